"""λDNN provisioner: catalog and profile loaders, performance model, exact planner.

A pure library (standard library + numpy): importing it never pulls in aws_cdk, boto3 or torch.
"""

from provisioner.catalog import Catalog, PsType, load_catalog
from provisioner.parse import (
    format_duration_s,
    format_usd,
    parse_duration_s,
    parse_slack,
    parse_usd,
)
from provisioner.plan import CostBreakdown, Goal, Plan, Prediction, TrainingSpec
from provisioner.planner import FrontierPoint, Infeasible, Limits, PlanResult, plan_job
from provisioner.profile import WorkloadProfile, check_dataset, load_profile

__all__ = [
    "Catalog",
    "CostBreakdown",
    "FrontierPoint",
    "Goal",
    "Infeasible",
    "Limits",
    "Plan",
    "PlanResult",
    "Prediction",
    "PsType",
    "TrainingSpec",
    "WorkloadProfile",
    "check_dataset",
    "format_duration_s",
    "format_usd",
    "load_catalog",
    "load_profile",
    "parse_duration_s",
    "parse_slack",
    "parse_usd",
    "plan_job",
]
