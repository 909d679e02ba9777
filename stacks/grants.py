"""Least-privilege S3 access by key prefix, with exact action names and named resources.

CDK's `bucket.grant_read_write` adds wildcard actions (`s3:GetObject*`, `s3:List*`, ...) that
cdk-nag rightly flags; these statements name each action and scope objects to one prefix, so the
only wildcard left is the object key under that prefix, which the runtime chooses.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Aws
from aws_cdk import aws_iam as iam
from constructs import IConstruct

from stacks.nag import acknowledge


@dataclass(frozen=True)
class BucketRef:
    """A bucket by name: `name` may hold the account token; `nag_name` is how cdk-nag prints it."""

    name: str
    nag_name: str

    @property
    def arn(self) -> str:
        return f"arn:{Aws.PARTITION}:s3:::{self.name}"


def job_bucket(job: str, purpose: str) -> BucketRef:
    """Our buckets are named `<job>-<purpose>-<account>` so every stack can name them.

    Naming them (instead of passing a bucket object) keeps cross-stack exports out of IAM
    policies and makes the results location readable. At most 32 + 10 + 12 + 2 < 63 characters.
    """
    stem = f"{job.lower()}-{purpose}"
    return BucketRef(name=f"{stem}-{Aws.ACCOUNT_ID}", nag_name=f"{stem}-<AWS::AccountId>")


def prefix_access(bucket: BucketRef, prefix: str, *, write: bool,
                  delete: bool = False) -> list[iam.PolicyStatement]:  # fmt: skip
    """Read (optionally write, delete) the objects under `prefix/`, and list only that prefix."""
    objects = [f"{bucket.arn}/{prefix}/*"] if prefix else [f"{bucket.arn}/*"]
    actions = ["s3:GetObject"] + (["s3:PutObject", "s3:AbortMultipartUpload"] if write else [])
    actions += ["s3:DeleteObject"] if delete else []
    listing = {"StringLike": {"s3:prefix": [f"{prefix}/*", prefix]}} if prefix else None
    return [
        iam.PolicyStatement(actions=actions, resources=objects),
        iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket.arn], conditions=listing),
    ]


def grant_prefix(principal: iam.IGrantable, owner: IConstruct, bucket: BucketRef, prefix: str,
                 *, write: bool, reason: str, delete: bool = False) -> None:  # fmt: skip
    """Add `prefix_access` to `principal` and acknowledge its one key wildcard on `owner`."""
    for statement in prefix_access(bucket, prefix, write=write, delete=delete):
        principal.grant_principal.add_to_principal_policy(statement)
    key = f"{prefix}/*" if prefix else "*"
    acknowledge(
        owner,
        rule=f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::{bucket.nag_name}/{key}]",
        reason=reason,
    )
