"""Refit a workload profile from a finished run: rate, start-up and worker↔PS bandwidth.

`python -m provisioner calibrate runs/<job>/report.json` (see provisioner/cli.py) reads the run
report the emulator writes (emulator/report.py). An AWS run's report (functions/finalize.py: the
workers' link records) is put in that schema with the deploy's plan first (`report_of_aws_run`,
`--plan`); without an `emulation` section the workers' CPU share is Lambda's, memory / 1,769 MB
per vCPU. A run known only by its total (a paper's table) refits α1 alone (`alpha1_for_total`).
Everything here is pure: documents in, documents out; the CLI reads and writes the files.

What is refitted, from the report's measured terms (each a total over the run, the slowest worker):
- the training rate R at the share the workers really had: one point of the run's architecture,
  samples / compute seconds, added to the curve or replacing the point nearest to it (the rest
  of the curve kept; a linear curve keeps its slope and moves its intercept through the point);
- `startup_s`: the measured start-up of the first chain link;
- the worker↔PS bandwidth, a catalog figure, not a profile one: returned as a suggested override
  of `network.function_ps_mb_s` in the catalog's own figure shape (profiles/README.md).
Each refitted profile figure gets a `sources` entry tagged "calibrated" naming the report.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any

from functions import terms as link_terms
from provisioner.catalog import Catalog
from provisioner.plan import Plan
from provisioner.planner import predict
from provisioner.profile import RateCurve, WorkloadProfile, profile_from_dict
from provisioner.space import Choice

LAMBDA_MB_PER_VCPU = 1769.0  # Lambda: 1,769 MB of memory buys one vCPU of CPU time
REPLACE_WITHIN = 0.10  # a point this close (relative share) is the same point, measured again
CALIBRATED = "calibrated"


@dataclass(frozen=True)
class RunFacts:
    """What a finished run's report says about the workload, in the units the profile uses."""

    job: str
    model: str
    dataset: str
    workload: str | None  # the profile name, when the report names it
    arch: str
    n_workers: int
    memory_mb: int
    ps_count: int
    share_vcpu: float  # CPU each worker really had: local cores (1 core = 1 vCPU) or vCPUs
    share_unit: str  # "local cores" (emulator) or "vCPU" (AWS: memory / 1,769 MB)
    samples_trained: int  # per worker: (completed + redone iterations) × local batch
    iterations: int
    compute_s: float
    communication_s: float | None
    ps_aggregation_s: float | None
    startup_s: float | None


@dataclass(frozen=True)
class Calibration:
    """The refitted profile document, the suggested catalog override and what changed."""

    profile: dict[str, Any]
    catalog_override: dict[str, Any]  # {} when the run says nothing about bandwidth
    changes: tuple[str, ...]  # one readable line per refitted figure


def _field(report: dict[str, Any], dotted: str, where: str) -> Any:
    value: Any = report
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            raise ValueError(f"report {where!r}: missing field {dotted!r}")
        value = value[part]
    return value


def _count(report: dict[str, Any], dotted: str, where: str, least: int = 0) -> int:
    value = _field(report, dotted, where)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(
            f"report {where!r} field {dotted!r}: {value!r} is not a whole number of at least "
            f"{least}"
        )
    return value


def measured_terms(report: dict[str, Any]) -> dict[str, float | None]:
    """term → measured seconds (None when the run did not measure it: null, NaN or absent)."""
    out: dict[str, float | None] = {}
    for row in report["terms"]:
        if not isinstance(row, dict):
            continue
        value = row.get("measured_s")
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            out[str(row.get("term"))] = float(value)
        else:
            out[str(row.get("term"))] = None
    return out


def worker_share(report: dict[str, Any], memory_mb: int) -> tuple[float, str]:
    """The CPU a worker really had: the emulator's cores per worker, else Lambda's memory rule."""
    emulation = report.get("emulation")
    cores = emulation.get("worker_cores") if isinstance(emulation, dict) else None
    if isinstance(cores, int | float) and not isinstance(cores, bool) and cores > 0:
        return float(cores), "local cores"
    return memory_mb / LAMBDA_MB_PER_VCPU, "vCPU"


