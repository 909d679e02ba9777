"""The pipelined search's tables and its dynamic programme over the blocks.

For fixed (arch, sync route, r, M) every block range [a, b)'s useful memories, with their slot,
sync, compute, boundary and memory need (range_options, built with numpy over all ranges at
once); and the Pareto labels (max slot, max sync, Σ memory) of every cut into S stages
(stage_labels). provisioner/pipeline_search.py says why this is exact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from provisioner.catalog import Catalog
from provisioner.pipeline_model import (
    SyncRoute,
    boundary_transfer_s,
    stage_compute_per_micro_s,
    stage_memory_needed_mb,
    stage_sync_s,
)
from provisioner.profile import WorkloadProfile
from provisioner.quota import vcpu_share
from provisioner.terms import Arr

Option = tuple[float, float, int, float, float, int]


@dataclass(frozen=True)
class RangeTables:
    """Every block range's (row: range_index) options as arrays over memory; a range's list of
    (slot, sync, memory, compute, boundary, need) is built when the search first asks for it
    (the bounds leave many ranges unasked)."""

    rows: dict[tuple[int, int], int]
    arrays: tuple[Arr, Arr, Arr, Arr]  # slot, sync, compute, boundary: (ranges, memories)
    keep: Arr  # (ranges, memories): the useful memories of each range
    need: Arr  # (ranges,)
    least_mb: Arr  # (ranges,) the smallest memory that fits, inf where none does
    grid: Arr
    built: dict[tuple[int, int], list[Option]]

    def options(self, a: int, b: int) -> list[Option]:
        found = self.built.get((a, b))
        if found is None:
            i = self.rows[(a, b)]
            js = np.nonzero(self.keep[i])[0]
            cols = [x[i, js].tolist() for x in self.arrays]
            need = int(self.need[i])
            found = [
                (sl, sy, m, co, bo, need)
                for sl, sy, m, co, bo in zip(
                    cols[0], cols[1], self.grid[js].tolist(), cols[2], cols[3], strict=True
                )  # fmt: skip
            ]
            self.built[(a, b)] = found
        return found


def inverse_rates(profile: WorkloadProfile, catalog: Catalog, grid: np.ndarray, arch: str) -> Arr:
    """(blocks + 1, J) prefix sums over the blocks of 1 / R_b(share(m)): a range's compute per
    sample at every memory is the difference of two rows (stage_compute_per_micro_s's sum)."""
    share = vcpu_share(grid, catalog.mb_per_vcpu, catalog.max_vcpu)
    rows = [stage_compute_per_micro_s((b,), arch, 1, share, grid) for b in profile.blocks]
    return np.vstack([np.zeros(grid.size), np.cumsum(np.array(rows), axis=0)])


def block_ranges(count: int) -> tuple[Arr, Arr]:
    """(first, stop) of every block range [a, b), a < b ≤ count, in one fixed order."""
    pairs = [(a, b) for a in range(count) for b in range(a + 1, count + 1)]
    return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])


def range_syncs(
    profile: WorkloadProfile,
    catalog: Catalog,
    grid: np.ndarray,
    route: SyncRoute,
    replicas: int,
) -> Arr:
    """(ranges, J): every stage range's sync per iteration at every memory (stage_sync_s)."""
    first, stop = block_ranges(len(profile.blocks))
    params = np.concatenate([[0], np.cumsum([b.parameter_bytes for b in profile.blocks])])
    memo: dict[int, Arr] = {}
    rows = []
    for p in (params[stop] - params[first]).tolist():
        if p not in memo:
            memo[p] = stage_sync_s(profile, catalog, route, int(p), replicas, grid)
        rows.append(memo[p])
    return np.array(rows)


