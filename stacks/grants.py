"""Least-privilege S3 access by key prefix, with exact action names and named resources.

CDK's `bucket.grant_read_write` adds wildcard actions (`s3:GetObject*`, `s3:List*`, ...) that
cdk-nag rightly flags; these statements name each action and scope objects to one prefix, so the
only wildcard left is the object key under that prefix, which the runtime chooses. Keys the
runtime does not choose (the final model and report) are granted by their exact names.
"""

from __future__ import annotations

from collections.abc import Sequence
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


def prefix_access(bucket: BucketRef, prefix: str, *, write: bool, delete: bool = False,
                  read: bool = True) -> list[iam.PolicyStatement]:  # fmt: skip
    """Read (GetObject, and ListBucket of that prefix only), write (PutObject), delete the objects
    under `prefix/`, each only if asked.

    Listing stays with reading: without s3:ListBucket a missing key answers 403 instead of 404, and
    a reader could not tell "not prepared yet" from "not allowed". The runtime writes with a single
    PutObject (no multipart upload), so no s3:AbortMultipartUpload.
    """
    objects = [f"{bucket.arn}/{prefix}/*"] if prefix else [f"{bucket.arn}/*"]
    actions = (["s3:GetObject"] if read else []) + (["s3:PutObject"] if write else [])
    actions += ["s3:DeleteObject"] if delete else []
    listing = {"StringLike": {"s3:prefix": [f"{prefix}/*", prefix]}} if prefix else None
    statements = [iam.PolicyStatement(actions=actions, resources=objects)]
    if read:
        listing_statement = iam.PolicyStatement(
            actions=["s3:ListBucket"], resources=[bucket.arn], conditions=listing
        )
        statements.append(listing_statement)
    return statements


def put_exact_objects(bucket: BucketRef, keys: Sequence[str]) -> iam.PolicyStatement:
    """PutObject on exactly these keys: no wildcard, so nothing for cdk-nag to acknowledge."""
    objects = [f"{bucket.arn}/{key}" for key in keys]
    return iam.PolicyStatement(actions=["s3:PutObject"], resources=objects)


def read_secret_value(secret_arn: str) -> iam.PolicyStatement:
    """The one call the runtime makes on the shared secret (`functions/aws.py`): no Describe."""
    return iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"], resources=[secret_arn])


def grant_prefix(principal: iam.IGrantable, owner: IConstruct, bucket: BucketRef, prefix: str,
                 *, write: bool, reason: str, delete: bool = False,
                 read: bool = True) -> None:  # fmt: skip
    """Add `prefix_access` to `principal` and acknowledge its one key wildcard on `owner`."""
    for statement in prefix_access(bucket, prefix, write=write, delete=delete, read=read):
        principal.grant_principal.add_to_principal_policy(statement)
    key = f"{prefix}/*" if prefix else "*"
    acknowledge(
        owner,
        rule=f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::{bucket.nag_name}/{key}]",
        reason=reason,
    )


def grant_s3_sync(principal: iam.IGrantable, owner: IConstruct, artifacts: BucketRef, *,
                  checkpoints: str, exchange: str) -> None:  # fmt: skip
    """An S3-sync worker's own access beyond its link records: its reducers' checkpoints (no PS
    writes them; a run whose exchange objects expired resumes from them, and each reducer
    prunes its older ones), and read, write and delete of the partitions under `exchange`."""
    grant_prefix(principal, owner, artifacts, checkpoints, write=True, delete=True,
                 reason="Writes, reads back and prunes its reducers' checkpoints (no PS here); "
                 "run id and iteration are in the key.")  # fmt: skip
    grant_prefix(
        principal,
        owner,
        artifacts,
        exchange,
        write=True,
        delete=True,
        reason="Exchanges gradient partitions with the other workers; run id, "
        "iteration and rank are in the key; it deletes them as the exchange goes.",
    )