def run_facts(report: Any, where: str) -> RunFacts:
    """The facts a refit needs, or ValueError naming what makes `report` unusable for one."""
    if not isinstance(report, dict) or not isinstance(report.get("terms"), list):
        raise ValueError(
            f"report {where!r} is not a run report: no 'terms' (give the report.json a "
            "finished run writes)"
        )
    status = report.get("status")
    if status != "done":
        raise ValueError(
            f"report {where!r} is from an unfinished run (status {status!r}): calibrate from "
            "a run whose status is 'done'"
        )
    completed = _count(report, "iterations.completed", where)
    redone = report.get("iterations", {}).get("redone") or 0
    iterations = completed + (redone if isinstance(redone, int) else 0)
    if iterations == 0:
        raise ValueError(f"report {where!r} completed 0 iterations: there is no rate to refit")
    memory_mb = _count(report, "plan.memory_mb", where, 1)
    terms = measured_terms(report)
    compute_s = terms.get("compute")
    if compute_s is None or compute_s <= 0:
        raise ValueError(
            f"report {where!r} has no measured compute time (terms 'compute' measured_s "
            f"{compute_s!r}): there is no rate to refit"
        )
    share, unit = worker_share(report, memory_mb)
    plan = report["plan"]
    workload = plan.get("workload")
    return RunFacts(
        job=str(report.get("job", "?")),
        model=str(_field(report, "plan.model", where)),
        dataset=str(_field(report, "plan.dataset", where)),
        workload=workload if isinstance(workload, str) else None,
        arch=str(_field(report, "plan.arch", where)),
        n_workers=_count(report, "plan.n_workers", where, 1),
        memory_mb=memory_mb,
        ps_count=_count(report, "plan.ps_count", where, 1),
        share_vcpu=share,
        share_unit=unit,
        samples_trained=iterations * _count(report, "plan.local_batch", where, 1),
        iterations=iterations,
        compute_s=compute_s,
        communication_s=terms.get("communication"),
        ps_aggregation_s=terms.get("ps_aggregation"),
        startup_s=terms.get("startup"),
    )


def is_aws_report(report: Any) -> bool:
    """An AWS run's report as functions/finalize.py writes it: the workers' link records and
    the iteration the run reached, no measured terms and no plan."""
    return isinstance(report, dict) and "workers" in report and "terms" not in report


def report_of_aws_run(aws: dict[str, Any], plan: Plan, where: str) -> dict[str, Any]:
    """An AWS run's report with the plan it ran (cdk.out/plan.json of that deploy) in the
    schema `run_facts` reads: its terms read from the workers' link records the way the
    emulator reads its own (functions/terms.py: compute and communication the straggler's,
    start-up and load the first link's); no `emulation` section, so the share is Lambda's."""
    if aws.get("job_id") != plan.job:
        raise ValueError(
            f"report {where!r} is a run of job {aws.get('job_id')!r}, the plan is job "
            f"{plan.job!r}: give the plan.json of the deploy that ran it"
        )
    workers = [w for w in aws.get("workers") or [] if isinstance(w, dict) and w.get("links")]
    if not workers:
        raise ValueError(f"report {where!r} has no worker link records: there is nothing to refit")
    per_worker = [link_terms.chain_terms(list(w["links"])) for w in workers]
    measured = link_terms.measured_terms(per_worker)
    straggler = link_terms.straggler_index(per_worker)
    completed = int(aws.get("iteration") or 0)
    trained = int(workers[straggler].get("iterations_run") or 0)
    return {
        "job": plan.job,
        "status": "done" if aws.get("complete") else "unfinished",
        "iterations": {"completed": completed, "redone": max(0, trained - completed)},
        "plan": {
            "workload": plan.workload,
            "model": plan.training.model,
            "dataset": plan.training.dataset,
            "arch": plan.arch,
            "n_workers": plan.n_workers,
            "memory_mb": plan.memory_mb,
            "ps_count": plan.ps_count,
            "local_batch": plan.training.local_batch,
        },
        "terms": [
            {"term": t, "measured_s": measured[t]}
            for t in ("load", "compute", "communication", "startup", "chaining")
        ],
    }


def check_workload(facts: RunFacts, profile: dict[str, Any], where: str) -> None:
    """ValueError unless the run trained the profile's model on the profile's dataset."""
    name = profile.get("name")
    same = (facts.model, facts.dataset) == (profile.get("model"), profile.get("dataset"))
    if not same or (facts.workload is not None and facts.workload != name):
        run = facts.workload or f"{facts.model} on {facts.dataset}"
        raise ValueError(
            f"report {where!r} is a run of {run}, but profile {name!r} is "
            f"{profile.get('model')} on {profile.get('dataset')}: give --profile for the "
            "report's workload"
        )


