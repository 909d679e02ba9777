"""The VPC: private isolated subnets only and an S3 gateway endpoint. No NAT gateway and no
internet route: nothing here can reach the internet.

Interface endpoints bill by the hour, so this stack creates none: each run opens the plan's set
and closes it when done (stacks/run_network.py, functions/network.py). The default set, each
needed for a run to work or be followed:
- ssm, ssmmessages, ec2messages: manage the PS instances through Session Manager (no SSH).
- ecr.api, ecr.dkr: the PS pulls the project's image (its layers come through the S3 endpoint).
- secretsmanager: PS and workers read the job's shared secret.
- logs: the PS container ships its log to CloudWatch, where the user follows the run.
Lambda's own logs and invokes do not go through the VPC, so they need no endpoint. The endpoints'
security group lives here, so a run's endpoints accept HTTPS from our two groups only.
HTTPS to S3 goes to S3's managed prefix list, whose id a custom resource looks up at deploy.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from stacks.provider_logs import stack_log_group
from stacks.s3_prefix_list import S3PrefixList

# What a run opens when its Plan does not list them (plans from before
# `Plan.interface_endpoints`).
INTERFACE_ENDPOINTS = (
    "ssm", "ssmmessages", "ec2messages", "ecr.api", "ecr.dkr", "secretsmanager", "logs",
)  # fmt: skip


class TrainingNetwork(Construct):
    """VPC, the S3 gateway endpoint and the security groups (workers, parameter servers, the
    run's interface endpoints).

    One AZ on purpose: the PS and the workers talk every iteration, and cross-AZ traffic is
    both slower and billed; each interface endpoint also bills per AZ.
    Attributes: `vpc`, `subnets` (selection for everything we place), `worker_security_group`,
    `ps_security_group`, `endpoint_security_group`, `s3_prefix_list`.
    """

    def __init__(self, scope: Construct, construct_id: str, *, ps_port: int,
                 az: str | None = None) -> None:  # fmt: skip
        super().__init__(scope, construct_id)
        # `az`: the user's pick (-c az=), e.g. where the PS type is offered; else the first.
        placement: dict[str, Any] = {"availability_zones": [az]} if az else {"max_azs": 1}
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr("10.42.0.0/16"),
            **placement,
            nat_gateways=0,
            subnet_configuration=[
                ec2.SubnetConfiguration(
                    name="training", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=20
                )
            ],
            gateway_endpoints={
                "S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3)
            },
        )
        self.subnets = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)
        flow_log_group = stack_log_group(self, "FlowLogs")
        self.vpc.add_flow_log(
            "FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_log_group)
        )
        self.worker_security_group = ec2.SecurityGroup(
            self,
            "Workers",
            vpc=self.vpc,
            description="Training workers (Lambda): reach the PS, S3 and the endpoints only",
            allow_all_outbound=False,
        )
        self.ps_security_group = ec2.SecurityGroup(
            self,
            "ParameterServers",
            vpc=self.vpc,
            description="Parameter servers: PS port open to the workers group only",
            allow_all_outbound=False,
        )
        # Endpoints accept HTTPS from our two groups only (not the whole VPC range).
        self.endpoint_security_group = ec2.SecurityGroup(
            self,
            "Endpoints",
            vpc=self.vpc,
            description="Interface endpoints: HTTPS from workers and parameter servers",
            allow_all_outbound=False,
        )
        self.s3_prefix_list = S3PrefixList(self, "S3PrefixList")
        self._connect(ps_port, s3=ec2.Peer.prefix_list(self.s3_prefix_list.prefix_list_id))

    def _connect(self, ps_port: int, *, s3: ec2.IPeer) -> None:
        """The only connections: workers reach the PS port and HTTPS, the PS reaches HTTPS only
        (it never calls a worker: workers connect to it and groups are stateful). `allow_to`
        writes the egress rule on one group and the matching ingress rule on the other.

        HTTPS goes to the interface endpoints' group and to `s3`, S3's managed prefix list (the
        gateway endpoint's route). DNS, instance metadata and time sync are not filtered by
        security groups.
        """
        https = ec2.Port.tcp(443)
        self.worker_security_group.connections.allow_to(
            self.ps_security_group,
            ec2.Port.tcp(ps_port),
            "PS protocol from the training workers only",
        )
        for group in (self.worker_security_group, self.ps_security_group):
            group.connections.allow_to(self.endpoint_security_group, https, "AWS APIs")
            group.add_egress_rule(s3, https, "S3 via the gateway endpoint")
