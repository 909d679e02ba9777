"""The parameter servers: `plan.ps_count` EC2 instances of `plan.ps_type`, one shard each (per
stage in a pipelined plan: stage s's shards hold only stage s's parameters).

How the PS gets its software in an isolated subnet (no internet): Docker comes from the AL2023
package repositories, which are S3 buckets reached through the S3 gateway endpoint; the project's
own image is pulled from ECR through the ecr.api/ecr.dkr interface endpoints (layers again via
S3). So the PS runs byte-for-byte the code the workers run, and nothing is fetched from PyPI.
The interface endpoints exist only while a run goes (stacks/run_network.py): a systemd unit
starts the PS on every boot and retries until they do, and the run, not the deploy, waits
until every shard serves (functions.ps_health.wait_handler). The boot files are in ps_boot/,
where shellcheck can read them.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from aws_cdk import Stack
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


def ps_health_cmd(container: list[str]) -> str:
    """The container's health check: `functions.ps_health` against the PS's own port.

    Docker marks a container unhealthy but never restarts it, so the check itself ends a PS that
    listens but no longer greets connections (out of descriptors, a dead accept thread): it
    sends SIGTERM to PID 1 (the PS; its handler checkpoints and exits) after 3 failed attempts;
    the container ends and systemd starts it again (ps_boot/lambdadnn-ps.service). A refused
    connection (the PS still restoring its checkpoint before it listens) never triggers it.
    """
    port = container[container.index("--port") + 1]
    return (f"{container[0]} -m functions.ps_health 127.0.0.1:{port}"
            " --attempts 3 --timeout-s 5 --terminate-pid 1")  # fmt: skip


BOOT_DIR = Path(__file__).parent / "ps_boot"
START_SCRIPT = "/usr/local/bin/lambdadnn-ps"
UNIT = "/etc/systemd/system/lambdadnn-ps.service"
ENV_FILE = "/etc/lambdadnn-ps.env"


def ps_env_lines(*, region: str, registry: str, image_uri: str, container: list[str],
                 log_group: str, shard: int, stage: int | None = None) -> list[str]:  # fmt: skip
    """The per-instance settings ps-start.sh sources (bash syntax: PS_ARGS is an array).

    SHARD names the log stream (`ps-$SHARD`): a pipelined plan's stages each have a shard 0.
    """
    label = f"{int(shard)}" if stage is None else f"stage{int(stage)}-{int(shard)}"
    return [
        f"REGION={shlex.quote(region)}",
        f"REGISTRY={shlex.quote(registry)}",
        f"IMAGE_URI={shlex.quote(image_uri)}",
        f"LOG_GROUP={shlex.quote(log_group)}",
        f"SHARD={label}",
        f"PS_HEALTH_CMD={shlex.quote(ps_health_cmd(container))}",
        f"PS_ENTRYPOINT={shlex.quote(container[0])}",
        f"PS_ARGS=({shlex.join(container[1:])})",
    ]


def _file_lines(path: str, content: str, mode: str) -> list[str]:
    """Write `content` to `path` from user data (a quoted heredoc: no expansion)."""
    return [f"cat > {path} <<'LAMBDADNN_EOF'", *content.rstrip("\n").splitlines(),
            "LAMBDADNN_EOF", f"chmod {mode} {path}"]  # fmt: skip


def ps_user_data_lines(*, region: str, registry: str, image_uri: str, container: list[str],
                       log_group: str, shard: int,
                       stage: int | None = None) -> list[str]:  # fmt: skip
    """First-boot script: Docker from the AL2023 repos (through the S3 gateway endpoint) and a
    systemd unit that starts the PS container on this and every later boot (ps_boot/)."""
    settings = ps_env_lines(region=region, registry=registry, image_uri=image_uri,
                            container=container, log_group=log_group, shard=shard,
                            stage=stage)  # fmt: skip
    env = "\n".join(settings)
    return [
        "set -euo pipefail",
        *_file_lines(ENV_FILE, env, "0644"),
        *_file_lines(START_SCRIPT, (BOOT_DIR / "ps-start.sh").read_text(), "0755"),
        *_file_lines(UNIT, (BOOT_DIR / "lambdadnn-ps.service").read_text(), "0644"),
        "dnf install -y docker",
        "systemctl enable --now docker",
        "systemctl daemon-reload",
        "systemctl enable --now lambdadnn-ps.service",
    ]


class ParameterServers(Construct):
    """PS instances, their role, log group and the shared secret's readers.

    Attributes: `instances`, `endpoints` ("ip:port" in shard order; a pipelined plan's stage by
    stage), `stage_endpoints` (each stage's own; one list for a one-stage plan),
    `instance_arns`, `log_group`, `role`.
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
        image = ImageSpec(plan.ps_arch, plan.training.model).asset(self, "Image")
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
        # A pipelined plan runs ps_count shards per stage, each stage's over its own parameters;
        # a one-stage plan's shards keep their ids (and so their templates).
        stages = range(plan.pipeline.stage_count) if plan.pipeline else [None]
        for stage, shard in ((stage, shard) for stage in stages for shard in range(plan.ps_count)):
            user_data = ec2.UserData.for_linux()
            name = f"Shard{shard}" if stage is None else f"Stage{stage}Shard{shard}"
            instance = ec2.Instance(
                self, name,
                vpc=vpc, vpc_subnets=subnets, security_group=security_group,
                instance_type=ec2.InstanceType(plan.ps_type), machine_image=image_ami,
                role=self.role, user_data=user_data, user_data_causes_replacement=True,
                require_imdsv2=True, ssm_session_permissions=True, detailed_monitoring=True,
                block_devices=[ec2.BlockDevice(
                    device_name="/dev/xvda",
                    volume=ec2.BlockDeviceVolume.ebs(
                        plan.ps_volume_gb, encrypted=True,
                        volume_type=ec2.EbsDeviceVolumeType.GP3),
                )],
            )  # fmt: skip
            container = ps_command(
                plan, shard=shard, secret_ref=secret.secret_arn,
                artifacts_bucket=artifacts.name, stage=stage,
            )  # fmt: skip
            user_data.add_commands(*ps_user_data_lines(
                region=stack.region, registry=registry, image_uri=image.image_uri,
                container=container, log_group=self.log_group.log_group_name, shard=shard,
                stage=stage,
            ))  # fmt: skip
            acknowledge(
                instance,
                rule="AwsSolutions-EC29",
                reason="Training PS are disposable by design: `cdk destroy` must terminate them.",
            )
            self.instances.append(instance)
        self.endpoints = [f"{i.instance_private_ip}:{PS_PORT}" for i in self.instances]
        per_stage = plan.ps_count
        self.stage_endpoints = [self.endpoints[s : s + per_stage]
                                for s in range(0, len(self.endpoints), per_stage)]  # fmt: skip
        self.instance_arns = [
            stack.format_arn(service="ec2", resource="instance", resource_name=i.instance_id)
            for i in self.instances
        ]