def range_options(
    profile: WorkloadProfile,
    catalog: Catalog,
    grid: np.ndarray,
    inv_rate: Arr,
    syncs: Arr,
    micro_batches: int,
    b_l: int,
) -> RangeTables:
    """Every stage range's memory options at once; a memory is dropped where the next smaller
    one is no worse in slot and in sync (it reaches the same pair for less)."""
    blocks = profile.blocks
    count = len(blocks)
    micro = b_l // micro_batches
    first, stop = block_ranges(count)
    params = np.concatenate([[0], np.cumsum([b.parameter_bytes for b in blocks])])
    acts = np.concatenate([[0], np.cumsum([b.activation_bytes_per_sample for b in blocks])])
    # stage 0's input is the dataset sample, read with the shard: it crosses no boundary; the
    # last stage hands nothing on
    outs = [b.output_bytes_per_sample for b in blocks]
    in_sample = np.array([0, *outs[:-1]])[first]
    out_sample = np.array([*outs[:-1], 0, 0])[stop - 1]
    side_in = np.array([boundary_transfer_s(catalog, micro * x, 0.0, grid) for x in
                        [0, *outs[:-1]]])  # fmt: skip
    side_out = np.array([boundary_transfer_s(catalog, 0.0, micro * x, grid) for x in
                         [*outs[:-1], 0]])  # fmt: skip
    need = stage_memory_needed_mb(
        profile.runtime_memory_mb or 0, params[stop] - params[first], acts[stop] - acts[first],
        in_sample + out_sample, b_l, micro,
    )  # fmt: skip
    comp = micro * (inv_rate[stop] - inv_rate[first])
    bnd = side_in[first] + side_out[stop - 1]
    slot = comp + bnd
    valid = grid[np.newaxis, :] >= need[:, np.newaxis]
    keep = valid.copy()
    better = (slot[:, 1:] < slot[:, :-1]) | (syncs[:, 1:] < syncs[:, :-1])
    keep[:, 1:] &= better | ~valid[:, :-1]  # the first memory that fits is always an option
    fits = valid.any(axis=1)
    least = np.where(fits, grid[np.argmax(valid, axis=1)], np.inf)
    rows = {(a, b): i for i, (a, b) in enumerate(zip(first.tolist(), stop.tolist(), strict=True))}
    return RangeTables(rows, (slot, syncs, comp, bnd), keep, need, least, grid, {})


Label = tuple[float, float, int, tuple[tuple[int, int, int], ...]]


def _pareto(labels: list[Label]) -> list[Label]:
    """The labels no other label matches or beats in (max slot, max sync, Σ memory)."""
    labels.sort(key=lambda x: (x[0], x[1], x[2]))
    out: list[Label] = []
    for lab in labels:
        if any(o[1] <= lab[1] and o[2] <= lab[2] for o in out):
            continue  # o's slot ≤ lab's too (sorted): lab is matched or beaten
        out.append(lab)
    return out


def least_memory_rest(tables: RangeTables, count: int, stages: int) -> list[list[float]]:
    """rest[ℓ][b]: the least Σ memory of blocks [b, count) cut into ℓ stages, each at its
    smallest memory that fits (inf where none): a floor on what a partial label still adds."""
    least = np.full((count + 1, count + 1), np.inf)  # least[b, c]: range [b, c) alone
    for (a, c), i in tables.rows.items():
        least[a, c] = tables.least_mb[i]
    rest = np.full(count + 1, np.inf)
    rest[count] = 0.0
    out = [rest.tolist()]
    for _ in range(stages):
        rest = np.min(least + rest[np.newaxis, :], axis=1)
        out.append(rest.tolist())
    return out


def stage_labels(
    tables: RangeTables, count: int, stages: int, keep: Callable[[float, float, float], bool]
) -> list[Label]:
    """The Pareto labels of every cut of `count` blocks into `stages` stages with one memory
    option each; a label's last member lists its stages as (first, stop, option index).
    `keep(max slot, max sync, Σ memory)` drops a partial label that cannot lead to a better
    plan: the three figures only grow as stages are added, so a bound on them holds for every
    completion."""
    rest = least_memory_rest(tables, count, stages)
    layer: dict[int, list[Label]] = {0: [(0.0, 0.0, 0, ())]}
    for s in range(stages):
        nxt: dict[int, list[Label]] = {}
        left = stages - s - 1  # each later stage needs a block
        for a, labels in layer.items():
            stops = [count] if left == 0 else range(a + 1, count - left + 1)
            for b in stops:
                out = nxt.setdefault(b, [])
                for oi, (slot, sync, mem, *_rest) in enumerate(tables.options(a, b)):
                    for ls, ly, lm, path in labels:
                        lab = (max(ls, slot), max(ly, sync), lm + mem)
                        if keep(lab[0], lab[1], lab[2] + rest[left][b]):
                            out.append((*lab, (*path, (a, b, oi))))
        layer = {b: _pareto(v) for b, v in nxt.items() if v}
    return layer.get(count, [])
