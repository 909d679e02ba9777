"""A plan in words and in a chart: the table `python -m provisioner plan` prints (and synth
shows), the next-best alternatives, and the frontier PNG. matplotlib is imported inside
write_frontier_png only, so the library stays pure."""

from __future__ import annotations

from provisioner import runaway
from provisioner.explain import alternatives_rule
from provisioner.files import replace_atomically
from provisioner.idle import idle_line
from provisioner.interval import interval_note
from provisioner.parse import format_duration_s, format_usd
from provisioner.plan import Plan
from provisioner.planner import PlanResult

SYNC_NOTE = "sync: "  # the plan note on the winning exchange (planner.sync_note), shown as a row


def _row(label: str, value: str) -> str:
    return f"  {label:<28}{value}"


def render_plan(plan: Plan) -> str:
    """The readable table of one plan: configuration, time per term, cost per item."""
    p, c = plan.prediction, plan.cost
    lines = [
        f"plan for {plan.workload} on {plan.catalog} (job {plan.job})",
        _row(
            "workers × memory",
            f"{plan.n_workers} × {plan.memory_mb} MB {plan.arch} ({plan.vcpu_share:.2f} vCPU)",
        ),
        *stage_rows(plan),
        _row(
            "parameter servers",
            f"{plan.ps_type} × {plan.ps_count} ({plan.ps_arch})" if plan.ps_count else "none",
        ),
        _row("gradient exchange", _exchange(plan)),
        *[_row("sync", n.removeprefix(SYNC_NOTE)) for n in plan.notes if n.startswith(SYNC_NOTE)],
        _row(
            "batch",
            f"local {plan.training.local_batch}, global {plan.training.global_batch}, "
            f"{plan.training.iterations} iterations",
        ),
        _row(
            "invocations per worker",
            f"{plan.invocations_per_worker} "
            f"({plan.iterations_per_invocation} iterations each, "
            f"timeout {plan.invocation_timeout_s} s, /tmp {plan.ephemeral_storage_mb} MB)",
        ),
        "predicted time",
        _row("run set-up (endpoints, PS)", format_duration_s(p.setup_s)),
        _row("launch (dispatch, start)", format_duration_s(p.launch_s)),
        _row("start-up", format_duration_s(p.startup_s)),
        _row("load (S3 → function)", format_duration_s(p.load_s)),
        _row("compute", format_duration_s(p.compute_s)),
        _row("communication", format_duration_s(p.communication_s)),
        _row("PS aggregation", format_duration_s(p.ps_aggregation_s)),
        _row("chaining", format_duration_s(p.chaining_s)),
        _row(
            "total",
            f"{format_duration_s(p.total_s)} ({interval_note(p.total_low_s, p.total_high_s)})",
        ),
        "predicted cost",
        _row("Lambda compute", format_usd(c.lambda_compute_usd)),
        _row("Lambda requests", format_usd(c.lambda_requests_usd)),
        _row("ephemeral storage", format_usd(c.ephemeral_storage_usd)),
        _row("PS instances", format_usd(c.ps_instances_usd)),
        _row("Step Functions", format_usd(c.step_functions_usd)),
        _row("S3 requests", format_usd(c.s3_requests_usd)),
        _row("VPC endpoints", format_usd(c.vpc_endpoints_usd)),
        _row("S3 exchange", format_usd(c.s3_exchange_usd)),
        _row("total", format_usd(c.total_usd)),
    ]
    if plan.execution_timeout_s:
        lines += ["if it goes wrong", _row("bounds", runaway.bounds_line(plan))]
    if plan.idle_usd_per_hour:
        lines += [_row("between runs", idle_line(plan))]
    if plan.replan is not None:
        envelope, worst = replan_words(plan)
        lines += ["re-planning during the run", _row("envelope", envelope),
                  _row("worst case", worst)]  # fmt: skip
    lines += [f"  note: {n}" for n in plan.notes if not n.startswith(SYNC_NOTE)]
    return "\n".join(lines)


