"""The benchmark's cases: the fixed configurations, the deadlines the planner sizes for, and the
plan each case runs on the local platform's catalog."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provisioner import Goal, Limits, load_catalog, load_profile, plan_job
from provisioner.catalog import Catalog
from provisioner.planner import build_plan
from provisioner.profile import WorkloadProfile
from provisioner.search import fastest_cell, solve_deadline
from provisioner.space import Choice, build_space

TERMS = (
    "load", "compute", "communication", "ps_aggregation", "startup", "chaining", "launch", "total"
)  # fmt: skip
LOCAL_PS = "loopback"
LOCAL_ARCH = "x86_64"  # the architecture every configuration is built and re-predicted on
AWS_CATALOG = "lambda-2025"  # what a `cpu_scale="auto"` case is planned on
INVOCATION_LIMIT_S = 900.0  # every case's: a link ends by its iteration cap, never by time


@dataclass(frozen=True)
class Case:
    """One benchmark row: a configuration (or a deadline the planner sizes for)."""

    workload: str
    n: int = 0  # 0: the planner chooses (planned rows)
    memory_mb: int = 0
    ps_count: int = 1
    iterations: int = 0  # 0: the workload's own k
    per_invocation: int = 0  # iteration cap per invocation (0: one link)
    deadline_s: float = 0.0  # planned rows only
    # planned rows only, instead of a deadline: where the plan's target lies between the fastest
    # and the cheapest plan's predicted times (tight_deadline_s), on any machine's speed
    tight: float = 0.0
    # held-out rows (bench.predict.heldout) vary these too; the defaults are the grid's
    sync: str = "ps"  # "ps" (ps_count shards) or "s3" (the S3 exchange with `reducers`)
    reducers: int = 0  # k of an S3 row
    # "1": planned on the local catalog, a vCPU one local core; "auto": planned on AWS's catalog
    # (AWS_CATALOG) and fitted to this machine by the emulator, as `--cpu-scale auto` does
    cpu_scale: str = "1"

    @property
    def planned(self) -> bool:
        return bool(self.deadline_s or self.tight)

    @property
    def label(self) -> str:
        if self.tight:
            return f"{self.workload} @ {'tight' if self.tight < 1 else 'loose'} {self.tight:g}"
        if self.deadline_s:
            return f"{self.workload} @ {self.deadline_s:g} s"
        links = f", {self.per_invocation}/link" if self.per_invocation else ""
        sync = f"s3 k={self.reducers}" if self.sync == "s3" else f"ps={self.ps_count}"
        scale = ", cpu auto" if self.cpu_scale == "auto" else ""
        return f"{self.workload} n={self.n} m={self.memory_mb} {sync}{links}{scale}"


# MobileNetV2 needs 1,216 MB (its profile's min_memory_mb: 975 MB peak resident set × 1.2), so
# its smallest size here is 1,280 MB; the planner would not choose less.
FIXED = (
    Case("digits-mlp", 1, 1024, 1, 1500),
    Case("digits-mlp", 1, 2653, 1, 1500),
    Case("digits-mlp", 2, 1024, 1, 1500, 500),
    Case("digits-mlp", 2, 1769, 2, 1500),
    Case("digits-mlp", 4, 1024, 1, 1000),
    Case("digits-mlp", 8, 1024, 2, 800, 400),
    Case("synthetic-cifar-cnn", 1, 1024, 1, 60),
    Case("synthetic-cifar-cnn", 1, 1769, 1, 60, 30),
    Case("synthetic-cifar-cnn", 2, 1024, 1, 60),
    Case("synthetic-cifar-cnn", 2, 1769, 2, 60),
    Case("synthetic-cifar-cnn", 4, 1024, 1, 40, 20),
    Case("synthetic-cifar-cnn", 8, 1024, 1, 24),
    Case("synthetic-cifar-mobilenetv2", 1, 1769, 1, 20),
    Case("synthetic-cifar-mobilenetv2", 1, 2653, 2, 20, 10),
    Case("synthetic-cifar-mobilenetv2", 2, 1280, 1, 20),
    Case("synthetic-cifar-mobilenetv2", 2, 1769, 2, 16, 8),
    Case("synthetic-cifar-mobilenetv2", 4, 1280, 1, 12),
    Case("synthetic-cifar-mobilenetv2", 8, 1280, 2, 8, 4),
)
# Loose deadlines, whose target the cheapest plan just meets, and tight ones, which the cheapest
# plan misses, so the plan sits at its target and the catalog's default_slack is what stands
# between it and the deadline. Both are set from this machine's own fastest and cheapest plans,
# because fixed seconds have no plan at all on an hour this VM runs three times slower.
LOOSE_SHARE = 1.0
TIGHT_SHARE = 0.5
PLANNED = (
    Case("digits-mlp", tight=LOOSE_SHARE),
    Case("synthetic-cifar-cnn", tight=LOOSE_SHARE),
    Case("synthetic-cifar-mobilenetv2", tight=LOOSE_SHARE),
    Case("digits-mlp", tight=TIGHT_SHARE),
    Case("synthetic-cifar-cnn", tight=TIGHT_SHARE),
    Case("synthetic-cifar-mobilenetv2", tight=TIGHT_SHARE),
)
QUICK = (FIXED[2], FIXED[8], PLANNED[0])


def tight_deadline_s(profile: WorkloadProfile, catalog: Catalog, share: float) -> float:
    """A deadline whose planning target (the deadline less the catalog's default_slack) lies
    `share` of the way from the fastest plan's predicted time to the cheapest plan's: the
    cheapest plan misses it, so the planner sizes up and the plan sits near its target."""
    space = build_space(profile, catalog, Limits())
    fastest_s, _ = fastest_cell(profile, catalog, space)
    cheapest = solve_deadline(profile, catalog, space, math.inf)
    if cheapest is None or not math.isfinite(fastest_s):
        raise ValueError(f"bad case: {profile.name} has no plan on {catalog.name}")
    i, pool = cheapest
    target_s = fastest_s + share * (float(pool.total_s[i]) - fastest_s)
    if share >= 1.0:  # the cheapest plan meets it, rounding in the slack's product included
        target_s *= 1.0 + 1e-9
    return target_s / (1.0 - catalog.default_slack)


def job_of(case: Case) -> str:
    """The case's job name, which names its stacks: letters, digits and hyphens only."""
    if case.deadline_s:
        return f"bench-d{case.deadline_s:g}"
    if case.tight:
        return f"bench-tight{round(case.tight * 100)}"
    return f"bench-n{case.n}-m{case.memory_mb}"


def plan_of(case: Case, profile_path: Path | None = None, catalog_path: Path | None = None) -> Any:
    """The Plan a case runs: built for its configuration, or chosen for its deadline, with the
    workload's profile at `profile_path` (default: the committed one), on the catalog at
    `catalog_path` (default: catalog/local.json)."""
    profile = load_profile(profile_path or case.workload)
    aws = case.cpu_scale == "auto"  # the emulator's report predicts it on `catalog_path` still
    catalog = load_catalog(AWS_CATALOG if aws else catalog_path or "local")
    job = job_of(case)
    if case.planned:
        deadline_s = case.deadline_s or tight_deadline_s(profile, catalog, case.tight)
        plan = plan_job(profile, catalog, Goal(deadline_s=deadline_s), Limits(), job).plan
    else:
        ps_type = catalog.ps_default_type if aws else LOCAL_PS
        choice = choice_of(case, case.memory_mb, ps_type)
        plan = build_plan(profile, catalog, choice, Goal(deadline_s=None), Limits(), job=job)
    if not case.iterations:
        return plan
    return dataclasses.replace(
        plan, training=dataclasses.replace(plan.training, iterations=case.iterations)
    )


def choice_of(case: Case, memory_mb: int, ps_type: str = LOCAL_PS) -> Choice:
    """The case's configuration at `memory_mb` (the local memory its cores stand for, when the
    report predicts an AWS-planned case here), on PS type `ps_type` if it has a PS."""
    if case.sync == "s3":
        return Choice(case.n, memory_mb, LOCAL_ARCH, "", 0, "s3", case.reducers)
    return Choice(case.n, memory_mb, LOCAL_ARCH, ps_type, case.ps_count)


def case_of(row: dict[str, Any]) -> Case:
    """The Case a results row ran (rows written before cases were stored: matched by label)."""
    if "case_fields" in row:
        return Case(**row["case_fields"])
    for case in FIXED + PLANNED:
        if case.label == row["case"]:
            return case
    raise ValueError(f"bad results row {row['case']!r}: not a case of this benchmark")
