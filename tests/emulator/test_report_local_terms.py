"""The report's local re-prediction, term by term, of an AWS plan run with --cpu-scale auto.

`cdk synth -c deadline=10m` plans digits-mlp as a dozen small workers syncing through S3; run
here with --cpu-scale auto each worker gets an eighth of a core. The re-prediction must keep
the quota's wait on the exchange's own CPU in the exchange (a worker times it there), and
count a worker's own CPU in the exchange once, not once per worker sharing the cores.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from emulator import cpu
from emulator.options import Options
from emulator.records import RunRecord
from emulator.report import predict_local
from provisioner import Goal, Limits, load_catalog, load_profile, plan_job
from provisioner.catalog import Catalog
from provisioner.plan import Plan
from provisioner.profile import PROFILE_DIR
from provisioner.terms import compute_time_s, training_rate_samples_s
from tests.emulator.plans import with_iterations
from tests.emulator.test_report import _record
from tests.local_catalog import local_catalog

CORES = 2.0  # the machine the run was on; the test does not read this one's


def shared_core_catalog() -> Catalog:
    """The test's local catalog on 2 shared cores under 20 ms quotas, as make calibrate
    writes it here (the figures are catalog/local.json's, rounded)."""
    return dataclasses.replace(
        local_catalog(),
        total_vcpu=cpu.WORKER_CORE_FRACTION * CORES,
        max_vcpu=cpu.WORKER_CORE_FRACTION * CORES,
        compute_cores=CORES,
        init_cores_by_n=((2.0, 1.82), (4.0, 1.83), (8.0, 1.65)),
        cpu_throttle_period_s=0.02,
        exchange_cpu_fraction=0.444,
    )


def auto_scale_record(plan: Plan, cores: float) -> RunRecord:
    """The run of `plan` at `cores` a worker under the emulator's default 60 s invocations."""
    record = _record(plan, 60.0, worker_cores=cores)
    return dataclasses.replace(record, options=Options(invocation_limit_s=60.0))


def test_an_aws_s3_plan_at_auto_scale_keeps_the_exchanges_cpu_out_of_its_compute() -> None:
    profile = load_profile("digits-mlp")
    plan = plan_job(
        profile,
        load_catalog("lambda-2025"),
        Goal(deadline_s=600.0),
        Limits(sync="auto"),
        job="auto",
    ).plan
    plan = with_iterations(plan, 50)
    assert plan.sync == "s3" and plan.n_workers >= 8  # many small workers, as the synth plans
    scale = cpu.default_cpu_scale(plan.n_workers, plan.memory_mb, CORES)
    cores = cpu.local_cores(plan.memory_mb, scale)
    local, _ = predict_local(auto_scale_record(plan, cores), shared_core_catalog())
    assert local is not None
    p = local.prediction
    # The back-to-back step at the worker's share, and that step with the cores shared by n
    # steps at once: the compute can be neither slower than either allows nor faster than a
    # step at full core speed. The old split put the exchange CPU's quota wait here: 465 ms
    # an iteration against a 13 ms step.
    curve = profile.rate(plan.arch)
    assert curve is not None
    rate = training_rate_samples_s(curve, np.asarray(cores), np.asarray(cores * 1769.0))
    back_to_back = float(compute_time_s(plan.training.local_batch, rate))
    shared = plan.training.local_batch / float(training_rate_samples_s(
        curve, np.asarray(1.0), np.asarray(1769.0))) * plan.n_workers / CORES  # fmt: skip
    assert p.compute_per_iteration_s <= max(back_to_back, shared) * 1.2
    # The iteration is its compute and its exchange, the quota's wait on the exchange's CPU in
    # the exchange (the old split left 3.9 s of a 5.1 s iteration to neither column's wall)
    assert p.iteration_s == pytest.approx(
        p.compute_per_iteration_s + p.exchange_per_iteration_s, rel=0.01
    )


def test_the_local_prediction_says_when_its_profile_was_not_read_on_this_host(
    tmp_path: Path,
) -> None:
    """A committed profile's start-up and steps were timed elsewhere or at another moment (the
    digits MLP's 2.51 s start-up where this host's runs took about 2 s): the label says so and
    how to read it here; an anchored profile (one with its `anchor` record) is that reading."""
    profile = load_profile("digits-mlp")
    plan = with_iterations(
        plan_job(profile, local_catalog(), Goal(deadline_s=30.0), Limits(), job="n").plan, 20
    )
    record = auto_scale_record(plan, 1.0)
    _, label = predict_local(record, shared_core_catalog())
    assert "not read on this host" in label and "--anchor" in label
    raw = json.loads((PROFILE_DIR / "digits-mlp.json").read_text(encoding="utf-8"))
    anchored = tmp_path / "digits-mlp.json"
    anchored.write_text(json.dumps({**raw, "anchor": {"startup_s": 1.9}}), encoding="utf-8")
    here = dataclasses.replace(
        record, options=Options(invocation_limit_s=60.0, workload=str(anchored))
    )
    local, label = predict_local(here, shared_core_catalog())
    assert local is not None and "not read on this host" not in label
