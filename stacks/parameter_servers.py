"""The parameter servers: `plan.ps_count` EC2 instances of `plan.ps_type`, one shard each.

How the PS gets its software in an isolated subnet (no internet): Docker comes from the AL2023
package repositories, which are S3 buckets reached through the S3 gateway endpoint; the project's
own image is pulled from ECR through the ecr.api/ecr.dkr interface endpoints (layers again via
S3). So the PS runs byte-for-byte the code the workers run, and nothing is fetched from PyPI.
Each instance signals CloudFormation once its PS prints READY, so the stack (and with it the
training start) waits for listening servers rather than booting ones.
"""

from __future__ import annotations

import shlex

from aws_cdk import Duration, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from provisioner.plan import Plan
from stacks.events import PS_PORT, checkpoint_prefix, ps_command
from stacks.grants import BucketRef, grant_prefix, read_secret_value
from stacks.image import ImageSpec
from stacks.machine_image import ps_machine_image
from stacks.nag import acknowledge
from stacks.provider_logs import stack_log_group

READY_TIMEOUT = Duration.minutes(30)  # boot, dnf, image pull and PS start on the slowest type


def ps_health_cmd(container: list[str]) -> str:
    """The container's health check: `functions.ps_health` against the PS's own port.

    Docker marks a container unhealthy but never restarts it, so the check itself ends a PS that
    listens but no longer greets connections (out of descriptors, a dead accept thread): it
    sends SIGTERM to PID 1 (the PS; its handler checkpoints and exits) after 3 failed attempts,
    and `--restart unless-stopped` starts it again. A refused connection (the PS still restoring
    its checkpoint before it listens) never triggers it. Chosen over a host-side watchdog loop,
    which a stop/start of the instance would not bring back (user data runs once).
    """
    port = container[container.index("--port") + 1]
    return (f"{container[0]} -m functions.ps_health 127.0.0.1:{port}"
            " --attempts 3 --timeout-s 5 --terminate-pid 1")  # fmt: skip


def ps_user_data_lines(*, region: str, registry: str, image_uri: str, container: list[str],
                       log_group: str, shard: int) -> list[str]:
    """Boot script: Docker from the AL2023 repos, the image from ECR, the PS in a container."""
    return [
        "set -euo pipefail",
        "dnf install -y docker aws-cfn-bootstrap",
        "systemctl enable --now docker",
        f"aws ecr get-login-password --region {region}"
        f" | docker login --username AWS --password-stdin {registry}",
        f"docker pull {image_uri}",
        # --restart: a stop/start of the instance (PS type change) brings the PS back by itself.
        "docker run -d --name ps --restart unless-stopped --network host"
        f" --log-driver awslogs --log-opt awslogs-region={region}"
        f" --log-opt awslogs-group={log_group} --log-opt awslogs-stream=ps-{shard}"
        # 3 attempts x (5 s + 1 s pause) stay inside the 30 s health timeout (see ps_health_cmd).
        f" --health-cmd {shlex.quote(ps_health_cmd(container))} --health-interval 30s"
        " --health-timeout 30s --health-retries 3 --health-start-period 300s"
        f" -e AWS_REGION={region} --entrypoint {shlex.quote(container[0])}"
        f" {image_uri} {shlex.join(container[1:])}",
        # grep -c reads all input (grep -q may exit early, SIGPIPE + pipefail = false failure);
        # a PS that died stops the wait at once instead of after the whole timeout.
        "for _ in $(seq 1 600); do"
        " docker logs ps 2>/dev/null | grep -c '^READY ' >/dev/null && break;"
        " [ \"$(docker inspect -f '{{.State.Running}}' ps)\" = true ] || exit 1; sleep 2; done",
        "docker logs ps 2>/dev/null | grep -c '^READY ' >/dev/null",
    ]


class ParameterServers(Construct):
    """PS instances, their role, log group and the shared secret's readers.

    Attributes: `instances`, `endpoints` ("ip:port" in shard order), `instance_arns`,
    `log_group`, `role`.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        plan: Plan,
        vpc: ec2.IVpc,
        subnets: ec2.SubnetSelection,
        security_group: ec2.ISecurityGroup,
        secret: secretsmanager.ISecret,
        artifacts: BucketRef,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        image = ImageSpec(plan.ps_arch).asset(self, "Image")
        self.log_group = stack_log_group(self, "Logs")
        self.role = iam.Role(
            self, "Role", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description=f"Parameter servers of job {plan.job}",
        )  # fmt: skip
        image.repository.grant_pull(self.role)
        self.role.add_to_policy(read_secret_value(secret.secret_arn))
        self.log_group.grant_write(self.role)
        # Delete: each shard removes its own checkpoints older than the newest common one.
        grant_prefix(self.role, self.role, artifacts, checkpoint_prefix(plan), write=True,
                     delete=True, reason="Only this job's checkpoint prefix; the PS names the "
                     "keys at run time.")  # fmt: skip
        acknowledge(
            self.role,
            rule="AwsSolutions-IAM5[Resource::*]",
            reason="ecr:GetAuthorizationToken has no resource-level permissions (AWS docs).",
        )
        acknowledge(
            self.role,
            rule="AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/"
            "AmazonSSMManagedInstanceCore]",
            reason="AWS's managed policy for Session Manager, our only way in (no SSH, no "
            "key pair); its ssm/ssmmessages/ec2messages actions take no resource scope.",
        )
        image_ami = ps_machine_image(stack, plan.ps_arch)
        registry = f"{stack.account}.dkr.ecr.{stack.region}.{stack.url_suffix}"
        self.instances: list[ec2.Instance] = []
        for shard in range(plan.ps_count):
            user_data = ec2.UserData.for_linux()
            instance = ec2.Instance(
                self, f"Shard{shard}",
                vpc=vpc, vpc_subnets=subnets, security_group=security_group,
                instance_type=ec2.InstanceType(plan.ps_type), machine_image=image_ami,
                role=self.role, user_data=user_data, user_data_causes_replacement=True,
                require_imdsv2=True, ssm_session_permissions=True, detailed_monitoring=True,
                resource_signal_timeout=READY_TIMEOUT,
                block_devices=[ec2.BlockDevice(
                    device_name="/dev/xvda",
                    volume=ec2.BlockDeviceVolume.ebs(
                        plan.ps_volume_gb, encrypted=True,
                        volume_type=ec2.EbsDeviceVolumeType.GP3),
                )],
            )  # fmt: skip
            container = ps_command(
                plan, shard=shard, secret_ref=secret.secret_arn,
                artifacts_bucket=artifacts.name,
            )  # fmt: skip
            user_data.add_signal_on_exit_command(instance)
            user_data.add_commands(*ps_user_data_lines(
                region=stack.region, registry=registry, image_uri=image.image_uri,
                container=container, log_group=self.log_group.log_group_name, shard=shard,
            ))  # fmt: skip
            acknowledge(
                instance,
                rule="AwsSolutions-EC29",
                reason="Training PS are disposable by design: `cdk destroy` must terminate them.",
            )
            self.instances.append(instance)
        self.endpoints = [f"{i.instance_private_ip}:{PS_PORT}" for i in self.instances]
        self.instance_arns = [
            stack.format_arn(service="ec2", resource="instance", resource_name=i.instance_id)
            for i in self.instances
        ]

