"""λDNN's Table 3 case on the 2020 platform: the planner's figure next to the paper's.

λDNN (Xu et al., IEEE TC 71(2), 2022), Table 3: ResNet-50 on CIFAR-10, 1 epoch, 8 functions,
one m5.large PS, deadline 600 s; λDNN measured 573.34 s with 8 × 2,560 MB. The profile
`paper-cifar10-resnet50` holds the workload (its `sources` say which figures are estimates).

The cost compared is like for like: λDNN's Eq. 10 (Lambda GB-s) plus the PS instance for the run,
as λDNN's Predictor.py adds it; our plan's other items (requests, Step Functions, S3, VPC
endpoints) are printed, not compared, since λDNN did not count them.

The case needs the PS burst model (network I/O credits): on m5.large's 0.75 Gbit/s baseline alone
it is infeasible (communication alone takes ~17 s per iteration).
"""

from __future__ import annotations

import dataclasses

import pytest

from provisioner.catalog import Catalog, load_catalog
from provisioner.plan import Goal, Plan
from provisioner.planner import build_plan, plan_job
from provisioner.profile import WorkloadProfile, load_profile
from provisioner.space import Choice, Infeasible, Limits

DEADLINE_S = 600.0
PAPER_N, PAPER_MEMORY_MB, PAPER_MEASURED_S = 8, 2560, 573.34
PAPER_PS = "m5.large"


@pytest.fixture(scope="module")
def case() -> tuple[WorkloadProfile, Catalog]:
    return load_profile("paper-cifar10-resnet50"), load_catalog("lambda-2020")


def paper_usd(catalog: Catalog) -> float:
    """λDNN's cost of its Table 3 run at the 2020 prices: Lambda GB-s (Eq. 10) plus the PS."""
    gb_s = PAPER_N * PAPER_MEMORY_MB / 1024.0 * PAPER_MEASURED_S
    lambda_usd = catalog.arch("x86_64").usd_per_gb_s * gb_s
    return lambda_usd + catalog.ps_type(PAPER_PS).usd_per_hour * PAPER_MEASURED_S / 3600.0


def _compared_usd(plan: Plan) -> float:
    return plan.cost.lambda_compute_usd + plan.cost.ps_instances_usd


def _line(what: str, plan: Plan) -> str:
    return (
        f"{what}: {plan.n_workers} × {plan.memory_mb} MB, {plan.ps_type} × {plan.ps_count}, "
        f"{plan.prediction.total_s:.2f} s, Lambda + PS ${_compared_usd(plan):.4f} "
        f"(all items ${plan.cost.total_usd:.4f})"
    )


def test_table3_case_is_feasible_on_burst_credits_and_not_on_the_baseline(
    case: tuple[WorkloadProfile, Catalog],
) -> None:
    """A 10-minute job on a fresh m5.large runs on its network I/O credits: feasible for 600 s.

    On the 0.75 Gbit/s baseline alone (the model before burst credits) the same case cannot
    meet the deadline. The cost is printed next to λDNN's, not asserted below it: our model adds
    terms λDNN's lacks (the PS sums the n gradients after they arrive, 0.6 s an iteration here;
    periodic checkpoints; start-up), so at λDNN's own configuration it predicts 641.65 s, not
    573.34 s, and the cheapest plan meeting 600 s needs more memory (README, "λDNN's setting").
    """
    profile, catalog = case
    paper = (
        f"λDNN Table 3: {PAPER_N} × {PAPER_MEMORY_MB} MB, {PAPER_PS} × 1, measured "
        f"{PAPER_MEASURED_S} s, Lambda + PS ${paper_usd(catalog):.4f}"
    )
    at_paper = build_plan(
        profile,
        catalog,
        Choice(PAPER_N, PAPER_MEMORY_MB, "x86_64", PAPER_PS, 1),
        Goal(deadline_s=None),
        Limits(),
        job="paper",
    )
    print(paper)
    print(_line("ours at λDNN's configuration", at_paper))
    try:
        result = plan_job(profile, catalog, Goal(deadline_s=DEADLINE_S), Limits(), "paper")
    except Infeasible as exc:
        pytest.fail(f"{paper}; ours: {exc}")
    plan = result.plan
    print(_line("ours, planned for 600 s", plan))
    assert plan.prediction.total_s <= DEADLINE_S
    assert plan.ps_type == PAPER_PS and plan.n_workers == PAPER_N
    no_burst = dataclasses.replace(
        catalog, ps_types=tuple(dataclasses.replace(p, burst_s=0.0) for p in catalog.ps_types)
    )
    with pytest.raises(Infeasible):
        plan_job(profile, no_burst, Goal(deadline_s=DEADLINE_S), Limits(), "paper")


def test_profile_rate_reproduces_table3_under_lambda_dnn_model(
    case: tuple[WorkloadProfile, Catalog],
) -> None:
    """The profile's R is back-solved from Table 3 with λDNN's own model (Eq. 1, the B_p and B_s
    its Predictor.py sets, its k count): fed back, that model gives the measured 573.34 s."""
    profile, _ = case
    curve = profile.rate("x86_64")
    assert curve is not None and curve.is_linear
    rate = float(curve.alpha1_samples_s_per_mb or 0.0) * PAPER_MEMORY_MB + float(
        curve.beta1_samples_s or 0.0
    )
    s3_mb_s = 0.002228 * min(PAPER_MEMORY_MB, 1792) + 16.12  # λDNN Predictor.py, B_f_s
    ps_mb_s = 80.0  # λDNN Predictor.py, B_f_p for n ≤ 16
    b_l = profile.profiled_local_batch
    k = (profile.dataset_samples // PAPER_N) // b_l * profile.epochs
    load_s = profile.dataset_bytes / 1e6 / (PAPER_N * s3_mb_s)
    total_s = load_s + k * (b_l / rate + 2 * profile.model_bytes / 1e6 / ps_mb_s)
    assert total_s == pytest.approx(PAPER_MEASURED_S, rel=1e-3)