def replan_words(plan: Plan) -> tuple[str, str]:
    """A re-planning plan's envelope (what a re-plan may choose without a new deploy) and its
    worst case with every re-plan at the envelope's ceiling, in the summary's words."""
    spec = plan.replan
    if spec is None:
        raise ValueError(f"plan {plan.job} does not re-plan")
    env = spec.envelope
    counts = ", ".join(str(n) for n in env.worker_counts)
    variants = ", ".join(str(mb) for mb in env.memory_variants_mb)
    scale = "on" if spec.scale_down else "off"
    envelope = (f"up to {env.max_workers} workers ({counts}), memory {variants} MB; "
                f"scale-down when ahead {scale}")  # fmt: skip
    worst = (f"{format_usd(spec.worst_case_usd)} if every re-plan goes to the ceiling "
             f"({env.max_workers} × {max(env.memory_variants_mb)} MB; as planned "
             f"{format_usd(plan.worst_case_usd)})")  # fmt: skip
    return envelope, worst


def stage_rows(plan: Plan) -> list[str]:
    """A pipelined plan's stages, one line each (none for a one-stage plan): blocks, memory,
    replicas and the stage's own sync."""
    if plan.pipeline is None:
        return []
    pipe = plan.pipeline
    sync = (
        f"PS {plan.ps_type} × {plan.ps_count}" if plan.sync == "ps" else f"S3 k = {plan.reducers}"
    )
    rows = [_row("pipeline", f"{pipe.stage_count} stages, {pipe.micro_batches} micro-batches "
                             f"({pipe.schedule}, {pipe.reason})")]  # fmt: skip
    for st in pipe.stages:
        blocks = f"{st.block_names[0]} … {st.block_names[-1]}" if len(st.block_names) > 1 else (
            st.block_names[0]
        )  # fmt: skip
        rows.append(
            _row(
                f"  stage {st.index}",
                f"blocks {st.first_block}-{st.stop_block - 1} ({blocks}), {plan.n_workers} × "
                f"{st.memory_mb} MB (needs {st.memory_needed_mb}), sync {sync}",
            )
        )
    return rows


def _exchange(plan: Plan) -> str:
    """The plan's gradient exchange: its PS shards, or its S3 reducers and requests."""
    if plan.sync == "s3":
        p = plan.prediction
        return (
            f"S3, reducers k = {plan.reducers} ({p.exchange_puts_per_iteration} PUT + "
            f"{p.exchange_gets_per_iteration} GET per iteration)"
        )
    return "PS: workers push gradients to the shards and pull parameters"


def _alternative_line(a: Plan) -> str:
    exchange = f"{a.ps_type} × {a.ps_count}" if a.sync == "ps" else f"s3, k = {a.reducers}"
    return (
        f"  {a.n_workers:>4} × {a.memory_mb:>5} MB {a.arch:<7} {exchange}"
        f"  {format_duration_s(a.prediction.total_s):>9}  {format_usd(a.cost.total_usd)}"
    )


def render_alternatives(result: PlanResult) -> str:
    lines = (
        [f"next-best alternatives: {alternatives_rule(result.plan.goal)}"]
        + [_alternative_line(a) for a in result.alternatives]
        if result.alternatives
        else ["no alternatives"]
    )
    if result.other_sync is not None:
        lines += [
            f"best plan of the other gradient exchange (sync {result.other_sync.sync}):",
            _alternative_line(result.other_sync),
        ]
    return "\n".join(lines)


def write_frontier_png(result: PlanResult, path: str) -> None:
    """Frontier chart with the chosen plan marked (matplotlib imported here only, Agg backend).

    Drawn beside `path` and renamed into place: a failed write (a full disk) leaves no half file.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = [p.total_s / 60 for p in result.frontier]
    ys = [p.total_usd for p in result.frontier]
    ax.step(xs, ys, where="post", color="tab:blue", alpha=0.5)
    ax.scatter(xs, ys, color="tab:blue", label="Pareto frontier (exact optimum per deadline)")
    plan = result.plan
    ax.scatter(
        [plan.prediction.total_s / 60],
        [plan.cost.total_usd],
        color="tab:red",
        s=90,
        marker="*",
        zorder=3,
        label=f"chosen: {plan.n_workers}×{plan.memory_mb} MB "
        f"{plan.arch}, {plan.ps_type}×{plan.ps_count}",
    )
    if plan.goal.deadline_s is not None:
        ax.axvline(plan.goal.deadline_s / 60, color="grey", linestyle="--", label="deadline")
    ax.set_xlabel("predicted training time (min)")
    ax.set_ylabel("predicted cost (USD)")
    ax.set_title(f"{plan.workload} on {plan.catalog}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        replace_atomically(path, lambda partial: fig.savefig(partial, dpi=120, format="png"))
    finally:
        plt.close(fig)
