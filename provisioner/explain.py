"""Plans explained in words: why none meets a goal, what an alternative is, which exchange won."""

from __future__ import annotations

import math

from provisioner.catalog import Catalog
from provisioner.parse import format_duration_s, format_usd
from provisioner.pipeline_search import MAX_REPLICAS, MAX_STAGES, search_pipeline
from provisioner.plan import Goal, Plan
from provisioner.profile import WorkloadProfile
from provisioner.search import fastest_cell, solve_deadline
from provisioner.space import Limits, Space


def goal_words(goal: Goal) -> str:
    """The goal as the user gave it: `deadline 4h00m00s and budget $5.00`."""
    wanted = []
    if goal.deadline_s is not None:
        wanted.append(f"deadline {format_duration_s(goal.deadline_s)}{reserve_words(goal)}")
    if goal.budget_usd is not None:
        wanted.append(f"budget {format_usd(goal.budget_usd)}")
    return " and ".join(wanted)


def pipeline_infeasible_message(
    profile: WorkloadProfile, catalog: Catalog, goal: Goal, limits: Limits
) -> str:
    """Why no plan meets `goal` for a model that must be cut (it fits no one function): the
    fastest pipelined plan the limits allow, so the user knows what to ask for instead."""
    text = (
        f"no plan meets {goal_words(goal)} for {profile.name} on {catalog.name} under these "
        f"limits: it needs ≥ {profile.min_memory_mb} MB, more than a function's "
        f"{catalog.memory_max_mb} MB, so it is cut into 2-{MAX_STAGES} stages of its "
        f"{len(profile.blocks)} blocks with up to {MAX_REPLICAS} replicas each"
    )
    fast = search_pipeline(profile, catalog, limits, None, None)
    if fast is None:
        return text + ", and no cut fits its stages into functions under these limits"
    return text + (
        f"; fastest achievable {format_duration_s(fast.figures.total_s)} "
        f"({len(fast.stages)} stages × {fast.replicas} replicas, "
        f"{format_usd(fast.figures.total_usd)})"
    )


def infeasible_message(
    profile: WorkloadProfile, catalog: Catalog, space: Space, goal: Goal, arch: str
) -> str:
    """Why no plan meets `goal`: the fastest and the cheapest achievable plans, so the user knows
    what to ask for instead."""
    fast_s, fast = fastest_cell(profile, catalog, space)
    if not math.isfinite(fast_s):
        return (
            f"no configuration of {profile.name} can run on {catalog.name} under these "
            f"limits: no memory size fits one iteration into an invocation of "
            f"{catalog.invocation_timeout_s} s, or the dataset shard does not fit in /tmp"
        )
    cheap = solve_deadline(profile, catalog, space, math.inf)
    text = (
        f"no plan meets {goal_words(goal)} for {profile.name} on {catalog.name} under "
        f"these limits: fastest achievable {format_duration_s(fast_s)} "
        f"(n={fast.n_workers}, {fast.memory_mb} MB, {fast.arch}, "
        + (f"S3 k={fast.reducers})" if fast.sync == "s3" else f"{fast.ps_type}×{fast.ps_count})")
    )
    if cheap is not None:
        i, pool = cheap
        text += (
            f", cheapest achievable {format_usd(float(pool.total_usd[i]))} "
            f"(takes {format_duration_s(float(pool.total_s[i]))})"
        )
    if arch == "any" and len(space.archs) > 1:
        text += "; workers and PS share one architecture (arch=mixed lets them differ)"
    return text


def reserve_words(goal: Goal) -> str:
    """What a deadline's plans are held to below it, e.g. ` less 10% slack, at the 90%
    interval's upper end (1.14× the prediction): predicted ≤ 11m35s`; "" if nothing."""
    if not goal.holds_back:
        return ""
    said = []
    if goal.slack:
        said.append(f" less {goal.slack:.0%} slack")
    if goal.interval_high > 1.0:
        said.append(f" at the 90% interval's upper end ({goal.interval_high:.2f}× the prediction)")
    limit = format_duration_s(goal.planning_deadline_s or 0.0)
    if goal.interval_high > 1.0:
        return ",".join(said) + f": predicted ≤ {limit}"
    return f"{said[0]} = {limit}"


def alternatives_rule(goal: Goal, workers: str = "each other worker count n") -> str:
    """What an alternative is, in one line: the CLI table's header, and each alternative's note
    with `workers` naming its own count."""
    if goal.deadline_s is None:
        return f"the fastest plan at {workers}, within the budget (ties: cheaper)"
    both = " and the budget" if goal.budget_usd is not None else ""
    return f"the cheapest plan at {workers}, meeting the deadline{both} (ties: faster)"


def sync_label(plan: Plan) -> str:
    """The exchange of a plan in a few words: `s3 (k=2)` or `ps (c5.large × 1)`."""
    if plan.sync == "s3":
        return f"s3 (k={plan.reducers})"
    return f"ps ({plan.ps_type} × {plan.ps_count})"


def sync_note(plan: Plan, other: Plan | None, forced: str) -> str:
    """Which gradient exchange won, and by how much over the best plan of the other one."""
    name = {"ps": "PS", "s3": "S3"}
    mode = name["s3" if plan.sync == "ps" else "ps"]
    if forced != "auto":
        return f"sync: {sync_label(plan)}, as asked (sync={forced}); the other mode not searched"
    if other is None:
        return f"sync: {sync_label(plan)}; the best {mode} plan cannot meet the goal"
    if plan.goal.deadline_s is not None:
        saved = other.cost.total_usd - plan.cost.total_usd
        return (
            f"sync: {sync_label(plan)}, {format_usd(saved)} cheaper than the best {mode} plan "
            f"{format_usd(other.cost.total_usd)} ({sync_label(other)}, "
            f"{format_duration_s(other.prediction.total_s)})"
        )
    faster = other.prediction.total_s - plan.prediction.total_s
    return (
        f"sync: {sync_label(plan)}, {format_duration_s(faster)} faster than the best {mode} plan "
        f"{format_duration_s(other.prediction.total_s)} ({sync_label(other)}, "
        f"{format_usd(other.cost.total_usd)})"
    )
