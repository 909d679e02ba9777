"""emulator.profiling's blocks: each block's sizes and rate, identical blocks measured once, the
profile's blocks added without changing a figure, and the whole-model figures derived from them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from emulator import cpu
from emulator.profiling.block_document import (
    blocks_of,
    combined_points,
    step_memory_mb,
    with_blocks,
    with_whole_model,
)
from emulator.profiling.block_measure import measure_blocks, saved_bytes_forward
from emulator.profiling.blocks import main
from emulator.profiling.children import dataset_source
from functions import models
from functions.blocks import model_blocks

REPO = Path(__file__).resolve().parents[2]
TINY = "functions/zoo.py:build_gpt2_tiny"


def _reading(share: float, rates: list[float], runtime_mb: float = 300.0) -> dict[str, object]:
    """A block child's reading of two blocks (the second measured on the first)."""
    sizes = {"parameter_bytes": 40, "output_bytes_per_sample": 16, "activation_bytes_per_sample": 8}
    return {
        "vcpu_share": share, "runtime_memory_mb": runtime_mb, "startup_s": 2.0,
        "blocks": [{"name": f"{i}:Linear", "measured_on": 0, **sizes, "samples_per_s": r}
                   for i, r in enumerate(rates)],
    }  # fmt: skip


def test_a_linear_saves_its_input_once_and_not_its_weight() -> None:
    layer = nn.Linear(8, 4)
    x = torch.randn(3, 8, requires_grad=True)
    out, saved = saved_bytes_forward(nn.Sequential(layer, nn.ReLU()), x)
    # the input (3·8 floats) for the weight's gradient, the ReLU's output (3·4) for its own
    assert saved == 3 * 8 * 4 + 3 * 4 * 4
    assert out.shape == (3, 4)


def test_each_gpt2_block_is_measured_and_the_identical_layers_once() -> None:
    model = models.build(TINY, (256,), 97, seed=0)
    x = torch.randint(0, 97, (2, 256)).float()
    measured = measure_blocks(model_blocks(model), x, min_steps=1, measure_s=0.0)
    assert [index for _, index in measured] == [0, 1, 1, 3]
    embed, layer, _, head = (figures for figures, _ in measured)
    assert sum(f.parameter_bytes for f, _ in measured) == 4 * models.parameter_count(model)
    assert layer.output_bytes_per_sample == 256 * 64 * 4  # (sequence, d_model) float32
    assert head.output_bytes_per_sample == 97 * 4  # the next token's scores
    # the embedding saves its token ids (int64); a layer saves far more than it hands on
    assert embed.activation_bytes_per_sample >= 256 * 8
    assert layer.activation_bytes_per_sample > 4 * layer.output_bytes_per_sample
    assert min(f.samples_per_s for f, _ in measured) > 0


def test_blocks_take_each_shares_median_and_the_model_rate_adds_their_times() -> None:
    readings = [_reading(1.0, [10.0, 30.0]), _reading(1.0, [20.0, 10.0]),
                _reading(1.0, [40.0, 20.0]), _reading(0.5, [5.0, 5.0])]  # fmt: skip
    blocks = blocks_of(readings, "x86_64")
    assert blocks[0]["training_rate"]["x86_64"]["points"] == [
        {"vcpu_share": 0.5, "samples_per_s": 5.0}, {"vcpu_share": 1.0, "samples_per_s": 20.0}
    ]  # fmt: skip
    # 1 / (1/5 + 1/5) and 1 / (1/20 + 1/20)
    assert combined_points(blocks, "x86_64") == [
        {"vcpu_share": 0.5, "samples_per_s": 2.5}, {"vcpu_share": 1.0, "samples_per_s": 10.0}
    ]  # fmt: skip


def test_children_that_disagree_on_a_size_are_refused() -> None:
    other = _reading(0.5, [5.0, 5.0])
    other["blocks"][1]["parameter_bytes"] = 44  # type: ignore[index]  # a test's dict
    with pytest.raises(ValueError, match="measured different sizes"):
        blocks_of([_reading(1.0, [1.0, 1.0]), other], "x86_64")


def test_blocks_are_added_to_a_profile_and_nothing_else_changes() -> None:
    added = {"blocks", "runtime_memory_mb"}
    committed = json.loads((REPO / "profiles" / "synthetic-cifar-cnn.json").read_text())
    raw = {k: v for k, v in committed.items() if k not in added}
    raw["sources"] = {k: v for k, v in committed["sources"].items() if k not in added}
    blocks = blocks_of([_reading(1.0, [1.0, 2.0])], "x86_64")
    with pytest.raises(ValueError, match=r"blocks hold 80 parameter bytes, the profile's "):
        with_blocks(raw, blocks, 300.4, method="m", when="d")
    raw["model_bytes"] = 80
    doc = with_blocks(raw, blocks, 300.4, method="m", when="d")
    assert doc["runtime_memory_mb"] == 301 and doc["blocks"] == blocks
    assert {k: v for k, v in doc.items() if k not in added} | {"sources": raw["sources"]} == raw
    assert {k: v for k, v in doc["sources"].items() if k not in added} == raw["sources"]


