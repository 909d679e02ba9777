"""The held-out draw: configurations drawn at random, per run, from a space wider than the grid
the model's figures were tuned on, so the score is the model's on configurations nobody chose.

The space: the three local workloads, n 1-12, memory uniform over the local catalog's range
above the workload's min_memory_mb (on a 64 MB grid), PS with 1-3 shards or the S3 exchange with
1..min(n, 3) reducers, one link or a per-invocation cap that makes 2-3, and the local plan
(cpu_scale 1) or the AWS plan fitted to this machine (`--cpu-scale auto`). A draw the planner
or the emulator cannot run, or the model cannot predict here, is drawn again and counted.

Each case's iterations are chosen so its local prediction of the total is a target drawn in
TARGET_S: that bounds how long a run takes and is the only place a prediction is read here; it
never enters the scoring, which holds the report's prediction to the measurement as the grid
does. Every draw is seeded (the seed and each draw go into the results).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.predict.cases import INVOCATION_LIMIT_S, Case, choice_of, plan_of
from emulator import cpu
from emulator.options import default_safety_margin_s
from provisioner import load_catalog, load_profile
from provisioner.catalog import Catalog
from provisioner.planner import RunRules, predict_run

WORKLOADS = ("digits-mlp", "synthetic-cifar-cnn", "synthetic-cifar-mobilenetv2")
MAX_N = 12
MEMORY_STEP_MB = 64
MAX_SHARDS = MAX_REDUCERS = 3
LINKS = (2, 3)  # a per-invocation cap makes this many links
CPU_SCALES = ("1", "auto")
TARGET_S = (8.0, 25.0)  # the local prediction of the total a case's iterations aim at
# A draw whose fewest iterations are predicted past this is drawn again: a run's length bound
LONGEST_S = 90.0
MAX_DRAWS = 1000  # per case: a space that yields nothing runnable is a bug, said in one line


@dataclass(frozen=True)
class Here:
    """The machine a draw is made for: its local catalog (and the file it came from, None for
    catalog/local.json) and the cores the emulator fits an AWS plan to."""

    catalog: Catalog
    path: Path | None
    cores: float

    @classmethod
    def of(cls, path: Path | None = None, cores: float | None = None) -> Here:
        catalog = load_catalog(str(path) if path else "local")
        return cls(catalog, path, cores or cpu.machine_cores())

    def most_iterations(self, case: Case) -> int:
        """The workload's k for the case's plan: what the plan's sense check allows at most."""
        return int(plan_of(case, None, self.path).training.iterations)


@dataclass
class Draws:
    """What a draw made: the cases, the target each aimed at, and what was drawn again, why."""

    seed: int
    cases: list[Case] = field(default_factory=list)
    targets_s: list[float] = field(default_factory=list)
    redrawn: Counter[str] = field(default_factory=Counter)

    def record(self) -> dict[str, Any]:
        """As the results' meta keeps it."""
        return {
            "seed": self.seed,
            "cases": len(self.cases),
            "draws": [
                {"case": c.label, "target_s": round(t, 3)}
                for c, t in zip(self.cases, self.targets_s, strict=True)
            ],
            "redrawn": sum(self.redrawn.values()),
            "redrawn_by_reason": dict(sorted(self.redrawn.items())),
        }


def memory_grid_mb(min_memory_mb: float, catalog: Catalog) -> list[int]:
    """The sizes on MEMORY_STEP_MB's grid within the catalog's range, at or above the
    workload's minimum."""
    low = max(min_memory_mb, catalog.memory_min_mb)
    first = math.ceil(low / MEMORY_STEP_MB) * MEMORY_STEP_MB
    return list(range(first, int(catalog.memory_max_mb) + 1, MEMORY_STEP_MB))


def draw_configuration(rng: random.Random, local: Catalog) -> tuple[Case, int]:
    """One configuration (iterations not yet chosen) and the links its cap should make (1:
    one link)."""
    workload = rng.choice(WORKLOADS)
    n = rng.randint(1, MAX_N)
    memory_mb = rng.choice(memory_grid_mb(load_profile(workload).min_memory_mb, local))
    if rng.random() < 0.5:
        sync, shards, reducers = "ps", rng.randint(1, MAX_SHARDS), 0
    else:
        sync, shards, reducers = "s3", 0, rng.randint(1, min(n, MAX_REDUCERS))
    links = 1 if rng.random() < 0.5 else rng.choice(LINKS)
    scale = rng.choice(CPU_SCALES)
    case = Case(workload, n, memory_mb, shards, sync=sync, reducers=reducers, cpu_scale=scale)
    return case, links


