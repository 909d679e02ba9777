"""Local emulator: runs a synthesized plan (cdk.out/plan.json) on one machine.

A real S3-compatible server on 127.0.0.1, the PS shards as processes with the EC2 entry point,
and n worker processes running the Lambda handler under a countdown context and a CPU share.
`python -m emulator cdk.out/plan.json --invocation-limit 60s` is the entry point.
"""