def test_a_model_too_big_for_a_step_gets_its_figures_from_its_blocks() -> None:
    blocks = blocks_of([_reading(1.0, [2.0, 2.0]), _reading(2.0, [4.0, 4.0])], "x86_64")
    raw = {"profiled_local_batch": 1024, "sources": {}}
    doc = with_blocks(raw, blocks, 512.0, method="m", when="d")
    whole = with_whole_model(doc, "x86_64", startup_s=9.876, agg_mb_s=900.04, when="d",
                             machine="here")  # fmt: skip
    assert whole["model_bytes"] == 80 and whole["startup_s"] == 9.88
    assert whole["training_rate"]["x86_64"]["points"][1] == {"vcpu_share": 2.0,
                                                             "samples_per_s": 2.0}  # fmt: skip
    # 512 MB + (4 · 80 + 1024 · 2 · 8) bytes, a fifth more, in 64 MB steps
    assert step_memory_mb(512.0, blocks, 1024) == 512.0 + (320 + 16384) / 2**20
    assert whole["min_memory_mb"] == 640
    assert whole["sources"]["min_memory_mb"]["tag"] == "derived"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--workload", "no-such"], "bad --workload 'no-such': no file "),
        (["--workload", "digits-mlp", "--shares", "0,x"], "bad --shares '0,x': expected "),
        (["--workload", "digits-mlp", "--batch", "0"], "bad --batch 0: expected a whole number"),
    ],
)
def test_bad_options_are_one_line_before_any_child(
    args: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {said}") and err.count("\n") == 1


def test_the_cli_measures_a_tiny_gpt2_in_cpu_groups_and_derives_its_profile(
    tmp_path: Path,
) -> None:
    """Real children in real CPU groups; where none can be held, exit 1 and one line."""
    raw = json.loads((REPO / "profiles" / "synthetic-tokens-gpt2-large.json").read_text())
    raw.update(name="tiny", model=TINY, dataset_samples=4)
    workload, out = tmp_path / "tiny.json", tmp_path / "out.json"
    workload.write_text(json.dumps(raw))
    done = subprocess.run(
        [sys.executable, "-m", "emulator.profiling.blocks", "--workload", str(workload),
         "--shares", "1", "--batch", "2", "--min-steps", "1", "--measure-s", "0", "--derive",
         "--output", str(out)],
        capture_output=True, text=True, cwd=REPO, timeout=280,
    )  # fmt: skip
    with cpu.CpuLimiter(f"lambda-dnn-test-probe-{os.getpid()}") as limiter:
        enforced = limiter.enforced
    if not enforced:
        assert done.returncode == 1 and "no profile written" in done.stderr
        return
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert [b["name"] for b in doc["blocks"]][::3] == ["0:Embeddings", "3:NextTokenHead"]
    vocab = 50_257
    assert doc["model_bytes"] == 4 * models.parameter_count(models.build(TINY, (256,), vocab, 0))
    assert doc["runtime_memory_mb"] > 0 and doc["min_memory_mb"] > doc["runtime_memory_mb"]
    assert "1 have the class and shapes of one of them" in doc["sources"]["blocks"]["method"]


def test_a_token_profile_is_timed_on_generated_token_sequences() -> None:
    assert dataset_source("synthetic-tokens", 4096) == "synthetic-tokens:2048"
    assert dataset_source("synthetic-tokens", 8) == "synthetic-tokens:8"


class _Broken(nn.Module):
    """Declares blocks whose shapes do not chain: 64 features, then a layer expecting 10."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(64, 32), nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.a(x.flatten(1)))

    def pipeline_blocks(self) -> list[nn.Module]:
        return [nn.Flatten(), nn.Linear(10, 32), self.b]


def test_a_model_whose_blocks_do_not_compose_is_one_line_and_no_figures(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The block child refuses the declaration before measuring anything (exit 2, one line)."""
    from emulator.profiling import block_child

    monkeypatch.setattr(models, "build", lambda *_, **__: _Broken())
    code = block_child.main(["--model=mlp", "--source=builtin:digits", "--batch=2",
                             "--min-steps=1", "--measure-s=0"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert err.startswith("block 1 (Linear) fails on the previous block's output shaped (2, 64)")
