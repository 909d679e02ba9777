"""The pipelined search's tables and its dynamic programme over the blocks.

For fixed (arch, M, b_l) every block range [a, b)'s slot, compute, boundary and memory need at
every memory (stage_tables, shared by every sync route); per route every range's sync
(pipeline_model.stage_syncs_s over the distinct stage sizes) and its useful memories
(range_options), all with numpy over all ranges at once; floors per range and over the cuts
(range_floors, cut_floors); and the Pareto labels (max slot, max sync, Σ memory) of every cut
into S stages (stage_labels). provisioner/pipeline_search.py says why this is exact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from provisioner.catalog import Catalog
from provisioner.pipeline_model import (
    boundary_transfer_s,
    stage_compute_per_micro_s,
    stage_memory_needed_mb,
)
from provisioner.profile import WorkloadProfile
from provisioner.quota import vcpu_share
from provisioner.terms import (
    Arr,
)

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
    light: dict[tuple[int, int], list[tuple[float, float, int]]]

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

    def triples(self, a: int, b: int) -> list[tuple[float, float, int]]:
        """options(a, b)'s (slot, sync, memory), in the same order: what the labels' programme
        reads, built for every range at once on the first call (one numpy conversion)."""
        if not self.light:
            rows, cols = np.nonzero(self.keep)  # row-major: each range's memories ascending
            found = list(zip(self.arrays[0][rows, cols].tolist(),
                             self.arrays[1][rows, cols].tolist(),
                             self.grid[cols].tolist(), strict=True))  # fmt: skip
            ends = np.searchsorted(rows, np.arange(self.keep.shape[0] + 1)).tolist()
            self.light.update({
                ab: found[ends[i]:ends[i + 1]] for ab, i in self.rows.items()
            })  # fmt: skip
        return self.light[(a, b)]


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


def range_sizes(profile: WorkloadProfile) -> tuple[Arr, Arr]:
    """(the distinct parameter bytes of the block ranges, each range's index into them): a
    range's sync (stage_sync_s) depends on its parameters alone, so stage_syncs_s of the sizes
    indexed by the second is every range's sync at every memory."""
    first, stop = block_ranges(len(profile.blocks))
    params = np.concatenate([[0], np.cumsum([b.parameter_bytes for b in profile.blocks])])
    sizes, which = np.unique(params[stop] - params[first], return_inverse=True)
    return sizes, which.reshape(-1)


@dataclass(frozen=True)
class StageTables:
    """What every block range's stage is at every memory, whatever the sync route: slot,
    compute, boundary (ranges, memories), memory need (ranges,) and which memories fit."""

    first: Arr
    stop: Arr
    slot: Arr
    comp: Arr
    bnd: Arr
    need: Arr
    valid: Arr
    grid: Arr
    slot_fits: Arr  # slot where the memory fits, inf where it does not
    least_mb: Arr  # (ranges,) the smallest memory that fits, inf where none does
    least_slot_s: Arr  # (ranges,) the least slot over the memories that fit


def stage_tables(
    profile: WorkloadProfile,
    catalog: Catalog,
    grid: np.ndarray,
    inv_rate: Arr,
    micro_batches: int,
    b_l: int,
) -> StageTables:
    """Every stage range's route-independent figures at once (shared by every sync route of
    one (arch, M, b_l): only the sync column depends on the route)."""
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
    valid = grid[np.newaxis, :] >= need[:, np.newaxis]
    slot = comp + bnd
    fits = np.where(valid, slot, np.inf)
    least = np.where(valid.any(axis=1), grid[np.argmax(valid, axis=1)], np.inf)
    return StageTables(
        first, stop, slot, comp, bnd, need, valid, grid, fits, least, fits.min(axis=1)
    )


def range_options(stage: StageTables, syncs: Arr) -> RangeTables:
    """Every stage range's memory options for one sync route; a memory is dropped where the
    next smaller one is no worse in slot and in sync (it reaches the same pair for less)."""
    slot, valid, grid = stage.slot, stage.valid, stage.grid
    keep = valid.copy()
    better = (slot[:, 1:] < slot[:, :-1]) | (syncs[:, 1:] < syncs[:, :-1])
    keep[:, 1:] &= better | ~valid[:, :-1]  # the first memory that fits is always an option
    rows = {
        (a, b): i for i, (a, b) in enumerate(zip(stage.first.tolist(), stage.stop.tolist(),
                                                 strict=True))
    }  # fmt: skip
    return RangeTables(
        rows, (slot, syncs, stage.comp, stage.bnd), keep, stage.need, stage.least_mb, grid, {}, {}
    )


def range_floors(
    stage: StageTables,
    syncs: Arr,
    slots: int,
    least_it_s: float,
    least_slot_s: float = 0.0,
    least_sync_s: float = 0.0,
) -> tuple[Arr, Arr]:
    """Per range, over the memories that fit (inf where none does): the least
    m·max(least_it_s, slots·max(slot, least_slot_s) + max(sync, least_sync_s)) in MB·s and
    (only where least_it_s is 0) the least slots·slot + sync in s. A stage's share of a plan's
    Lambda MB·s per iteration is m·iteration; the iteration is slots·(slowest slot) + (slowest
    sync), the slowest at least the stage's own and at least the floors given (floors on every
    cut's slowest slot and sync, and on its iteration), so these bound the stage from below."""
    own = slots * stage.slot_fits + syncs  # inf where the memory does not fit
    secs = own.min(axis=1) if least_it_s == 0.0 else np.zeros(0)
    if least_slot_s > 0.0 or least_sync_s > 0.0:
        own = slots * np.maximum(stage.slot_fits, least_slot_s) + np.maximum(syncs, least_sync_s)
    if least_it_s > 0.0:
        own = np.maximum(own, least_it_s)
    mb_s = (own * stage.grid[np.newaxis, :]).min(axis=1)
    return mb_s, secs


def cut_floors(values: Arr, first: Arr, stop: Arr, count: int, stages: int, add: bool) -> list[Arr]:
    """rest[ℓ][b]: over every cut of blocks [b, count) into ℓ stages, the least Σ (add) or the
    least max (else) of the ranges' `values`: a floor on what the remaining stages bring,
    whatever their cut. rest[ℓ][count] is 0 for ℓ = 0 and inf after (a stage needs a block)."""
    table = np.full((count + 1, count + 1), np.inf)  # table[b, c]: range [b, c) alone
    table[first, stop] = values
    rest = np.full(count + 1, np.inf)
    rest[count] = 0.0
    out = [rest]
    for _ in range(stages):
        both = table + rest[np.newaxis, :] if add else np.maximum(table, rest[np.newaxis, :])
        rest = np.min(both, axis=1)
        out.append(rest)
    return out


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


Rest = list[tuple[list[float], list[float], list[float]]]
Keep = Callable[[float, float, float, float, float, float], bool]


def stage_labels(
    tables: RangeTables, count: int, stages: int, keep: Keep, rest: Rest
) -> list[Label]:
    """The Pareto labels of every cut of `count` blocks into `stages` stages with one memory
    option each; a label's last member lists its stages as (first, stop, option index).
    `keep(max slot, max sync, Σ memory, *rest[ℓ] at b)` drops a partial label covering [0, b)
    with ℓ stages still to place that cannot lead to a better plan; rest[ℓ] holds per b floors
    on what those ℓ stages add (least Σ memory, least Σ MB·s per iteration, least iteration).
    The three figures only grow as stages are added and the floors hold for every cut of the
    rest, so a bound on them holds for every completion; a label dominated by another has a
    bound no lower, so dropping it never keeps a label whose dominator was dropped."""
    layer: dict[int, list[Label]] = {0: [(0.0, 0.0, 0, ())]}
    for s in range(stages):
        nxt: dict[int, list[Label]] = {}
        left = stages - s - 1  # each later stage needs a block
        rest_mem, rest_mb_s, rest_s = rest[left]
        for a, labels in layer.items():
            stops = [count] if left == 0 else range(a + 1, count - left + 1)
            for b in stops:
                out = nxt.setdefault(b, [])
                rm, rms, rs = rest_mem[b], rest_mb_s[b], rest_s[b]
                for oi, (slot, sync, mem) in enumerate(tables.triples(a, b)):
                    for ls, ly, lm, path in labels:
                        lab = (ls if ls > slot else slot, ly if ly > sync else sync, lm + mem)
                        if keep(lab[0], lab[1], lab[2], rm, rms, rs):
                            out.append((*lab, (*path, (a, b, oi))))
        layer = {b: _pareto(v) for b, v in nxt.items() if v}
    return layer.get(count, [])
