"""Re-planning on the model: a run played at a slowdown of the catalog's speed, with and without
re-planning at its link boundaries (provisioner/replan_sim.py), before any emulator run; and in
the emulator (`--emulator`, bench/replan_emulator.py): the synthesized state machine re-planning
real runs on this machine.

Run: `.venv/bin/python -m bench.replan` (writes bench/results/replan.md; seconds);
`.venv/bin/python -m bench.replan --emulator` (bench/results/replan-emulator.md; about 20 min
on 2 cores; `--only W` one workload again).

For each workload on lambda-2025 at its deadline, the plan_job plan with links of at most a
tenth of the deadline (replan_pace.pace_checked_catalog: the run is checked at least that
often, each extra link priced), the default envelope (provisioner/envelope.py), and slowdowns 1.0,
1.5, 2.0 and 3.0 × the catalog's compute and exchange. Every figure is the model's: the truth
of a segment is the model at the slower figures, and a segment cut short by a switch is costed
pro rata its iterations (an estimate). The emulator's table (the synthesized state machine
re-planning) is bench/results/replan-emulator.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

from provisioner import Goal, Limits, load_catalog, load_profile, plan_job
from provisioner.envelope import default_envelope, envelope_worst_case_usd
from provisioner.parse import format_duration_s, format_usd
from provisioner.replan_pace import pace_checked_catalog
from provisioner.replan_sim import simulate

RESULTS = Path(__file__).resolve().parent / "results"
REGENERATE = ".venv/bin/python -m bench.replan"
CASES = (("paper-cifar10-mobilenetv2", 1200.0), ("cifar10-resnet18", 3600.0))
SLOWDOWNS = (1.0, 1.5, 2.0, 3.0)


def case_lines(workload: str, deadline_s: float) -> list[str]:
    """One workload's table: the plan, its envelope, and each slowdown fixed and re-planned."""
    profile = load_profile(workload)
    base = load_catalog("lambda-2025")
    goal, limits = Goal(deadline_s=deadline_s), Limits()
    catalog = pace_checked_catalog(base, deadline_s)
    plan = plan_job(profile, catalog, goal, limits, "bench", alternatives=0,
                    frontier_points=0).plan  # fmt: skip
    env = default_envelope(plan, catalog, min_memory_mb=profile.min_memory_mb)
    exchange = f"PS {plan.ps_type} × {plan.ps_count}" if plan.sync == "ps" else (
        f"S3 k = {plan.reducers}")  # fmt: skip
    lines = [
        f"### {workload}, deadline {format_duration_s(deadline_s)}",
        "",
        f"Plan: {plan.n_workers} × {plan.memory_mb} MB, {exchange}, "
        f"{plan.invocations_per_worker} links of {plan.iterations_per_invocation} iterations; "
        f"predicted {format_duration_s(plan.prediction.total_s)}, "
        f"{format_usd(plan.cost.total_usd)}. Envelope: up to {env.max_workers} workers "
        f"({', '.join(map(str, env.worker_counts))}), memory "
        f"{', '.join(map(str, env.memory_variants_mb))} MB; worst case "
        f"{format_usd(plan.worst_case_usd)} as planned, "
        f"{format_usd(envelope_worst_case_usd(plan, catalog, env))} at the envelope's ceiling.",
        "",
        "| slowdown | fixed: finish | met | cost | re-planned: finish | met | cost "
        "| first re-plan |",
        "|---:|---:|---|---:|---:|---|---:|---|",
    ]
    for slowdown in SLOWDOWNS:
        fixed = simulate(plan, profile, catalog, env, slowdown, replan=False)
        moved = simulate(plan, profile, catalog, env, slowdown)
        lines.append(
            f"| {slowdown:g}× | {format_duration_s(fixed.finish_s)} | {_yes(fixed.met)} | "
            f"{format_usd(fixed.cost_usd)} | {format_duration_s(moved.finish_s)} | "
            f"{_yes(moved.met)} | {format_usd(moved.cost_usd)} | "
            f"{moved.stories[0] if moved.stories else '–'} |"
        )
    return [*lines, ""]


def _yes(met: bool | None) -> str:
    return "–" if met is None else ("yes" if met else "no")


def main(argv: list[str] | None = None) -> None:
    if "--emulator" in (sys.argv[1:] if argv is None else argv):
        from bench.replan_emulator import main as emulator_main

        emulator_main([a for a in (sys.argv[1:] if argv is None else argv) if a != "--emulator"])
        return
    lines = ["## Re-planning on the model", "", f"Regenerate: `{REGENERATE}`. "
             + (__doc__ or "").split("\n\n", 2)[2].replace("\n", " ").strip(), ""]  # fmt: skip
    for workload, deadline_s in CASES:
        lines += case_lines(workload, deadline_s)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "replan.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
