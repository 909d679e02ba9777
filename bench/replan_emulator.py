"""Re-planning in the emulator: the synthesized state machine running a plan that re-plans on this
machine, at slowdowns of 1, 1.5, 2 and 3 × its deadline, with re-planning off (`--no-replan`)
and on.

Run: `.venv/bin/python -m bench.replan --emulator` (writes bench/results/replan-emulator.md and
.json; about 30 minutes on 2 cores; `--only W` runs one workload again beside the first, `--case
W` anew in its place).

Each workload's profile is first read again on this machine (`python -m emulator.profile
--anchor`, as `make demo` does: its rate at 0.5 and 1 vCPU and its start-up, so the model
predicts this machine's speed now; the committed profile where no CPU group holds the shares),
then planned on this machine's catalog (catalog/local.json) under the demo's run rules (8 s
invocations, at most 400 iterations a link) with re-planning on (provisioner/replan_attach.py:
links cut for the pace checks) and an envelope of ceiling 4 (`-c replan_ceiling=4`: up to 4 × n
workers, memory ½ to 4 × the plan's; the default 2 cannot win back a 2× slower platform for a
plan that only just meets its deadline, whose first link is spent before the first check). How
the deadline was chosen: the slowdown is set relative to it, so the plan as it is only just
meets it at 1× (80-100% of it) and misses it by R at R× (within 15%), as measured. One
calibration run first measures the fixed plan at the cpu scale whose local prediction is the
deadline (`--cpu-scale for-deadline:1`, emulator/deadline_scale.py): its measured total over the
deadline is k. A row's fixed run first tries the scale whose local prediction is R / k × the
deadline (for-deadline:R/k); where it took a total outside the row's band, the next try's scale
comes from the case's fixed runs so far (the secant of log total against log scale through the
two nearest the target), at most four tries, and the row shows how many it took; the re-planning
run then runs at the row's scale. Per run: the measured total against the deadline and the run's
cost priced from what it measured (emulator/report_replan.py); for the re-planning run its pace
checks, the pace its first check measured (measured / predicted seconds per iteration, against
the plan's figures at the catalog's speed) and the re-plans' stories. For the 3× case, the
envelope it would have needed: the smallest ceiling of workers and memory (by its worst case)
with which the model's run (provisioner/replan_sim.py: on this machine, fewer cores per MB)
meets the deadline, at the 3× row's cpu scale and at the pace its first check measured.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from provisioner import Goal, Limits, load_catalog, load_profile
from provisioner.catalog import Catalog
from provisioner.envelope import _on_grid_mb, envelope_worst_case_usd, worker_counts
from provisioner.parse import format_usd
from provisioner.plan import Plan
from provisioner.planner import RunRules, emulator_margin_s, run_catalog
from provisioner.profile import WorkloadProfile
from provisioner.replan_attach import plan_with_replan, replan_catalog
from provisioner.replan_sim import simulate
from provisioner.replan_spec import Envelope
from provisioner.space import Infeasible

RESULTS = Path(__file__).resolve().parent / "results"
COMMAND = ".venv/bin/python -m bench.replan --emulator"
CASES = (("digits-mlp", 20.0), ("synthetic-cifar-cnn", 60.0))
SLOWDOWNS = (1.0, 1.5, 2.0, 3.0)
LIMIT_S, PER_INVOCATION = 8.0, 400  # the demo's run rules
CEILING = 4  # the plans' envelope (replan_ceiling)
CEILING_FACTORS = (2, 3, 4, 6, 8)  # worker ceilings tried for the 3× case, × the plan's n
MEMORY_FACTORS = (1, 2, 3, 4)  # memory ceilings tried, × the plan's (on the catalog's grid)
# A row's fixed run is fitted to its slowdown as measured (fit_fixed_run): at most FIT_TRIES
# runs, accepted within FIT_TOLERANCE of R × the deadline (at 1×: FIT_BAND_1X of it up to it).
FIT_TRIES, FIT_TOLERANCE, FIT_BAND_1X, MIN_SCALE = 4, 0.15, 0.8, 0.03


@dataclass(frozen=True)
class Case:
    """One workload's plan on this machine and the figures it was made from."""

    workload: str
    deadline_s: float
    plan: Plan
    profile: WorkloadProfile
    catalog: Catalog  # the pace-checked catalog under the run rules (the plan's)


