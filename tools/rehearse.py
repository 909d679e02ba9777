"""Deploy rehearsal: the pinned CDK CLI bootstraps, deploys, updates and destroys this app
against moto's server (tools/moto_compat.py). `make rehearse`; `make test` runs it after pytest.

    python -m tools.rehearse [--from 2h] [--to 3m38s]

bootstrap; `cdk deploy --all` (every stack CREATE_COMPLETE with its template's resources and
outputs, each resource found in its service); the same deploy again ("no changes", no stack
touched); a deploy with another deadline (it changes what the offline diff, `make diff`'s, says
and nothing else); `cdk destroy --all` (no stack, bucket, instance, endpoint or log group left).
One line per check, PASS or FAIL (the exit code is 1 on any FAIL; the steps after a FAIL do not
run), and a `moto cannot:` line for each thing moto only stands in for. Every check reads moto's
API with boto3 (tools/rehearse_checks.py), never what the CLI printed.

The CLI runs in cdk.out/rehearsal (git-ignored; kept for its logs) with a copy of cdk.json, so
its context lookups land in that copy's cdk.context.json, never the repo's; its account cache
(CDK_HOME) is deleted on exit. moto listens on a free localhost port, the only address anything
is sent to, and stops when the rehearsal ends, however it ends.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tools.moto_compat import MOTO_VERSION
from tools.plan_diff import CDK_CLI, REPO_ROOT, node_env, template_diff
from tools.rehearse_checks import (
    REGION,
    Aws,
    Change,
    as_deployed,
    change_kinds,
    change_summary,
    deployed_summary,
    diff_changes,
    found,
    leftovers,
    snapshots,
    stack_resources,
    stacks_of,
    stood_in,
    template,
    updated_as_diffed,
)

WORK_DIR = Path(REPO_ROOT) / "cdk.out" / "rehearsal"
ACCOUNT = "123456789012"
# 2h -> 3m38s takes the digits plan from 2 × 629 MB to 5 × 605 MB workers, both re-planning
# (re-planning is on by default): the PS instance is replaced (its boot script names the
# envelope's ceiling of workers, so CDK gives it a new logical id), the twice-the-memory
# variant is replaced by the new one, the training stack's definitions and grants change, the
# data stack only in its tags.
FROM_DEADLINE, TO_DEADLINE = "2h", "3m38s"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
CLI_TIMEOUT_S = 600


class Report:
    """Prints one line per check and counts the failures."""

    def __init__(self) -> None:
        self.failures = 0

    def check(self, name: str, problems: list[str], detail: str, started: float) -> bool:
        seconds = time.monotonic() - started
        self.failures += bool(problems)
        verdict, text = ("FAIL", "; ".join(problems)) if problems else ("PASS", detail)
        print(f"{name:<30} {verdict} {seconds:5.1f}s  {text}", flush=True)
        return not problems

    def cannot(self, name: str, reason: str) -> None:
        print(f"{name:<30} moto cannot: {reason}", flush=True)


@contextmanager
def moto_server(log: Path, start_timeout_s: float = 60) -> Iterator[str]:
    """tools.moto_compat's server on a free localhost port, its URL; stopped on exit (it
    serves until its stdin closes, which also happens when this process is killed)."""
    with log.open("w") as err:
        server = subprocess.Popen(
            [sys.executable, "-m", "tools.moto_compat", "--port", "0"],
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    assert server.stdin is not None and server.stdout is not None
    try:
        ready, _, _ = select.select([server.stdout], [], [], start_timeout_s)
        url = server.stdout.readline().strip() if ready else ""
        if not url.startswith("http://localhost:"):
            raise RuntimeError(f"moto did not start within {start_timeout_s:.0f} s; see {log}")
        yield url
    finally:
        server.stdin.close()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def cli_env(endpoint: str, cdk_home: Path) -> dict[str, str]:
    """The CLI's environment: Node 24, quiet, fake credentials, every AWS call to moto."""
    env = {k: v for k, v in node_env().items() if not k.startswith(("AWS_", "CDK_DEFAULT_"))}
    env.update(
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID="rehearsal",
        AWS_SECRET_ACCESS_KEY="rehearsal",
        AWS_REGION=REGION,
        AWS_DEFAULT_REGION=REGION,
        AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
        AWS_EC2_METADATA_DISABLED="true",
        CDK_HOME=str(cdk_home),
        FORCE_COLOR="0",
    )
    return env


