"""λDNN's training-time terms (Xu et al., IEEE TC 71(2), 2022, §3) and this project's extensions.

Every term is a small pure function over numpy arrays (scalars broadcast), so the planner can
evaluate millions of (n, m, arch, PS) cells at once and a single plan is the same computation on
one cell. Symbols follow λDNN: n functions of m MB, local batch b_l, global batch b_g = n·b_l,
n_t samples of d_t bytes, model of d_m bytes, e epochs. Bandwidths are in decimal MB/s, sizes in
MB = 10^6 bytes, /tmp in MiB as Lambda configures it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from provisioner.profile import RateCurve

Arr = npt.NDArray[Any]
MIB = 1024 * 1024
EPHEMERAL_HEADROOM_MB = 64  # room for the runtime's own scratch files next to shard + checkpoint


def local_batch(n: Arr, profiled_local_batch: int, max_global_batch: int) -> Arr:
    """λDNN local-batch rule: b_l = b_l^f while n·b_l^f ≤ b_g^max, else ⌊b_g^max / n⌋."""
    n = np.asarray(n, dtype=np.int64)
    capped = max_global_batch // np.maximum(n, 1)
    return np.where(n * profiled_local_batch <= max_global_batch, profiled_local_batch, capped)


def iterations(dataset_samples: int, epochs: int, global_batch: Arr) -> Arr:
    """λDNN iteration count k = ⌈n_t·e / b_g⌉ (integer arithmetic, no float rounding)."""
    gb = np.maximum(np.asarray(global_batch, dtype=np.int64), 1)
    return -(-(dataset_samples * epochs) // gb)


def s3_bandwidth_mb_s(memory_mb: Arr, per_memory_mb: float, intercept: float, cap: float) -> Arr:
    """λDNN B_s(m) = min(α2·m + β2, B_s^max): S3 → function bandwidth grows with memory."""
    return np.minimum(per_memory_mb * np.asarray(memory_mb, dtype=np.float64) + intercept, cap)


def load_time_s(dataset_mb: float, n: Arr, s3_mb_s: Arr) -> Arr:
    """λDNN t_load = d_t / (n·B_s(m)): each function reads its 1/n shard of the dataset."""
    return dataset_mb / (np.asarray(n, dtype=np.float64) * s3_mb_s)


def training_rate_samples_s(curve: RateCurve, share: Arr, memory_mb: Arr) -> Arr:
    """R(m), extending λDNN's linear fit R = α1·m + β1 to measured points.

    Points (keyed by vCPU share, or by memory) are made non-decreasing (running maximum: more
    CPU never trains slower), interpolated linearly, proportional below the first point and flat
    beyond the last.
    """
    if curve.is_linear:
        alpha = float(curve.alpha1_samples_s_per_mb or 0.0)
        beta = float(curve.beta1_samples_s or 0.0)
        return np.maximum(alpha * np.asarray(memory_mb, dtype=np.float64) + beta, 0.0)
    by_memory = bool(curve.memory_points_mb)
    xs = np.asarray(curve.memory_points_mb if by_memory else curve.vcpu_shares, dtype=np.float64)
    ys = np.maximum.accumulate(np.asarray(curve.samples_per_s, dtype=np.float64))
    x = np.asarray(memory_mb if by_memory else threaded_share(share), dtype=np.float64)
    below = ys[0] * x / xs[0]
    return np.where(x < xs[0], below, np.interp(x, xs, ys))


def threaded_share(share: Arr) -> Arr:
    """The share a worker can use: min(s, max(1, ⌊s⌋)), as it runs max(1, ⌊s⌋) torch threads.

    functions/worker.torch_threads sets one thread per whole vCPU, so between whole vCPUs the
    extra fraction idles (measured: MobileNetV2 at 1.5 vCPU trains no faster than at 1.0) and
    points measured by vCPU share are read at this share. Memory-keyed and linear curves
    (λDNN's runtime, all cores busy) are not.
    """
    s = np.asarray(share, dtype=np.float64)
    return np.minimum(s, np.maximum(1.0, np.floor(s)))


def load_overhead_s(load_cpu_s: float | None, share: Arr, n: Arr, total_vcpu: float | None) -> Arr:
    """Extension: the load's CPU-bound part (S3 client, two requests, np.load) at the worker's
    share: load_cpu_s / min(1, s, C/n). Single-threaded, so more than one vCPU does not help;
    on C shared cores n loads at once run at C/n each (measured on 2 cores: 0.3 s at 1 vCPU,
    0.5 s at 0.58, 1.3–1.7 s with 8 workers)."""
    s = np.minimum(np.asarray(share, dtype=np.float64), 1.0)
    if total_vcpu is not None:
        s = np.minimum(s, total_vcpu / np.maximum(np.asarray(n, dtype=np.float64), 1.0))
    return (load_cpu_s or 0.0) / s


def compute_time_s(local_batch_: Arr, rate_samples_s: Arr) -> Arr:
    """λDNN t_comp = b_l / R(m): one forward + backward pass over the local batch."""
    with np.errstate(divide="ignore"):
        return np.asarray(local_batch_, dtype=np.float64) / rate_samples_s


def burst_iterations(burst_s: Arr, communication_burst_s: Arr, k: Arr) -> Arr:
    """Extension: iterations done while the PS has network I/O credits, at most k.

    EC2 instances whose bandwidth is "up to" a peak run at the peak for a limited time (the
    catalog's burst_s, spent while the instance sends above its baseline) and at the baseline
    after. The PS sends only during the exchange, so a fresh instance's credits last
    ⌊burst_s / t_comm at the peak⌋ iterations. Credits earned while the PS idles are not
    counted (conservative), and this depends on n and the PS only, never on memory.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        fit = np.floor(np.asarray(burst_s, dtype=np.float64) / communication_burst_s)
    fit = np.where(np.isfinite(fit), fit, 0.0)
    return np.minimum(fit, np.asarray(k, dtype=np.float64))


def two_rate_mean(k: Arr, k_burst: Arr, burst: Arr, baseline: Arr) -> Arr:
    """The mean over k iterations of a term that is `burst` for k_burst and `baseline` after."""
    k = np.maximum(np.asarray(k, dtype=np.float64), 1.0)
    with np.errstate(invalid="ignore"):  # 0 · inf of an infeasible cell stays NaN → masked
        return np.where(k_burst > 0, (k_burst * burst + (k - k_burst) * baseline) / k, baseline)


def ps_bandwidth_mb_s(
    n: Arr, function_mb_s: float, shard_mb_s: Arr, ps_count: Arr, flow_cap_mb_s: float
) -> Arr:
    """λDNN B_p(n) = min(B_f^max, B_ps / n), extended to sharded PS with a per-flow cap.

    Each of the ps_count shards serves d_m/ps_count to n workers over its *baseline* bandwidth;
    a worker's flow to one shard is capped (5 Gbps outside a placement group), so the effective
    per-worker bandwidth is min(B_f^max, ps_count · min(flow cap, shard baseline / n)).
    """
    n = np.asarray(n, dtype=np.float64)
    per_shard = np.minimum(flow_cap_mb_s, np.asarray(shard_mb_s, dtype=np.float64) / n)
    return np.minimum(function_mb_s, np.asarray(ps_count, dtype=np.float64) * per_shard)


def communication_time_s(model_mb: float, ps_mb_s: Arr, rtt_s: float) -> Arr:
    """λDNN t_comm = 2·d_m / B_p(n) (push gradients, pull parameters), plus one round trip each."""
    return 2.0 * model_mb / ps_mb_s + 2.0 * rtt_s


def aggregation_time_s(n: Arr, model_mb: float, ps_count: Arr, mb_s_per_core: float) -> Arr:
    """Extension: each PS shard averages n gradients of d_m/ps_count and applies the update.

    One core per shard: the shard process's numpy element-wise work is single-threaded.
    """
    shard_mb = model_mb / np.asarray(ps_count, dtype=np.float64)
    return np.asarray(n, dtype=np.float64) * shard_mb / mb_s_per_core


def checkpoint_time_s(
    model_mb: float,
    ps_count: Arr,
    ps_s3_mb_s: Arr | float,
    put_request_s: float,
    shared_host: bool = False,
) -> Arr:
    """Extension: shards write their slice (parameters + momentum, 2·d_m/ps_count) to S3 at once,
    each one PUT: its request latency plus the slice at the PS's S3 bandwidth.

    Where the shards share one host (`shared_host`: the local platform's cores and its one S3
    server) the slices share its bandwidth, so the write takes the whole model's bytes: measured
    on 2 cores, MobileNetV2 (9 MB) with two shards, 0.26-0.30 s a checkpoint against 0.21 s
    with one (bench/predict), where halving the bytes predicted 0.12 s.
    """
    writers = np.where(shared_host, 1.0, np.asarray(ps_count, dtype=np.float64))
    return put_request_s + 2.0 * model_mb / writers / ps_s3_mb_s


def checkpoint_interval_s(checkpoint_s: Arr, max_loss_s: float, max_overhead: float) -> Arr:
    """Extension: training seconds between periodic PS checkpoints.

    A PS shard that crashes restores its newest checkpoint, so the interval bounds the training
    redone (λDNN checkpoints proactively for the same reason); each checkpoint stalls the
    iteration that writes it by checkpoint_s, so the interval is never shorter than
    checkpoint_s / max_overhead (Young, CACM 1974: the interval trades the two).
    """
    return np.maximum(max_loss_s, np.asarray(checkpoint_s, dtype=np.float64) / max_overhead)


def checkpoint_every_iterations(step_s: Arr, interval_s: Arr) -> Arr:
    """Extension: the interval in iterations (every shard counts the same iterations, so the
    shards' checkpoints always share an iteration a restore can return to); at least 1."""
    with np.errstate(divide="ignore", invalid="ignore"):
        every = np.ceil(np.asarray(interval_s, dtype=np.float64) / step_s)
    return np.where(np.isfinite(every), np.maximum(every, 1.0), 1.0)


def periodic_checkpoint_s(checkpoint_s: Arr, every: Arr) -> Arr:
    """Extension: the periodic checkpoint's time per iteration, C every ⌈τ/step⌉ iterations."""
    return np.asarray(checkpoint_s) / every


def iterations_per_invocation(usable_s: float, overhead_s: Arr, iteration_s: Arr, k: Arr) -> Arr:
    """Extension (15-minute limit): iterations one invocation completes after its fixed overhead.

    0 means the configuration cannot make progress within one invocation (infeasible).
    """
    room = usable_s - overhead_s
    with np.errstate(divide="ignore", invalid="ignore"):
        fit = np.floor(np.where(room > 0, room, 0.0) / iteration_s)
    fit = np.where(np.isfinite(fit), fit, 0.0)
    return np.minimum(fit, np.asarray(k, dtype=np.float64)).astype(np.int64)


def invocations(k: Arr, per_invocation: Arr) -> Arr:
    """Extension: chain links per worker, ⌈k / iterations per invocation⌉ (1 if infeasible)."""
    per = np.maximum(per_invocation, 1)
    return -(-np.asarray(k, dtype=np.int64) // per)


def ephemeral_storage_mb(dataset_bytes: int, n: Arr, model_bytes: int, minimum_mb: int) -> Arr:
    """/tmp the worker needs: its dataset shard, a model checkpoint pair and fixed headroom."""
    shard = dataset_bytes / np.asarray(n, dtype=np.float64) + 2.0 * model_bytes
    need = np.ceil(shard / MIB) + EPHEMERAL_HEADROOM_MB
    return np.asarray(np.maximum(need, minimum_mb), dtype=np.int64)


def warmup_steps_s(steps: float, core_compute_s: Arr) -> Arr:
    """Extension: a cold process's slower first steps, `steps` of the one-vCPU step; none where
    the profile measured none (even where a step is infinitely slow: 0·inf is nan)."""
    if not steps:
        return np.zeros(np.shape(core_compute_s))
    return steps * np.asarray(core_compute_s, dtype=np.float64)
