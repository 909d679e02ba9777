"""`--cpu-scale for-deadline:R`: the cpu scale at which the plan's own model predicts a total of
R × its deadline on this machine (R 1.33: a run a third over its deadline, as a slower platform
than the plan's figures would make it).

The prediction is the report's local one (emulator/report.py): the configuration that runs, a
worker's cores (its Lambda share × the scale) read as memory on the local catalog, under the
run's invocation limit, safety margin and iteration cap. Its total falls as the scale grows, in
steps where a link fits fewer iterations, so the scale found (by bisection on a log scale) is the
slowest whose prediction is at most R × the deadline.
"""

from __future__ import annotations

import math
import re

from emulator import cpu
from emulator.options import LOCAL_CATALOG, default_safety_margin_s
from provisioner.catalog import Catalog, load_catalog
from provisioner.plan import Plan
from provisioner.planner import RunRules, predict_run
from provisioner.profile import WorkloadProfile, load_profile
from provisioner.space import Choice

PREFIX = "for-deadline:"
_RATIO = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*$")
SCALE_RANGE = (0.02, 4.0)  # local cores per Lambda vCPU searched
STEPS = 40  # bisection steps: the range to well under 0.1%


def parse_ratio(text: str) -> float:
    """R of `for-deadline:R`: a number above 0 (1.33: a third over the deadline)."""
    match = _RATIO.match(text.removeprefix(PREFIX))
    if not match or float(match.group(1)) <= 0:
        raise ValueError(
            f"bad --cpu-scale {text!r}: expected for-deadline:R with R a number above 0, "
            "such as for-deadline:1.33"
        )
    return float(match.group(1))


def predicted_total_s(
    plan: Plan, profile: WorkloadProfile, catalog: Catalog, rules: RunRules, scale: float
) -> float:
    """The model's total for the plan's configuration at `scale` on this machine (inf where the
    model says it cannot run)."""
    cores = cpu.local_cores(plan.memory_mb, scale)
    memory_mb = max(1, round(cores * catalog.mb_per_vcpu))
    if plan.sync == "s3":
        choice = Choice(plan.n_workers, memory_mb, plan.arch, "", 0, "s3", plan.reducers)
    else:
        choice = Choice(plan.n_workers, memory_mb, plan.arch, "loopback", plan.ps_count)
    try:
        return predict_run(profile, catalog, choice, rules, job=plan.job).prediction.total_s
    except ValueError:  # Infeasible included: that share cannot run it
        return math.inf


def scale_for_deadline(
    plan: Plan,
    ratio: float,
    *,
    workload: str | None,
    limit_s: float,
    iterations_per_invocation: int,
    catalog: Catalog | None = None,
) -> float:
    """The cpu scale whose local prediction of the plan is `ratio` × its deadline; ValueError
    (one line) for a plan without a deadline or a ratio no scale in SCALE_RANGE reaches."""
    deadline_s = plan.goal.deadline_s
    if deadline_s is None:
        raise ValueError(f"bad --cpu-scale for-deadline:{ratio:g}: plan {plan.job!r} has no "
                         "deadline; accepted: a number such as 0.5, or auto")  # fmt: skip
    profile = load_profile(workload or plan.workload)
    catalog = catalog or load_catalog(LOCAL_CATALOG)
    rules = RunRules(
        invocation_limit_s=limit_s,
        safety_margin_s=default_safety_margin_s(limit_s),
        max_iterations_per_invocation=iterations_per_invocation,
    )
    target_s = ratio * deadline_s
    low, high = (math.log(s) for s in SCALE_RANGE)

    def total(log_scale: float) -> float:
        return predicted_total_s(plan, profile, catalog, rules, math.exp(log_scale))

    if not total(high) <= target_s <= total(low):
        raise ValueError(
            f"bad --cpu-scale for-deadline:{ratio:g}: no scale from {SCALE_RANGE[0]:g} to "
            f"{SCALE_RANGE[1]:g} makes the plan's local prediction {target_s:.1f} s "
            f"({total(high):.1f} s at the fastest)"
        )
    for _ in range(STEPS):
        middle = (low + high) / 2
        if total(middle) > target_s:  # too slow: more cores per vCPU
            low = middle
        else:
            high = middle
    return math.exp(high)
