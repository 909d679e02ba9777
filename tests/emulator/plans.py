"""Plans for the emulator tests, made by the real planner from the committed digits-mlp profile."""

from __future__ import annotations

import dataclasses

from provisioner import Goal, Limits, Plan, load_catalog, load_profile, plan_job


def planned_digits(job: str, deadline_s: float = 30.0) -> Plan:
    """The cheapest plan for digits-mlp under `deadline_s` (n ≥ 2 at the default 30 s)."""
    result = plan_job(
        load_profile("digits-mlp"),
        load_catalog("lambda-2025"),
        Goal(deadline_s=deadline_s),
        Limits(),
        job=job,
    )
    return result.plan


def with_iterations(plan: Plan, iterations: int) -> Plan:
    """The same plan trained for `iterations` (sizes the run to the test's time budget)."""
    return dataclasses.replace(
        plan, training=dataclasses.replace(plan.training, iterations=iterations)
    )
