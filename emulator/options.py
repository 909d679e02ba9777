"""How to emulate a plan: the `Options` of a run and the settings every part of the run shares
(the handlers the local Lambda steps run, the poll interval, the step limit, the local catalog).

The plan says what to run; these say how this machine runs it. Nothing here starts anything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provisioner.runaway import LINK_RETRIES
from stacks import events

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKER_HANDLER = "functions.worker:handler"
PREPARE_HANDLER = "functions.datasets:prepare_handler"
FINALIZE_HANDLER = "functions.finalize:handler"
STEP_LIMIT_S = 900.0  # prepare and finalize run as ordinary Lambda invocations
POLL_INTERVAL_S = 0.2
LOCAL_CATALOG = "local"  # catalog/local.json, written per machine by `make calibrate`
NO_LOCAL_CATALOG = "no local catalog: run `make calibrate`"


@dataclass(frozen=True)
class Options:
    """How to emulate (the plan says what to run)."""

    invocation_limit_s: float = 60.0
    cpu_scale: float | None = None  # local cores per Lambda vCPU; None = fit the machine
    out_dir: Path | None = None  # default runs/<job>
    s3: str = "weed"
    max_attempts: int = 1 + LINK_RETRIES  # per invocation: the first try and the retries
    safety_margin_s: float | None = None  # default: a quarter of the limit, at most 30 s
    run_timeout_s: float | None = None  # whole-run deadline; default from the plan
    worker_handler: str = WORKER_HANDLER
    status_poll_s: float = 2.0
    quiet: bool = False
    kill_grace_s: float = 10.0  # past the limit before a silent invocation is killed
    print_report: bool = True
    warm: bool = True  # reuse a worker's environment for its next link, as Lambda often does
    # End each invocation after this many iterations too (0: only the limit): re-invocation at a
    # chosen iteration whatever the machine's speed (tests, `--iterations-per-invocation`).
    iterations_per_invocation: int = 0
    ps_secret: str | None = None  # the PS handshake and checkpoint HMAC key; default: fresh per run
    # The plan's profile (a name in profiles/ or a path) for the report's predictions; default:
    # the plan's workload name (a profile written elsewhere, e.g. a user's, needs its path).
    workload: str | None = None
    # The catalog the report predicts this machine on (a name in catalog/ or a path): a
    # benchmark round that read some of its figures again (bench.predict) passes its own.
    local_catalog: str = LOCAL_CATALOG
    # The most MB one function may hold here (`--memory-ceiling`): a plan with a function above
    # it is refused before anything starts (records.check_memory_ceiling). None: no ceiling.
    memory_ceiling_mb: int | None = None
    # Re-plan at link boundaries when the plan carries `replan` (False: `--no-replan`, the plan
    # run as it is: its `replan` dropped before the definition is synthesized).
    replan: bool = True
    # Tests only: called with each pace check's event just before the pace function gets it
    # (the event returned is the one it gets), so a test fixes what a check sees (its clock, the
    # link records it reads) and the check decides the same whatever the machine's speed.
    pace_hook: Callable[[dict[str, Any]], dict[str, Any]] | None = None


def default_safety_margin_s(limit_s: float) -> float:
    """Stop a quarter of the limit early (at most the AWS default of 30 s): room to checkpoint."""
    return min(events.SAFETY_MARGIN_S, 0.25 * limit_s)
