"""The run report: predicted vs measured per term, cost, loss curve, accuracy, artifacts.

Measured terms come from the workers' own `timings` (summed over each worker's invocations; the
slowest worker sets the pace under BSP, so each term is the maximum over workers) and from the
orchestrator's clocks. Two predictions sit beside them: the configuration that ran (n, the
cores each worker really got as memory at 1 core = 1 vCPU, arch, PS count, PS `loopback`) on
this machine's catalog (`catalog/local.json`, from `make calibrate`) under the run's invocation
limit, safety margin and iteration cap, which the measurement is scored against
(`accuracy_local`); and the AWS one, the Plan's own or, for a plan made on the local catalog,
the same configuration on lambda-2025 with its cheapest PS type.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from emulator import cpu
from emulator.evaluate import held_out_accuracy
from emulator.options import LOCAL_CATALOG, NO_LOCAL_CATALOG, default_safety_margin_s
from emulator.records import RunRecord, WorkerState, worker_memory_mb
from emulator.report_cpu import cpu_section
from emulator.report_pipeline import TERMS_NOTE, predict_local_pipelined, straggler_boundary_s
from emulator.report_replan import accuracy_of, replan_report
from emulator.report_stages import stage_rows
from emulator.report_table import format_table
from emulator.s3_client import s3_client_for
from emulator.s3server import S3Endpoint
from functions.aws import download_to, list_keys
from functions.terms import chain_terms, link_timing, measured_terms
from provisioner.catalog import CATALOG_DIR, Catalog, load_catalog
from provisioner.files import write_text_atomically
from provisioner.interval import LEVEL
from provisioner.plan import Goal, Plan, Prediction
from provisioner.planner import Infeasible, Limits, RunRules, build_plan, predict_run
from provisioner.space import Choice

PREDICTED_FIELDS = {
    "load": "load_s",
    "compute": "compute_s",
    "communication": "communication_s",
    "ps_aggregation": "ps_aggregation_s",
    "startup": "startup_s",
    "chaining": "chaining_s",
    "launch": "launch_s",  # the first link's platform start and dispatch
    "setup": "setup_s",  # AWS only: the run's endpoints and PS start (the emulator's PS is up)
    "total": "total_s",
}
LOCAL_PS_TYPE = "loopback"  # the local catalog's one PS type
AWS_CATALOG = "lambda-2025"


def aggregation_measured_s(record: RunRecord, per_worker: list[dict[str, float]]) -> float:
    """The averaging and update the workers wait through: the slowest PS shard's own update
    time, or in an S3-sync run the busiest reducer's (NaN when neither was measured)."""
    if record.plan.sync == "s3":
        return max((w.get("reduce", 0.0) for w in per_worker), default=math.nan)
    return math.nan if record.ps_update_s is None else record.ps_update_s


def exchange_figures(record: RunRecord, local: Plan | None) -> dict[str, Any] | None:
    """An S3-sync run's exchange per iteration and its requests, measured next to the model's
    for this machine (None for a PS run: its exchange is the communication term).

    Measured per iteration: the slowest worker's communication plus its reduce over the
    iterations it ran (a reducer is on every iteration's critical path); requests: every
    link's counts over the run's iterations (polls that found nothing are GETs S3 bills too).
    """
    plan = record.plan
    if plan.sync != "s3":
        return None
    per_iteration = []
    for worker in record.workers:
        ran = sum(int(link.get("iterations_run") or 0) for link in worker.links)
        spent = sum(link_timing(link, t) for link in worker.links
                    for t in ("communication", "reduce"))  # fmt: skip
        if ran:
            per_iteration.append(spent / ran)
    counts: dict[str, int] = {}
    for worker in record.workers:
        for link in worker.links:
            for kind, value in (link.get("s3_requests") or {}).items():
                counts[kind] = counts.get(kind, 0) + int(value)
    k = max(1, plan.training.iterations)
    predicted = None if local is None else local.prediction
    return {
        "sync": "s3",
        "reducers": plan.reducers,
        "per_iteration_s": {
            "measured": max(per_iteration, default=math.nan),
            "predicted_local": None if predicted is None else predicted.exchange_per_iteration_s,
        },
        "requests_per_iteration": requests_per_iteration(
            {kind: n / k for kind, n in sorted(counts.items())},
            None if predicted is None else predicted_requests(predicted, k),
        ),
        "requests_total": counts,
    }