def local_memory_mb(case: Case, here: Here) -> int:
    """The memory the report predicts the case at here: its own on the local plan; on the AWS
    plan, the cores the emulator gives a worker (cpu.default_cpu_scale) as memory, as
    emulator.report.local_choice reads them."""
    if case.cpu_scale == "1":
        return case.memory_mb
    scale = cpu.default_cpu_scale(case.n, case.memory_mb, here.cores)
    return max(1, round(cpu.local_cores(case.memory_mb, scale) * here.catalog.mb_per_vcpu))


def per_invocation(iterations: int, links: int) -> int:
    """The cap that splits `iterations` into about `links` links (0: one link)."""
    return 0 if links == 1 else -(-iterations // links)


def predicted_total_s(case: Case, iterations: int, links: int, here: Here) -> float:
    """The local prediction of the case's total at `iterations`, as the report will make it."""
    cap = per_invocation(iterations, links)
    rules = RunRules(
        invocation_limit_s=INVOCATION_LIMIT_S,
        safety_margin_s=default_safety_margin_s(INVOCATION_LIMIT_S),
        max_iterations_per_invocation=cap,
        iterations=iterations,
    )
    choice = choice_of(case, local_memory_mb(case, here))
    plan = predict_run(load_profile(case.workload), here.catalog, choice, rules, job="heldout")
    return float(plan.prediction.total_s)


def iterations_for(case: Case, links: int, most: int, target_s: float, here: Here) -> int:
    """The most iterations from `links` to `most` whose local prediction stays within
    `target_s` (at least `links`: every link runs one)."""
    low, high = links, most
    while low < high:  # the total grows with the iterations
        middle = (low + high + 1) // 2
        if predicted_total_s(case, middle, links, here) <= target_s:
            low = middle
        else:
            high = middle - 1
    return low


def why_not(case: Case, links: int, here: Here) -> str | None:
    """Why the configuration cannot be run or predicted here, in a word or two; None if it can."""
    try:
        most = here.most_iterations(case)
    except ValueError:  # Infeasible among them
        return "no plan"
    if most < links:
        return "fewer iterations than links"
    auto = case.cpu_scale == "auto"
    scale = cpu.default_cpu_scale(case.n, case.memory_mb, here.cores) if auto else 1.0
    try:  # the emulator refuses a quota the kernel cannot enforce
        cpu.check_cpu_scale(case.cpu_scale, scale, case.memory_mb)
    except ValueError:
        return "cpu quota"
    try:
        fewest_s = predicted_total_s(case, links, links, here)
    except ValueError:
        return "no local prediction"
    return "too long" if fewest_s > LONGEST_S else None


def draw_cases(
    count: int,
    seed: int,
    here: Here | None = None,
    refuse: Callable[[Case, int, Here], str | None] = why_not,
) -> Draws:
    """`count` runnable cases drawn with `seed` for `here` (default: catalog/local.json, this
    machine's cores), each with the iterations that aim its local prediction at a target drawn
    in TARGET_S; a draw `refuse` names a reason against is drawn again and counted under it."""
    here = here or Here.of()
    rng = random.Random(seed)
    draws = Draws(seed)
    while len(draws.cases) < count:
        for _ in range(MAX_DRAWS):
            case, links = draw_configuration(rng, here.catalog)
            reason = refuse(case, links, here)
            if reason is None:
                break
            draws.redrawn[reason] += 1
        else:
            raise ValueError(f"bad held-out space: no runnable configuration in {MAX_DRAWS} draws")
        target_s = rng.uniform(*TARGET_S)
        k = iterations_for(case, links, here.most_iterations(case), target_s, here)
        draws.cases.append(Case(case.workload, case.n, case.memory_mb, case.ps_count, k,
                                per_invocation(k, links), sync=case.sync, reducers=case.reducers,
                                cpu_scale=case.cpu_scale))  # fmt: skip
        draws.targets_s.append(target_s)
    return draws