def rate_samples_s(facts: RunFacts) -> float:
    """λDNN's R at the run's share: samples one worker trained per compute second."""
    return facts.samples_trained / facts.compute_s


def refit_points(
    points: list[dict[str, Any]], key: str, x: float, rate: float
) -> tuple[list[dict[str, Any]], float | None]:
    """The points with (x, rate) in place of the nearest one within REPLACE_WITHIN, else added;
    sorted by `key`. Also returns the x of the point replaced (None when added)."""
    nearest = min(points, key=lambda p: abs(float(p[key]) - x), default=None)
    replaced = None
    if nearest is not None and abs(float(nearest[key]) - x) <= REPLACE_WITHIN * x:
        replaced = float(nearest[key])
        points = [p for p in points if p is not nearest]
    new = [*points, {key: x, "samples_per_s": rate}]
    return sorted(new, key=lambda p: float(p[key])), replaced


def _source(method: str, date: str) -> dict[str, str]:
    return {"method": method, "date": date, "tag": CALIBRATED}


def refit_rate(
    doc: dict[str, Any], facts: RunFacts, run: str, date: str
) -> tuple[dict[str, Any], str]:
    """The document with R of the run's architecture refitted at the run's share (see module)."""
    rate = round(rate_samples_s(facts), 1)
    share = round(facts.share_vcpu, 4)
    memory = round(facts.share_vcpu * LAMBDA_MB_PER_VCPU)  # the memory that buys this share
    curves = doc.setdefault("training_rate", {})
    curve = curves.get(facts.arch) or {"points": []}
    sources = doc.setdefault("sources", {})
    method = (
        f"calibrated from {run}: {facts.samples_trained} samples per worker in "
        f"{facts.compute_s:g} s of measured compute"
    )
    where = f"training_rate.{facts.arch}"
    if "linear" in curve:
        # One run measures one memory size: keep the fitted slope, move the line through it.
        alpha = float(curve["linear"]["alpha1_samples_s_per_mb"])
        beta = round(rate - alpha * memory, 3)
        curves[facts.arch] = {"linear": {**curve["linear"], "beta1_samples_s": beta}}
        sources[f"{where}.linear.beta1_samples_s"] = _source(method, date)
        return doc, f"{where} linear: beta1 {beta:g} samples/s (R = {rate:g} at {memory} MB)"
    key = "memory_mb" if curve["points"] and "memory_mb" in curve["points"][0] else "vcpu_share"
    x = float(memory if key == "memory_mb" else share)
    points, replaced = refit_points(list(curve["points"]), key, x, rate)
    curves[facts.arch] = {"points": points}
    if replaced is not None:
        sources.pop(f"{where}.{key}={replaced:g}", None)
    sources[f"{where}.{key}={x:g}"] = _source(method, date)
    what = "added" if replaced is None else f"replaced the point at {replaced:g}"
    return doc, f"{where} at {key} {x:g}: {rate:g} samples/s ({what})"


def refit_startup(
    doc: dict[str, Any], facts: RunFacts, run: str, date: str
) -> tuple[dict[str, Any], str]:
    """The document with `startup_s` set to the first link's measured start-up (kept if none)."""
    if facts.startup_s is None or facts.startup_s <= 0:
        return doc, "startup_s: not measured in the run, kept"
    old = doc.get("startup_s")
    doc["startup_s"] = round(facts.startup_s, 3)
    doc.setdefault("sources", {})["startup_s"] = _source(
        f"calibrated from {run}: measured start-up of the first chain link", date
    )
    return doc, f"startup_s: {old} -> {doc['startup_s']:g}"


def ps_bandwidth_mb_s(facts: RunFacts, model_bytes: int, rtt_s: float) -> float | None:
    """Per-worker worker↔PS bandwidth B_p, λDNN's t_comm = 2·d_m / B_p + 2·rtt inverted.

    Communication as the workers measure it includes waiting through the PS update, which the
    model holds as its own term, so the measured PS aggregation is taken out first. None when
    the run leaves no transfer time to divide by.
    """
    if facts.communication_s is None:
        return None
    transfer_s = facts.communication_s - (facts.ps_aggregation_s or 0.0)
    transfer_s -= 2.0 * rtt_s * facts.iterations
    if transfer_s <= 0:
        return None
    return 2.0 * model_bytes / 1e6 * facts.iterations / transfer_s


