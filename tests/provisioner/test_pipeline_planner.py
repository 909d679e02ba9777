"""plan_job with block profiles: a model that fits no function is cut; a profile without blocks
is refused in one line; a pipelined plan round-trips through its JSON."""

from __future__ import annotations

import dataclasses

import pytest

from provisioner import local_machine
from provisioner.catalog import Catalog
from provisioner.plan import Goal, Plan
from provisioner.planner import Infeasible, plan_job
from provisioner.profile import WorkloadProfile
from provisioner.space import Limits
from tests.provisioner.conftest import make_profile, small_catalog
from tests.provisioner.pipeline_profiles import block_dict, blocks_profile

LIMITS = Limits(max_concurrency=6, sync="auto")


def catalog() -> Catalog:
    return small_catalog(memory_max_mb=1280, shards=1, ps=("c5.large",))


def too_big() -> WorkloadProfile:
    """Four 60 MB blocks: 4 copies of 240 MB and the runtime exceed 1,280 MB; two do not."""
    blocks = [block_dict(f"{i}:Layer", 60_000_000, 20_000, 100_000, 400.0) for i in range(4)]
    return blocks_profile(
        blocks, min_memory_mb=1400, dataset_samples=2000, epochs=1, profiled_local_batch=8
    )


def test_a_model_that_fits_no_function_is_cut() -> None:
    plan = plan_job(too_big(), catalog(), Goal(deadline_s=4 * 3600.0), LIMITS, "big").plan
    assert plan.pipeline is not None and plan.pipeline.reason == "does-not-fit"
    stages = plan.pipeline.stages
    assert stages[0].first_block == 0 and stages[-1].stop_block == 4
    assert all(s.memory_mb >= s.memory_needed_mb for s in stages)
    assert plan.memory_mb == max(s.memory_mb for s in stages) <= 1280
    assert plan.n_workers * len(stages) <= 6
    assert any(n.startswith("pipelined in ") and "(does-not-fit)" in n for n in plan.notes)
    assert plan.training.local_batch % plan.pipeline.micro_batches == 0


def test_a_pipelined_plan_round_trips_through_json() -> None:
    plan = plan_job(too_big(), catalog(), Goal(deadline_s=4 * 3600.0), LIMITS, "big").plan
    again = Plan.from_json(plan.to_json())
    assert again == plan and again.pipeline == plan.pipeline


def test_a_model_that_fits_no_function_without_blocks_is_refused() -> None:
    profile = make_profile(min_memory_mb=4000)
    with pytest.raises(Infeasible) as err:
        plan_job(profile, catalog(), Goal(deadline_s=3600.0), LIMITS, "big")
    assert str(err.value) == (
        "workload test-workload needs ≥ 4000 MB but a function of catalog lambda-2025 has at "
        "most 1280 MB, and its profile declares no blocks to cut it into pipeline stages; "
        "accepted: a profile with 'blocks' and 'runtime_memory_mb' (profiles/README.md), "
        "profiled with its blocks"
    )


def test_a_model_no_cut_can_train_in_time_names_the_fastest_cut() -> None:
    """Infeasible, one line: why it must be cut, and the fastest pipelined plan the limits allow
    (which takes longer than the deadline asked)."""
    fastest = plan_job(too_big(), catalog(), Goal(budget_usd=1e6), LIMITS, "big").plan
    with pytest.raises(Infeasible) as err:
        plan_job(too_big(), catalog(), Goal(deadline_s=60.0), LIMITS, "big")
    said = str(err.value)
    assert said.startswith(
        "no plan meets deadline 1m00s for test-workload on lambda-2025 under these limits: it "
        "needs ≥ 1400 MB, more than a function's 1280 MB, so it is cut into 2-4 stages of its "
        "4 blocks with up to 16 replicas each; fastest achievable "
    )
    assert fastest.prediction.total_s > 60.0
    assert f"({len(fastest.pipeline.stages)} stages × {fastest.n_workers} replicas" in said


