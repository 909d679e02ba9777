"""The run's interface endpoints (functions/network.py) against moto's EC2: open creates what
the job lacks and waits for it, a repeat or a concurrent run reuses, close deletes only the job's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from functions import network
from functions.network import JOB_TAG, NetworkTask

REGION = "us-east-1"
SERVICES = ["logs", "secretsmanager", "ecr.api"]


@pytest.fixture
def ec2(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)  # the handler's client: Lambda sets it
    with mock_aws():
        yield boto3.client("ec2", region_name=REGION)


def _event(ec2: Any, action: str, job: str = "job-a", **extra: Any) -> dict[str, Any]:
    vpc = ec2.describe_vpcs(Filters=[{"Name": "tag:test", "Values": ["training"]}])["Vpcs"]
    if vpc:
        vpc_id = vpc[0]["VpcId"]
        subnet = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])
        subnet_id = subnet["Subnets"][0]["SubnetId"]
        group = ec2.describe_security_groups(
            Filters=[
                {"Name": "vpc-id", "Values": [vpc_id]},
                {"Name": "group-name", "Values": ["endpoints"]},
            ]
        )["SecurityGroups"][0]["GroupId"]
    else:
        vpc_id = ec2.create_vpc(
            CidrBlock="10.42.0.0/16",
            TagSpecifications=[
                {"ResourceType": "vpc", "Tags": [{"Key": "test", "Value": "training"}]}
            ],
        )["Vpc"]["VpcId"]
        subnet_id = ec2.create_subnet(VpcId=vpc_id, CidrBlock="10.42.0.0/20")["Subnet"]["SubnetId"]
        group = ec2.create_security_group(
            GroupName="endpoints", Description="endpoints", VpcId=vpc_id
        )["GroupId"]
    return {
        "action": action,
        "job_id": job,
        "vpc_id": vpc_id,
        "subnet_ids": [subnet_id],
        "security_group_id": group,
        "services": SERVICES,
        "run_id": "run-1",
        **extra,
    }


def _live(ec2: Any, job: str | None = None) -> list[dict[str, Any]]:
    endpoints = ec2.describe_vpc_endpoints()["VpcEndpoints"]
    live = [e for e in endpoints if e["State"].lower() not in network.GONE]
    if job is None:
        return live
    return [e for e in live if {"Key": JOB_TAG, "Value": job} in e.get("Tags", [])]


class _Context:
    def get_remaining_time_in_millis(self) -> int:
        return 600_000


def test_open_creates_each_listed_endpoint_once_tagged_with_the_job(ec2: Any) -> None:
    out = network.handler(_event(ec2, "open"), _Context())
    live = _live(ec2, "job-a")
    assert sorted(e["ServiceName"] for e in live) == sorted(
        f"com.amazonaws.{REGION}.{s}" for s in SERVICES
    )
    assert out["services"] == sorted(e["ServiceName"] for e in live)
    assert all(e["VpcEndpointType"] == "Interface" and e["PrivateDnsEnabled"] for e in live)
    # A retried invocation or a second run that starts before the first has closed reuses them.
    network.handler(_event(ec2, "open", run_id="run-2"), _Context())
    assert len(_live(ec2, "job-a")) == len(SERVICES)


def test_close_deletes_the_jobs_endpoints_and_nothing_else(ec2: Any) -> None:
    network.handler(_event(ec2, "open"), _Context())
    network.handler(_event(ec2, "open", job="job-b"), _Context())
    out = network.handler(_event(ec2, "close"), None)
    assert len(out["endpoints"]) == len(SERVICES)
    assert _live(ec2, "job-a") == []
    assert len(_live(ec2, "job-b")) == len(SERVICES)
    # Closing twice (the run's own close, then the run-ended rule's) is harmless.
    assert network.handler(_event(ec2, "close"), None) == {"endpoints": [], "services": []}


def test_open_adds_only_what_is_missing(ec2: Any) -> None:
    network.handler(_event(ec2, "open", services=["logs"]), _Context())
    first = _live(ec2, "job-a")
    network.handler(_event(ec2, "open"), _Context())
    after = _live(ec2, "job-a")
    assert first[0]["VpcEndpointId"] in {e["VpcEndpointId"] for e in after}
    assert len(after) == len(SERVICES)


def test_waiting_ends_with_the_pending_endpoints_named_when_time_runs_out() -> None:
    task = NetworkTask.parse(
        {
            "action": "open",
            "job_id": "j",
            "vpc_id": "vpc-1",
            "subnet_ids": ["s"],
            "security_group_id": "sg",
        }
    )

    class Pending:
        def get_paginator(self, _name: str) -> Any:
            page = {
                "VpcEndpoints": [
                    {
                        "ServiceName": "com.amazonaws.r.logs",
                        "State": "pending",
                        "VpcEndpointId": "vpce-1",
                    }
                ]
            }
            return type("P", (), {"paginate": lambda self, **_: [page]})()

    clock = iter([600.0, 300.0, 25.0])
    slept: list[float] = []
    with pytest.raises(TimeoutError, match=r"com\.amazonaws\.r\.logs \(pending\)"):
        network.wait_available(Pending(), task, remaining_s=lambda: next(clock), sleep=slept.append)
    assert slept == [network.POLL_S, network.POLL_S]


def test_an_unknown_action_is_named() -> None:
    with pytest.raises(ValueError, match="action 'start' is not one of 'open', 'close'"):
        NetworkTask.parse({"action": "start"})
