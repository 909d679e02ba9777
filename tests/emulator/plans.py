"""Plans for the emulator tests, made by the real planner from the committed digits-mlp profile."""

from __future__ import annotations

import dataclasses

from emulator import cpu
from provisioner import Goal, Limits, Plan, load_catalog, load_profile, plan_job
from provisioner.planner import Infeasible


def _plan(job: str, deadline_s: float, limits: Limits | None = None) -> Plan:
    result = plan_job(
        load_profile("digits-mlp"),
        load_catalog("lambda-2025"),
        Goal(deadline_s=deadline_s),
        limits or Limits(),
        job=job,
    )
    return result.plan


def planned_digits(job: str, min_workers: int = 2) -> Plan:
    """The cheapest digits-mlp plan under the loosest deadline that needs ≥ `min_workers`.

    The deadline is found relative to the single-worker plan's predicted time, so the test does
    not depend on the profile's figures (provisional or measured).
    """
    single = _plan(job, 3600.0)
    setup = single.prediction.setup_s  # the run's set-up: the same for every plan
    for fraction in (0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3):
        try:
            plan = _plan(job, setup + (single.prediction.total_s - setup) * fraction)
        except Infeasible:
            break
        if plan.n_workers >= min_workers:
            return plan
    raise AssertionError(f"no deadline makes digits-mlp need {min_workers} workers")


def planned_digits_s3(job: str, max_workers: int = 3) -> Plan:
    """The cheapest digits-mlp plan that syncs through S3 with at most `max_workers` workers
    (the account's concurrency as the limit: the planner's own choice is a dozen, too many
    processes for a test machine)."""
    return _plan(job, 3600.0, Limits(sync="s3", max_concurrency=max_workers))


def with_iterations(plan: Plan, iterations: int) -> Plan:
    """The same plan trained for `iterations` (sizes the run to the test's time budget)."""
    return dataclasses.replace(
        plan, training=dataclasses.replace(plan.training, iterations=iterations)
    )


def with_long_training(plan: Plan, iterations: int) -> Plan:
    """The same plan trained for `iterations`, with as many epochs as that takes (a plan never
    trains past its epochs) in one link, for a test that stops the run long before it could end."""
    t = plan.training
    epochs = -(-(iterations * t.global_batch) // t.dataset_samples)
    return dataclasses.replace(
        plan,
        training=dataclasses.replace(t, iterations=iterations, epochs=epochs),
        invocations_per_worker=1,
        iterations_per_invocation=iterations,
    )


def machine_cpu_scale(plan: Plan) -> float:
    """Local cores per Lambda vCPU that give the plan's workers the machine's worker cores
    between them (at most one core each), instead of the plan's Lambda share.

    For the tests of what a run does (retries, the S3 exchange, faults), not of how fast it is:
    at the planned share (3 × 384 MB = 0.22 cores each) a worker spends ~12 s importing torch
    and an S3 reducer ~140 ms an iteration in botocore, which was most of the CI's time.
    The share is still enforced; only its size differs. The tests of the share and of the
    wall-clock limit keep the default (`test_planned_job_trains_end_to_end`, the clock test).
    """
    share = cpu.lambda_vcpu_share(plan.memory_mb)
    per_worker_cores = min(1.0, cpu.WORKER_CORE_FRACTION * cpu.machine_cores() / plan.n_workers)
    return per_worker_cores / share
