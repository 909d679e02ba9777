"""The run's VPC interface endpoints: opened when a run starts, closed when it ends.

Interface endpoints bill by the hour whether or not anything uses them (about $0.01 per endpoint
per AZ), so the stacks create none: a deployment between runs would bill about $58 a month for
plumbing. Each run opens the set the plan lists before it starts the PS and closes it when the
PS has stopped (the training state machine on success or a caught failure, the run-ended rule
otherwise, and `cdk destroy` for anything left). The S3 gateway endpoint is free and stays.

`handler(event, context)` with `action` "open" or "close":
- open: creates each listed service's endpoint that the VPC lacks (tagged with the job), then
  waits until every one is `available`, within the invocation's time. Safe to repeat: an
  endpoint a concurrent run already created is reused, not duplicated.
- close: deletes every endpoint tagged with the job in the VPC.
Both return `{"endpoints": [ids], "services": [names]}` so the state history shows what ran.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from functions import aws

LOG = logging.getLogger("functions.network")

JOB_TAG = "lambdadnn:job"  # the tag every endpoint of a job carries; IAM conditions use it
POLL_S = 10.0  # between two looks at endpoints still pending
MARGIN_S = 20.0  # of the invocation's remaining time, kept to fail with a clear message
GONE = ("deleting", "deleted", "rejected", "failed", "expired")


@dataclass(frozen=True)
class NetworkTask:
    """The event, parsed once."""

    action: str  # "open" | "close"
    job_id: str
    vpc_id: str
    subnet_ids: tuple[str, ...]
    security_group_id: str
    services: tuple[str, ...]  # short names: "logs", "ecr.api", …
    run_id: str = ""

    @staticmethod
    def parse(event: Mapping[str, Any]) -> NetworkTask:
        action = str(event.get("action", ""))
        if action not in ("open", "close"):
            raise ValueError(f"action {action!r} is not one of 'open', 'close'")
        return NetworkTask(
            action=action,
            job_id=str(event["job_id"]),
            vpc_id=str(event["vpc_id"]),
            subnet_ids=tuple(str(s) for s in event["subnet_ids"]),
            security_group_id=str(event["security_group_id"]),
            services=tuple(str(s) for s in event.get("services", ())),
            run_id=str(event.get("run_id", "")),
        )


def service_name(region: str, service: str) -> str:
    """AWS's endpoint service name of a short name: ("us-east-1", "logs") → com.amazonaws.…"""
    return f"com.amazonaws.{region}.{service}"


def job_endpoints(ec2: Any, task: NetworkTask) -> list[dict[str, Any]]:
    """The job's endpoints in its VPC that are not on their way out."""
    pages = ec2.get_paginator("describe_vpc_endpoints").paginate(
        Filters=[
            {"Name": "vpc-id", "Values": [task.vpc_id]},
            {"Name": f"tag:{JOB_TAG}", "Values": [task.job_id]},
        ]
    )
    return [
        e
        for page in pages
        for e in page["VpcEndpoints"]
        if str(e.get("State", "")).lower() not in GONE
    ]


def open_endpoints(ec2: Any, task: NetworkTask, region: str) -> list[dict[str, Any]]:
    """Create the listed endpoints the job lacks; return the job's endpoints (not yet waited)."""
    have = {e["ServiceName"] for e in job_endpoints(ec2, task)}
    for service in task.services:
        name = service_name(region, service)
        if name in have:
            continue
        LOG.info("creating the %s endpoint in %s", service, task.vpc_id)
        ec2.create_vpc_endpoint(
            VpcEndpointType="Interface",
            VpcId=task.vpc_id,
            ServiceName=name,
            SubnetIds=list(task.subnet_ids),
            SecurityGroupIds=[task.security_group_id],
            PrivateDnsEnabled=True,
            # Idempotent per run: a retried invocation does not create a second endpoint.
            ClientToken=f"{task.run_id or task.job_id}:{service}"[-64:],
            TagSpecifications=[
                {
                    "ResourceType": "vpc-endpoint",
                    "Tags": [
                        {"Key": JOB_TAG, "Value": task.job_id},
                        {"Key": "Name", "Value": f"{task.job_id}-{service}"},
                    ],
                }
            ],
        )
    return job_endpoints(ec2, task)


def wait_available(
    ec2: Any,
    task: NetworkTask,
    *,
    remaining_s: Callable[[], float | None],
    sleep: Callable[[float], None] = time.sleep,
) -> list[dict[str, Any]]:
    """Poll until every job endpoint is `available`; TimeoutError naming the pending ones
    (`remaining_s` gives None without a deadline)."""
    while True:
        endpoints = job_endpoints(ec2, task)
        pending = [e for e in endpoints if str(e.get("State", "")).lower() != "available"]
        if not pending:
            return endpoints
        left_s = remaining_s()
        if left_s is not None and left_s < POLL_S + MARGIN_S:
            names = ", ".join(f"{e['ServiceName']} ({e.get('State')})" for e in pending)
            raise TimeoutError(f"interface endpoints not available in time: {names}")
        sleep(POLL_S)


def close_endpoints(ec2: Any, task: NetworkTask) -> list[dict[str, Any]]:
    """Delete every endpoint of the job in its VPC; return what was deleted."""
    endpoints = job_endpoints(ec2, task)
    if endpoints:
        ec2.delete_vpc_endpoints(VpcEndpointIds=[e["VpcEndpointId"] for e in endpoints])
        LOG.info("deleted %d interface endpoints of job %s", len(endpoints), task.job_id)
    return endpoints


def _summary(endpoints: list[dict[str, Any]]) -> dict[str, list[str]]:
    return {
        "endpoints": sorted(e["VpcEndpointId"] for e in endpoints),
        "services": sorted(e["ServiceName"] for e in endpoints),
    }


def handler(event: Mapping[str, Any], context: Any) -> dict[str, list[str]]:
    """Lambda entry point (outside the VPC: it calls the EC2 API, not the PS)."""
    import boto3  # the Lambda runtime has it; imported here so parsing needs nothing

    logging.basicConfig(level=logging.INFO)
    task = NetworkTask.parse(event)
    ec2 = boto3.client("ec2")
    if task.action == "close":
        return _summary(close_endpoints(ec2, task))
    open_endpoints(ec2, task, ec2.meta.region_name)
    return _summary(wait_available(ec2, task, remaining_s=lambda: aws.remaining_s(context)))
