"""Predicted vs measured on the emulator: the model held to the platform it predicts.

`python -m bench.predict [--quick] [--planned] [--only WORKLOAD] [--repeats R] [--reuse]
[--precision P [--max-repeats M] [--extra-minutes X]]`
`python -m bench.predict --rescore [--quick] [--only WORKLOAD] [--set SECTION.FIELD=VALUE ...]
[--anchor-weight W] [--profile WORKLOAD=PATH ...]`

Every configuration is planned on the local platform's catalog (`catalog/local.json`, written
by `python -m emulator.calibrate` for this machine): the same model and planner as for AWS, fed
figures measured here. The emulator then trains it (real weed S3 server, PS processes, worker
processes held to their CPU share) and its report sets each term's local prediction against the
measurement: accuracy = 1 − |predicted − measured| / measured.

Two kinds of rows:
- fixed: a chosen (n, m, PS shards) over three models, n from 1 to 8, three memory sizes, with
  and without re-invocations (an iteration cap per invocation makes links end at a chosen
  iteration on any machine);
- planned: the planner picks the configuration for a deadline on the local platform, and the
  run must meet that deadline: a loose one, whose target the cheapest plan just meets, and a
  tight one, which the cheapest plan misses on any machine (tight_deadline_s), so the plan sits
  at its target and only the catalog's default_slack stands between the run and the deadline.
  Both are set from this machine's fastest and cheapest plans, so every machine has a plan for
  them. `--planned` runs only these rows.
Each case runs R times (default 3) and each term's measured figure is the median of its runs:
the same run varies by 10-20% on these machines. The repeats go round the cases (every case once,
then again), so a drift of the machine's speed meets every case alike. With `--precision P`
rounds go on after the repeats over the cases whose median may still stray more than P from
their typical run (median_error: √(π/2)·stdev/√R over the median), up to M runs a case (default
12) and for at most X minutes (default 30). The rule reads the measured totals alone, never a
prediction: a case runs again for its noise, not for how far it lands from its prediction. Five
runs of a digits case spread 10-17% leave its median 6-9% adrift, so without it some row of
most grids is 10% off whatever the model says (noise_ceiling).

The platform is measured in the same run, first: the machine's catalog (`emulator.calibrate`)
and every workload's profile (`emulator.profile`), as λDNN profiles a workload before it
predicts. This VM's speed drifts by up to half between hours (MobileNetV2 at 1 vCPU: 50 samples/s
one day, 77 the next, same code), so a profile from another hour predicts another machine.
The figures used are kept beside the results (bench/results/predict-platform/); `--reuse`
skips the measuring and takes catalog/local.json and profiles/ as they are.

Anchors: a curve measured once still meets rows up to an hour later, so in every round each
workload's rate at 0.5 and 1 vCPU and its start-up are read again just before its cases (a few
children per share, emulator.profile.measure_anchor) and its profile moved half way (in log
speed: emulator.profile.ANCHOR_WEIGHT says why) to that speed, the whole way beyond ×1.33
(ANCHOR_DRIFT_BAND), each point by the factor at its share, the curve's shape kept between and
beyond (anchored_profile; kept under <name>-platform/anchors/). Two shares, not one: the CNN's
runs at 0.56-0.72 vCPU did not speed up with the 1-vCPU reading (2026-11-26). Each run is
predicted from its round's anchored profile and a row's prediction is the median of its runs'.
The catalog's loop figures drift too (the shard's CPU per exchange read 0.17-0.57 ms on the same
machine hours apart, 2026-11-27, and the grids fit best 0.2-0.5 ms), so every round first reads
them again (emulator.calibrate.measure_loop_now: the round trip, the client's CPU share of an
exchange, the shard's CPU per exchange, each the median of three fresh shards' 1,000 exchanges)
and the load's CPU-bound part (emulator.calibrate.measure_load_now: five fresh runners' first
load of a tiny dataset at 1 vCPU; it read 0.31 s at calibration and the grids' loads fit
0.20-0.25 s hours later), and plans and predicts its rows on the catalog with them
(anchor_catalog; kept as <name>-platform/anchors/local-round<k>.json, which --rescore reads per
run).
The table also gives the accuracy of the same runs predicted from the start-of-run profiles and
catalog, so what the anchors changed is measured, not asserted. `--no-anchor` runs without them.
Writes bench/results/predict.{json,md,png} (`--quick`, `--only W`: predict-quick.*, predict-W.*).

`--rescore` measures nothing: it predicts the configurations of an earlier run's results again
with the model as it is now, from the platform figures that run measured, and holds them to that
run's measurements (predict-rescored.*, predict-W-rescored.*). A model change is checked against
40 minutes of measurements in a second; the table says it is a re-scoring, and of which run.
`--set lambda.compute_cores=2` re-scores with a catalog figure changed (a what-if the table
names), for a figure a new calibration would add or move. `--anchor-weight W` re-scores with each
run's anchor applied again at weight W (emulator.profile.ANCHOR_WEIGHT), from the readings the
run kept. `--profile WORKLOAD=PATH` re-scores with another profile of the workload (a re-profile)
in place of the run's start profile, moved by those same readings: a new profile is checked on
measurements taken before it, out of sample.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emulator import cpu
from emulator.calibrate import (
    LOOP_FIGURES,
    here_today,
    load_anchored,
    loop_anchored,
    measure_load_now,
    measure_loop_now,
    write_catalog,
)
from emulator.options import LOCAL_CATALOG, Options
from emulator.orchestrator import run
from emulator.profile import ANCHOR_WEIGHT, anchored_profile, write_anchored
from emulator.s3server import weed_server
from provisioner import Goal, Limits, load_catalog, load_profile, plan_job
from provisioner.catalog import Catalog, catalog_from_dict, curve_points
from provisioner.planner import RunRules, build_plan, predict_run
from provisioner.profile import WorkloadProfile, profile_from_dict
from provisioner.search import fastest_cell, solve_deadline
from provisioner.space import Choice, build_space

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS = REPO_ROOT / "bench" / "results"
TERMS = (
    "load", "compute", "communication", "ps_aggregation", "startup", "chaining", "launch", "total"
)  # fmt: skip
LOCAL_PS = "loopback"
LOCAL_ARCH = "x86_64"  # the architecture every configuration is built and re-predicted on
RUN_CONFIGURATION = ("n", "memory_mb", "ps_count", "iterations")  # what a plan chose, per run
INVOCATION_LIMIT_S = 900.0  # every case's: a link ends by its iteration cap, never by time


@dataclass(frozen=True)
class Case:
    """One benchmark row: a configuration (or a deadline the planner sizes for)."""

    workload: str
    n: int = 0  # 0: the planner chooses (planned rows)
    memory_mb: int = 0
    ps_count: int = 1
    iterations: int = 0  # 0: the workload's own k
    per_invocation: int = 0  # iteration cap per invocation (0: one link)
    deadline_s: float = 0.0  # planned rows only
    # planned rows only, instead of a deadline: where the plan's target lies between the fastest
    # and the cheapest plan's predicted times (tight_deadline_s), on any machine's speed
    tight: float = 0.0

    @property
    def planned(self) -> bool:
        return bool(self.deadline_s or self.tight)

    @property
    def label(self) -> str:
        if self.tight:
            return f"{self.workload} @ {'tight' if self.tight < 1 else 'loose'} {self.tight:g}"
        if self.deadline_s:
            return f"{self.workload} @ {self.deadline_s:g} s"
        links = f", {self.per_invocation}/link" if self.per_invocation else ""
        return f"{self.workload} n={self.n} m={self.memory_mb} ps={self.ps_count}{links}"


# MobileNetV2 needs 1,216 MB (its profile's min_memory_mb: 975 MB peak resident set × 1.2), so
# its smallest size here is 1,280 MB; the planner would not choose less.
FIXED = (
    Case("digits-mlp", 1, 1024, 1, 1500),
    Case("digits-mlp", 1, 2653, 1, 1500),
    Case("digits-mlp", 2, 1024, 1, 1500, 500),
    Case("digits-mlp", 2, 1769, 2, 1500),
    Case("digits-mlp", 4, 1024, 1, 1000),
    Case("digits-mlp", 8, 1024, 2, 800, 400),
    Case("synthetic-cifar-cnn", 1, 1024, 1, 60),
    Case("synthetic-cifar-cnn", 1, 1769, 1, 60, 30),
    Case("synthetic-cifar-cnn", 2, 1024, 1, 60),
    Case("synthetic-cifar-cnn", 2, 1769, 2, 60),
    Case("synthetic-cifar-cnn", 4, 1024, 1, 40, 20),
    Case("synthetic-cifar-cnn", 8, 1024, 1, 24),
    Case("synthetic-cifar-mobilenetv2", 1, 1769, 1, 20),
    Case("synthetic-cifar-mobilenetv2", 1, 2653, 2, 20, 10),
    Case("synthetic-cifar-mobilenetv2", 2, 1280, 1, 20),
    Case("synthetic-cifar-mobilenetv2", 2, 1769, 2, 16, 8),
    Case("synthetic-cifar-mobilenetv2", 4, 1280, 1, 12),
    Case("synthetic-cifar-mobilenetv2", 8, 1280, 2, 8, 4),
)
# Loose deadlines, whose target the cheapest plan just meets, and tight ones, which the cheapest
# plan misses, so the plan sits at its target and the catalog's default_slack is what stands
# between it and the deadline. Both are set from this machine's own fastest and cheapest plans:
# fixed seconds (12, 40, 60 s until 2026-11-26) had no plan at all on a day this VM ran 3x slower
# (digits-mlp: 12 s less 20% slack against a fastest plan of 11.6 s).
LOOSE_SHARE = 1.0
TIGHT_SHARE = 0.5
PLANNED = (
    Case("digits-mlp", tight=LOOSE_SHARE),
    Case("synthetic-cifar-cnn", tight=LOOSE_SHARE),
    Case("synthetic-cifar-mobilenetv2", tight=LOOSE_SHARE),
    Case("digits-mlp", tight=TIGHT_SHARE),
    Case("synthetic-cifar-cnn", tight=TIGHT_SHARE),
    Case("synthetic-cifar-mobilenetv2", tight=TIGHT_SHARE),
)
QUICK = (FIXED[2], FIXED[8], PLANNED[0])


def tight_deadline_s(profile: WorkloadProfile, catalog: Catalog, share: float) -> float:
    """A deadline whose planning target (the deadline less the catalog's default_slack) lies
    `share` of the way from the fastest plan's predicted time to the cheapest plan's: the
    cheapest plan misses it, so the planner sizes up and the plan sits near its target."""
    space = build_space(profile, catalog, Limits())
    fastest_s, _ = fastest_cell(profile, catalog, space)
    cheapest = solve_deadline(profile, catalog, space, math.inf)
    if cheapest is None or not math.isfinite(fastest_s):
        raise ValueError(f"bad case: {profile.name} has no plan on {catalog.name}")
    i, pool = cheapest
    target_s = fastest_s + share * (float(pool.total_s[i]) - fastest_s)
    if share >= 1.0:  # the cheapest plan meets it, rounding in the slack's product included
        target_s *= 1.0 + 1e-9
    return target_s / (1.0 - catalog.default_slack)


def job_of(case: Case) -> str:
    """The case's job name, which names its stacks: letters, digits and hyphens only."""
    if case.deadline_s:
        return f"bench-d{case.deadline_s:g}"
    if case.tight:
        return f"bench-tight{round(case.tight * 100)}"
    return f"bench-n{case.n}-m{case.memory_mb}"


def plan_of(case: Case, profile_path: Path | None = None, catalog_path: Path | None = None) -> Any:
    """The Plan a case runs: built for its configuration, or chosen for its deadline, with the
    workload's profile at `profile_path` (default: the committed one), on the catalog at
    `catalog_path` (default: catalog/local.json)."""
    profile = load_profile(profile_path or case.workload)
    catalog = load_catalog(catalog_path or "local")
    job = job_of(case)
    if case.planned:
        deadline_s = case.deadline_s or tight_deadline_s(profile, catalog, case.tight)
        plan = plan_job(profile, catalog, Goal(deadline_s=deadline_s), Limits(), job).plan
    else:
        choice = Choice(case.n, case.memory_mb, LOCAL_ARCH, LOCAL_PS, case.ps_count)
        plan = build_plan(profile, catalog, choice, Goal(deadline_s=None), Limits(), job=job)
    if not case.iterations:
        return plan
    return dataclasses.replace(
        plan, training=dataclasses.replace(plan.training, iterations=case.iterations)
    )


def measure(
    case: Case,
    endpoint: Any,
    out: Path,
    profile_path: Path | None = None,
    catalog_path: Path | None = None,
) -> dict[str, Any]:
    """Train one case; the row of the table (every term: local prediction, measured, accuracy),
    planned on the catalog at `catalog_path` and predicted on it by the emulator's report
    (default: catalog/local.json)."""
    plan = plan_of(case, profile_path, catalog_path)
    started = time.monotonic()
    run(
        plan,
        Options(
            invocation_limit_s=INVOCATION_LIMIT_S,
            out_dir=out,
            quiet=True,
            print_report=False,
            iterations_per_invocation=case.per_invocation,
            workload=str(profile_path) if profile_path else None,
            local_catalog=str(catalog_path) if catalog_path else LOCAL_CATALOG,
        ),
        endpoint=endpoint,
    )
    report = json.loads((out / "report.json").read_text())
    terms = {row["term"]: row for row in report["terms"]}
    result = {
        "case": case.label,
        "case_fields": dataclasses.asdict(case),
        "workload": case.workload,
        "planned": case.planned,
        "deadline_s": plan.goal.deadline_s if case.planned else None,
        "n": plan.n_workers,
        "memory_mb": plan.memory_mb,
        "ps_count": plan.ps_count,
        "iterations": plan.training.iterations,
        "links": report["invocations"]["per_worker"],
        "cpu_share": report["emulation"]["cpu_share"],
        "terms": {
            t: {
                "predicted_local_s": terms[t].get("predicted_local_s"),
                "measured_s": terms[t].get("measured_s"),
                "predicted_aws_s": terms[t].get("predicted_s"),
            }
            for t in TERMS
            if t in terms
        },
        "accuracy_local": report.get("accuracy_local") or {},
        "met_deadline": (
            terms["total"]["measured_s"] <= plan.goal.deadline_s if case.planned else None
        ),
        "run_s": time.monotonic() - started,
    }
    return result


def case_of(row: dict[str, Any]) -> Case:
    """The Case a results row ran (rows written before cases were stored: matched by label)."""
    if "case_fields" in row:
        return Case(**row["case_fields"])
    for case in FIXED + PLANNED:
        if case.label == row["case"]:
            return case
    raise ValueError(f"bad results row {row['case']!r}: not a case of this benchmark")


def predicted_terms(
    row: dict[str, Any],
    profile_path: Path | str | WorkloadProfile,
    catalog: Catalog,
    configuration: dict[str, Any] | None = None,
) -> dict[str, float]:
    """Every term the current model predicts for the configuration a row ran (a planned row's
    too: its plan is not chosen again; `configuration`, one run's, where runs differ), under the
    rules it ran by, from `profile_path`."""
    row = {**row, **(configuration or {})}
    from emulator.options import default_safety_margin_s
    from emulator.report import PREDICTED_FIELDS

    case = case_of(row)
    rules = RunRules(
        invocation_limit_s=INVOCATION_LIMIT_S,
        safety_margin_s=default_safety_margin_s(INVOCATION_LIMIT_S),
        max_iterations_per_invocation=case.per_invocation,
        iterations=row["iterations"],
    )
    choice = Choice(row["n"], row["memory_mb"], LOCAL_ARCH, LOCAL_PS, row["ps_count"])
    profile = (
        profile_path
        if isinstance(profile_path, WorkloadProfile)
        else load_profile(str(profile_path))
    )
    plan = predict_run(profile, catalog, choice, rules, job="bench")
    return {t: float(getattr(plan.prediction, PREDICTED_FIELDS[t])) for t in TERMS}


def reanchored_profile(
    platform: Path,
    kept_name: str,
    workload: str,
    weight: float,
    instead: dict[str, Any] | None = None,
) -> WorkloadProfile:
    """The run's anchored profile `kept_name` (under `platform`) built again at `weight`: the
    start-of-run profile (or the profile document `instead`, a what-if) moved by the readings
    the run kept (its factor per anchored share × the start profile's rate there, the rate
    read; start-up as read)."""
    start = json.loads((platform / f"{workload}.json").read_text())
    kept = json.loads((platform / kept_name).read_text())
    anchor = kept["anchor"]
    points = start["training_rate"][LOCAL_ARCH]["points"]
    rates = {float(p["vcpu_share"]): p["samples_per_s"] for p in points}
    factors = anchor.get("speed_factor_by_share") or {"1": anchor["speed_factor"]}
    readings = {float(s): f * rates[float(s)] for s, f in factors.items()}
    doc = anchored_profile(
        instead if instead is not None else start,
        {"samples_per_s": readings[1.0], "samples_per_s_by_share": readings,
         "startup_s": anchor["startup_s"]},
        LOCAL_ARCH, anchor.get("date", ""), weight,
    )  # fmt: skip
    return profile_from_dict(doc)


def rescore_row(
    row: dict[str, Any],
    platform: Path,
    catalog: Catalog,
    anchor_weight: float | None = None,
    instead: dict[str, dict[str, Any]] | None = None,
    catalogs: list[Catalog] | None = None,
) -> dict[str, Any]:
    """The row with every term predicted again by the current model on the catalog (each run's
    own in `catalogs`, where the runs kept their rounds': run_catalogs) and the
    profiles the run measured (`platform`: each run's anchored profile where the run kept them,
    the median of their predictions; with `anchor_weight`, each built again from the run's
    start profile and its anchor's readings at that weight; with a profile document for the
    row's workload in `instead`, from that one, at `anchor_weight` or ANCHOR_WEIGHT), against
    the row's measurements."""
    names = row.get("profiles", [])
    profile_path = platform / f"{row['workload']}.json"
    other = (instead or {}).get(row["workload"])
    weight = ANCHOR_WEIGHT if anchor_weight is None else anchor_weight
    paths: list[Path | str | WorkloadProfile]
    kept = bool(names) and all((platform / f).exists() for f in names)
    if not kept and other is not None:
        paths = [profile_from_dict(other)]
    elif not kept:
        paths = [profile_path if profile_path.exists() else row["workload"]]
    elif anchor_weight is None and other is None:
        paths = [platform / f for f in names]
    else:
        paths = [reanchored_profile(platform, f, row["workload"], weight, other) for f in names]
    configurations: list[dict[str, Any] | None] = list(row.get("run_configurations") or [None])
    if len(paths) == 1:  # one profile for every run (no anchors)
        paths = paths * len(configurations)
    if len(configurations) != len(paths):  # rows written before runs kept their configurations
        configurations = [None] * len(paths)
    if not catalogs or len(catalogs) != len(paths):
        catalogs = [catalog] * len(paths)
    runs = [
        predicted_terms(row, path, run_catalog, configuration)
        for path, configuration, run_catalog in zip(paths, configurations, catalogs, strict=True)
    ]
    empty = {"measured_s": None, "predicted_aws_s": None}  # a term the run did not measure
    middle = {t: statistics.median(p[t] for p in runs) for t in TERMS}
    terms = {t: {**row["terms"].get(t, empty), "predicted_local_s": middle[t]} for t in TERMS}
    rescored = {**row, "terms": terms, "accuracy_local": accuracies(terms)}
    if len(row.get("predicted_totals_s") or []) == len(runs):  # each run's, predicted again
        rescored["predicted_totals_s"] = [p["total"] for p in runs]
    return rescored


def run_catalogs(
    row: dict[str, Any], platform: Path, settings: list[str], read: dict[str, Catalog]
) -> list[Catalog] | None:
    """Each run's catalog, its round's as the run kept it under `platform` (anchor_catalog),
    with `settings` set (catalog_figures_set); None where the runs kept none (grids before
    2026-11-27 16:25 UTC were predicted on the run's one catalog). `read` caches a round's."""
    names = row.get("catalogs") or []
    if not names or not all((platform / f).exists() for f in names):
        return None
    for f in names:
        if f not in read:
            doc = json.loads((platform / f).read_text())
            read[f] = catalog_from_dict(catalog_figures_set(doc, settings))
    return [read[f] for f in names]


def profiles_instead(settings: list[str]) -> dict[str, dict[str, Any]]:
    """{workload: profile document} from WORKLOAD=PATH settings (--profile), each read and
    checked as the planner reads a profile; one line naming the bad setting otherwise."""
    out: dict[str, dict[str, Any]] = {}
    for setting in settings:
        workload, sep, path = setting.partition("=")
        if not (sep and workload and path):
            raise ValueError(f"bad --profile {setting!r}: expected WORKLOAD=PATH, e.g. "
                             "synthetic-cifar-cnn=/tmp/cnn.json")  # fmt: skip
        try:
            doc = json.loads(Path(path).read_text())
            profile = profile_from_dict(doc)
        except (OSError, ValueError) as err:
            raise ValueError(f"bad --profile {setting!r}: {err}") from None
        if profile.name != workload:
            raise ValueError(f"bad --profile {setting!r}: {path} is the profile of "
                             f"{profile.name!r}, not {workload!r}")  # fmt: skip
        out[workload] = doc
    return out


def figure_value(text: str) -> float | list[list[float]] | None:
    """A --set value: a finite number, or a curve's points [[x, y], ...] (positive, x
    increasing, as the catalog reads lambda.init_cores_by_n); None otherwise."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value) if math.isfinite(value) else None
    points = curve_points(value)  # as the catalog reads a curve
    return None if points is None else [[x, y] for x, y in points]


def catalog_figures_set(doc: dict[str, Any], settings: list[str]) -> dict[str, Any]:
    """A copy of the catalog document `doc` with each `section.field=value` of `settings` set
    (added if absent), its source naming the re-scoring: a what-if on a figure the model reads,
    held to measurements already taken."""
    out = json.loads(json.dumps(doc))
    for setting in settings:
        path, sep, value = setting.partition("=")
        section, dot, field = path.partition(".")
        number = figure_value(value)
        if not (sep and dot and field and number is not None):
            raise ValueError(f"bad --set {setting!r}: expected section.field=number or "
                             "=[[x, y], ...], e.g. lambda.compute_cores=2 or "
                             "lambda.init_cores_by_n=[[2,1.9],[8,1.88]]")  # fmt: skip
        if not isinstance(out.get(section), dict):
            known = ", ".join(k for k, v in doc.items() if isinstance(v, dict) and k != "tags")
            raise ValueError(f"bad --set {setting!r}: no catalog section {section!r} ({known})")
        figure = out[section].get(field)
        base = figure if isinstance(figure, dict) else {"unit": "", "date": "", "tag": "policy"}
        out[section][field] = {**base, "value": number, "source": f"--set {setting} (re-scoring)"}
    return out


def rescore(
    name: str,
    command: str,
    settings: list[str] | None = None,
    anchor_weight: float | None = None,
    profiles: list[str] | None = None,
) -> str:
    """Re-predict RESULTS/<name>.json with the current model, the run's catalog changed by
    `settings` (catalog_figures_set), with `anchor_weight` its anchors applied again at that
    weight (reanchored_profile) and with `profiles` (WORKLOAD=PATH each) those profiles in
    place of the run's start profiles, anchored by the readings the run kept; writes
    <name>-rescored.*."""
    instead = profiles_instead(profiles or [])
    source = RESULTS / f"{name}.json"
    if not source.exists():
        raise ValueError(f"bad --rescore: no {source} to re-score (run the benchmark first)")
    data = json.loads(source.read_text())
    platform = RESULTS / f"{name}-platform"
    if not (platform / "local.json").exists():
        raise ValueError(f"bad --rescore: no {platform}/local.json (the run kept no platform)")
    doc = json.loads((platform / "local.json").read_text())
    catalog = catalog_from_dict(catalog_figures_set(doc, settings or []))
    read: dict[str, Catalog] = {}
    rows = [
        rescore_row(r, platform, catalog, anchor_weight, instead,
                    run_catalogs(r, platform, settings or [], read))
        for r in data["rows"]
    ]  # fmt: skip
    what = list(settings or [])
    if anchor_weight is not None:
        what.append(f"its anchors applied at weight {anchor_weight:g}")
    what += [f"the profile {p} in place of its start profile" for p in profiles or []]
    meta = {
        **data["meta"],
        "command": command,
        "platform": f"those of the run re-scored (bench/results/{name}-platform/)",
        "rescored": f"predictions of {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} "
        f"held to the measurements of {data['meta']['date']} (`{data['meta']['command']}`)"
        + (f"; the run's catalog with {', '.join(what)}" if what else ""),
    }
    return write_results(rows, meta, f"{name}-rescored")


def accuracy(predicted: float | None, measured: float | None) -> float | None:
    """1 − |predicted − measured| / measured, as the emulator's report computes it."""
    if predicted is None or not measured:
        return None
    return 1.0 - abs(predicted - measured) / measured


def accuracies(terms: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Each term's accuracy, where it has both a local prediction and a measurement."""
    return {
        t: a
        for t, v in terms.items()
        if (a := accuracy(v["predicted_local_s"], v["measured_s"])) is not None
    }


def median_row(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One row from repeated runs of a case: each term's measured median, and predicted median
    (each run is predicted from its own anchored profile), accuracies of the one against the
    other, every run's total, and the deadline met only if every run met it.

    The machine is noisy (the same run varies by 10-20% here), so one run is a sample; the
    median of a few is the figure a prediction can be held to.
    """
    row = dict(runs[0])
    terms: dict[str, Any] = {}
    for term, first in runs[0]["terms"].items():
        terms[term] = dict(first)
        for field in ("predicted_local_s", "measured_s", "predicted_aws_s"):
            values = [r["terms"][term][field] for r in runs]
            values = [v for v in values if v is not None]
            terms[term][field] = statistics.median(values) if values else None
    row["terms"] = terms
    row["accuracy_local"] = accuracies(terms)
    unanchored = [float(r["unanchored_total_s"]) for r in runs if "unanchored_total_s" in r]
    if unanchored and len(unanchored) == len(runs):
        row["unanchored_total_s"] = statistics.median(unanchored)
    row["profiles"] = [r["profile"] for r in runs if r.get("profile")]
    row["catalogs"] = [r["catalog"] for r in runs if r.get("catalog")]
    # each run's configuration: a planned case plans again every round, on that round's profile
    row["run_configurations"] = [{f: r[f] for f in RUN_CONFIGURATION} for r in runs]
    row["measured_totals_s"] = [r["terms"]["total"]["measured_s"] for r in runs]
    # each run's own prediction (its round's anchored profile) and deadline: how far a run lands
    # past its prediction is what emulator/slack.py reads a machine's slack from
    row["predicted_totals_s"] = [r["terms"]["total"]["predicted_local_s"] for r in runs]
    row["deadlines_s"] = [r["deadline_s"] for r in runs]
    met = [r["met_deadline"] for r in runs]
    row["met_deadlines"] = met
    row["met_deadline"] = None if met[0] is None else all(met)
    row["run_s"] = sum(r["run_s"] for r in runs)
    return row


def _fmt(x: Any, digits: int = 2) -> str:
    return (
        "–" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{digits}f}"
    )


def summary_of(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean and worst accuracy of the total and of every term, over the rows that have one."""
    out: dict[str, Any] = {}
    for term in TERMS:
        values = [r["accuracy_local"].get(term) for r in rows]
        values = [v for v in values if isinstance(v, int | float) and math.isfinite(v)]
        if values:
            out[term] = {
                "mean": statistics.fmean(values),
                "worst": min(values),
                "rows": len(values),
            }
    unanchored = [
        a
        for r in rows
        if (a := accuracy(r.get("unanchored_total_s"), r["terms"]["total"]["measured_s"]))
        is not None
    ]
    if unanchored:
        out["total_unanchored"] = {
            "mean": statistics.fmean(unanchored),
            "worst": min(unanchored),
            "rows": len(unanchored),
        }
    planned = [r for r in rows if r["planned"]]
    out["deadlines_met"] = f"{sum(bool(r['met_deadline']) for r in planned)}/{len(planned)}"
    repeat = repeatability(rows)
    if repeat is not None:
        out["repeatability"] = repeat
    ceiling = noise_ceiling(rows)
    if ceiling is not None:
        out["ceiling"] = ceiling
        out["ceiling_more_runs"] = noise_ceiling(rows, runs=int(ceiling["runs"]) + 2)
    return out


def repeated_totals(rows: list[dict[str, Any]]) -> list[list[float]]:
    """Each case's measured totals, for the cases measured at least twice. A planned case that
    chose another configuration in some round ran different jobs, not repeats: its totals are
    each scaled by the case's median prediction over the run's own (rows that keep per-run
    predictions), so only the spread of measured against predicted remains."""
    return [totals for r in rows if len(totals := comparable_totals(r)) >= 2]


def comparable_totals(row: dict[str, Any]) -> list[float]:
    """The row's measured totals, as repeats of one job (repeated_totals)."""
    totals = row.get("measured_totals_s", [])
    predicted = row.get("predicted_totals_s") or []
    configurations = row.get("run_configurations") or []
    same = all(c == configurations[0] for c in configurations)
    if same or not totals or len(predicted) != len(totals) or not all(p for p in predicted):
        return [t for t in totals if t]
    middle = statistics.median(predicted)
    return [t * middle / p for t, p in zip(totals, predicted, strict=True) if t]


def repeatability(rows: list[dict[str, Any]]) -> dict[str, float] | None:
    """How well each case's median total predicts that case's other runs (mean and worst
    accuracy, and the mean max/min spread): the ceiling a model's accuracy can be read against
    on this machine. A model exact to the median scores no better on a single run, and the
    median of three runs is itself that far from a case's typical run. None with one run each.
    """
    scores, spreads = [], []
    for totals in repeated_totals(rows):
        middle = statistics.median(totals)
        scores += [1.0 - abs(middle - t) / t for t in totals if t != middle]
        spreads.append(max(totals) / min(totals))
    if not scores:
        return None
    return {"mean": statistics.fmean(scores), "worst": min(scores),
            "spread": statistics.fmean(spreads)}  # fmt: skip


# The median of R runs strays from a case's typical run by about √(π/2)·σ/√R (σ the runs'
# spread): a case spread as the digits MLP's on this VM (10-17% a run, 2026-11-27) strays 6-9% at
# five runs, so in most grids of 24 rows some row is 10% off whatever the model predicts.
MEDIAN_EFFICIENCY = math.sqrt(math.pi / 2)


def median_error(totals: list[float]) -> float | None:
    """How far the median of `totals` may stray from the case's typical run, over that median:
    √(π/2) · stdev / √R (the normal approximation to the median's standard error); None with
    fewer than two runs."""
    if len(totals) < 2:
        return None
    return (
        MEDIAN_EFFICIENCY
        * statistics.stdev(totals)
        / math.sqrt(len(totals))
        / statistics.median(totals)
    )


def cases_wanting_runs(runs: list[list[dict[str, Any]]], precision: float, cap: int) -> list[int]:
    """The cases whose median total is not yet within `precision` (median_error) and that have
    fewer than `cap` runs. Read from the measured totals alone, never from a prediction, so a
    case runs again for its noise and not for how far it lands from what was predicted."""
    wanting = []
    for i, case_runs in enumerate(runs):
        totals = [r["terms"]["total"]["measured_s"] for r in case_runs]
        error = median_error([t for t in totals if t])
        if len(case_runs) < cap and (error is None or error > precision):
            wanting.append(i)
    return wanting


# The target (README: the latest grid): the mean and the worst accuracy of the total
TARGET_MEAN, TARGET_WORST = 0.95, 0.90
# Simulated grids behind noise_ceiling (seeded: the same rows give the same figures)
CEILING_TRIALS = 2000


def noise_ceiling(
    rows: list[dict[str, Any]], runs: int | None = None, trials: int = CEILING_TRIALS, seed: int = 0
) -> dict[str, Any] | None:
    """What a model exact on every case's mean would score against this grid's measurements:
    each case's runs drawn `trials` times as normal with the case's own spread (the standard
    deviation over the mean of its measured totals), `runs` of them a case (default: as many as
    the grid ran of that case), and held to their median as the grid holds a prediction.
    Returns the median grid's mean and worst accuracy, the runs a case (the median count and
    the range) and the shares of grids that reach TARGET_MEAN and TARGET_WORST; None with no
    case run twice.

    The worst of 24 rows is the noise's tail: at this machine's spread (5.6% a case over four
    grids of 2026-11-26) the median of three runs strays past 10% in some row of most grids,
    whatever the model, so a worst under TARGET_WORST says little alone; the mean's shortfall
    from the ceiling is the model's."""
    import numpy as np

    cases = repeated_totals(rows)
    if not cases:
        return None
    rng = np.random.default_rng(seed)
    counts = [runs or len(totals) for totals in cases]
    scores = np.empty((trials, len(cases)))
    for j, (totals, count) in enumerate(zip(cases, counts, strict=True)):
        spread = statistics.stdev(totals) / statistics.fmean(totals)
        draws = 1.0 + spread * rng.standard_normal((trials, count))
        middle = np.median(np.maximum(draws, 1e-9), axis=1)  # a run takes some time
        scores[:, j] = 1.0 - np.abs(1.0 - middle) / middle
    means, worsts = scores.mean(axis=1), scores.min(axis=1)
    return {"runs": statistics.median_low(counts), "runs_range": [min(counts), max(counts)],
            "mean": float(np.median(means)), "worst": float(np.median(worsts)),
            "p_mean": float(np.mean(means >= TARGET_MEAN)),
            "p_worst": float(np.mean(worsts >= TARGET_WORST))}  # fmt: skip


def write_results(rows: list[dict[str, Any]], meta: dict[str, Any], name: str = "predict") -> str:
    """Table, JSON and chart under RESULTS/<name>.* (a partial run names its own files, so
    the full grid's stay)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    summary = summary_of(rows)
    stem = RESULTS / name
    stem.with_suffix(".json").write_text(
        json.dumps({"meta": meta, "summary": summary, "rows": rows}, indent=2) + "\n"
    )
    cols = ("load", "compute", "communication", "startup", "chaining", "launch", "total")
    head = "| case | k | links | " + " | ".join(f"{c} pred./meas. s" for c in cols)
    head += " | accuracy (total) | deadline met |"
    lines = [
        f"# Predicted (local catalog) vs measured on the emulator ({meta['date']})",
        "",
        head,
        "|" + "---|" * (len(cols) + 5),
    ]
    for r in rows:
        cells = [
            f"{_fmt(r['terms'].get(c, {}).get('predicted_local_s'))}/"
            f"{_fmt(r['terms'].get(c, {}).get('measured_s'))}"
            for c in cols
        ]
        met = "–" if r["met_deadline"] is None else ("yes" if r["met_deadline"] else "**no**")
        case = r["case"]
        if r["planned"]:
            tight = (r.get("case_fields") or {}).get("tight")
            case += f" ({r['deadline_s']:.2f} s)" if tight else ""
            case += f" → n={r['n']} m={r['memory_mb']}"
        lines.append(
            f"| {case} | {r['iterations']} | {max(r['links'])} | "
            + " | ".join(cells)
            + f" | {_fmt(r['accuracy_local'].get('total'), 3)} | {met} |"
        )
    lines += ["", "| term | mean accuracy | worst | rows |", "|---|---|---|---|"]
    for term in TERMS:
        if term in summary:
            s = summary[term]
            lines.append(f"| {term} | {s['mean']:.3f} | {s['worst']:.3f} | {s['rows']} |")
    if "repeatability" in summary:
        rep = summary["repeatability"]
        lines += [
            "",
            f"Repeatability (the noise the accuracy is read against): each case's median total "
            f"as a prediction of its own other runs scores mean {rep['mean']:.3f}, worst "
            f"{rep['worst']:.3f}; a case's slowest run took {rep['spread']:.2f}× its fastest "
            "on average.",
        ]
    if "ceiling" in summary:
        top, more = summary["ceiling"], summary["ceiling_more_runs"]
        lines += [
            "",
            f"Ceiling (noise_ceiling): a model exact on every case's mean, held to the median of "
            f"{runs_text(top)} runs spread as each case's were, scores mean {top['mean']:.3f} and "
            f"worst {top['worst']:.3f} in the median of {CEILING_TRIALS} simulated grids; "
            f"mean ≥ {TARGET_MEAN} in {top['p_mean']:.0%} of them, worst ≥ {TARGET_WORST} in "
            f"{top['p_worst']:.0%} (with {more['runs']} runs a case: {more['p_mean']:.0%} and "
            f"{more['p_worst']:.0%}).",
        ]
    if "total_unanchored" in summary:
        un = summary["total_unanchored"]
        lines += [
            "",
            f"The same measurements predicted from the profiles measured at the start of the run "
            f"instead of each round's anchored ones: total mean {un['mean']:.3f}, worst "
            f"{un['worst']:.3f}.",
        ]
    if meta.get("anchors"):
        lines += [
            "",
            "Anchors: before its rows in every round, each workload's rate at the anchored shares "
            "and its start-up were measured again and its profile moved to that speed "
            "(emulator.profile.anchored_profile); speed factor per round, over the profile's: "
            f"{anchor_factors_text(meta['anchors'])}.",
        ]
    if meta.get("loop_anchors"):
        lines += [
            "",
            "Loop anchors: in every round, before its rows, the catalog's round trip, the "
            "client's CPU share of an exchange and the shard's CPU per exchange were read again "
            "(emulator.calibrate.measure_loop_now), in grids from 2026-11-27 19:16 UTC also "
            "the load's CPU-bound part (measure_load_now), and the round's rows planned and "
            f"predicted on the catalog with them (<name>-platform/anchors/local-round<k>.json): "
            f"{loop_anchors_text(meta['loop_anchors'])}.",
        ]
    lines += [
        "",
        "Deadlines met by plans the planner chose on the local catalog: "
        f"{summary['deadlines_met']}.",
        f"Machine: {meta['machine']}; load average while measuring: {meta['loadavg']}; "
        f"CPU share: {meta['cpu_share']}.",
        f"Command: `{meta['command']}`; measured = the median of each case's runs "
        f"({runs_per_case_text(meta)}).",
        f"Platform figures: {meta.get('platform', 'catalog/local.json and profiles/')}.",
    ]
    if "rescored" in meta:
        lines.append(f"Re-scored, nothing measured: {meta['rescored']}.")
    text = "\n".join(lines) + "\n"
    stem.with_suffix(".md").write_text(text)
    _plot(rows, stem.with_suffix(".png"))
    return text


def runs_per_case_text(meta: dict[str, Any]) -> str:
    """How many runs each case got: the repeats, and with --precision the extra rounds' rule."""
    text = f"{meta.get('repeats', 1)} per case, taken round the cases"
    rule = meta.get("precision")
    if not rule:
        return text
    counts = rule["runs"]
    return (
        f"{text}, then again round those whose median could still stray more than "
        f"{rule['median_error']:.0%} (median_error, read from the measured totals alone), up "
        f"to {rule['max_repeats']} and for at most {rule['extra_minutes']:g} minutes: "
        f"{min(counts)}-{max(counts)} runs a case, {sum(counts)} in all"
    )


def runs_text(ceiling: dict[str, Any]) -> str:
    """The runs a case the ceiling drew: one count, or each case's own (a grid that ran the
    noisier cases more; ceilings written before kept one count)."""
    low, high = ceiling.get("runs_range") or (ceiling["runs"], ceiling["runs"])
    return f"{low}" if low == high else f"each case's own {low}-{high}"


def loop_anchors_text(rounds: list[dict[str, float]]) -> str:
    """Each anchored catalog figure's readings per round (anchor_catalog), seconds in ms, a
    share as is."""
    parts = []
    for field in ANCHORED_FIGURES:
        values = [r[field] for r in rounds if field in r]
        if values and field.endswith("_s"):
            parts.append(f"{field} {', '.join(f'{v * 1e3:.3f}' for v in values)} ms")
        elif values:
            parts.append(f"{field} {', '.join(f'{v:.3f}' for v in values)}")
    return "; ".join(parts)


def anchor_factors_text(anchors: dict[str, list[Any]]) -> str:
    """Each workload's speed factors per round, per anchored share (runs before 2026-11-26 kept
    one 1-vCPU factor per round)."""
    parts = []
    for w, rounds in sorted(anchors.items()):
        by_share = [r if isinstance(r, dict) else {"1": r} for r in rounds]
        shares = sorted({k for r in by_share for k in r}, key=float)
        each = "; ".join(
            f"{k} vCPU {', '.join(f'{r[k]:.2f}' for r in by_share if k in r)}" for k in shares
        )
        parts.append(f"{w} ({each})")
    return "; ".join(parts)


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    for workload in sorted({r["workload"] for r in rows}):
        mine = [r for r in rows if r["workload"] == workload]
        ax.scatter(
            [r["terms"]["total"]["predicted_local_s"] for r in mine],
            [r["terms"]["total"]["measured_s"] for r in mine],
            label=workload,
        )
    values = [
        v
        for r in rows
        for v in (r["terms"]["total"]["predicted_local_s"], r["terms"]["total"]["measured_s"])
        if v
    ]
    lo, hi = min(values) * 0.8, max(values) * 1.2
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="measured = predicted")
    ax.fill_between(
        [lo, hi], [lo / 1.1, hi / 1.1], [lo / 0.9, hi / 0.9], color="k", alpha=0.07, label="±10%"
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("predicted total, local catalog (s)")
    ax.set_ylabel("measured total (s)")
    ax.set_title("λDNN model on the emulator: total training time")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def measure_platform(workloads: list[str], out: Path) -> dict[str, Path]:
    """Calibrate this machine (catalog/local.json) and profile each workload now; a copy of
    every figure used goes to `out`. Returns the profile path per workload."""
    out.mkdir(parents=True, exist_ok=True)
    catalog = Path(__file__).resolve().parent.parent / "catalog" / "local.json"
    steps = [["emulator.calibrate", "--out", str(catalog)]] + [
        ["emulator.profile", "--workload", w, "--output", str(out / f"{w}.json")] for w in workloads
    ]
    for step in steps:
        print(f"measuring the platform: python -m {' '.join(step)}", file=sys.stderr, flush=True)
        done = subprocess.run([sys.executable, "-m", *step], capture_output=True, text=True)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise ValueError(f"python -m {' '.join(step[:3])} failed: {last}")
    shutil.copyfile(catalog, out / "local.json")
    return {w: out / f"{w}.json" for w in workloads}


def keep_platform(workloads: list[str], out: Path) -> dict[str, Path]:
    """Copy catalog/local.json and each workload's committed profile to `out`, as a --reuse
    run takes them; the profile path per workload (the copy)."""
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(REPO_ROOT / "catalog" / "local.json", out / "local.json")
    for w in workloads:
        shutil.copyfile(REPO_ROOT / "profiles" / f"{w}.json", out / f"{w}.json")
    return {w: out / f"{w}.json" for w in workloads}


def anchor_profile(workload: str, base: Path | None, out: Path) -> tuple[Path, dict[str, float]]:
    """Measure the workload's speed now at the anchored shares and write its profile (`base`,
    else the committed one) moved to it at `out`; (the path, the speed factor over the
    profile's per anchored share)."""
    source = base or REPO_ROOT / "profiles" / f"{workload}.json"
    moved = write_anchored(
        json.loads(source.read_text()), out, time.strftime("%Y-%m-%d", time.gmtime())
    )
    return out, dict(moved["anchor"]["speed_factor_by_share"])


def anchor_catalog(start: Path, endpoint: Any, work: Path, out: Path, k: int) -> Path:
    """Read the catalog's loop figures now (emulator.calibrate.measure_loop_now: the round trip,
    the client's CPU share, the shard's CPU per exchange) and the load's CPU-bound part
    (measure_load_now), and write the catalog `start` with them at `out` (checked that it
    loads, whole or not at all), round k's catalog; its path."""
    doc = json.loads(start.read_text())
    work.mkdir(parents=True, exist_ok=True)
    figures = measure_loop_now(endpoint, work, float(doc["network"]["function_ps_mb_s"]["value"]))
    load_cpu_s = measure_load_now(endpoint, work / "load")
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    out.parent.mkdir(parents=True, exist_ok=True)
    read = f"round {k}'s anchor of bench.predict, {when}"
    where = here_today()
    anchored = load_anchored(loop_anchored(doc, figures, read, where), load_cpu_s, read, where)
    write_catalog(anchored, out)
    return out


# What anchor_catalog reads again each round, as the results' meta keeps it, and the section of
# the catalog each is in.
ANCHORED_FIGURES = {**{f: "network" for f in LOOP_FIGURES}, "load_cpu_s": "lambda"}


def anchored_figures_of(catalog_path: Path) -> dict[str, float]:
    """The anchored figures a round's catalog holds (anchor_catalog), as the results' meta
    keeps them."""
    doc = json.loads(catalog_path.read_text())
    held = {f: doc.get(section, {}).get(f) for f, section in ANCHORED_FIGURES.items()}
    return {f: figure["value"] for f, figure in held.items() if figure is not None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.predict")
    parser.add_argument("--quick", action="store_true", help="three rows (a smoke run)")
    parser.add_argument("--only", help="run only this workload's rows")
    parser.add_argument(
        "--planned", action="store_true", help="run only the rows the planner sizes for a deadline"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs per case; each term's median counts"
    )
    parser.add_argument(
        "--precision",
        type=float,
        metavar="P",
        help="after the repeats, run again round the cases whose median total may still stray "
        "more than P (median_error, from the measured totals alone), up to --max-repeats runs "
        "a case, for at most --extra-minutes",
    )
    parser.add_argument(
        "--max-repeats", type=int, default=12, help="with --precision: most runs a case"
    )
    parser.add_argument(
        "--extra-minutes",
        type=float,
        default=30.0,
        help="with --precision: no extra round starts a workload's cases after this long",
    )
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="take catalog/local.json and profiles/ as they are (no calibration or profiling)",
    )
    parser.add_argument(
        "--no-anchor",
        action="store_true",
        help="predict every round from the profiles measured at the start (no re-anchoring)",
    )
    parser.add_argument(
        "--rescore",
        action="store_true",
        help="measure nothing: predict an earlier run's rows again with the current model",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.FIELD=VALUE",
        help="with --rescore: a catalog figure changed for the re-scoring, a number or points "
        "[[x, y], ...] (repeatable)",
    )
    parser.add_argument(
        "--profile",
        action="append",
        default=[],
        metavar="WORKLOAD=PATH",
        help="with --rescore: this profile in place of the run's start profile of the workload, "
        "anchored by the readings the run kept (a re-profile checked on measurements already "
        "taken; repeatable)",
    )
    parser.add_argument(
        "--anchor-weight",
        type=float,
        metavar="W",
        help="with --rescore: build each run's anchored profile again, moved W of the way "
        "(in log speed) to its anchor's reading (0: the profile as measured, 1: the reading)",
    )
    args = parser.parse_args(argv)
    command = "python -m bench.predict " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.repeats < 1:
        raise ValueError(f"bad --repeats {args.repeats}: expected a whole number ≥ 1")
    if args.precision is not None and not 0.0 < args.precision < 1.0:
        raise ValueError(
            f"bad --precision {args.precision:g}: expected a fraction above 0, below 1"
        )
    if args.max_repeats < args.repeats:
        raise ValueError(
            f"bad --max-repeats {args.max_repeats}: expected at least --repeats ({args.repeats})"
        )
    if args.extra_minutes < 0:
        raise ValueError(f"bad --extra-minutes {args.extra_minutes:g}: expected minutes ≥ 0")
    cases: tuple[Case, ...] = QUICK if args.quick else FIXED + PLANNED
    if args.planned:
        cases = tuple(c for c in cases if c.planned)
    if args.only:
        cases = tuple(c for c in cases if c.workload == args.only)
    workloads = sorted({c.workload for c in cases})
    name = (
        "predict"
        + ("-quick" if args.quick else "")
        + ("-planned" if args.planned else "")
        + (f"-{args.only}" if args.only else "")
    )
    rescore_only = (
        ("--set", repr(args.set[0]) if args.set else None),
        ("--profile", repr(args.profile[0]) if args.profile else None),
        ("--anchor-weight", None if args.anchor_weight is None else f"{args.anchor_weight:g}"),
    )
    given = [(flag, value) for flag, value in rescore_only if value is not None]
    if given and not args.rescore:
        raise ValueError(f"bad {given[0][0]} {given[0][1]}: only a re-scoring (--rescore) takes it")
    if args.anchor_weight is not None and not 0.0 <= args.anchor_weight <= 1.0:
        raise ValueError(
            f"bad --anchor-weight {args.anchor_weight:g}: expected a number from 0 to 1"
        )
    if args.rescore:
        print(rescore(name, command, args.set, args.anchor_weight, args.profile))
        return 0
    platform_dir = RESULTS / f"{name}-platform"
    # the catalog and profiles this run measured (or took as they were) and used, beside its
    # results: a re-scoring reads them there
    if args.reuse:
        load_catalog("local")  # fail in one line before any server starts if not calibrated
        profiles: dict[str, Path | None] = dict(keep_platform(workloads, platform_dir))
    else:
        profiles = dict(measure_platform(workloads, platform_dir))
    catalog = load_catalog("local")
    runs: list[list[dict[str, Any]]] = [[] for _ in cases]
    anchors: dict[str, list[dict[str, float]]] = {w: [] for w in workloads}
    loop_anchors: list[dict[str, float]] = []
    extra_until: float | None = None
    with tempfile.TemporaryDirectory() as tmp, weed_server() as endpoint:

        def run_round(k: int, indices: list[int]) -> None:
            """Round k over the cases `indices`: a workload's together, right after its anchor
            (in an extra round, only while the extra minutes last)."""
            round_catalog = None
            for w in workloads:
                mine = [i for i in indices if cases[i].workload == w]
                if not mine or (extra_until is not None and time.monotonic() > extra_until):
                    continue
                if not args.no_anchor and round_catalog is None:  # before the round's first row
                    round_catalog = anchor_catalog(
                        platform_dir / "local.json", endpoint, Path(tmp) / f"loop-{k}",
                        platform_dir / "anchors" / f"local-round{k}.json", k,
                    )  # fmt: skip
                    loop_anchors.append(anchored_figures_of(round_catalog))
                base = profiles[w]
                profile = base
                if not args.no_anchor:
                    profile, factor = anchor_profile(
                        w, base, platform_dir / "anchors" / f"{w}-round{k}.json"
                    )
                    anchors[w].append(factor)
                for i in mine:
                    out = Path(tmp) / f"case-{i}-{k}"
                    result = measure(cases[i], endpoint, out, profile, round_catalog)
                    if round_catalog is not None:
                        result["catalog"] = str(round_catalog.relative_to(platform_dir))
                    if not args.no_anchor and profile is not None:
                        result["profile"] = str(profile.relative_to(platform_dir))
                        unanchored = predicted_terms(result, base or w, catalog)
                        result["unanchored_total_s"] = unanchored["total"]
                    runs[i].append(result)
                    total = result["accuracy_local"].get("total")
                    print(json.dumps({"case": cases[i].label, "repeat": k, "total": total}),
                          file=sys.stderr, flush=True)  # fmt: skip

        everything = list(range(len(cases)))
        for k in range(args.repeats):  # round the cases: a drift in speed meets them all
            run_round(k, everything)
        if args.precision is not None:
            # then again round the cases whose median is not yet precise, while time lasts
            extra_until = time.monotonic() + 60.0 * args.extra_minutes
            k = args.repeats
            while time.monotonic() < extra_until and (
                wanting := cases_wanting_runs(runs, args.precision, args.max_repeats)
            ):
                run_round(k, wanting)
                k += 1
    rows = [median_row(r) for r in runs]
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": cpu.this_machine(),
        "loadavg": " ".join(Path("/proc/loadavg").read_text().split()[:3]),
        "cpu_share": rows[0]["cpu_share"] if rows else "",
        "repeats": args.repeats,
        "platform": "catalog/local.json and profiles/ as they were (--reuse), kept in "
        f"bench/results/{name}-platform/"
        if args.reuse
        else f"calibrated and profiled at the start of this run (bench/results/{name}-platform/)",
        "command": command,
        "anchors": {w: f for w, f in anchors.items() if f},
        "loop_anchors": loop_anchors,
    }
    if args.precision is not None:
        meta["precision"] = {
            "median_error": args.precision,
            "max_repeats": args.max_repeats,
            "extra_minutes": args.extra_minutes,
            "runs": [len(r) for r in runs],
        }
    print(write_results(rows, meta, name))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ValueError as err:
        print(f"bench.predict: {err}", file=sys.stderr)
        sys.exit(2)
