"""The profile document: a new one from what can be read without timing, the measured fields
replaced with their sources, and its writing.

The profile JSON is updated in place of its measured fields only (training_rate of this
machine's architecture, startup_s, warmup_iterations, the loop and shared-core figures,
ps_aggregation_mb_s_per_core, min_memory_mb), each with a `sources` entry naming the date, the
method and the machine; every other field is left as it was.
"""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path
from typing import Any

from emulator import cpu
from emulator.profiling.child import LOOP_BLOCKS, WARMUP_ITERATIONS
from emulator.profiling.children import dataset_source
from emulator.profiling.reading import MEMORY_FIELDS, memory_figures
from provisioner.catalog_domains import LAMBDA_MEMORY_MB


def machine_description() -> str:
    """This machine as a profile's sources name it: CPU model, cores available, architecture."""
    model = cpu.model_name(cpu.read_cpuinfo()) or platform.processor() or platform.machine()
    return f"{model}, {cpu.machine_cores():.0f} cores available, {platform.machine()}"


def updated_profile(
    raw: dict[str, Any],
    points: list[dict[str, Any]],
    startup_s: float,
    agg_mb_s: float,
    arch: str,
    when: str,
    machine: str,
    *,
    cpu_limit: str,
    warmup_iterations: float | None = None,
    parallel: tuple[float, int] | None = None,
    crowd: tuple[float, int] | None = None,
    crowd_warmup: float | None = None,
    lockstep_wait: float | None = None,
    parallel_readings: list[float] | None = None,
) -> dict[str, Any]:
    """The profile document with the measured fields and their sources replaced.

    `cpu_limit` names how the shares were held (CpuLimiter.mechanism), for the source entry;
    `warmup_iterations` (None: not measured, left as it was) the fresh process's excess;
    `parallel` (ratio, processes) the speed with every core training, `crowd` (ratio,
    processes) a step's CPU in a loop of more workers than cores, `crowd_warmup` the first
    steps' excess CPU in that crowd, in steps alone, `lockstep_wait` the straggler's wait in
    the `parallel` loops, in its steps (None: left as it was; the wait needs `parallel`),
    `parallel_readings` each pair's ratio, kept in the source so the spread shows.
    """
    out = json.loads(json.dumps(raw))
    out.setdefault("training_rate", {})[arch] = {
        "points": [
            {"vcpu_share": p["vcpu_share"], "samples_per_s": round(p["samples_per_s"], 1)}
            for p in points
        ]
    }
    out["startup_s"] = round(startup_s, 2)
    out["ps_aggregation_mb_s_per_core"] = round(agg_mb_s, 1)
    sources = out.setdefault("sources", {})
    rss = [float(p["peak_rss_mb"]) for p in points if "peak_rss_mb" in p]
    if rss:
        from functions.profile_task import RSS_HEADROOM, memory_for_rss_mb

        out["min_memory_mb"] = memory_for_rss_mb(max(rss))
        sources["min_memory_mb"] = {
            "method": f"measured: python -m emulator.profile; the largest peak resident set of a "
            f"child that trained on the whole dataset ({max(rss):.0f} MB) × {RSS_HEADROOM}, in "
            "64 MB steps; " + machine,
            "date": when,
            "tag": "measured",
        }
    for field, value in memory_figures(points).items():
        out[field] = value
        sources[field] = {
            "method": f"measured: python -m emulator.profile; {MEMORY_FIELDS[field]}, the median "
            "of the children; used only on shared-core platforms (the local catalog); " + machine,
            "date": when,
            "tag": "measured",
        }
    loop_figures = (
        ("loop_extra_cpu_s", "cpu_s", "CPU seconds an iteration of the worker's loop (step, "
         "push, pull through one PS shard on loopback) less the back-to-back step's, timed in "
         f"{LOOP_BLOCKS} alternating pairs of blocks (the median of the pairs), at each share; "
         "used only on shared-core platforms (the local catalog); "),
        ("loop_overhead_s", "s", "wall seconds the exchange (PSExchange.step: push, wait, pull "
         "through one PS shard on loopback) takes an iteration of the same loop, timed around it "
         "as a run's workers time their communication, mean over the iterations, at each share; "
         "on shared-core platforms the model's exchange alone takes at least its figure at 1 "
         "vCPU (provisioner.model.loop_exchange_s); "),
    )  # fmt: skip
    for name, unit, method in loop_figures:
        measured_at = [p for p in points if name in p]
        if measured_at:
            out[name] = [
                {"vcpu_share": p["vcpu_share"], unit: round(p[name], 6)} for p in measured_at
            ]
            sources[name] = {
                "method": "measured: python -m emulator.profile (median of the repeats); "
                + f"{method}{machine}",
                "date": when,
                "tag": "measured",
            }
    if warmup_iterations is not None:
        out["warmup_iterations"] = round(warmup_iterations, 2)
        sources["warmup_iterations"] = {
            "method": "measured: python -m emulator.profile; the CPU of the first "
            f"{WARMUP_ITERATIONS} steps of a fresh process less {WARMUP_ITERATIONS} steady steps',"
            " in steady steps (median over the shares); " + machine,
            "date": when,
            "tag": "measured",
        }
    if parallel is not None:
        out["parallel_speed_ratio"], out["parallel_processes"] = round(parallel[0], 3), parallel[1]
        sources["parallel_speed_ratio"] = {
            "method": f"measured: python -m emulator.profile; mean samples/s of the steps of "
            f"{parallel[1]} children at 1 vCPU each, the ranks of one BSP loop through a loopback "
            "shard (in lockstep, as a run's workers), over one child alone in the same loop timed "
            "just before (the median of the pairs' ratios, each at most 1); used only on "
            "shared-core platforms (the local catalog); " + machine,
            "date": when,
            "tag": "measured",
        }
        if parallel_readings:
            sources["parallel_speed_ratio"]["readings"] = [round(r, 3) for r in parallel_readings]
    if crowd is not None:
        out["crowded_step_ratio"], out["crowded_processes"] = round(crowd[0], 3), crowd[1]
        sources["crowded_step_ratio"] = {
            "method": f"measured: python -m emulator.profile; the step's CPU per iteration of "
            f"{crowd[1]} children at 1 vCPU each, the ranks of one BSP loop through a loopback "
            "PS shard (their median), over one child's back-to-back step alone timed just "
            "before (the median of the repeats' pairs, at least 1); used only on shared-core "
            "platforms (the local catalog); " + machine,
            "date": when,
            "tag": "measured",
        }
    if crowd is not None and crowd_warmup is not None:
        out["crowded_warmup_iterations"] = round(crowd_warmup, 2)
        sources["crowded_warmup_iterations"] = {
            "method": f"measured: python -m emulator.profile; the CPU the first "
            f"{WARMUP_ITERATIONS} steps of {crowd[1]} children at 1 vCPU each, started together, "
            f"cost beyond {WARMUP_ITERATIONS} steady ones (the median of their second half), in "
            "steps of one child's step CPU alone (the median of the children, then of the "
            "repeats' pairs, at least 0); used only on shared-core platforms (the local "
            "catalog); " + machine,
            "date": when,
            "tag": "measured",
        }
    if parallel is not None and lockstep_wait is not None:
        out["lockstep_wait_fraction"] = round(lockstep_wait, 4)
        sources["lockstep_wait_fraction"] = {
            "method": f"measured: python -m emulator.profile; in the lockstep loops of "
            f"parallel_speed_ratio ({parallel[1]} ranks at 1 vCPU each), the mean over the "
            "iterations of the slowest rank's step less the straggler's (the rank whose steps "
            "took longest, as a run's report picks it), over the straggler's mean step (the "
            "median of the pairs); used only on shared-core platforms (the local catalog), "
            "at n >= 2 (provisioner.model.lockstep_wait_s); " + machine,
            "date": when,
            "tag": "measured",
        }
    shares = ", ".join(f"{p['vcpu_share']:g}" for p in points)
    sources["training_rate"] = {
        "method": "measured: python -m emulator.profile (median of the repeats); forward+backward"
        f" at local batch "
        f"{raw['profiled_local_batch']} on {dataset_source(raw['dataset'], raw['dataset_samples'])}"
        f" in a {cpu_limit} of {shares} cores "
        "(1 local core = 1 Lambda vCPU), torch threads = max(1, floor(share)); " + machine,
        "date": when,
        "tag": "measured",
    }
    sources["startup_s"] = {
        "method": "measured: python -m emulator.profile (median of the repeats); the worker "
        "module's own import (functions.worker IMPORT_S: torch and the handler's modules, with "
        "whole cores, as Lambda's init phase bursts and the emulator's runner does) + model "
        "build at 1 vCPU, the clock a run's worker reports (the dataset is the load term); "
        "excludes the interpreter start and Lambda's image load; " + machine,
        "date": when,
        "tag": "measured",
    }
    sources["ps_aggregation_mb_s_per_core"] = {
        "method": "measured: python -m emulator.profile; numpy accumulate + SGD momentum update "
        "of 16 MB float32 on one core; " + machine,
        "date": when,
        "tag": "measured",
    }
    out["provisional"] = any(
        isinstance(s, dict) and s.get("tag") == "est" for s in sources.values()
    )
    return out