def predicted_requests(prediction: Prediction, iterations: int) -> dict[str, float]:
    """The model's exchange requests per iteration over a run of `iterations`, named as
    RequestCounts counts them: "get" is every GET sent (those that find their object, the
    expected misses and the links' start reads), "get_miss" the ones that find nothing yet,
    "put" and "list" the iterations' and the links' starts and ends."""
    misses = prediction.exchange_get_misses_per_iteration
    k = max(1, iterations)
    return {
        "put": prediction.exchange_puts_per_iteration + prediction.exchange_link_puts / k,
        "get": prediction.exchange_gets_per_iteration + misses + prediction.exchange_link_gets / k,
        "get_miss": misses,
        "list": prediction.exchange_link_lists / k,
    }


def requests_per_iteration(
    measured: dict[str, float], predicted: dict[str, float] | None
) -> dict[str, Any]:
    """Measured next to predicted requests per iteration, and measured / predicted for each
    kind the model prices (None where it predicts none)."""
    ratio = None
    if predicted is not None:
        ratio = {kind: measured.get(kind, 0.0) / want if want else None
                 for kind, want in predicted.items()}  # fmt: skip
    return {"measured": measured, "predicted_local": predicted, "measured_over_predicted": ratio}


def loss_curve(workers: list[WorkerState]) -> list[tuple[int, float]]:
    """Mean loss per iteration over the workers that reported it, in iteration order."""
    by_iteration: dict[int, list[float]] = {}
    for worker in workers:
        for link in worker.links:
            for it, loss in link.get("losses") or []:
                if loss is not None:  # a pipeline's stages before the last see no loss
                    by_iteration.setdefault(int(it), []).append(float(loss))
    return [(it, sum(v) / len(v)) for it, v in sorted(by_iteration.items())]


def smoothed_first_last(curve: list[tuple[int, float]], window: int = 10) -> tuple[float, float]:
    """Mean of the first and of the last `window` losses (single batches are noisy)."""
    if not curve:
        return math.nan, math.nan
    head = [loss for _, loss in curve[:window]]
    tail = [loss for _, loss in curve[-window:]]
    return sum(head) / len(head), sum(tail) / len(tail)


def compute_at_local_share_s(record: RunRecord) -> float | None:
    """The plan's compute term re-predicted for the cores a worker really got here.

    k · b_l / R(share × cpu_scale) with the workload profile's own rate curve (the same
    function the planner uses), so a measured compute time can be read against a prediction
    made for this machine's share, not AWS's. None when the profile cannot be loaded.
    """
    return _compute_s_at_share(record, record.worker_cores)


def compute_at_full_speed_s(record: RunRecord) -> float | None:
    """The compute term if no step were ever throttled: k · b_l / R(max(1, cores)).

    λDNN's t_comp = b_l / R(share) (above) holds when the function computes back to back. A
    worker that waits for the PS between steps starts each step with a fresh CFS quota and
    runs it at full speed until the quota of the period is spent, so short steps can take as
    little as this; measured compute lies between the two.
    """
    return _compute_s_at_share(record, max(1.0, record.worker_cores))


def _compute_s_at_share(record: RunRecord, share: float) -> float | None:
    try:
        from provisioner import load_profile
        from provisioner.terms import training_rate_samples_s

        profile = load_profile(record.workload)
    except (ImportError, OSError, ValueError):
        return None
    curve = profile.rate(record.plan.arch) or (profile.rates[0] if profile.rates else None)
    if curve is None:
        return None
    # Local cores stand for vCPUs one to one at cpu_scale 1.0 (how the profile was measured).
    rate = float(
        training_rate_samples_s(curve, np.asarray(share), np.asarray(share * cpu.MB_PER_VCPU))
    )
    if rate <= 0:
        return None
    training = record.plan.training
    return training.iterations * training.local_batch / rate


def redone_iterations(workers: list[WorkerState]) -> int:
    """Iterations trained more than once (after a PS restart or rollback), the most of any worker.

    Every step a worker completes is in its links' losses with its iteration number, so an
    iteration seen twice was redone; a link lost with its environment (SIGKILL) returns no
    losses and is not counted here (its iterations are redone by the retry, visible once).
    """
    most = 0
    for worker in workers:
        seen = [int(it) for link in worker.links for it, _ in link.get("losses") or []]
        most = max(most, len(seen) - len(set(seen)))
    return most


