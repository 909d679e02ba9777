"""Block profiles of two shapes built from analytic figures, for bench/pipeline.py and tests.

Until profiled block profiles land, these stand in: a ResNet-18 on CIFAR-10 cut in 10 blocks
(its committed profile's rates shared among the blocks by their FLOPs) and a GPT-2-large-shaped
transformer (36 layers of d_model 1280, sequence 256, ~774 M parameters: embedding, 36 layers,
final norm and the tied head) whose rates come from its FLOPs at an assumed CPU throughput.
"""

from __future__ import annotations

from typing import Any

from provisioner.profile import WorkloadProfile, load_profile, profile_from_dict

GFLOP_S_PER_VCPU = 25.0  # an assumed fp32 throughput of one Lambda vCPU (not measured)
SCALING = ((1.0, 1.0), (2.0, 1.9), (4.0, 3.6), (6.0, 5.2))  # vCPUs → speed-up (assumed)


def _rate(samples_s_at_one: float) -> dict[str, Any]:
    points = [{"vcpu_share": 0.5, "samples_per_s": samples_s_at_one / 2}]
    points += [{"vcpu_share": v, "samples_per_s": samples_s_at_one * f} for v, f in SCALING]
    return {"x86_64": {"points": points}}


def _block(name: str, params: int, out: int, act: int, gflop: float) -> dict[str, Any]:
    return {
        "name": name,
        "parameter_bytes": 4 * params,
        "output_bytes_per_sample": out,
        "activation_bytes_per_sample": act,
        "training_rate": _rate(GFLOP_S_PER_VCPU / gflop),
    }


def gpt2_large_profile() -> WorkloadProfile:
    """36 layers of d = 1280 at sequence 256; fwd + bwd = 6 FLOPs per parameter per token plus
    attention's 12·s²·d per layer; activations per layer and sample ≈ 68·s·d + 10·heads·s² bytes
    (fp32, Korthikanti et al. 2022's 34·s·h + 5·a·s² at 2 bytes)."""
    d, s, heads, vocab, layers = 1280, 256, 20, 50257, 36
    layer_params = 12 * d * d + 13 * d
    embed_params = vocab * d + 1024 * d
    hidden = s * d * 4
    blocks = [_block("0:Embeddings", embed_params, hidden, hidden, 0.01)]
    layer_gflop = (6 * layer_params * s + 12 * s * s * d) / 1e9
    blocks += [
        _block(f"{i + 1}:Block", layer_params, hidden, 68 * s * d + 10 * heads * s * s, layer_gflop)
        for i in range(layers)
    ]
    head_gflop = 6 * vocab * d * s / 1e9  # the tied head's matmul
    blocks.append(_block(f"{layers + 1}:Head", 2 * d, 8, 2 * s * vocab * 4, head_gflop))
    model_bytes = sum(b["parameter_bytes"] for b in blocks)
    inv = sum(1.0 / b["training_rate"]["x86_64"]["points"][1]["samples_per_s"] for b in blocks)
    doc = {
        "schema_version": 1,
        "name": "synthetic-gpt2-large",
        "model": "mlp",  # a stand-in spec: the figures are analytic, nothing builds this model
        "dataset": "synthetic-cifar",
        "provisional": True,
        "model_bytes": model_bytes,
        "dataset_samples": 2_000,
        "dataset_bytes": 2_000 * s * 8,
        "epochs": 1,
        "profiled_local_batch": 8,
        "max_global_batch": 512,
        "min_memory_mb": 4 * model_bytes // 2**20 + 420,
        "learning_rate": 0.0003,
        "momentum": 0.9,
        "training_rate": _rate(1.0 / inv),
        "startup_s": 6.0,
        "ps_aggregation_mb_s_per_core": 2000.0,
        "runtime_memory_mb": 420,
        "blocks": blocks,
        "sources": {"all": {"method": "analytic (bench/pipeline_shapes.py)", "tag": "synthetic"}},
    }
    return profile_from_dict(doc)


def resnet18_blocks_profile() -> WorkloadProfile:
    """cifar10-resnet18 cut in 10 blocks (stem conv, bn+relu, 8 basic blocks... folded as
    stem, 4 stages × 2 basic blocks, pool + fc): parameters, outputs and FLOP shares of the
    CIFAR ResNet-18; each block's rate is the model's x86_64 rate over its FLOP share."""
    base = load_profile("cifar10-resnet18")
    # (name, parameters, output floats per sample, FLOP share)
    shape = [
        ("0:Stem", 1_856, 64 * 32 * 32, 0.04),
        ("1:Layer1.0", 73_984, 64 * 32 * 32, 0.13),
        ("2:Layer1.1", 73_984, 64 * 32 * 32, 0.13),
        ("3:Layer2.0", 230_144, 128 * 16 * 16, 0.11),
        ("4:Layer2.1", 295_424, 128 * 16 * 16, 0.12),
        ("5:Layer3.0", 919_040, 256 * 8 * 8, 0.11),
        ("6:Layer3.1", 1_180_672, 256 * 8 * 8, 0.12),
        ("7:Layer4.0", 3_673_088, 512 * 4 * 4, 0.11),
        ("8:Layer4.1", 4_720_640, 512 * 4 * 4, 0.12),
        ("9:Head", 5_130, 10, 0.01),
    ]
    total = sum(p for _, p, _, _ in shape)
    curve = base.rate("x86_64")
    assert curve is not None
    blocks = []
    for name, params, out, share in shape:
        points = [
            {"vcpu_share": v, "samples_per_s": r / share}
            for v, r in zip(curve.vcpu_shares, curve.samples_per_s, strict=True)
        ]
        blocks.append({
            "name": name,
            # scaled so the blocks sum to the profile's model_bytes exactly
            "parameter_bytes": params * base.model_bytes // total,
            "output_bytes_per_sample": 4 * out,
            "activation_bytes_per_sample": 3 * 4 * out,
            "training_rate": {"x86_64": {"points": points}},
        })  # fmt: skip
    blocks[-1]["parameter_bytes"] += base.model_bytes - sum(b["parameter_bytes"] for b in blocks)
    doc = {
        "schema_version": 1, "name": "cifar10-resnet18-blocks", "model": base.model,
        "dataset": base.dataset, "provisional": True, "model_bytes": base.model_bytes,
        "dataset_samples": base.dataset_samples, "dataset_bytes": base.dataset_bytes,
        "epochs": base.epochs, "profiled_local_batch": base.profiled_local_batch,
        "max_global_batch": base.max_global_batch, "min_memory_mb": base.min_memory_mb,
        "learning_rate": base.learning_rate, "momentum": base.momentum,
        "training_rate": {"x86_64": {"points": [
            {"vcpu_share": v, "samples_per_s": r}
            for v, r in zip(curve.vcpu_shares, curve.samples_per_s, strict=True)
        ]}},
        "startup_s": base.startup_s,
        "ps_aggregation_mb_s_per_core": base.ps_aggregation_mb_s_per_core,
        "runtime_memory_mb": 420, "blocks": blocks,
        "sources": {"all": {"method": "cifar10-resnet18 cut by FLOP shares", "tag": "synthetic"}},
    }  # fmt: skip
    return profile_from_dict(doc)
