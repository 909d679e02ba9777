"""Offline review of what another deadline (or any context change) would change.

    python -m tools.plan_diff --from 2h --to 90m [-c workload=... -c dataset=...] [--plan-only]
    python -m tools.plan_diff --from 2h --to 2h --to-c sync=s3   # PS plan -> S3-sync plan

Synthesizes the app twice (same code path as `cdk synth`: cdk.json context + overrides) into
`cdk.out/plan-diff/from` and `.../to`, prints a plan-level table (n, memory, PS, predicted
time and cost), then runs the pinned CDK CLI's `cdk diff --template <from> --app <to>` per stack.
`cdk diff` against a deployed stack needs an AWS account; against a saved template it does not.
A stack on one side only (the PS stack of a PS plan, gone in an S3-sync plan) is reported as
removed or added whole, with its resources counted by type.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
from typing import Any

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
NODE_BIN = os.path.join(REPO_ROOT, ".venv", "node-bin")
CDK_CLI = os.path.join(REPO_ROOT, "node_modules", ".bin", "cdk")
# What a reviewer decides on, in the order they read it; units in the labels.
PLAN_ROWS = (
    ("workers n", ("n_workers",)),
    ("memory MB", ("memory_mb",)),
    ("arch", ("arch",)),
    ("timeout s", ("invocation_timeout_s",)),
    ("/tmp MB", ("ephemeral_storage_mb",)),
    ("invocations/worker", ("invocations_per_worker",)),
    ("reserved concurrency", ("reserve_concurrency",)),
    ("sync", ("sync",)),
    ("reducers k", ("reducers",)),
    ("PS type", ("ps_type",)),
    ("PS shards", ("ps_count",)),
    ("PS arch", ("ps_arch",)),
    ("local batch", ("training", "local_batch")),
    ("iterations", ("training", "iterations")),
    ("predicted time s", ("prediction", "total_s")),
    ("predicted cost USD", ("cost", "total_usd")),
    ("  of which PS USD", ("cost", "ps_instances_usd")),
    ("  of which endpoints USD", ("cost", "vpc_endpoints_usd")),
)


# With credentials the CLI resolves an account (from STS, or from its cache in ~/.cdk keyed by
# access key) and the stacks become account-bound: context lookups, i.e. network. Offline
# review must not depend on what credentials happen to be in the environment.
ACCOUNT_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                     "AWS_PROFILE", "CDK_DEFAULT_ACCOUNT", "CDK_DEFAULT_REGION")  # fmt: skip


def node_env() -> dict[str, str]:
    """Node 24 first on PATH, and the CLI kept offline and quiet (no account: no lookups)."""
    env = {k: v for k, v in os.environ.items() if k not in ACCOUNT_VARIABLES}
    env["PATH"] = NODE_BIN + os.pathsep + env.get("PATH", "")
    env.update(CDK_DISABLE_VERSION_CHECK="1", CDK_DISABLE_CLI_TELEMETRY="true",
               JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION="1")  # fmt: skip
    return env


def parse_context(pairs: list[str]) -> dict[str, str]:
    """`-c key=value` pairs, as the CDK CLI takes them."""
    context = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"-c {pair!r} is not accepted; use -c key=value")
        context[key] = value
    return context


def synth_into(context: dict[str, Any], outdir: str) -> tuple[int, str]:
    """In-process `cdk synth` of app.py into outdir; (exit code, what app.py printed)."""
    from aws_cdk import App

    import app as app_module

    with open(os.path.join(REPO_ROOT, "cdk.json"), encoding="utf-8") as handle:
        defaults = json.load(handle)["context"]
    shutil.rmtree(outdir, ignore_errors=True)
    cdk_app = App(context={**defaults, **context}, outdir=outdir)
    err = io.StringIO()
    code = app_module.synth_job(cdk_app, err=err)
    if code == 0:
        cdk_app.synth()
    return code, err.getvalue()


def _field(plan: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = plan
    for key in path:
        if key not in value:  # a field newer than the plan.json being read
            return "-"
        value = value[key]
    return value


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}" if value < 10 else f"{value:.1f}"
    return str(value)


def plan_table(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Rows `label | from | to | changed?` for the two plans."""
    lines = [f"{'':<24} {'from':>14} {'to':>14}", "-" * 56]
    for label, path in PLAN_ROWS:
        old, new = _field(before, path), _field(after, path)
        mark = "  *" if old != new else ""
        lines.append(f"{label:<24} {_show(old):>14} {_show(new):>14}{mark}")
    return lines


def with_tags(template: dict[str, Any], tags: dict[str, str]) -> dict[str, Any]:
    """A copy of `template` whose resources carry `tags`' values for those keys.

    Every resource is tagged with the deadline and the predictions, so any new deadline changes
    every resource's tags (an in-place update). Aligning them first leaves the diff showing the
    changes that matter; the tag change itself is reported in one line.
    """
    copy: dict[str, Any] = json.loads(json.dumps(template))
    for resource in copy.get("Resources", {}).values():
        found = resource.get("Properties", {}).get("Tags")
        if isinstance(found, list):
            for tag in found:
                if isinstance(tag, dict) and tag.get("Key") in tags:
                    tag["Value"] = tags[tag["Key"]]
        elif isinstance(found, dict):
            found.update({k: v for k, v in tags.items() if k in found})
    return copy