def error_share_of_total(
    predicted_s: float | None, measured_s: float | None, measured_total_s: float | None
) -> float | None:
    """(p − m) / M, M the measured total: how much a term's miss moved the total, with its sign
    (+ over-predicted); None when a figure is missing or M is 0 or not finite."""
    if predicted_s is None or measured_s is None or measured_total_s is None:
        return None
    if not all(math.isfinite(f) for f in (predicted_s, measured_s, measured_total_s)):
        return None
    if measured_total_s <= 0:
        return None
    return (predicted_s - measured_s) / measured_total_s


def describe(plan: Plan) -> str:
    """One configuration in a few words: '2 x 1769 MB x86_64, PS 1 x loopback' (or ', S3 k=1')."""
    if plan.sync == "s3":
        exchange = f"S3 k={plan.reducers}"
    else:
        exchange = f"PS {plan.ps_count} x {plan.ps_type}"
    return f"{plan.n_workers} x {plan.memory_mb} MB {plan.arch}, {exchange}"


def same_exchange(plan: Plan, memory_mb: int, ps_type: str) -> Choice:
    """The plan's configuration at `memory_mb`, on PS type `ps_type` if it has a PS. An S3 run
    keeps its sync and k: as a PS choice it was modelled as a PS of 0 shards (no exchange)."""
    if plan.sync == "s3":
        return Choice(plan.n_workers, memory_mb, plan.arch, "", 0, "s3", plan.reducers)
    return Choice(plan.n_workers, memory_mb, plan.arch, ps_type, plan.ps_count)


def run_rules(record: RunRecord) -> RunRules:
    """The limit, margin and cap the run enforced, and the plan's k (a bench may shorten it)."""
    limit_s = record.options.invocation_limit_s
    margin_s = record.options.safety_margin_s
    return RunRules(
        invocation_limit_s=limit_s,
        safety_margin_s=default_safety_margin_s(limit_s) if margin_s is None else margin_s,
        max_iterations_per_invocation=record.options.iterations_per_invocation,
        iterations=record.plan.training.iterations,
    )


def local_choice(plan: Plan, worker_cores: float, catalog: Catalog) -> Choice:
    """The configuration that ran, on the local platform: a worker's cores as memory."""
    memory_mb = max(1, round(worker_cores * catalog.mb_per_vcpu))
    return same_exchange(plan, memory_mb, LOCAL_PS_TYPE)


def predict_local(record: RunRecord, catalog: Catalog | str | None) -> tuple[Plan | None, str]:
    """The run's configuration predicted for this machine, or None and the one-line reason."""
    from provisioner import load_profile

    if isinstance(catalog, str):
        if not (CATALOG_DIR / f"{catalog}.json").exists() and not Path(catalog).exists():
            return None, NO_LOCAL_CATALOG
        try:
            catalog = load_catalog(catalog)
        except ValueError as err:  # there, but not a catalog: say why, do not stop the report
            return None, f"no local prediction: {err}"
    if catalog is None:
        return None, NO_LOCAL_CATALOG
    if record.plan.pipeline is not None:
        return _predict_local_pipelined(record, catalog)
    choice = local_choice(record.plan, record.worker_cores, catalog)
    try:
        profile = load_profile(record.workload)
        plan = predict_run(profile, catalog, choice, run_rules(record), job=record.plan.job)
    except (OSError, ValueError) as err:  # Infeasible included: the model says it cannot run
        return None, f"no local prediction: {err}"
    label = f"{catalog.name}: {describe(plan)} ({record.worker_cores:.3f} cores per worker)"
    return plan, label + unread_here_note(record.workload)