def profile_path(workload: str) -> Path:
    """Where the round keeps the workload's profile as read on this machine (anchor_profile)."""
    return RESULTS / f"replan-emulator-{workload}.profile.json"


def anchor_profile(workload: str) -> str:
    """The workload's profile read again on this machine (`emulator.profile --anchor`, as `make
    demo` does), else the committed one; which of the two, for the results."""
    out = profile_path(workload)
    cmd = [sys.executable, "-m", "emulator.profile", "--workload", workload, "--anchor",
           "--output", str(out)]  # fmt: skip
    if subprocess.run(cmd, check=False).returncode == 0:
        return "read again on this machine (emulator.profile --anchor)"
    shutil.copy(Path(__file__).resolve().parents[1] / "profiles" / f"{workload}.json", out)
    return "the committed profile (no CPU group here to read it again)"


def local_case(workload: str, deadline_s: float, profile_file: str | None = None) -> Case:
    """The workload's plan for this machine under the demo's run rules, re-planning on (its
    profile as the round read it, where it did; `profile_file`: a repeat's, under RESULTS)."""
    path = RESULTS / profile_file if profile_file else profile_path(workload)
    profile = load_profile(str(path) if path.exists() else workload)
    goal = Goal(deadline_s=deadline_s)
    base = load_catalog("local")
    rules = RunRules(LIMIT_S, emulator_margin_s(LIMIT_S, base), PER_INVOCATION)
    catalog = run_catalog(base, rules)
    plan = plan_with_replan(profile, catalog, goal, Limits(), f"replan-{workload}", replan="on",
                            alternatives=0, frontier_points=0, ceiling=CEILING).plan  # fmt: skip
    checked = replan_catalog("on", goal, catalog)
    assert checked is not None and plan.replan is not None, f"{workload}: no re-planning plan"
    return Case(workload, deadline_s, plan, profile, checked)


def cpu_scale_for(case: Case, slowdown: float) -> float:
    """The cpu scale whose local prediction of the plan is `slowdown` × its deadline (R of
    for-deadline:R)."""
    from emulator.deadline_scale import scale_for_deadline

    path = profile_path(case.workload)
    return scale_for_deadline(case.plan, slowdown, workload=str(path) if path.exists() else
                              case.workload, limit_s=LIMIT_S,
                              iterations_per_invocation=PER_INVOCATION)  # fmt: skip


def emulate(
    case: Case, slowdown: float, scale: float, replan: bool, endpoint: Any, out: Path
) -> dict[str, Any]:
    """One emulator run of the case's plan at cpu scale `scale`; its verdict, cost and re-plans
    (or its failure)."""
    from emulator.options import Options
    from emulator.orchestrator import run
    from emulator.records import EmulatorError

    path = profile_path(case.workload)
    options = Options(invocation_limit_s=LIMIT_S, iterations_per_invocation=PER_INVOCATION,
                      cpu_scale=scale, out_dir=out, quiet=True, print_report=False,
                      workload=str(path) if path.exists() else case.workload,
                      replan=replan)  # fmt: skip
    row: dict[str, Any] = {"slowdown": slowdown, "cpu_scale": scale, "replan": replan}
    try:
        run(case.plan, options, endpoint=endpoint)
    except EmulatorError as err:
        return {**row, "failed": str(err)}
    report = json.loads((out / "report.json").read_text())
    section = report.get("replan") or {}
    decisions = section.get("decisions") or []
    return {
        **row,
        "total_s": report["deadline"]["measured_total_s"],
        "met": report["deadline"]["met"],
        "cost_usd": section.get("cost_usd", {}).get("measured"),
        "stories": [s["story"] for s in section.get("switches") or []],
        "checks": len(decisions),
        "first_pace": decisions[0]["pace_ratio"] if decisions else None,
        "loss_last": report["loss"]["last"],
    }