def one_sided(from_dir: str, to_dir: str, stack: str) -> str | None:
    """ "removed"/"added: the whole stack (N resources: counts by type)" when `stack` was
    synthesized on one side only; None when both sides have it (or neither)."""
    found = {side: os.path.join(folder, f"{stack}.template.json")
             for side, folder in (("removed", from_dir), ("added", to_dir))}  # fmt: skip
    present = [side for side, path in found.items() if os.path.exists(path)]
    if len(present) != 1:
        return None
    with open(found[present[0]], encoding="utf-8") as handle:
        resources = json.load(handle).get("Resources", {})
    counts: dict[str, int] = {}
    for resource in resources.values():
        counts[resource["Type"]] = counts.get(resource["Type"], 0) + 1
    listed = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
    return f"{present[0]}: the whole stack ({len(resources)} resources: {listed})"


def template_diff(from_dir: str, to_dir: str, stack: str,
                  tags: dict[str, str] | None) -> tuple[int, str]:  # fmt: skip
    """The pinned CLI's diff of one stack: saved template (from) vs synthesized app (to)."""
    template = os.path.join(from_dir, f"{stack}.template.json")
    if tags is not None:
        with open(template, encoding="utf-8") as handle:
            aligned = with_tags(json.load(handle), tags)
        template = os.path.join(from_dir, f"{stack}.tags-aligned.json")
        with open(template, "w", encoding="utf-8") as handle:
            json.dump(aligned, handle, indent=1)
    result = subprocess.run(
        [CDK_CLI, "diff", "--exclusively", "--app", to_dir, "--template", template, stack],
        capture_output=True, text=True, env=node_env(), cwd=REPO_ROOT, timeout=300,
    )  # fmt: skip
    return result.returncode, (result.stdout + result.stderr).strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.plan_diff", description=__doc__)
    parser.add_argument("--from", dest="before", required=True, help="deadline, e.g. 2h")
    parser.add_argument("--to", dest="after", required=True, help="deadline, e.g. 90m")
    parser.add_argument(
        "-c",
        dest="context",
        action="append",
        default=[],
        help="extra context for both synths, key=value (repeatable)",
    )
    parser.add_argument(
        "--to-c",
        dest="to_context",
        action="append",
        default=[],
        help="extra context for the 'to' synth only, e.g. sync=s3 (repeatable)",
    )
    parser.add_argument("--out", default=os.path.join(REPO_ROOT, "cdk.out", "plan-diff"))
    parser.add_argument("--plan-only", action="store_true", help="skip the template diff")
    parser.add_argument(
        "--with-tags",
        action="store_true",
        help="also show every resource's changed plan tags (long)",
    )
    args = parser.parse_args(argv)
    try:
        common = parse_context(args.context)
        to_only = parse_context(args.to_context)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    os.environ["PATH"] = node_env()["PATH"]  # before aws_cdk starts node
    dirs = {"from": os.path.join(args.out, "from"), "to": os.path.join(args.out, "to")}
    plans = {}
    for side, deadline in (("from", args.before), ("to", args.after)):
        extra = to_only if side == "to" else {}
        code, printed = synth_into({**common, **extra, "deadline": deadline}, dirs[side])
        if code:
            print(f"{side} (deadline={deadline}): {printed.strip()}", file=sys.stderr)
            return code
        with open(os.path.join(dirs[side], "plan.json"), encoding="utf-8") as handle:
            plans[side] = json.load(handle)["plan"]
    also = "".join(f", -c {k}={v}" for k, v in to_only.items())
    print(f"plan: deadline {args.before} -> {args.after}{also} (* = changed)")
    print("\n".join(plan_table(plans["from"], plans["to"])))
    if args.plan_only:
        return 0
    if not os.path.exists(CDK_CLI):
        print("error: node_modules/.bin/cdk is missing; run `make setup` (npm ci)", file=sys.stderr)
        return 2
    from provisioner.plan import Plan
    from stacks.job import plan_tags

    tags = {side: plan_tags(Plan.from_dict(plans[side])) for side in plans}
    changed = [f"{k}: {tags['from'][k]} -> {v}" for k, v in tags["to"].items()
               if tags["from"].get(k) != v]  # fmt: skip
    if changed and not args.with_tags:
        print(f"\ntags on every resource: {'; '.join(changed)} (--with-tags to list them)")
    job = plans["to"]["job"]
    for suffix in ("data", "ps", "training"):
        stack = f"{job}-{suffix}"
        whole = one_sided(dirs["from"], dirs["to"], stack)
        if whole is not None:
            print(f"\n=== {stack} ===\n{whole}")
            continue
        if not os.path.exists(os.path.join(dirs["to"], f"{stack}.template.json")):
            continue  # on neither side
        code, text = template_diff(
            dirs["from"], dirs["to"], stack, None if args.with_tags else tags["to"]
        )
        print(f"\n=== {job}-{suffix} ===\n{text}")
        if code not in (0, 1):  # 1 means "differences found" with --fail; anything else broke
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
