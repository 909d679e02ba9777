"""A run's measured terms from its workers' link results: one reading for every report.

The emulator's report (emulator/report.py) and calibration from an AWS run's report
(provisioner/calibrate.py, from what functions/finalize.py collects) read the same links the
same way. Pure: dictionaries in, seconds out; no torch, boto3 or numpy.
"""

from __future__ import annotations

import math
from typing import Any

# Candidate timing keys per term, first match wins: the runtime names its timings, we map them.
TERM_KEYS: dict[str, tuple[str, ...]] = {
    "load": ("load_s", "data_load_s", "shard_load_s", "download_s"),
    "compute": ("compute_s",),
    "communication": ("communication_s", "comm_s"),
    "startup": ("startup_s", "init_s", "setup_s"),
    "checkpoint": ("checkpoint_s",),
    "reduce": ("reduce_s",),  # S3 sync: a reducer's own work (its partition's sum and update)
    "import": ("import_s",),  # a cold link's module import, part of its start-up
    # the first iteration's wait, for the peers' start-up (part of communication)
    "first_wait": ("first_wait_s",),
}


def link_timing(link: dict[str, Any], term: str) -> float:
    """Seconds one invocation spent on `term` per its timings (0 when not reported)."""
    timings = link.get("timings") or {}
    for key in TERM_KEYS.get(term, ()):
        value = timings.get(key)
        if isinstance(value, int | float) and math.isfinite(value):
            return float(value)
    if term == "communication":
        push, pull = timings.get("push_s"), timings.get("pull_s")
        if isinstance(push, int | float) and isinstance(pull, int | float):
            return float(push) + float(pull)
    return 0.0


def startup_of(link: dict[str, Any]) -> float:
    """A link's start-up: the handler's own (import, model build, PS sync) when it reports one,
    else the handler module's import time as the runner measured it."""
    own = link_timing(link, "startup")
    if own > 0:
        return own
    return float((link.get("emulator_timings") or {}).get("handler_import_s", 0.0))


def warm_startup_s(link: dict[str, Any]) -> float:
    """A cold link's start-up less its import: what the same environment's next link pays."""
    return max(0.0, startup_of(link) - link_timing(link, "import"))


def orchestration_gap_s(link: dict[str, Any]) -> float:
    """What a link cost the orchestrator beyond the handler's own time: the request, the poll
    that sees the result (POLL_INTERVAL_S) and the hand-over; the model's `restart_s`, which
    calibrate measures the same way. A cold link's import is start-up, not gap."""
    timings = link.get("timings") or {}
    handler_s = float(timings.get("total_s", 0.0)) + float(timings.get("import_s", 0.0))
    return max(0.0, float(link.get("wall_s", 0.0)) - handler_s)


def chain_terms(links: list[dict[str, Any]]) -> dict[str, float]:
    """One worker's measured seconds per term over its whole chain of invocations (`links`:
    each invocation's result, in order, as the worker returned or recorded it)."""
    terms = {
        t: sum(link_timing(link, t) for link in links)
        for t in ("load", "compute", "communication", "reduce")
    }
    terms["startup"] = startup_of(links[0]) if links else 0.0
    # Chaining: what each extra link costs beyond training, i.e. its start-up, reload and the
    # orchestrator's gap, plus the checkpoints every link writes before it returns (λDNN has no
    # such term).
    terms["chaining"] = sum(
        startup_of(link) + link_timing(link, "load") + orchestration_gap_s(link)
        for link in links[1:]
    )
    terms["chaining"] += sum(link_timing(link, "checkpoint") for link in links)
    terms["load"] = link_timing(links[0], "load") if links else 0.0
    terms["wall"] = sum(float(link.get("wall_s", 0.0)) for link in links)
    # The chain's wall less its first link's gap: from the first handler's start to the end,
    # so a run's wall beyond it is launch (the spawn, the first dispatch and poll)
    terms["in_chain"] = terms["wall"] - (orchestration_gap_s(links[0]) if links else 0.0)
    return terms


def straggler_index(per_worker: list[dict[str, float]]) -> int:
    """The BSP straggler among the workers' chain_terms: the worker that computed longest."""
    return max(range(len(per_worker)), key=lambda i: per_worker[i]["compute"])


def measured_terms(per_worker: list[dict[str, float]]) -> dict[str, float]:
    """The run's measured terms: start-up, load, chaining and wall as the slowest worker's (each
    gates the others), compute and communication both from the straggler (the worker that
    computed longest).

    Not each term's maximum over workers: in BSP the others wait for the straggler in their
    communication, so the fastest worker's communication holds the straggler's extra compute,
    and the two maxima, taken from different workers, counted that time twice.
    """
    straggler = per_worker[straggler_index(per_worker)]
    measured = {t: max(w[t] for w in per_worker) for t in per_worker[0]}
    measured["compute"], measured["communication"] = (
        straggler["compute"], straggler["communication"])  # fmt: skip
    return measured