def _predict_local_pipelined(record: RunRecord, catalog: Catalog) -> tuple[Plan | None, str]:
    """A pipelined run predicted by the pipelined model (report_pipeline.py): each stage at the
    cores its workers really got, as memory."""
    from provisioner import load_profile

    plan = record.plan
    assert plan.pipeline is not None
    cores = [
        cpu.local_cores(worker_memory_mb(plan, s.index), record.cpu_scale)
        for s in plan.pipeline.stages
    ]
    memory_mb = [max(1, round(c * catalog.mb_per_vcpu)) for c in cores]
    try:
        profile = load_profile(record.workload)
        local = predict_local_pipelined(
            profile, catalog, plan, run_rules(record), memory_mb, LOCAL_PS_TYPE
        )
    except (OSError, ValueError) as err:  # Infeasible included: the model says it cannot run
        return None, f"no local prediction: {err}"
    per_stage = ", ".join(f"{c:.3f}" for c in cores)
    label = (
        f"{catalog.name}, pipelined model: {len(cores)} stages x {describe(local)} "
        f"({per_stage} cores per stage's worker)"
    )
    return local, label + TERMS_NOTE + unread_here_note(record.workload)


def unread_here_note(workload: str) -> str:
    """'' where the profile `workload` is a reading of this host (an anchored profile), else
    how to take one. A committed profile's start-up and step were timed on another machine or
    moment: on this 2-core host the digits MLP's profile says 2.51 s of start-up and 0.86 ms a
    step at one vCPU, where its runs at 0.9 vCPU took 1.84-2.24 s and 0.53-0.61 ms (median
    step) under the same load, and calibration's cold start of the bare runner read 1.02 s.
    The demo and bench.predict predict from such a reading (`--anchor`)."""
    from provisioner.catalog import read_data_json
    from provisioner.profile import PROFILE_DIR

    try:
        _, raw = read_data_json(workload, PROFILE_DIR, "profile")
    except ValueError:
        return ""
    if isinstance(raw, dict) and raw.get("anchor"):
        return ""
    return (
        f"; profile {workload!r} not read on this host, so its start-up and steps may not hold "
        f"here: `python -m emulator.profile --workload {workload} --anchor --output P`, then "
        "--workload P"
    )


def predict_aws(plan: Plan, workload: str | None = None) -> tuple[Plan | None, str]:
    """The AWS prediction and its label: the plan's own unless it was made on the local catalog;
    then the same (n, memory, arch, PS count or S3 k) on lambda-2025, with its cheapest PS type
    if it has a PS."""
    if plan.catalog != LOCAL_CATALOG:
        return plan, f"{plan.catalog}: {describe(plan)}"
    from provisioner import load_profile

    try:
        profile, catalog = load_profile(workload or plan.workload), load_catalog(AWS_CATALOG)
    except (OSError, ValueError) as err:
        return None, f"no AWS prediction: {err}"
    ps_types = [""] if plan.sync == "s3" else [ps.name for ps in catalog.ps_types]
    options = []
    for ps_type in ps_types:
        choice = same_exchange(plan, plan.memory_mb, ps_type)
        try:
            options.append(build_plan(profile, catalog, choice, Goal(), Limits(), job=plan.job))
        except (Infeasible, ValueError):
            continue
    if not options:
        return None, f"no AWS prediction: {plan.n_workers} x {plan.memory_mb} MB cannot run"
    cheapest = min(options, key=lambda p: p.cost.total_usd)
    which = ", cheapest PS type" if cheapest.sync == "ps" else ""
    return cheapest, f"{catalog.name}{which}: {describe(cheapest)}"


def deadline_verdict(deadline_s: float | None, measured_total_s: float) -> dict[str, Any]:
    """Whether the measured total met the plan's deadline (None when it had none)."""
    met = None if deadline_s is None else measured_total_s <= deadline_s
    return {"deadline_s": deadline_s, "measured_total_s": measured_total_s, "met": met}


def interval_verdict(local: Plan | None, measured_total_s: float) -> dict[str, Any] | None:
    """The local prediction's 90% interval (its total scaled by the local catalog's measured
    spread, provisioner/interval.py) and whether the measured total fell inside; None without
    a local prediction or where the catalog measured no spread (a point is no interval)."""
    p = None if local is None else local.prediction
    if p is None or p.total_low_s is None or p.total_high_s is None:
        return None
    if not p.total_low_s < p.total_high_s:
        return None
    inside = p.total_low_s <= measured_total_s <= p.total_high_s
    return {"level": LEVEL, "low_s": p.total_low_s, "high_s": p.total_high_s, "inside": inside}