def candidate_envelopes(plan: Plan, catalog: Catalog) -> list[Envelope]:
    """Envelopes larger than the default: worker ceilings CEILING_FACTORS × n (within the global
    batch) and memory up to MEMORY_FACTORS × the plan's (on the catalog's grid)."""
    b_g, found = plan.training.global_batch, {}
    for factor in CEILING_FACTORS:
        top = max(plan.n_workers, min(factor * plan.n_workers, b_g))
        for m_factor in MEMORY_FACTORS:
            sizes = {plan.memory_mb, _on_grid_mb(m_factor * plan.memory_mb, catalog)}
            env = Envelope(top, worker_counts(b_g, top), tuple(sorted(sizes)))
            found[(env.max_workers, env.memory_variants_mb)] = env
    return list(found.values())


def at_scale(catalog: Catalog, slowdown: float) -> Catalog:
    """This machine as a run at cpu scale 1 / slowdown emulates it: its cores hold `slowdown` ×
    the vCPU (emulator/pace.py gives the pace check the same), so more or larger functions
    fit, up to Lambda's largest (the slower vCPU is simulate's slowdown)."""
    if catalog.total_vcpu is None:
        return catalog
    aws = load_catalog("lambda-2025")
    return replace(
        catalog,
        total_vcpu=catalog.total_vcpu * slowdown,
        compute_cores=None if catalog.compute_cores is None else catalog.compute_cores * slowdown,
        max_vcpu=min(aws.max_vcpu, catalog.max_vcpu * slowdown),
        memory_max_mb=min(aws.memory_max_mb, round(catalog.memory_max_mb * slowdown)),
    )


def needed_envelope(case: Case, slowdown: float) -> tuple[Envelope, float, float] | None:
    """The envelope with the smallest worst case whose model run meets the deadline at
    `slowdown` on this machine at that scale (envelope, worst case, finish), or None when none
    tried does."""
    met = []
    catalog = at_scale(case.catalog, slowdown)
    for env in candidate_envelopes(case.plan, catalog):
        try:
            sim = simulate(case.plan, case.profile, catalog, env, slowdown)
        except Infeasible:  # at this slowdown the plan (or a re-plan) cannot run a link at all
            continue
        if sim.met:
            worst = envelope_worst_case_usd(case.plan, catalog, env)
            met.append((worst, env.max_workers, env, sim.finish_s))
    if not met:
        return None
    worst, _, env, finish = min(met, key=lambda m: (m[0], m[1]))
    return env, worst, finish


def failure_words(error: str) -> str:
    """What failed a run, short: the error a Catch or a guard held (`... (Workers caught
    TooManyLinks: A worker ran 17 links, the plan's bound.)`), else the error's start."""
    if " caught " in error:
        return error.rsplit(" caught ", 1)[1].rstrip(").")
    return error[:80]


def _cell(row: dict[str, Any]) -> str:
    if "failed" in row:
        return f"failed ({failure_words(row['failed'])}) | no | –"
    met = "yes" if row["met"] else "no"
    cost = "–" if row["cost_usd"] is None else format_usd(row["cost_usd"])
    return f"{row['total_s']:.1f} s | {met} | {cost}"


def _tries(fixed: dict[str, Any]) -> str:
    count = len(fixed.get("tries") or [])
    return f" ({count} runs)" if count > 1 else ""


