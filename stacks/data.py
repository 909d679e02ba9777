"""Buckets: the dataset (ours; a user's `s3://` source is imported read-only and never deleted),
artifacts, access logs.

Every bucket we create is encrypted (S3-managed keys), TLS-only, private, logs its access to the
log bucket, and goes away with `cdk destroy` (objects included). Shards always land in our own
dataset bucket, so a user's bucket is only ever read.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3_deployment
from constructs import Construct, IConstruct

from stacks.context import LOCAL_SOURCE_PREFIX, DatasetSource
from stacks.grants import BucketRef, grant_prefix, job_bucket
from stacks.nag import acknowledge, logical_id


@dataclass(frozen=True)
class DataLayout:
    """Where the job's data lives, by name, so every stack can refer to it without exports.

    `source` is what the prepare step reads (`functions.datasets.load_source`);
    `source_bucket`/`source_prefix` is the S3 location behind it (None for generated data).
    """

    dataset: BucketRef
    artifacts: BucketRef
    source: str
    source_bucket: BucketRef | None
    source_prefix: str


def data_layout(job: str, dataset: DatasetSource) -> DataLayout:
    """The layout for a job and its dataset source."""
    ours, artifacts = job_bucket(job, "dataset"), job_bucket(job, "artifacts")
    if dataset.kind == "s3":
        user = BucketRef(name=dataset.bucket, nag_name=dataset.bucket)
        return DataLayout(ours, artifacts, dataset.spec, user, dataset.prefix)
    if dataset.kind == "local":
        source = f"s3://{ours.name}/{LOCAL_SOURCE_PREFIX}{dataset.source_suffix}"
        return DataLayout(ours, artifacts, source, ours, LOCAL_SOURCE_PREFIX)
    return DataLayout(ours, artifacts, dataset.spec, None, "")


# Old versions (a pruned checkpoint, an overwritten model) stay a week for recovery, then go.
ARTIFACTS_LIFECYCLE = s3.LifecycleRule(
    id="ExpireSupersededVersions",
    noncurrent_version_expiration=Duration.days(7),
    expired_object_delete_marker=True,
    abort_incomplete_multipart_upload_after=Duration.days(1),
)


def exchange_lifecycle(prefix: str) -> s3.LifecycleRule:
    """An S3-sync plan's exchange objects go after a day, superseded versions too: the runtime
    deletes them as it goes, and this is the backstop for a run cut off mid-iteration."""
    return s3.LifecycleRule(
        id="ExpireExchange",
        prefix=f"{prefix}/",
        expiration=Duration.days(1),
        noncurrent_version_expiration=Duration.days(1),
    )


def boundary_lifecycle(prefix: str) -> s3.LifecycleRule:
    """A pipelined plan's boundary objects (activations and their gradients) go after a day:
    each reader deletes what it read, and this is the backstop for a run cut off mid-iteration."""
    return s3.LifecycleRule(
        id="ExpireBoundary",
        prefix=f"{prefix}/",
        expiration=Duration.days(1),
        noncurrent_version_expiration=Duration.days(1),
    )


def grant_prepare(principal: iam.IGrantable, owner: IConstruct, layout: DataLayout,
                  shards: str, *, reason: str) -> None:  # fmt: skip
    """The prepare step writes the shards and manifest under `shards` and reads nothing back,
    and reads the user's dataset objects when the source is an S3 prefix."""
    grant_prefix(principal, owner, layout.dataset, shards, read=False, write=True, reason=reason)
    if layout.source_bucket is not None:
        grant_prefix(principal, owner, layout.source_bucket, layout.source_prefix, write=False,
                     reason="Reads the user's dataset objects under the given prefix.")  # fmt: skip


def _bucket(scope: Construct, construct_id: str, **kwargs: object) -> s3.Bucket:
    """A private, encrypted, TLS-only bucket that `cdk destroy` empties and removes."""
    return s3.Bucket(
        scope,
        construct_id,
        encryption=s3.BucketEncryption.S3_MANAGED,
        enforce_ssl=True,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        removal_policy=RemovalPolicy.DESTROY,
        auto_delete_objects=True,
        **kwargs,  # type: ignore[arg-type]  # per-bucket extras: name, logging, versioning
    )


