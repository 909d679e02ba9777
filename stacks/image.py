"""The project's one container image (functions/Dockerfile), as a CDK asset for a given arch.

The workers, the prepare and finalize steps and the parameter servers all run this image, so
there is one build per CPU architecture. Assets are hashed at synth and built at deploy: synth
needs no Docker engine. The build context is the repo root (the Dockerfile copies `functions/`,
`provisioner/` for the pace function, and the model's file); everything that is not an input
of the image is excluded, which also keeps the asset hash, and so the template, stable while
tests and docs change, and changes it when the model file changes (so `cdk diff` shows a new
image).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from aws_cdk import IgnoreMode
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from functions.model_spec import ZOO_FILE, parse_spec

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
DOCKERFILE = "functions/Dockerfile"
# Docker-ignore syntax: exclude everything, then allow back the image's inputs.
BUILD_CONTEXT_EXCLUDE = (
    "*",
    "!functions",
    "!provisioner",  # the pace function re-plans with the planner's library
    "**/__pycache__",
    "**/*.pyc",
)


@dataclass(frozen=True)
class ImageSpec:
    """Where and how to build the image for one architecture."""

    arch: str  # "x86_64" | "arm64"
    model: str = "mlp"  # the plan's model spec: a user's file goes into the image too

    @property
    def model_file(self) -> str:
        return parse_spec(self.model).file

    @property
    def exclude(self) -> list[str]:
        if self.model_file == ZOO_FILE:
            return list(BUILD_CONTEXT_EXCLUDE)
        return [*BUILD_CONTEXT_EXCLUDE, f"!{self.model_file}"]

    @property
    def build_args(self) -> dict[str, str] | None:
        """The Dockerfile's MODEL_FILE (default: the zoo, already under functions/)."""
        return None if self.model_file == ZOO_FILE else {"MODEL_FILE": self.model_file}

    @property
    def platform(self) -> ecr_assets.Platform:
        if self.arch == "arm64":
            return ecr_assets.Platform.LINUX_ARM64
        return ecr_assets.Platform.LINUX_AMD64

    @property
    def lambda_architecture(self) -> lambda_.Architecture:
        return lambda_.Architecture.ARM_64 if self.arch == "arm64" else lambda_.Architecture.X86_64

    def lambda_code(self, *, handler: str) -> lambda_.DockerImageCode:
        """Lambda code from the image; `handler` becomes the image's CMD for that function."""
        return lambda_.DockerImageCode.from_image_asset(
            REPO_ROOT,
            file=DOCKERFILE,
            cmd=[handler],
            platform=self.platform,
            exclude=self.exclude,
            ignore_mode=IgnoreMode.DOCKER,
            build_args=self.build_args,
        )

    def asset(self, scope: Construct, construct_id: str) -> ecr_assets.DockerImageAsset:
        """The same image as a plain ECR asset (for the PS instances to pull)."""
        return ecr_assets.DockerImageAsset(
            scope,
            construct_id,
            directory=REPO_ROOT,
            file=DOCKERFILE,
            platform=self.platform,
            exclude=self.exclude,
            ignore_mode=IgnoreMode.DOCKER,
            build_args=self.build_args,
        )
