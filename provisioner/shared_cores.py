"""How n CPU-bound tasks at once share C cores: the local machine's one rule of sharing."""

from __future__ import annotations

import numpy as np

from provisioner.terms import Arr


def shared_slowdown(n: Arr, total_vcpu: Arr | float | None) -> Arr:
    """Extension: max(1, n/C), how much longer n CPU-bound tasks at once take on C shared
    cores than one alone; 1 where every function has its own cores (AWS: total_vcpu None)."""
    n = np.asarray(n, dtype=np.float64)
    if total_vcpu is None:
        return np.ones(n.shape)
    return np.maximum(1.0, n / total_vcpu)
