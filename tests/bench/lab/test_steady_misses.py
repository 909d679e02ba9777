"""bench.lab.steady_misses: which waits the model prices as steady."""

from __future__ import annotations

from bench.lab.steady_misses import steady_waits


def test_the_steady_waits_are_past_each_links_first_two_iterations() -> None:
    # 10 iterations in two links of 3 workers and 2 reducers: 4 cold iterations, 6 steady of
    # 2·3·2 = 12 waits each
    row = {"iterations": 10, "links": [2], "n": 3, "reducers": 2}
    assert steady_waits(row) == 6 * 12
    # one iteration a link: nothing steady
    assert steady_waits({**row, "iterations": 3, "links": [3]}) == 0
