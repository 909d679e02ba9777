"""What the runtime receives from a plan that re-plans: the prepare event's layouts, the PS's
ceiling of workers, the worker event's fixed part; a plan that runs as it is gets none of it."""

from __future__ import annotations

import dataclasses

from functions.ps.cli import build_parser
from provisioner.replan_spec import Envelope, ReplanSpec
from stacks.events import (
    PACE_EVENT_KEYS,
    layout_prefixes,
    prepare_event,
    ps_command,
    replan_event_base,
    worker_event,
)
from tests.stacks.conftest import make_plan

PLAN = make_plan()  # 4 workers, global batch 128
REPLAN = dataclasses.replace(
    PLAN, replan=ReplanSpec(Envelope(8, (1, 2, 4, 8), (1024, 2048, 4096)), 1.0, False)
)


def test_the_prepare_event_lists_a_layout_per_envelope_count_with_the_plans_first_keys() -> None:
    plain = prepare_event(PLAN, source="builtin:digits", dataset_bucket="d")
    event = prepare_event(REPLAN, source="builtin:digits", dataset_bucket="d")
    assert "layouts" not in plain
    assert {k: v for k, v in event.items() if k != "layouts"} == plain
    assert event["layouts"] == [
        {"n_shards": n, "dataset_prefix": f"demo/shards-n{n}"} for n in (1, 2, 4, 8)
    ]
    assert layout_prefixes(PLAN) == ("demo/shards-n4",)


def test_the_plans_own_count_is_a_layout_even_outside_the_envelopes_counts() -> None:
    odd = dataclasses.replace(PLAN, replan=ReplanSpec(Envelope(8, (8,), (2048,)), 1.0, False))
    assert layout_prefixes(odd) == ("demo/shards-n4", "demo/shards-n8")


def test_the_ps_waits_for_up_to_the_envelopes_ceiling() -> None:
    parse = build_parser().parse_args
    plain = ps_command(PLAN, shard=0, secret_ref="s", artifacts_bucket="b")
    ceiling = ps_command(REPLAN, shard=0, secret_ref="s", artifacts_bucket="b")
    assert parse(plain[3:]).workers == 4
    assert parse(ceiling[3:]).workers == 8
    assert [a for a in ceiling if a != "8"] == [a for a in plain if a != "4"]


def test_the_event_base_keeps_what_no_pace_changes() -> None:
    event = worker_event(REPLAN, rank=3, dataset_bucket="d", artifacts_bucket="a",
                         ps_endpoints=["ps:7070"], secret_ref="s")  # fmt: skip
    base = replan_event_base(event)
    assert set(base) == set(event) - set(PACE_EVENT_KEYS) - {"rank"}
    assert base["ps_endpoints"] == ["ps:7070"] and base["iterations"] == PLAN.training.iterations
