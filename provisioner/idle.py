"""What a deployed job bills by the hour while no run is going, until `cdk destroy`.

After a run the state machine stops the PS instances and closes the run's interface endpoints
(stacks/run_network.py), so their hours end with it. What stays is what exists whether or not
anything trains: the PS instances' root volumes (per GB-month, stopped or not) and the job's
secret (per secret-month), both prorated by the hour. Everything else the stacks create bills
per use (Lambda, Step Functions, S3 requests) or per GB stored (S3 objects, logs).
"""

from __future__ import annotations

from dataclasses import dataclass

from provisioner.catalog import Catalog
from provisioner.parse import format_usd
from provisioner.plan import Plan

HOURS_PER_MONTH = 730  # AWS's convention for monthly prices


@dataclass(frozen=True)
class IdleCost:
    """USD per hour between runs, item by item."""

    volumes_usd_per_hour: float
    secret_usd_per_hour: float

    @property
    def total_usd_per_hour(self) -> float:
        return self.volumes_usd_per_hour + self.secret_usd_per_hour


def idle_line(plan: Plan) -> str:
    """What synth and `provisioner plan` print about the time between runs."""
    if plan.sync == "s3":
        usd = format_usd(plan.idle_usd_per_hour)
        return f"{usd}/h until `cdk destroy` (S3 sync: no PS volumes, no secret)"
    endpoints = len(plan.interface_endpoints)
    closing = f"; the run's {endpoints} interface endpoints close with it" if endpoints else ""
    return (
        f"{format_usd(plan.idle_usd_per_hour)}/h until `cdk destroy` "
        f"({plan.ps_count * plan.ps_volume_gb} GB of PS volumes, 1 secret{closing})"
    )


def idle_cost(catalog: Catalog, *, ps_count: int, secret: bool = True) -> IdleCost:
    """The hourly bill of `ps_count` PS root volumes of the catalog's size and the job's one
    secret (none in an S3-sync plan: no PS to authenticate to), at the catalog's prices."""
    gb = ps_count * catalog.ps_root_volume_gb
    return IdleCost(
        volumes_usd_per_hour=gb * catalog.ebs_usd_per_gb_month / HOURS_PER_MONTH,
        secret_usd_per_hour=catalog.secret_usd_per_month / HOURS_PER_MONTH if secret else 0.0,
    )