def build_report(
    record: RunRecord,
    accuracy: dict[str, Any] | None,
    local_catalog: Catalog | str | None = LOCAL_CATALOG,
) -> dict[str, Any]:
    """The JSON report (also printed as a table); `local_catalog` is this machine's catalog or
    its name or path (a missing one leaves the local columns null)."""
    plan = record.plan
    per_worker = [chain_terms(w.links) for w in record.workers]
    measured = measured_terms(per_worker)
    if plan.pipeline is not None:  # the rest of the straggler's iteration, as predicted
        measured["communication"] += straggler_boundary_s(record.workers, per_worker)
    # Inside the PS (the workers wait through it): the slowest shard's own update time.
    measured["ps_aggregation"] = aggregation_measured_s(record, per_worker)
    measured["total"] = record.train_wall_s
    # Launch: the run's wall outside the latest-ending worker's chain of handlers (its spawn,
    # the first dispatch, the poll that sees its last result), the time no handler timed.
    measured["launch"] = max(0.0, record.train_wall_s - measured.pop("in_chain", 0.0))
    # Nothing to set up here: the emulator's PS serves before the clock starts.
    measured["setup"] = 0.0
    predicted = {t: float(getattr(plan.prediction, f)) for t, f in PREDICTED_FIELDS.items()}
    local_plan, local_label = predict_local(record, local_catalog)
    aws_plan, aws_label = predict_aws(plan, record.workload)
    local = {t: _term(local_plan, f) for t, f in PREDICTED_FIELDS.items()}
    aws = {t: _term(aws_plan, f) for t, f in PREDICTED_FIELDS.items()}
    curve = loss_curve(record.workers)
    first, last = smoothed_first_last(curve)
    links = [len(w.links) for w in record.workers]
    completed = min((w.iteration for w in record.workers), default=0)
    return {
        "job": plan.job,
        "status": "done",
        "plan": {
            "n_workers": plan.n_workers,
            "memory_mb": plan.memory_mb,
            "arch": plan.arch,
            "vcpu_share": plan.vcpu_share,
            "ps_type": plan.ps_type,
            "ps_count": plan.ps_count,
            "sync": plan.sync,
            "reducers": plan.reducers,
            "iterations": plan.training.iterations,
            "local_batch": plan.training.local_batch,
            "model": plan.training.model,
            "dataset": plan.training.dataset,
            "deadline_s": plan.goal.deadline_s,
            "invocations_per_worker": plan.invocations_per_worker,
            "notes": list(plan.notes),
        },
        "emulation": {
            # where the run ran, as its catalog names the machine: a slack read from runs
            # (emulator/slack.py) counts only this machine's
            "machine": cpu.this_machine(),
            "invocation_limit_s": record.options.invocation_limit_s,
            "cpu_scale_cores_per_vcpu": record.cpu_scale,
            "worker_cores": record.worker_cores,
            "cpu_share": record.cpu_status,
            "throttled_s": record.throttled_s,
            "s3": f"{record.s3_kind} at {record.s3_url}",
        },
        "terms": [
            {
                "term": t,
                "predicted_s": predicted[t],
                "measured_s": measured.get(t, math.nan),
                "predicted_local_s": local[t],
                "predicted_aws_s": aws[t],
            }
            for t in PREDICTED_FIELDS
        ],
        "accuracy_local": {t: accuracy_of(local[t], measured.get(t)) for t in PREDICTED_FIELDS},
        "error_share_of_total_local": {
            t: error_share_of_total(local[t], measured.get(t), measured.get("total"))
            for t in PREDICTED_FIELDS
        },
        "predictions": {"local": local_label, "aws": aws_label},
        "exchange": exchange_figures(record, local_plan),
        "cpu": cpu_section(
            [w.links for w in record.workers], cpu.machine_cores(), record.train_wall_s
        ),
        "deadline": deadline_verdict(plan.goal.deadline_s, record.train_wall_s),
        "interval_local": interval_verdict(local_plan, record.train_wall_s),
        "compute_predicted_at_local_share_s": compute_at_local_share_s(record),
        "compute_at_full_speed_s": compute_at_full_speed_s(record),
        "measured_per_worker": per_worker,
        **({"stages": stages} if (stages := stage_rows(plan, record.workers)) else {}),
        "wall": {
            "prepare_s": record.prepare_s,
            "ps_start_s": record.ps_start_s,
            "train_s": record.train_wall_s,
            "finalize_s": record.finalize_s,
        },
        "iterations": {
            "planned": plan.training.iterations,
            "completed": completed,
            "redone": redone_iterations(record.workers),
            "checkpoint_every": plan.training.checkpoint_every_iterations,
        },
        "ps_restarts": record.ps_restarts,
        "run_id": record.run_id,
        "state_machine": list(record.states),
        "invocations": {
            "per_worker": links,
            "reinvocations": sum(n - 1 for n in links),
            "cold_starts": sum(1 for w in record.workers for link in w.links if link.get("cold")),
            "failed_attempts": sum(len(w.failures) for w in record.workers),
            "failures": [f for w in record.workers for f in w.failures],
            "links": [
                [
                    {
                        "iteration": link.get("iteration"),
                        "stopped": link.get("stopped"),
                        "cold": link.get("cold"),
                        "wall_s": link.get("wall_s"),
                        "attempt": link.get("attempt"),
                        "allocator": link.get("allocator"),
                        "minor_faults": (link.get("timings") or {}).get("train_minor_faults"),
                        "step_compute_s": link.get("step_compute_s"),
                    }
                    for link in w.links
                ]
                for w in record.workers
            ],
        },
        "loss": {"first": first, "last": last, "decreased": last < first, "curve": curve},
        "accuracy": accuracy,
        # What the AWS column would cost (a local plan's own prices are copies, nothing bills).
        "cost_usd": dict((aws_plan or plan).cost.__dict__),
        "artifacts": {},
    }