def case_lines(case: Case, rows: list[dict[str, Any]], needed: str) -> list[str]:
    """One workload's table from its runs (fixed and re-planned per slowdown)."""
    plan = case.plan
    assert plan.replan is not None
    env = plan.replan.envelope
    lines = [
        f"### {case.workload}, deadline {case.deadline_s:g} s (this machine)",
        "",
        f"Plan: {plan.n_workers} × {plan.memory_mb} MB, "
        + (f"PS {plan.ps_type} × {plan.ps_count}" if plan.sync == "ps" else f"S3 k = "
           f"{plan.reducers}")
        + f", {plan.invocations_per_worker} links of {plan.iterations_per_invocation} iterations;"
        f" predicted {plan.prediction.total_s:.1f} s, {format_usd(plan.cost.total_usd)}. "
        f"Envelope: up to {env.max_workers} workers ({', '.join(map(str, env.worker_counts))}), "
        f"memory {', '.join(map(str, env.memory_variants_mb))} MB; worst case "
        f"{format_usd(plan.replan.worst_case_usd)}.",
        "",
        "| slowdown | cpu scale | fixed: total | met | cost | re-planned: total | met | cost "
        "| checks | pace at link 1 | re-plans |",
        "|---:|---:|---:|---|---:|---:|---|---:|---:|---:|---|",
    ]  # fmt: skip
    for slowdown in SLOWDOWNS:
        fixed = next(r for r in rows if r["slowdown"] == slowdown and not r["replan"])
        moved = next(r for r in rows if r["slowdown"] == slowdown and r["replan"])
        stories = "; ".join(moved.get("stories") or []) or "–"
        pace = moved.get("first_pace")
        lines.append(
            f"| {slowdown:g}× | {fixed.get('cpu_scale', 1 / slowdown):.3f}{_tries(fixed)} | "
            f"{_cell(fixed)} | "
            f"{_cell(moved)} | "
            f"{moved.get('checks', '–')} | {'–' if pace is None else f'{pace:.2f}×'} | "
            f"{stories} |"
        )
    return [*lines, "", needed, ""]  # render puts the case's profile line before `needed`


def needed_line(case: Case, rows: list[dict[str, Any]]) -> str:
    """What envelope the slowest case would have needed on the model: at its row's cpu scale
    (1 / scale × fewer cores per MB) and at the pace its re-planning run measured at its first
    check."""
    slowest = max(SLOWDOWNS)
    moved = next(r for r in rows if r["slowdown"] == slowest and r["replan"])
    measured = moved.get("first_pace")
    assert case.plan.replan is not None
    default = case.plan.replan.envelope
    parts = []
    scale = moved.get("cpu_scale", 1.0 / slowest)
    tries = [(f"at the row's cpu scale {scale:.3f} ({1 / scale:.2f}× fewer cores per MB than the "
              "catalog)", 1.0 / scale)]  # fmt: skip
    if measured is not None:
        tries.append((f"at the pace its first check measured ({measured:.2f}×)", measured))
    for label, pace in tries:
        found = needed_envelope(case, pace)
        if found is None:
            parts.append(f"{label} no envelope tried (up to 8 × n workers, 4 × the memory) "
                         "meets the deadline")  # fmt: skip
            continue
        env, worst, finish = found
        within = (env.max_workers <= default.max_workers
                  and set(env.memory_variants_mb) <= set(default.memory_variants_mb))  # fmt: skip
        parts.append(
            f"{label} an envelope of up to {env.max_workers} workers and memory "
            f"{', '.join(map(str, env.memory_variants_mb))} MB meets it (finish {finish:.1f} s, "
            f"worst case {format_usd(worst)}"
            + ("; the default envelope holds it)" if within else ")")  # fmt: skip
        )
    return f"What the {slowest:g}× case needed, on the model: " + "; ".join(parts) + "."


