"""Re-scoring: an earlier run's configurations predicted again by the model as it is now, from
the platform figures that run kept, held to that run's measurements. Nothing is measured, so a
model change is checked against an hour of measurements in a second.

What-ifs, each named in the table: `--set SECTION.FIELD=VALUE` changes a catalog figure (one a
new calibration would add or move); `--anchor-weight W` applies each run's anchor again at W
(bench.lab.anchor.ANCHOR_WEIGHT), from the readings the run kept; `--profile WORKLOAD=PATH`
puts another profile of the workload (a re-profile) in place of the run's start profile, moved
by those same readings, so a new profile is checked on measurements taken before it.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from bench.lab.anchor import ANCHOR_WEIGHT, anchored_profile
from bench.predict.cases import INVOCATION_LIMIT_S, LOCAL_ARCH, LOCAL_PS, TERMS, case_of
from bench.predict.rows import accuracies, error_shares
from emulator.profiling.reading import MEMORY_FIELDS
from provisioner import load_profile
from provisioner.catalog import Catalog, catalog_from_dict, curve_points
from provisioner.planner import RunRules, predict_run
from provisioner.profile import WorkloadProfile, profile_from_dict
from provisioner.space import Choice


def predicted_terms(
    row: dict[str, Any],
    profile_path: Path | str | WorkloadProfile,
    catalog: Catalog,
    configuration: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Every term the current model predicts for the configuration a row ran (a planned row's
    too: its plan is not chosen again; `configuration`, one run's, where runs differ), under the
    rules it ran by, from `profile_path`; an S3 row's requests per iteration under "requests"."""
    row = {**row, **(configuration or {})}
    from emulator.options import default_safety_margin_s
    from emulator.report import PREDICTED_FIELDS, predicted_requests

    case = case_of(row)
    rules = RunRules(
        invocation_limit_s=INVOCATION_LIMIT_S,
        safety_margin_s=default_safety_margin_s(INVOCATION_LIMIT_S),
        max_iterations_per_invocation=case.per_invocation,
        iterations=row["iterations"],
    )
    memory_mb = row["memory_mb"]
    if case.cpu_scale == "auto" and row.get("worker_cores"):  # as the report predicted it here
        memory_mb = max(1, round(float(row["worker_cores"]) * catalog.mb_per_vcpu))
    if case.sync == "s3":
        choice = Choice(row["n"], memory_mb, LOCAL_ARCH, "", 0, "s3", case.reducers)
    else:
        choice = Choice(row["n"], memory_mb, LOCAL_ARCH, LOCAL_PS, row["ps_count"])
    profile = (
        profile_path
        if isinstance(profile_path, WorkloadProfile)
        else load_profile(str(profile_path))
    )
    plan = predict_run(profile, catalog, choice, rules, job="bench")
    out: dict[str, Any] = {t: float(getattr(plan.prediction, PREDICTED_FIELDS[t])) for t in TERMS}
    if case.sync == "s3":
        out["requests"] = predicted_requests(plan.prediction, row["iterations"])
    return out


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
    read; start-up and memory as read)."""
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
         "startup_s": anchor["startup_s"],
         # memory is no speed: what the anchor's children measured, as the run kept it
         **{field: kept[field] for field in MEMORY_FIELDS if field in kept}},
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
    rescored = {**row, "terms": terms, "accuracy_local": accuracies(terms),
                "error_share_of_total_local": error_shares(terms)}  # fmt: skip
    if len(row.get("predicted_totals_s") or []) == len(runs):  # each run's, predicted again
        rescored["predicted_totals_s"] = [p["total"] for p in runs]
    priced = [p["requests"] for p in runs if "requests" in p]
    if priced and row.get("requests_per_iteration"):  # an S3 row's requests, priced again
        from emulator.report import requests_per_iteration

        middle_requests = {k: statistics.median(p[k] for p in priced) for k in priced[0]}
        measured = row["requests_per_iteration"].get("measured") or {}
        rescored["requests_per_iteration"] = {
            **row["requests_per_iteration"],  # each run's measured counts too, where kept
            **requests_per_iteration(measured, middle_requests),
        }
    return rescored


def run_catalogs(
    row: dict[str, Any], platform: Path, settings: list[str], read: dict[str, Catalog]
) -> list[Catalog] | None:
    """Each run's catalog, its round's as the run kept it under `platform` (anchor_catalog),
    with `settings` set (catalog_figures_set); None where the runs kept none (grids from before
    the catalog was anchored every round were predicted on the run's one catalog). `read`
    caches a round's."""
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
    out: dict[str, Any] = json.loads(json.dumps(doc))
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
    results: Path,
    name: str,
    command: str,
    settings: list[str] | None = None,
    anchor_weight: float | None = None,
    profiles: list[str] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The rows and meta of `results`/<name>.json predicted again with the current model, the
    run's catalog changed by `settings` (catalog_figures_set), with `anchor_weight` its anchors
    applied again at that weight (reanchored_profile) and with `profiles` (WORKLOAD=PATH each)
    those profiles in place of the run's start profiles, anchored by the readings the run
    kept."""
    instead = profiles_instead(profiles or [])
    source = results / f"{name}.json"
    if not source.exists():
        raise ValueError(f"bad --rescore: no {source} to re-score (run the benchmark first)")
    data = json.loads(source.read_text())
    platform = results / f"{name}-platform"
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
    kept = {k: v for k, v in data["meta"].items() if k != "date"}  # older results carry one
    meta = {
        **kept,
        "command": command,
        "platform": f"those of the run re-scored (bench/results/{name}-platform/)",
        "rescored": "predictions made again, held to the measurements of the run "
        f"(`{data['meta']['command']}`)"
        + (f"; the run's catalog with {', '.join(what)}" if what else ""),
    }
    return rows, meta