LAMBDA_MAX_MEMORY_MB = LAMBDA_MEMORY_MB[1]  # the largest memory a function has: a model must fit
NEW_PROFILE_DEFAULTS = {"epochs": 1, "profiled_local_batch": 32, "max_global_batch": 256,
                        "learning_rate": 0.05, "momentum": 0.9}  # fmt: skip


def new_profile(
    model: str, dataset: str, *, name: str, when: str, settings: dict[str, Any]
) -> dict[str, Any]:
    """A profile document for a user's model file and dataset, from what can be read without
    timing anything: sizes, shapes, the file's digest; the timed figures follow (updated_profile).

    ValueError (one line) for a model or dataset that cannot train: see functions.models and
    functions.datasets for the checks."""
    import numpy as np

    from functions import datasets, models
    from functions.model_spec import file_digest, parse_spec

    spec = parse_spec(model)
    reader = models.dataset_reader(model)
    x, y, _ = datasets.load_source(dataset_source(dataset, 0), seed=0, reader=reader)
    if len(x) == 0:
        raise ValueError(f"dataset {dataset!r} holds no samples")
    shape, classes = [int(d) for d in x.shape[1:]], int(y.max()) + 1
    built = models.build(model, shape, classes, seed=0)
    models.check_output(built, model, shape, classes)
    params = models.parameter_count(built)
    # as the prepare step writes shards: float32 inputs, int64 labels
    dataset_bytes = len(x) * int(np.prod(shape)) * 4 + len(y) * 8
    computed = {"date": when, "tag": "exact"}
    return {
        "schema_version": 1,
        "name": name,
        "model": model,
        "model_digest": file_digest(spec),
        "dataset": dataset,
        "input_shape": shape,
        "provisional": True,
        "model_bytes": params * 4,
        "dataset_samples": len(x),
        "dataset_bytes": dataset_bytes,
        **settings,
        "min_memory_mb": 128,  # replaced by the measured peak resident set
        "training_rate": {},
        "startup_s": 0.0,
        "ps_aggregation_mb_s_per_core": 1.0,
        "sources": {
            "model_bytes": {"method": f"computed: {spec.text} = {params:,} fp32 parameters",
                            **computed},
            "dataset_samples": {"method": f"counted: {dataset} read by functions.datasets, "
                                f"{len(x):,} samples of {'×'.join(map(str, shape))}, {classes} "
                                "classes", **computed},
            "dataset_bytes": {"method": "computed: float32 inputs + int64 labels (shard format)",
                              **computed},
            **{k: {"method": "chosen: python -m emulator.profile's default or its flag",
                   "date": when, "tag": "design"} for k in settings},
        },
    }  # fmt: skip


def check_fits_lambda(doc: dict[str, Any]) -> None:
    """ValueError when the measured memory need exceeds Lambda's largest function."""
    need = int(doc["min_memory_mb"])
    if need > LAMBDA_MAX_MEMORY_MB:
        raise ValueError(
            f"model {doc['model']} on {doc['dataset']} needs {need} MB (the peak resident set of "
            f"a training step with headroom); a Lambda function has at most "
            f"{LAMBDA_MAX_MEMORY_MB} MB: use a smaller model or batch, or a dataset of fewer "
            "samples per worker"
        )


def write_profile(target: Path, doc: dict[str, Any]) -> None:
    """Write the profile `doc` at `target` whole or not at all, its folder made if need be."""
    from provisioner.files import write_text_atomically  # never a half-written profile

    target.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(target, json.dumps(doc, indent=2) + "\n")
    print(f"wrote {target}", file=sys.stderr)
