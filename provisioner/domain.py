"""The values a figure may take: its domain, declared once per figure in a table.

A catalog or profile figure outside its domain (NaN, Infinity, 0 where only a positive value
means anything, a typo of 1e308) would reach the performance model's arithmetic and come out as a
warning, an empty search or a plan of nonsense; checked at load time it is one line naming the
figure, the value and the accepted range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# Ceilings for figures with no platform range of their own: far above any real value, far below
# where products of figures overflow a float.
MAX_MEMORY_MB = 1_048_576  # a TiB: no function or machine the planner sizes has more
MAX_CORES = 4096.0  # no machine or function has more cores
MAX_MB_S = 1e6  # a TB/s: above any network, disk or memory bandwidth
MAX_GBPS = 10_000.0  # 10 Tbit/s: above any NIC
MAX_SECONDS = 86_400.0  # a day: no start-up, request, set-up or billing minimum takes longer
MAX_USD = 1000.0  # no unit a catalog prices (a request, a GB-second, an hour) costs more
MAX_COUNT = 1_000_000  # functions, transitions, shards: above any account's quota


def _shown(bound: float) -> str:
    whole = bound == int(bound) and abs(bound) < 1e7
    return str(int(bound)) if whole else f"{bound:g}"


@dataclass(frozen=True)
class Domain:
    """A finite number in [low, high] (either end open where said), whole if `whole`."""

    low: float
    high: float
    low_open: bool = False
    high_open: bool = False
    whole: bool = False

    def accepts(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if not math.isfinite(value) or (self.whole and not float(value).is_integer()):
            return False
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    @property
    def text(self) -> str:
        """The domain in words and interval notation, e.g. `a number in (0, 4096]`."""
        kind = "a whole number" if self.whole else "a number"
        left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
        return f"{kind} in {left}{_shown(self.low)}, {_shown(self.high)}{right}"

    def check(self, value: Any, where: str) -> float:
        """`value` as a float; ValueError `<where>: <value> is not <domain>` outside it."""
        if not self.accepts(value):
            raise ValueError(f"{where}: {value!r} is not {self.text}")
        return float(value)


def positive(high: float) -> Domain:
    return Domain(0.0, high, low_open=True)


def non_negative(high: float) -> Domain:
    return Domain(0.0, high)


def whole(low: int, high: float) -> Domain:
    return Domain(float(low), float(high), whole=True)


def share(*, of_one_open: bool = False) -> Domain:
    """A share of a whole: [0, 1], or [0, 1) where all of it means no progress at all."""
    return Domain(0.0, 1.0, high_open=of_one_open)
