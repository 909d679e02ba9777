"""Data stack: the job's buckets (see stacks/data.py)."""

from __future__ import annotations

from aws_cdk import CfnOutput, Environment, Stack
from constructs import Construct

from stacks.context import DatasetSource
from stacks.data import DataBuckets, DataLayout


class DataStack(Stack):
    """Attributes: `buckets`."""

    def __init__(self, scope: Construct, construct_id: str, *, layout: DataLayout,
                 dataset: DatasetSource, description: str, env: Environment | None = None,
                 exchange_prefix: str | None = None,
                 boundary_prefix: str | None = None) -> None:  # fmt: skip
        super().__init__(scope, construct_id, description=description, env=env)
        self.buckets = DataBuckets(self, "Buckets", layout=layout, dataset=dataset,
                                   exchange_prefix=exchange_prefix,
                                   boundary_prefix=boundary_prefix)  # fmt: skip
        CfnOutput(self, "ArtifactsBucket", value=self.buckets.artifacts_bucket.bucket_name,
                  description="Checkpoints, final model and run report")  # fmt: skip
        CfnOutput(self, "DatasetBucket", value=self.buckets.dataset_bucket.bucket_name,
                  description="Dataset shards (and the uploaded local dataset)")  # fmt: skip