class DataBuckets(Construct):
    """Attributes: `dataset_bucket`, `artifacts_bucket`, `access_logs_bucket`, `upload`.

    `exchange_prefix`: an S3-sync plan's exchange prefix in the artifacts bucket, which gets its
    own expiry (`exchange_lifecycle`); None for a PS plan (and a profiling run). A pipelined
    plan's stages exchange under it too. `boundary_prefix`: a pipelined plan's boundary objects,
    which expire likewise (`boundary_lifecycle`); None for a one-stage plan.
    """

    def __init__(self, scope: Construct, construct_id: str, *, layout: DataLayout,
                 dataset: DatasetSource, exchange_prefix: str | None = None,
                 boundary_prefix: str | None = None) -> None:  # fmt: skip
        super().__init__(scope, construct_id)
        self.access_logs_bucket = _bucket(self, "AccessLogs")
        acknowledge(
            self.access_logs_bucket,
            rule="AwsSolutions-S1",
            reason="This is the access-log bucket; logging it to itself would loop.",
        )
        logs = {"server_access_logs_bucket": self.access_logs_bucket}
        self.dataset_bucket = _bucket(
            self, "Dataset", bucket_name=layout.dataset.name,
            server_access_logs_prefix="dataset/", **logs,
        )  # fmt: skip
        # Versioning where it helps: checkpoints and the final model survive an overwrite by a
        # faulty retry; the dataset is re-creatable from its source, so it stays unversioned.
        # The PS deletes superseded checkpoints as it goes; the lifecycle rule makes that free
        # storage for real (a deleted version stays billable until it expires).
        self.artifacts_bucket = _bucket(
            self, "Artifacts", bucket_name=layout.artifacts.name, versioned=True,
            server_access_logs_prefix="artifacts/", lifecycle_rules=[
                ARTIFACTS_LIFECYCLE,
                *([exchange_lifecycle(exchange_prefix)] if exchange_prefix else []),
                *([boundary_lifecycle(boundary_prefix)] if boundary_prefix else []),
            ],
            **logs,
        )  # fmt: skip
        self.upload: s3_deployment.BucketDeployment | None = None
        if dataset.kind == "local":
            self.upload = s3_deployment.BucketDeployment(
                self, "UploadLocalDataset",
                sources=[s3_deployment.Source.asset(dataset.path)],
                destination_bucket=self.dataset_bucket,
                destination_key_prefix=LOCAL_SOURCE_PREFIX,
            )  # fmt: skip
            _acknowledge_upload_helper(Stack.of(self), self.dataset_bucket)


# CDK's BucketDeployment runs a singleton Lambda of its own; these are its findings.
_UPLOAD_HELPER_FINDINGS = (
    ("AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
     "AWSLambdaBasicExecutionRole]", "CDK's upload helper writes only its own logs."),
    *((f"AwsSolutions-IAM5[Action::s3:{action}]",
       "CDK's upload helper: copy the local dataset asset into our dataset bucket.")
      for action in ("Abort*", "DeleteObject*", "GetBucket*", "GetObject*", "List*")),
    ("AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::"
     "cdk-hnb659fds-assets-<AWS::AccountId>-<AWS::Region>/*]",
     "CDK's upload helper reads the staged asset from the bootstrap asset bucket."),
    ("AwsSolutions-L1", "CDK pins the upload helper's runtime; it runs once at deploy."),
)  # fmt: skip


def _acknowledge_upload_helper(stack: Stack, dataset_bucket: s3.Bucket) -> None:
    """Acknowledge the helper's findings on the helper only (found by its CDK id prefix)."""
    helpers = [c for c in stack.node.children if c.node.id.startswith("Custom::CDKBucketDeploy")]
    for helper in helpers:
        for rule, reason in _UPLOAD_HELPER_FINDINGS:
            acknowledge(helper, rule=rule, reason=reason)
        acknowledge(
            helper,
            rule=f"AwsSolutions-IAM5[Resource::<{logical_id(dataset_bucket)}.Arn>/*]",
            reason="CDK's upload helper writes the local dataset into our dataset bucket.",
        )
