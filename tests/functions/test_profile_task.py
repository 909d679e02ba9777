"""The profiling handler (functions/profile_task.py): its event, its timing loop, the document.

The handler runs on real shards in moto S3; the timing loop's early stop is driven by a context
the test controls; the profile document is built from hand-written results.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from functions import profile_task
from functions.profile_task import ProfileError, ProfileTask, min_memory_mb, profile_document
from provisioner.profile import profile_from_dict
from stacks.profile_run import WARMUP_ITERATIONS
from tests.stacks.test_profile_stack import make_run


def event(**overrides: Any) -> dict[str, Any]:
    base = {"job_id": "prof", "model": "mlp", "dataset_bucket": "b", "dataset_prefix": "data",
            "local_batch": 16, "iterations": 3, "warmup_iterations": 2, "memory_mb": 1769}
    return {**base, **overrides}


def test_the_handler_times_the_asked_iterations_on_a_real_shard(
    s3: Any, bucket: str, digits: Any
) -> None:
    digits(1)
    result = profile_task.handler(event(dataset_bucket=bucket, memory_mb=3008))
    assert result["memory_mb"] == 3008 and result["iterations"] == 3
    assert result["samples_per_s"] > 0 and result["peak_rss_mb"] > 0
    assert result["torch_threads"] >= 1 and result["arch"] in ("x86_64", "arm64")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"memory_mb": None}, "profile event key 'memory_mb' = None: expected an integer >= 0"),
        ({"iterations": True}, "profile event key 'iterations' = True: expected an integer >= 0"),
        ({"iterations": 0}, "profile event key 'iterations' = 0: expected an integer >= 1"),
        ({"model": "gpt"},
         "profile event key 'model': model 'gpt' is not accepted; use a zoo name (mlp, cnn, "
         "resnet18, mobilenetv2) or path/to/file.py:function"),
    ],
)  # fmt: skip
def test_a_bad_event_names_the_key_and_what_is_accepted(
    overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(ProfileError) as caught:
        ProfileTask.from_event(event(**overrides))
    assert str(caught.value) == message


def test_an_event_for_another_size_is_refused_before_any_work() -> None:
    class Context:
        memory_limit_in_mb = "1024"  # as the Lambda runtime gives it

    with pytest.raises(ProfileError, match="^profile event key 'memory_mb' = 1769: this function "
                       "has 1024 MB; send each size's event to its own function$"):  # fmt: skip
        profile_task.handler(event(memory_mb=1769), Context())


def test_a_missing_key_is_named() -> None:
    bad = event()
    del bad["local_batch"]
    with pytest.raises(ProfileError, match="^profile event is missing required key 'local_batch'$"):
        ProfileTask.from_event(bad)


@dataclass
class CountingStep:
    warmup: int = 2
    iterations: int = 10
    safety_margin_s: float = 10.0
    calls: int = 0

    def run(self, iteration: int) -> None:
        self.calls += 1


class RunsOutAfter:
    """A Lambda context with time for `checks` looks, then 1 s left (below the margin)."""

    def __init__(self, checks: int) -> None:
        self.checks = checks

    def get_remaining_time_in_millis(self) -> int:
        self.checks -= 1
        return 900_000 if self.checks >= 0 else 1_000


def test_timing_stops_before_the_invocation_runs_out_but_never_before_one_step() -> None:
    step = CountingStep()
    assert len(profile_task.time_steps(step, RunsOutAfter(checks=4))) == 4  # type: ignore[arg-type]
    assert step.calls == 2 + 4  # the warm-up is never timed
    # Out of time from the start: one step is still timed, so the run reports a rate.
    assert len(profile_task.time_steps(CountingStep(), RunsOutAfter(0))) == 1  # type: ignore[arg-type]
    assert len(profile_task.time_steps(CountingStep(), None)) == 10  # type: ignore[arg-type]


def measured(memory_mb: int, rate: float, rss_mb: float = 400.0, arch: str = "x86_64") -> dict:
    return {"memory_mb": memory_mb, "measured": {
        "memory_mb": memory_mb, "arch": arch, "samples_per_s": rate, "iterations": 30,
        "import_s": 2.0, "load_s": 0.5, "build_s": 0.1, "peak_rss_mb": rss_mb}}  # fmt: skip


def failed(memory_mb: int) -> dict:
    return {"memory_mb": memory_mb, "error": {"Error": "Runtime.OutOfMemory", "Cause": "..."}}


def test_min_memory_is_the_peak_resident_set_with_headroom_in_64_mb_steps() -> None:
    runs = [measured(1024, 1.0, rss_mb=400)["measured"],
            measured(1769, 2.0, rss_mb=420)["measured"]]  # fmt: skip
    assert min_memory_mb(runs, []) == 512  # 420 x 1.2 = 504 → 512
    # A smaller size that failed proves the smallest working one is the least that trains.
    assert min_memory_mb(runs, [512]) == 1024
    # A larger size that failed (e.g. over the account's cap) says nothing about the minimum.
    assert min_memory_mb(runs, [10240]) == 512


def test_the_document_replaces_only_the_measured_figures_and_loads() -> None:
    base = make_run().base_profile
    results = [measured(3008, 30000.0), measured(1024, 12000.0), failed(512),
               measured(1769, 25000.0)]  # fmt: skip
    doc = profile_document(base, results, name="digits-mlp-aws", iterations=30,
                           warmup=WARMUP_ITERATIONS, when="2026-11-23")  # fmt: skip
    assert doc["training_rate"]["x86_64"] == {"points": [
        {"memory_mb": 1024, "samples_per_s": 12000.0},
        {"memory_mb": 1769, "samples_per_s": 25000.0},
        {"memory_mb": 3008, "samples_per_s": 30000.0}]}  # fmt: skip
    assert doc["startup_s"] == 2.6  # the 1,769 MB run: import + load + build
    assert doc["min_memory_mb"] == 1024
    assert doc["name"] == "digits-mlp-aws" and not doc["provisional"]
    assert {k: v for k, v in doc.items() if k not in (
        "training_rate", "startup_s", "min_memory_mb", "name", "provisional", "sources")} == {
        k: v for k, v in base.items() if k not in (
            "training_rate", "startup_s", "min_memory_mb", "name", "provisional", "sources")}
    assert doc["sources"]["startup_s"]["date"] == "2026-11-23"
    profile_from_dict(json.loads(json.dumps(doc)))  # the planner's loader accepts it


def test_a_run_that_measured_nothing_or_mixed_architectures_is_refused() -> None:
    base = make_run().base_profile
    with pytest.raises(ProfileError, match=r"^no memory size was profiled; failures: .*1024"):
        profile_document(base, [failed(1024)], name="x", iterations=1, warmup=0, when="d")
    mixed = [measured(1024, 1.0), measured(1769, 2.0, arch="arm64")]
    with pytest.raises(ProfileError, match="several architectures"):
        profile_document(base, mixed, name="x", iterations=1, warmup=0, when="d")