def test_a_local_catalog_cuts_a_model_only_where_it_does_not_fit() -> None:
    local = dataclasses.replace(catalog(), total_vcpu=2.0)
    assert local_machine.applies(local)
    plan = plan_job(too_big(), local, Goal(deadline_s=4 * 3600.0), LIMITS, "big").plan
    assert plan.pipeline is not None and plan.pipeline.reason == "does-not-fit"
    assert plan.memory_mb <= local.memory_max_mb
    # a model that fits keeps the one-stage plan its profile without blocks gets: never "cheaper"
    blocks = [block_dict(f"{i}:Layer", 1_000_000, 4_000, 40_000, 300.0) for i in range(3)]
    fits = blocks_profile(blocks, dataset_samples=2000, epochs=1, profiled_local_batch=8)
    kept = plan_job(fits, local, Goal(deadline_s=3600.0), LIMITS, "small").plan
    plain = plan_job(
        dataclasses.replace(fits, blocks=(), runtime_memory_mb=None),
        local, Goal(deadline_s=3600.0), LIMITS, "small",
    ).plan  # fmt: skip
    assert kept.pipeline is None and kept == plain


def test_a_small_model_keeps_its_one_stage_plan_unless_cutting_beats_it() -> None:
    blocks = [block_dict(f"{i}:Layer", 1_000_000, 4_000, 40_000, 300.0) for i in range(3)]
    profile = blocks_profile(blocks, dataset_samples=2000, epochs=1, profiled_local_batch=8)
    result = plan_job(profile, catalog(), Goal(deadline_s=3600.0), LIMITS, "small")
    plain = plan_job(
        dataclasses.replace(profile, blocks=(), runtime_memory_mb=None),
        catalog(), Goal(deadline_s=3600.0), LIMITS, "small",
    ).plan  # fmt: skip
    if result.plan.pipeline is None:
        assert result.plan == plain
    else:  # cut: it beats the one-stage optimum, kept as the first alternative
        assert result.plan.pipeline.reason == "cheaper"
        assert result.plan.cost.total_usd <= plain.cost.total_usd
        assert result.alternatives[0] == plain


def test_the_cli_summary_lists_every_stage() -> None:
    from provisioner.summary import render_plan

    plan = plan_job(too_big(), catalog(), Goal(deadline_s=4 * 3600.0), LIMITS, "big").plan
    assert plan.pipeline is not None
    text = render_plan(plan).splitlines()
    head = [line for line in text if line.strip().startswith("pipeline")]
    assert head and f"{plan.pipeline.stage_count} stages" in head[0]
    for st in plan.pipeline.stages:
        (line,) = [x for x in text if x.strip().startswith(f"stage {st.index}")]
        assert f"blocks {st.first_block}-{st.stop_block - 1}" in line
        assert f"{plan.n_workers} × {st.memory_mb} MB" in line
    one = plan_job(make_profile(), catalog(), Goal(deadline_s=3600.0), LIMITS, "x").plan
    assert not [x for x in render_plan(one).splitlines() if "stage 0" in x]


def test_cutting_is_chosen_where_it_is_cheaper_and_says_by_how_much() -> None:
    """A model whose whole needs 1,280 MB but whose rate is flat above 0.05 vCPU: two stages of
    512 MB bill 1,024 MB per replica for about half the time each, cheaper than one 1,280 MB
    function even with the boundaries' requests."""
    flat = {"points": [{"vcpu_share": 0.05, "samples_per_s": 10.0},
                       {"vcpu_share": 1.0, "samples_per_s": 10.0}]}  # fmt: skip
    blocks = [block_dict(f"{i}:Layer", 1_000_000, 4_000, 10_000, 10.0) for i in range(4)]
    for b in blocks:
        b["training_rate"] = {"x86_64": flat}
    whole = {"points": [{**p, "samples_per_s": 2.5} for p in flat["points"]]}
    profile = blocks_profile(
        blocks, min_memory_mb=1280, dataset_samples=4000, epochs=1, profiled_local_batch=16,
        training_rate={"x86_64": whole},
    )  # fmt: skip
    goal = Goal(deadline_s=4 * 3600.0)
    result = plan_job(profile, catalog(), goal, LIMITS, "cut")
    plan, one_stage = result.plan, result.alternatives[0]
    assert plan.pipeline is not None and plan.pipeline.reason == "cheaper"
    assert one_stage.pipeline is None
    assert plan.cost.total_usd < one_stage.cost.total_usd
    saved = one_stage.cost.total_usd - plan.cost.total_usd
    assert f"pipelined in {plan.pipeline.stage_count} stages (cheaper): ${saved:.4f} less" in (
        " ".join(plan.notes)
    )
