"""Names the emulator gives to the resources the stacks would create for a job.

In AWS the buckets get CloudFormation-generated names; locally we pick stable, valid ones
(3–63 characters, lower case, digits, dots, hyphens). Prefixes come from `stacks.events`, the
same functions the stacks use, so the keys inside the buckets match the AWS path.
"""

from __future__ import annotations

import re

SECRET_ENV = "LAMBDA_DNN_PS_SECRET"  # the worker event's secret_ref is f"env:{SECRET_ENV}"


def bucket_name(job: str, purpose: str) -> str:
    """A valid S3 bucket name `<job>-<purpose>` (lower-cased, invalid characters → '-')."""
    raw = f"{job}-{purpose}".lower()
    name = re.sub(r"[^a-z0-9.-]", "-", raw).strip("-.")
    if len(name) < 3:
        name = f"{name}-bucket"
    return name[:63].rstrip("-.")
