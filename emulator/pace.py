"""The pace step of a run that re-plans, on this machine: `functions.pace.handler` called in the
emulator's process with the run's local S3, on the run's clock, with the figures of the platform
the run emulates (the bundle's catalog under the run's rules and cpu scale: local_bundle).

The definition's PaceCheck passes the pace function the execution's start and the state's
entered time; the handler reads the elapsed time as their difference. Here the elapsed time is
the training clock's (from the first worker's launch, as the report measures the total against
the deadline): the emulator's prepare step and PS start are not part of the plan's prediction
(its set-up is 0 on the local catalog), and on the execution's clock they would count against
the deadline as if they were. A test may fix what a check sees (`Options.pace_hook`: its clock,
the records it reads), so the check decides the same whatever the machine's speed.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import math
import os
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from emulator.lambda_context import CountdownContext

PACE_HANDLER = "functions.pace:handler"  # the PaceFunction's handler (stacks: PaceFunction)
PACE_LIMIT_S = 60.0  # the pace function's timeout (the contract's)
_ENV_LOCK = threading.Lock()


def iso_after(start_iso: str, seconds: float) -> str:
    """The ISO-8601 time `seconds` after `start_iso` (Step Functions' form, a trailing Z)."""
    start = datetime.datetime.fromisoformat(start_iso.replace("Z", "+00:00"))
    later = start + datetime.timedelta(seconds=seconds)
    return later.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")


def run_catalog_document(
    doc: dict[str, Any], *, cpu_scale: float, limit_s: float, margin_s: float
) -> dict[str, Any]:
    """The bundle's catalog (the plan's catalog file) as this run emulates it: the run's
    invocation limit and safety margin, and on the local platform (a catalog that caps the
    workers' cores) its cores in vCPU at the run's scale. One vCPU is `cpu_scale` cores here,
    so the cores the workers share hold 1 / cpu_scale times the vCPU the file says: at scale
    0.5 two functions of 1,769 MB fit in one core, and a re-plan may take them. The slower
    vCPU itself is not changed here: the pace check measures it."""
    out = copy.deepcopy(doc)
    lam = out["lambda"]
    timeout_s = math.ceil(limit_s)  # the catalog's timeout is whole seconds (planner.run_catalog)
    lam["invocation_timeout_s"] = {**lam["invocation_timeout_s"], "value": timeout_s}
    margin = margin_s + (timeout_s - limit_s)
    lam["safety_margin_s"] = {**lam["safety_margin_s"], "value": margin}
    for key in ("total_vcpu", "compute_cores"):  # the shared cores, in vCPU at this scale
        if key in lam:
            lam[key] = {**lam[key], "value": float(lam[key]["value"]) / cpu_scale}
    return out


def local_bundle(
    event: dict[str, Any],
    *,
    cpu_scale: float,
    limit_s: float,
    margin_s: float,
    profile: dict[str, Any] | None,
    plan: dict[str, Any],
) -> dict[str, Any]:
    """The pace event with its bundle as this run emulates the plan: the plan as given (the
    synth ran it with a stand-in for the local PS type, which no EC2 type is), the catalog under
    the run's rules and scale (run_catalog_document) and the run's profile (`--workload`: the one
    the plan was made from, e.g. a reading of this host), where they differ from the synth's."""
    bundle = {**(event.get("bundle") or {}), "plan": plan}
    if "catalog" in bundle:
        bundle["catalog"] = run_catalog_document(
            bundle["catalog"], cpu_scale=cpu_scale, limit_s=limit_s, margin_s=margin_s
        )
    if profile is not None:
        bundle["profile"] = profile
    return {**event, "bundle": bundle}


def on_training_clock(event: dict[str, Any], elapsed_s: float) -> dict[str, Any]:
    """The pace event with `now` set `elapsed_s` after the run's start, so the handler's elapsed
    time (now − run_started) is the training clock's."""
    return {**event, "now": iso_after(str(event["run_started"]), max(0.0, elapsed_s))}


@contextlib.contextmanager
def s3_environment(env: Mapping[str, str]) -> Iterator[None]:
    """This process's environment holds the run's S3 endpoint and credentials (the `AWS_`
    variables every child of the run gets) while the block runs: the handler builds its client
    from the environment, as functions/aws.py does in a Lambda function."""
    wanted = {k: v for k, v in env.items() if k.startswith("AWS_")}
    with _ENV_LOCK:
        saved = {k: os.environ.get(k) for k in wanted}
        os.environ.update(wanted)
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def run_pace(event: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """One pace check: the handler's new `$.pace` (it writes its decision record to S3)."""
    from functions import pace  # the pace function's module: imported by a run that re-plans

    with s3_environment(env):
        result: dict[str, Any] = pace.handler(
            event, CountdownContext(limit_s=PACE_LIMIT_S, function_name="pace")
        )
    return result


def pace_note(before: Mapping[str, Any], after: Mapping[str, Any]) -> str | None:
    """What the progress line says when a check switched the run's configuration; None when
    it kept it (or the run is done)."""
    if after.get("done") or int(after.get("switches", 0)) <= int(before.get("switches", 0)):
        return None
    return (
        f"re-plan at link {after.get('invocation')}: {before.get('n_workers')} × "
        f"{before.get('memory_mb')} MB → {after.get('n_workers')} × {after.get('memory_mb')} MB "
        f"from iteration {after.get('start_iteration')}"
    )


def segment_cap(event: dict[str, Any], rules: dict[str, Any]) -> int:
    """A re-planning run's iterations per link: the segment's own (its plan keeps the pace
    checks often enough) held to the emulator's cap where one is set (0: none)."""
    own = int(event.get("iterations_per_invocation") or 0)
    cap = int(rules.get("iterations_per_invocation") or 0)
    return min(own, cap) if own and cap else own or cap
