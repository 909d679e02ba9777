"""What stops a run that goes wrong, derived from the plan, and what it can cost at most.

A worker link that ends without advancing (a time limit hit before the first step, a PS that
keeps timing out) would otherwise be re-invoked forever at up to 15 minutes of Lambda each. The
state machine therefore fails the second link in a row that does not advance `start_iteration`
(the first is re-invoked: a cold link may spend its budget starting), caps the links of each
worker (stalled ones included), and the execution has a timeout: every bound below is one the
stacks enforce, and `worst_case_usd` is what a run costs if it hits them.
"""

from __future__ import annotations

import math

import numpy as np

from provisioner import costs
from provisioner.catalog import Catalog
from provisioner.parse import format_duration_s, format_usd
from provisioner.plan import CostBreakdown, Plan

LINK_RETRIES = 2  # a failed link is retried this often (Step Functions Retry, the emulator too)
LINK_FACTOR = 3  # links a worker may take: three times the plan's, ...
LINK_SLACK = 2  # ... plus two (a plan of one link may take five)
TIME_FACTOR = 3  # the execution may take three times the predicted training time, ...
TASK_MARGIN_S = 120  # a Lambda task waits this much longer than the function's own timeout
HELPER_TIMEOUT_S = 900  # the helper steps' limit (Lambda's maximum): once per run, unmodelled
# ... plus the helper steps at their limit: open the endpoints, wait for the PS (retried once),
# prepare, finalize, close the endpoints (stacks/orchestration.py).
HELPER_STEPS = 6


def max_links(planned_links: int) -> int:
    """Links one worker may run before the run fails as runaway."""
    return LINK_FACTOR * planned_links + LINK_SLACK


def execution_timeout_s(predicted_s: float) -> int:
    """The state machine's timeout: three times the predicted training, plus the helper steps
    at their limit. A run that reaches it is stopped, and so are its PS instances
    (stacks/orchestration.py: a rule on the execution's end)."""
    return math.ceil(TIME_FACTOR * predicted_s) + HELPER_STEPS * (HELPER_TIMEOUT_S + TASK_MARGIN_S)


def plan_bounds(plan: Plan) -> tuple[int, int]:
    """(links per worker, execution timeout s) the stacks enforce for `plan`; a plan written
    before the plan carried them gets them derived the same way."""
    links = plan.max_links_per_worker or max_links(plan.invocations_per_worker)
    return links, plan.execution_timeout_s or execution_timeout_s(plan.prediction.total_s)


def bounds_line(plan: Plan) -> str:
    """The plan's bounds in one line, as synth and `provisioner plan` print them."""
    return (
        f"links must advance (one stall is retried); at most {plan.max_links_per_worker} links "
        f"per worker; execution timeout {format_duration_s(plan.execution_timeout_s)}; "
        f"worst case {format_usd(plan.worst_case_usd)}"
    )


def worst_case_usd(
    catalog: Catalog,
    cost: CostBreakdown,
    *,
    n_workers: int,
    ps_type: str,
    ps_count: int,
    billed_s: float,
    planned_links: int,
    timeout_s: int,
) -> float:
    """The cost of a run that runs into its bounds, with the model's own cost items: every
    worker billed for the whole execution timeout, the PS shards and endpoints for as long,
    every allowed link invoked, and S3 requests as many times more as the time allows.
    (Lambda GB-seconds and /tmp are linear in the billed time; the plan's `billed_s` is one
    worker's predicted billed time.)"""
    longer = max(1.0, timeout_s / max(billed_s, 1e-9))
    # The model's items take arrays (cells); here each is one value.
    n, shards, t, links = (np.asarray(v) for v in (n_workers, ps_count, timeout_s,
                                                   max_links(planned_links)))  # fmt: skip
    # an S3-sync plan (no shard) has no PS and opens no endpoints
    hourly = np.asarray(catalog.ps_type(ps_type).usd_per_hour if ps_count else 0.0)
    endpoints = len(catalog.interface_endpoints) if ps_count else 0
    return float(
        (cost.lambda_compute_usd + cost.ephemeral_storage_usd) * longer
        + costs.ps_usd(hourly, shards, t, catalog.ps_min_billed_s)
        + costs.endpoints_usd(catalog.endpoint_usd_per_hour, endpoints, t)
        + costs.requests_usd(catalog.usd_per_request, n, links)
        + costs.step_functions_usd(catalog.sfn_usd_per_transition, catalog.sfn_fixed_transitions,
                                   catalog.sfn_transitions_per_invocation, n, links)
        + (cost.s3_requests_usd + cost.s3_exchange_usd) * longer
    )  # fmt: skip
