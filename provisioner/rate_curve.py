"""A training rate curve R per architecture: the profile's own and each block's."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RateCurve:
    """Training rate R of one function for one architecture.

    Either measured points (vCPU share, or memory in MB, -> samples/s; interpolated
    monotonically, proportional below the first point, flat beyond the last) or λDNN's linear
    fit R = α1·m + β1 in the memory size m (MB).
    """

    arch: str
    vcpu_shares: tuple[float, ...] = ()
    samples_per_s: tuple[float, ...] = ()
    alpha1_samples_s_per_mb: float | None = None
    beta1_samples_s: float | None = None
    memory_points_mb: tuple[float, ...] = ()  # points keyed by memory instead of vCPU share

    @property
    def is_linear(self) -> bool:
        return self.alpha1_samples_s_per_mb is not None