def render(doc: dict[str, Any]) -> str:
    """The markdown of a finished round (its rows in `doc`)."""
    lines = [
        "## Re-planning in the emulator",
        "",
        f"Regenerate: `{COMMAND}` (`--render` rewrites this file from the .json). Machine: "
        f"{doc['machine']}. " + (__doc__ or "").split("\n\n", 2)[2].replace("\n", " ").strip(),
        "",
    ]
    if doc.get("note"):
        lines += [doc["note"], ""]
    for entry in [*doc["cases"], *doc.get("repeats", [])]:
        case = local_case(entry["workload"], entry["deadline_s"], entry.get("profile_file"))
        table = case_lines(case, entry["runs"], needed_line(case, entry["runs"]))
        if entry.get("profile_file"):
            table[0] += ", run again (its profile read again: another plan)"
        if entry.get("profile"):
            cal = entry.get("calibration") or {}
            table[-2:-2] = [
                f"Profile: {entry['profile']}. Calibration: the fixed plan at "
                f"for-deadline:1 (cpu scale {cal.get('cpu_scale', 0):.3f}) took "
                f"{cal.get('total_s', 0):.1f} s, k = {entry.get('k', 1):.2f}; the rows took "
                f"{entry.get('runs_wall_s', 0) / 60:.1f} min.",
                "",
            ]
        if entry.get("remark"):
            table[-2:-2] = [entry["remark"], ""]
        lines += table
    return "\n".join(lines)


def target_band(slowdown: float, deadline_s: float) -> tuple[float, float]:
    """The fixed run's totals a row at `slowdown` accepts: at 1× the plan only just meets its
    deadline (FIT_BAND_1X of it up to it), at R× it misses by R (± FIT_TOLERANCE)."""
    if slowdown <= 1.0:
        return FIT_BAND_1X * deadline_s, deadline_s
    return (1 - FIT_TOLERANCE) * slowdown * deadline_s, (1 + FIT_TOLERANCE) * slowdown * deadline_s


def next_scale(points: list[tuple[float, float | None]], target_s: float) -> float:
    """The cpu scale at which the fixed plan should take target_s, from its measured runs
    (scale, total; None for a run that failed, too slow to finish in its link bound): the secant
    in log-log through the two finished runs nearest the target, or time ∝ 1 / scale from one;
    above a failed run, halfway (geometrically) to the nearest finished run above it."""
    done = [(scale, total) for scale, total in points if total is not None]
    done.sort(key=lambda p: abs(math.log(p[1] / target_s)))
    failed = max((scale for scale, total in points if total is None), default=0.0)
    if not done:
        return min(1.0, failed * 1.5)
    s1, t1 = done[0]
    guess = s1 * t1 / target_s
    other = [(scale, total) for scale, total in done if scale != s1]
    if other:
        s2, t2 = other[0]
        slope = (math.log(t2) - math.log(t1)) / (math.log(s2) - math.log(s1))
        if slope < 0:  # a slower cpu takes longer; noise may say otherwise
            guess = s1 * math.exp((math.log(target_s) - math.log(t1)) / slope)
    guess = min(max(guess, s1 / 4, MIN_SCALE), 1.0, s1 * 4)
    if guess > failed:
        return guess
    above = [scale for scale, _ in done if scale > failed]
    return math.sqrt(failed * min(above)) if above else min(1.0, failed * 1.5)


def fit_fixed_run(
    case: Case,
    slowdown: float,
    first_scale: float,
    points: list[tuple[float, float | None]],
    endpoint: Any,
    out: Path,
) -> dict[str, Any]:
    """The row's fixed run at the scale where it takes `slowdown` × the deadline, as measured:
    the first try at `first_scale` (the model's), then next_scale over every fixed run of the
    case so far (`points`, extended), up to FIT_TRIES runs; the row keeps its tries. A try that
    fails (past its link bound: too slow to finish) ends the fitting: the fixed plan cannot
    finish there, let alone meet the deadline, and the re-planning run runs at that scale."""
    low, high = target_band(slowdown, case.deadline_s)
    scale, tries = first_scale, []
    for attempt in range(FIT_TRIES):
        row = emulate(case, slowdown, scale, False, endpoint, out / f"try{attempt}")
        total = row.get("total_s")
        points.append((scale, total))
        tries.append([round(scale, 4), total])
        if total is None or low <= total <= high:
            break
        scale = round(next_scale(points, (low + high) / 2), 4)
    return {**row, "tries": tries}


