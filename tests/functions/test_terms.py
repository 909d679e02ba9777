"""A run's measured terms from its links (functions/terms.py): made-up invocation results."""

from __future__ import annotations

import math

from functions.terms import (
    chain_terms,
    link_timing,
    measured_terms,
    orchestration_gap_s,
    warm_startup_s,
)


def link_result(losses: list[list[float]], **timings: float) -> dict:  # type: ignore[type-arg]
    """An invocation's result as the emulator records it (also tests/emulator/test_report.py)."""
    return {
        "losses": losses,
        "timings": timings,
        "wall_s": 10.0,
        "emulator_timings": {"handler_import_s": 2.0},
    }


def test_chain_terms_sum_links_and_split_startup_from_chaining() -> None:
    links = [
        link_result(
            [], load_s=0.5, compute_s=3.0, communication_s=1.0, startup_s=4.0, checkpoint_s=0.1
        ),
        link_result(
            [],
            load_s=0.2,
            compute_s=2.0,
            communication_s=0.5,
            startup_s=3.0,
            checkpoint_s=0.1,
            total_s=9.0,
            import_s=0.5,
        ),
    ]
    terms = chain_terms(links)
    assert terms["compute"] == 5.0
    assert terms["communication"] == 1.5
    assert terms["load"] == 0.5  # the first link's load; later reloads are chaining
    assert terms["startup"] == 4.0
    # the second link's start-up, reload, the orchestrator's gap (10 s seen, 9.5 s in the
    # handler and its import) and both links' checkpoints
    assert math.isclose(terms["chaining"], 3.0 + 0.2 + 0.5 + 0.1 + 0.1)
    assert terms["wall"] == 20.0
    # the first link reports no handler total: its whole wall counts as gap, outside the chain
    assert terms["in_chain"] == 10.0
    links[0]["timings"].update(total_s=7.5, import_s=2.0)
    assert chain_terms(links)["in_chain"] == 19.5  # 0.5 s of the first link no handler saw


def test_compute_and_communication_come_from_the_straggler_not_two_workers() -> None:
    """In BSP the fast worker waits for the slow one in its communication: the two maxima from
    different workers would count the straggler's extra compute twice."""
    fast = {"compute": 8.0, "communication": 3.0, "startup": 2.0, "load": 0.5, "chaining": 0.0}
    slow = {"compute": 10.0, "communication": 1.0, "startup": 1.5, "load": 0.7, "chaining": 0.2}
    got = measured_terms([fast, slow])
    assert (got["compute"], got["communication"]) == (10.0, 1.0)
    assert (got["startup"], got["load"], got["chaining"]) == (2.0, 0.7, 0.2)


def test_the_orchestration_gap_is_what_the_handler_did_not_spend() -> None:
    assert orchestration_gap_s({"wall_s": 1.0, "timings": {"total_s": 0.7}}) == 0.30000000000000004
    assert orchestration_gap_s({"wall_s": 1.0, "timings": {"total_s": 0.7, "import_s": 0.4}}) == 0
    assert orchestration_gap_s({"wall_s": 1.0}) == 1.0  # a handler that reports no timings


def test_link_timing_falls_back_to_push_plus_pull_and_to_zero() -> None:
    assert link_timing({"timings": {"push_s": 1.0, "pull_s": 2.0}}, "communication") == 3.0
    assert link_timing({"timings": {}}, "compute") == 0.0


def test_a_warm_start_up_is_the_cold_ones_less_its_import() -> None:
    cold = {"timings": {"startup_s": 3.0, "import_s": 2.5}}
    assert warm_startup_s(cold) == 0.5
    assert warm_startup_s({"timings": {"startup_s": 0.7}}) == 0.7  # a warm link imports nothing
    assert warm_startup_s({"timings": {"startup_s": 1.0, "import_s": 2.0}}) == 0.0