def _term(plan: Plan | None, field: str) -> float | None:
    return None if plan is None else float(getattr(plan.prediction, field))


def json_safe(value: Any) -> Any:
    """NaN/inf → None, recursively: report.json stays strict JSON (jq, JavaScript)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def plot_loss(curve: list[tuple[int, float]], path: Path, title: str) -> None:
    """Loss per iteration (mean over workers) as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    if curve:
        ax.plot([it for it, _ in curve], [loss for _, loss in curve], lw=1)
    ax.set_xlabel("iteration")
    ax.set_ylabel("training loss (mean over workers)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def mirror_prefix(s3: Any, bucket: str, prefix: str, local_dir: Path) -> list[str]:
    """Copy every object under `prefix` to `local_dir` (the S3 server dies with the run)."""
    copied = list_keys(s3, bucket, prefix)
    for key in copied:
        download_to(s3, bucket, key, local_dir / key)
    return copied


def finish_report(record: RunRecord, endpoint: S3Endpoint) -> dict[str, Any]:
    """Evaluate, write report.json + loss.png locally and to the artifacts bucket, print; the
    local columns predicted on the run's Options.local_catalog."""

    s3 = s3_client_for(endpoint)
    try:
        accuracy = held_out_accuracy(record, s3)
    except Exception as err:  # noqa: BLE001 - a failed evaluation is reported, not fatal
        accuracy = {"accuracy": None, "error": f"{type(err).__name__}: {err}"}
    report = build_report(record, accuracy, record.options.local_catalog)
    out = record.out_dir
    bucket = record.buckets["artifacts"]
    report["replan"] = replan_report(record, s3)
    prefix = f"{record.plan.job}/emulator"
    plot_loss(report["loss"]["curve"], out / "loss.png", f"{record.plan.job}: training loss")
    s3.upload_file(str(out / "loss.png"), bucket, f"{prefix}/loss.png")
    model_key = record.finalize_result.get("model_key") or f"{record.plan.job}/model.pt"
    report["artifacts"] = {
        "model (s3)": f"s3://{bucket}/{model_key}",
        "report (s3)": f"s3://{bucket}/{prefix}/report.json",
        "local copy of the artifacts bucket": str(out / "artifacts"),
        "report.json": str(out / "report.json"),
        "loss curve": str(out / "loss.png"),
        "logs": str(out / "logs"),
    }
    body = json.dumps(json_safe(report), indent=2, sort_keys=True, default=str, allow_nan=False)
    body += "\n"
    write_text_atomically(out / "report.json", body)
    s3.upload_fileobj(io.BytesIO(body.encode()), bucket, f"{prefix}/report.json")
    mirror_prefix(s3, bucket, f"{record.plan.job}/", out / "artifacts")
    if record.options.print_report:
        print("\n" + format_table(report), flush=True)
    return report