def run_case(workload: str, deadline_s: float, endpoint: Any, tmp: Path) -> dict[str, Any]:
    """One workload's round: its profile read again, the calibration run, the rows (each
    fixed run fitted to its slowdown as measured, then the re-planning run at its scale)."""
    source = anchor_profile(workload)
    case = local_case(workload, deadline_s)
    out = tmp / f"{workload}-calibration"
    calibration = emulate(case, 1.0, cpu_scale_for(case, 1.0), False, endpoint, out)
    print(json.dumps({"workload": workload, "calibration": calibration}), file=sys.stderr,
          flush=True)  # fmt: skip
    k = calibration.get("total_s", deadline_s) / deadline_s
    points = [(calibration["cpu_scale"], calibration.get("total_s"))]
    rows, started = [], time.monotonic()
    for slowdown in SLOWDOWNS:
        out = tmp / f"{workload}-{slowdown:g}"
        fixed = fit_fixed_run(case, slowdown, cpu_scale_for(case, slowdown / k), points,
                              endpoint, out / "off")  # fmt: skip
        rows.append(fixed)
        print(json.dumps({"workload": workload, **fixed}), file=sys.stderr, flush=True)
        rows.append(emulate(case, slowdown, fixed["cpu_scale"], True, endpoint, out / "on"))
        print(json.dumps({"workload": workload, **rows[-1]}), file=sys.stderr, flush=True)
    return {"workload": workload, "deadline_s": deadline_s, "profile": source,
            "calibration": calibration, "k": k,
            "runs_wall_s": round(time.monotonic() - started), "runs": rows}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    from emulator import cpu
    from emulator.s3server import weed_server

    args = sys.argv[1:] if argv is None else argv
    path = RESULTS / "replan-emulator.json"
    if "--render" in args:  # the table again from the last round's rows (no runs)
        doc = json.loads(path.read_text())
    else:
        # `--only W`: that workload's round again, beside the first (its profile kept apart);
        # `--case W`: that workload's round anew, in place of its entry in the table
        only = args[args.index("--only") + 1] if "--only" in args else None
        redo = args[args.index("--case") + 1] if "--case" in args else None
        fresh = {"machine": cpu.this_machine(), "cases": []}
        doc = json.loads(path.read_text()) if only or redo else fresh
        with tempfile.TemporaryDirectory() as tmp, weed_server() as endpoint:
            for workload, deadline_s in CASES:
                if only not in (None, workload) or redo not in (None, workload):
                    continue
                first = profile_path(workload)
                kept = first.read_bytes() if only and first.exists() else None
                entry = run_case(workload, deadline_s, endpoint, Path(tmp))
                if only:
                    repeats = doc.setdefault("repeats", [])
                    name = f"replan-emulator-{workload}-again{len(repeats) + 1}.profile.json"
                    first.replace(RESULTS / name)
                    if kept is not None:
                        first.write_bytes(kept)
                    repeats.append({**entry, "profile_file": name})
                else:
                    others = [c for c in doc["cases"] if c["workload"] != workload]
                    order = [w for w, _ in CASES]
                    doc["cases"] = sorted(
                        [*others, entry], key=lambda c: order.index(c["workload"])
                    )
                RESULTS.mkdir(exist_ok=True)  # each case as it ends: a late round keeps its first
                path.write_text(json.dumps(doc, indent=1) + "\n")
    text = render(doc)
    (RESULTS / "replan-emulator.md").write_text(text + "\n")
    print(text)