def app_dir(work: Path) -> Path:
    """A folder holding cdk.json's copy with its app command made absolute: the CLI run there
    keeps its context lookups (cdk.context.json) there."""
    config = json.loads(Path(REPO_ROOT, "cdk.json").read_text(encoding="utf-8"))
    config["app"] = " ".join(
        str(Path(REPO_ROOT, part)) if Path(REPO_ROOT, part).exists() else part
        for part in config["app"].split()
    )
    folder = work / "app"
    folder.mkdir(parents=True)
    (folder / "cdk.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    return folder


class Cli:
    """The pinned CDK CLI; each run's output goes to <work>/<name>.log."""

    def __init__(self, env: dict[str, str], work: Path) -> None:
        self.env, self.work = env, work

    def run(self, name: str, args: list[str], cwd: Path) -> tuple[list[str], str]:
        """(problems: [] or the CLI's exit code and last error line, its output). The CLI and
        what it starts (the app's synth) run in their own process group, ended with the run."""
        with subprocess.Popen(
            [CDK_CLI, *args, "--no-notices"],
            cwd=cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        ) as cli:
            try:
                output, _ = cli.communicate(timeout=CLI_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                output = f"timed out after {CLI_TIMEOUT_S} s\n"
            finally:
                if cli.poll() is None:  # timed out, or this process is being stopped
                    os.killpg(cli.pid, signal.SIGKILL)
                    cli.wait()
        log = self.work / f"{name}.log"
        log.write_text(output, encoding="utf-8")
        if cli.returncode == 0:
            return [], output
        lines = [line.strip() for line in output.splitlines() if line.strip()]
        errors = [line for line in lines if "Error" in line or "❌" in line] or lines[-1:] or ["?"]
        return [f"cdk exited {cli.returncode}: {errors[-1]} ({log})"], output


def offline_diff(assemblies: dict[str, Path], stacks: list[str]) -> dict[str, dict[str, Change]]:
    """`make diff`'s template diff (tools.plan_diff.template_diff, the plan's tags aligned as it
    aligns them) of each deployed template against the next: stack -> logical id -> Change."""
    os.environ["PATH"] = node_env()["PATH"]  # aws_cdk (for plan_tags) starts node on import
    from provisioner.plan import Plan
    from stacks.job import plan_tags

    plan = json.loads((assemblies["to"] / "plan.json").read_text(encoding="utf-8"))["plan"]
    tags = plan_tags(Plan.from_dict(plan))
    changes = {}
    for stack in stacks:
        code, text = template_diff(str(assemblies["from"]), str(assemblies["to"]), stack, tags)
        if code not in (0, 1):
            raise RuntimeError(f"cdk diff of {stack} exited {code}: {text[-400:]}")
        ids = {*template(assemblies["from"], stack)["Resources"]}
        changes[stack] = diff_changes(text, ids | {*template(assemblies["to"], stack)["Resources"]})
    return changes


class Rehearsal:
    """The steps in order, each a method returning whether it passed."""

    def __init__(self, report: Report, endpoint: str, work: Path, deadlines: list[str]) -> None:
        self.report, self.work, self.deadlines = report, work, deadlines
        self.aws = Aws(endpoint)
        self.cli = Cli(cli_env(endpoint, work / "cdk-home"), work)
        self.app = app_dir(work)
        self.assemblies = {"from": work / "from", "to": work / "to"}
        self.kept_bucket = ""
        self.changes: dict[str, dict[str, Change]] = {}

    def run(self) -> None:
        steps: list[Callable[[], bool]] = [
            self.bootstrap,
            lambda: self.synth("from", self.deadlines[0]),
            self.publish_image,
            self.deploy,
            self.redeploy_unchanged,
            lambda: self.synth("to", self.deadlines[1]),
            self.diff,
            self.update,
            self.destroy,
        ]
        for step in steps:
            if not step():
                print("stopped: the steps after a FAIL do not run", flush=True)
                return

    def bootstrap(self) -> bool:
        started, folder = time.monotonic(), self.work / "bootstrap"
        folder.mkdir()  # no cdk.json here: bootstrap synthesizes nothing
        problems, _ = self.cli.run("bootstrap", ["bootstrap", f"aws://{ACCOUNT}/{REGION}"], folder)
        cf = self.aws("cloudformation")
        answer = found(lambda: cf.describe_stacks(StackName="CDKToolkit"))
        stack: dict[str, Any] = answer["Stacks"][0] if answer else {"StackStatus": "missing"}
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs") or []}
        if stack["StackStatus"] != "CREATE_COMPLETE" or "BucketName" not in outputs:
            problems.append(f"CDKToolkit {stack['StackStatus']}, outputs {sorted(outputs)}")
        self.kept_bucket = outputs.get("BucketName", "")
        detail = f"CDKToolkit CREATE_COMPLETE, bootstrap version {outputs.get('BootstrapVersion')}"
        return self.report.check(f"cdk bootstrap {ACCOUNT}", problems, detail, started)

    def synth(self, side: str, deadline: str) -> bool:
        started = time.monotonic()
        # The PS shape, the one with a lifecycle to rehearse (instances replaced, endpoints,
        # the secret); the digits demo's default plan goes through S3 and has none of it.
        args = ["synth", "--quiet", "-o", str(self.assemblies[side]), "-c", f"deadline={deadline}",
                "-c", "sync=ps"]  # fmt: skip
        problems, output = self.cli.run(f"synth-{side}", args, self.app)
        plan = next((line for line in output.splitlines() if line.startswith("plan ")), "")
        name = f"cdk synth -c deadline={deadline} -c sync=ps"
        return self.report.check(name, problems, plan, started)

    def publish_image(self) -> bool:
        """The worker image's manifest in moto's ECR under its asset hash, where the CLI looks
        before it builds: it finds the image published and builds nothing."""
        started, hashes = time.monotonic(), set()
        for assets in sorted(self.assemblies["from"].glob("*.assets.json")):
            images = json.loads(assets.read_text(encoding="utf-8")).get("dockerImages", {})
            for asset_hash, asset in images.items():
                for place in asset["destinations"].values():
                    self._put_manifest(place["repositoryName"], place["imageTag"], asset_hash)
                    hashes.add(asset_hash[:12])
        problems = [] if hashes else ["no Docker image asset in the assembly"]
        detail = f"image {', '.join(sorted(hashes))} in moto's ECR under its asset hash"
        passed = self.report.check("worker image", problems, detail, started)
        self.report.cannot(
            "worker image",
            "run Lambda images without Docker (none here): the image is not built; a manifest "
            "under its asset hash stands for it",
        )
        return passed

    def _put_manifest(self, repository: str, tag: str, asset_hash: str) -> None:
        ecr = self.aws("ecr")
        ids = [{"imageTag": tag}]
        if found(lambda: ecr.describe_images(repositoryName=repository, imageIds=ids)):
            return  # the two stacks share the image
        manifest = {"schemaVersion": 2, "mediaType": DOCKER_MANIFEST,
                    "config": {"digest": f"sha256:{asset_hash}"}}  # fmt: skip
        ecr.put_image(repositoryName=repository, imageTag=tag, imageManifest=json.dumps(manifest))

    def _deploy(self, name: str, side: str) -> tuple[list[str], str]:
        app = str(self.assemblies[side])
        args = ["deploy", "--app", app, "--all", "--require-approval", "never"]
        return self.cli.run(name, args, self.app)

    def deploy(self) -> bool:
        started, assembly = time.monotonic(), self.assemblies["from"]
        stacks = stacks_of(assembly)
        problems, _ = self._deploy("deploy", "from")
        passed = self.report.check("cdk deploy --all", problems, f"{len(stacks)} stacks", started)
        for stack in stacks:
            started, body = time.monotonic(), template(assembly, stack)
            problems = as_deployed(self.aws, stack, body, "CREATE_COMPLETE")
            detail = f"CREATE_COMPLETE, {deployed_summary(self.aws, stack, body)}"
            passed &= self.report.check(f"  {stack}", problems, detail, started)
        for reason in stood_in([template(assembly, stack) for stack in stacks]):
            self.report.cannot("cdk deploy --all", reason)
        return passed

    def redeploy_unchanged(self) -> bool:
        started, stacks = time.monotonic(), stacks_of(self.assemblies["from"])
        cf = self.aws("cloudformation")

        def state(stack: str) -> tuple[str, int]:
            status = cf.describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"]
            return status, len(cf.describe_stack_events(StackName=stack)["StackEvents"])

        before = {stack: state(stack) for stack in stacks}
        problems, output = self._deploy("redeploy", "from")
        for stack in stacks:
            if not re.search(rf"{re.escape(stack)} \(no changes\)", output):
                problems.append(f"{stack}: the CLI did not say (no changes)")
            if state(stack) != before[stack]:
                problems.append(f"{stack} was touched: {before[stack]} -> {state(stack)}")
        detail = f"(no changes) for all {len(stacks)}; no stack status or event changed"
        return self.report.check("cdk deploy --all (unchanged)", problems, detail, started)

    def diff(self) -> bool:
        started = time.monotonic()
        self.changes = offline_diff(self.assemblies, stacks_of(self.assemblies["from"]))
        summary = "; ".join(f"{s}: {change_summary(c)}" for s, c in self.changes.items())
        problems = [] if any(self.changes.values()) else ["no change but tags: nothing to test"]
        return self.report.check("offline diff (make diff)", problems, summary, started)

    def update(self) -> bool:
        aws, old, new = self.aws, self.assemblies["from"], self.assemblies["to"]
        stacks = stacks_of(new)
        resources = {stack: stack_resources(aws, stack) for stack in stacks}
        before = {s: snapshots(aws, resources[s], template(old, s)) for s in stacks}
        started = time.monotonic()
        problems, _ = self._deploy("update", "to")
        name = f"cdk deploy -c deadline={self.deadlines[1]}"
        passed = self.report.check(name, problems, f"{len(stacks)} stacks", started)
        for stack in stacks:
            started, body = time.monotonic(), template(new, stack)
            status = "CREATE_COMPLETE" if body == template(old, stack) else "UPDATE_COMPLETE"
            problems = as_deployed(aws, stack, body, status)
            if aws("cloudformation").get_template(StackName=stack)["TemplateBody"] != body:
                problems.append("its template is not the synthesized one")
            after = snapshots(aws, stack_resources(aws, stack), body)
            problems += updated_as_diffed(
                aws,
                before[stack],
                after,
                resources[stack],
                self.changes[stack],
                template(old, stack),
            )
            detail = (
                f"{status} as diffed: {change_summary(self.changes[stack])}; "
                "the rest reads back as before"
            )
            passed &= self.report.check(f"  {stack}", problems, detail, started)
        custom = Counter(
            kind
            for changes in self.changes.values()
            for action, kind in changes.values()
            if action == "~" and kind.startswith("Custom::")
        )
        if custom:
            self.report.cannot(
                name,
                f"run custom-resource providers: the modified ones ({change_kinds(custom)}) are "
                "kept as they were, so the new plan starts no run",
            )
        return passed

    def destroy(self) -> bool:
        started, stacks = time.monotonic(), stacks_of(self.assemblies["to"])
        args = ["destroy", "--app", str(self.assemblies["to"]), "--all", "--force"]
        problems, _ = self.cli.run("destroy", args, self.app)
        passed = self.report.check("cdk destroy --all", problems, f"{len(stacks)} stacks", started)
        started = time.monotonic()
        detail = (
            "no stack, bucket, instance, endpoint, log group, VPC, function or state "
            "machine of the app (CDKToolkit and its bucket stay)"
        )
        left = leftovers(self.aws, stacks, self.kept_bucket)
        return self.report.check("  nothing left", left, detail, started) and passed


def _contents(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.rehearse",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--from", dest="before", default=FROM_DEADLINE, help="first deadline")
    parser.add_argument("--to", dest="after", default=TO_DEADLINE, help="the update's deadline")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that the finally blocks run
    context = Path(REPO_ROOT, "cdk.context.json")
    context_before, started, report = _contents(context), time.monotonic(), Report()
    shutil.rmtree(WORK_DIR, ignore_errors=True)
    WORK_DIR.mkdir(parents=True)
    try:
        with moto_server(WORK_DIR / "moto.log") as endpoint:
            print(f"moto {MOTO_VERSION} + tools/moto_compat.py on {endpoint}; logs: {WORK_DIR}")
            Rehearsal(report, endpoint, WORK_DIR, [args.before, args.after]).run()
    finally:
        shutil.rmtree(WORK_DIR / "cdk-home", ignore_errors=True)  # the CLI's account cache
    unchanged = _contents(context) == context_before
    problems = [] if unchanged else ["the repo's cdk.context.json changed"]
    report.check("repo untouched", problems, "cdk.context.json as it was", time.monotonic())
    verdict = f"{report.failures} FAIL" if report.failures else "PASS"
    print(f"rehearsal: {verdict} in {time.monotonic() - started:.0f} s", flush=True)
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