def bandwidth_override(
    facts: RunFacts, model_bytes: int, rtt_s: float, run: str, date: str
) -> tuple[dict[str, Any], str]:
    """The suggested catalog override for `network.function_ps_mb_s` ({} when not measurable)."""
    mb_s = ps_bandwidth_mb_s(facts, model_bytes, rtt_s)
    if mb_s is None:
        if facts.communication_s is None:
            return {}, "worker<->PS bandwidth: communication not measured in the run, no override"
        net_s = facts.communication_s - (facts.ps_aggregation_s or 0.0)
        return {}, (
            f"worker<->PS bandwidth: no override, the {net_s:.3g} s of communication net of the "
            f"PS update are within {facts.iterations} round trips of {rtt_s:g} s (the catalog's "
            "rtt is too long for this platform: give the run's own catalog)"
        )
    figure = {
        "value": round(mb_s, 1),
        "unit": "MB/s",
        "source": (
            f"calibrated from {run}: 2·d_m·k / (communication − PS aggregation − 2·rtt·k) with "
            f"rtt {rtt_s:g} s, per worker at {facts.n_workers} workers and {facts.ps_count} PS "
            "shard(s)"
        ),
        "date": date,
        "tag": CALIBRATED,
    }
    line = f"network.function_ps_mb_s: {figure['value']:g} MB/s per worker (suggested override)"
    return {"network": {"function_ps_mb_s": figure}}, line


def run_label(facts: RunFacts, path: str, date: str) -> str:
    """The provenance every calibrated figure carries: report, job, date, n, memory, cores."""
    return (
        f"{path} (job {facts.job}, {date}, n {facts.n_workers}, {facts.memory_mb} MB, "
        f"{facts.share_vcpu:.4g} {facts.share_unit})"
    )


def calibrate(
    profile: dict[str, Any], report: Any, path: str, date: str, rtt_s: float = 0.0
) -> Calibration:
    """Refit `profile` (a parsed profile document) from `report` (a parsed run report at `path`,
    dated `date`); `rtt_s` is the catalog's worker↔PS round trip (0: bandwidth includes it)."""
    facts = run_facts(report, path)
    check_workload(facts, profile, path)
    run = run_label(facts, path, date)
    doc = json.loads(json.dumps(profile))  # the caller's document stays as it was
    doc, rate_line = refit_rate(doc, facts, run, date)
    doc, startup_line = refit_startup(doc, facts, run, date)
    profile_from_dict(doc)  # the result must load like any profile
    override, bandwidth_line = bandwidth_override(
        facts, int(profile["model_bytes"]), rtt_s, run, date
    )
    return Calibration(doc, override, (rate_line, startup_line, bandwidth_line))


def _total_s(profile: WorkloadProfile, catalog: Catalog, choice: Choice, alpha1: float) -> float:
    """The model's total at `choice` with R = α1·m (β1 = 0) for the choice's architecture."""
    curve = RateCurve(arch=choice.arch, alpha1_samples_s_per_mb=alpha1, beta1_samples_s=0.0)
    rates = tuple(r for r in profile.rates if r.arch != choice.arch) + (curve,)
    cells = predict(dataclasses.replace(profile, rates=rates), catalog, choice)
    return float(cells.total_s.ravel()[0])


def alpha1_for_total(
    profile: WorkloadProfile,
    catalog: Catalog,
    choice: Choice,
    measured_total_s: float,
    rel_tolerance: float = 1e-6,
) -> float:
    """α1 (samples/s per MB, β1 = 0) with which this model predicts `measured_total_s` at `choice`.

    For a run whose only published figure is its total (a paper's table): the rate is fitted with
    the model that will use it, so the terms the model counts itself (start-up, PS aggregation,
    checkpoints, communication) are taken out of the measurement once, not left inside R and then
    added again. The total falls as α1 grows (compute is the only term that depends on it), so a
    bisection on log α1 finds it. The total steps where a whole iteration more or less fits
    between checkpoints, so the result is the slowest rate whose total does not exceed the
    measurement (within one such step of it).
    """
    low, high = 1e-9, 1e3
    floor_s = _total_s(profile, catalog, choice, high)  # compute ≈ 0: the other terms alone
    if not math.isfinite(measured_total_s) or measured_total_s <= floor_s:
        raise ValueError(
            f"measured total {measured_total_s:g} s is not above what the model's other terms "
            f"take at {choice} ({floor_s:.2f} s): no training rate reproduces it"
        )
    while high / low > 1 + rel_tolerance:
        mid = math.sqrt(low * high)
        if _total_s(profile, catalog, choice, mid) > measured_total_s:
            low = mid
        else:
            high = mid
    return high
