"""Fixtures for the stacks' tests: a hand-built Plan and an in-process synth helper.

The Plan here is written by hand so these tests pin the stacks to the Plan's fields, not to the
planner's current choices; the app-level tests use the real planner.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

# aws_cdk starts node on import: make sure it is the venv's Node 24 and that the CLI-ish checks
# stay quiet and offline.
_NODE_BIN = os.path.join(os.path.dirname(__file__), "..", "..", ".venv", "node-bin")
os.environ["PATH"] = os.path.abspath(_NODE_BIN) + os.pathsep + os.environ.get("PATH", "")
os.environ.setdefault("JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION", "1")
os.environ.setdefault("CDK_DISABLE_VERSION_CHECK", "1")

from provisioner.plan import CostBreakdown, Goal, Plan, Prediction, TrainingSpec  # noqa: E402

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def make_plan(**overrides: object) -> Plan:
    """A plausible digits-mlp plan; override any top-level field by keyword."""
    training = TrainingSpec(
        model="mlp",
        dataset="digits",
        dataset_samples=1797,
        dataset_bytes=1797 * 64 * 4,
        model_bytes=4 * 10_000,
        epochs=20,
        local_batch=32,
        global_batch=128,
        iterations=281,
        learning_rate=0.05,
        momentum=0.9,
        checkpoint_every_iterations=50,
    )
    prediction = Prediction(
        load_s=1.0,
        compute_s=100.0,
        communication_s=20.0,
        ps_aggregation_s=5.0,
        startup_s=8.0,
        chaining_s=0.0,
        total_s=134.0,
        iteration_s=0.45,
        compute_per_iteration_s=0.36,
        communication_per_iteration_s=0.07,
        ps_bandwidth_mb_s=84.0,
        s3_bandwidth_mb_s=80.0,
    )
    cost = CostBreakdown(
        lambda_compute_usd=0.05,
        lambda_requests_usd=0.000001,
        ephemeral_storage_usd=0.0,
        ps_instances_usd=0.004,
        step_functions_usd=0.0003,
        s3_requests_usd=0.0001,
        total_usd=0.0544,
    )
    plan = Plan(
        job="demo",
        workload="digits-mlp",
        catalog="aws",
        goal=Goal(deadline_s=7200.0),
        n_workers=4,
        memory_mb=2048,
        arch="arm64",
        vcpu_share=2048 / 1769,
        ps_type="c5.large",
        ps_count=2,
        ps_arch="x86_64",
        invocation_timeout_s=900,
        ephemeral_storage_mb=1024,
        invocations_per_worker=1,
        iterations_per_invocation=281,
        reserve_concurrency=True,
        training=training,
        prediction=prediction,
        cost=cost,
        notes=("hand-built test plan",),
    )
    return dataclasses.replace(plan, **overrides)  # type: ignore[arg-type]


@pytest.fixture
def plan() -> Plan:
    return make_plan()


# --- in-process synth of the whole app, cached per context -----------------------------------


def _cdk_json_context() -> dict[str, Any]:
    with open(os.path.join(REPO_ROOT, "cdk.json"), encoding="utf-8") as handle:
        return json.load(handle)["context"]  # type: ignore[no-any-return]


CDK_JSON_CONTEXT = _cdk_json_context()


@dataclass
class Synth:
    """One in-process `cdk synth`: exit code, what it printed, and the templates by stack."""

    code: int
    stderr: str
    app: Any
    outdir: str
    templates: dict[str, dict[str, Any]]

    def template(self, suffix: str) -> dict[str, Any]:
        """The template of the stack whose name ends with `-suffix` (data, ps, training)."""
        (name,) = [n for n in self.templates if n.endswith(f"-{suffix}")]
        return self.templates[name]

    def plan_json(self) -> dict[str, Any]:
        with open(os.path.join(self.outdir, "plan.json"), encoding="utf-8") as handle:
            return json.load(handle)  # type: ignore[no-any-return]


_APP_DIRS: list[str] = []


def _apps_dir() -> str:
    """One temporary folder for every new_app of this test session, removed when it ends
    (tests elsewhere, tests/functions among them, build apps through these helpers too)."""
    import atexit
    import shutil
    import tempfile

    if not _APP_DIRS:
        _APP_DIRS.append(tempfile.mkdtemp(prefix="lambda-dnn-test-apps-"))
        atexit.register(shutil.rmtree, _APP_DIRS[0], True)
    return _APP_DIRS[0]


def new_app(context: dict[str, Any] | None = None, **kwargs: Any) -> Any:
    """An App with cdk.json's context (and `context` over it) that synthesizes under a folder
    removed when the session ends: an App without an outdir makes a fresh /tmp/cdk.out* that
    nothing removes (a CI run left 70)."""
    import tempfile

    from aws_cdk import App

    kwargs.setdefault("outdir", tempfile.mkdtemp(prefix="cdk.out", dir=_apps_dir()))
    return App(context={**CDK_JSON_CONTEXT, **(context or {})}, **kwargs)


def run_synth(context: dict[str, Any], outdir: str) -> Synth:
    """What `cdk synth -c k=v ...` does, minus the node CLI: cdk.json context + overrides."""
    from aws_cdk import App

    import app as app_module

    app = App(context={**CDK_JSON_CONTEXT, **context}, outdir=outdir)
    err = io.StringIO()
    code = app_module.synth_job(app, err=err)
    templates: dict[str, dict[str, Any]] = {}
    if code == 0:
        assembly = app.synth()
        templates = {stack.stack_name: stack.template for stack in assembly.stacks}
    return Synth(code=code, stderr=err.getvalue(), app=app, outdir=outdir, templates=templates)


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """`synth(**context)` → Synth, cached: many tests read the same few synths."""
    cache: dict[str, Synth] = {}

    def _synth(**context: Any) -> Synth:
        key = json.dumps(context, sort_keys=True)
        if key not in cache:
            cache[key] = run_synth(context, str(tmp_path_factory.mktemp("cdk.out")))
        return cache[key]

    yield _synth
