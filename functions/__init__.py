"""The training runtime: the code that runs in AWS Lambda (workers) and on the PS instances.

Modules: `task` (the worker event as a frozen dataclass), `wire` (binary framing + handshake),
`ps` (one parameter-server shard, `python -m functions.ps`), `ps_client` (push/pull with
deadlines), `worker` (the Lambda handler), `zoo` (models), `datasets` (shards in S3),
`finalize` (assemble the trained model), `aws` (S3 client and secrets).
This package never imports aws_cdk.
"""
