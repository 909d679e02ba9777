"""The report's S3 requests per iteration: every GET the model prices (misses too) next to the
measured counts, and their ratio, in report.json and the text table."""

from __future__ import annotations

import dataclasses

from emulator.report import predicted_requests, requests_per_iteration
from emulator.report_table import exchange_lines
from provisioner.plan import Prediction


def prediction(**requests: float) -> Prediction:
    zeros = {
        f.name: 0.0 for f in dataclasses.fields(Prediction) if f.default is dataclasses.MISSING
    }
    return Prediction(**zeros, **requests)  # type: ignore[arg-type]


def test_predicted_gets_are_the_hits_and_the_expected_misses() -> None:
    p = prediction(exchange_puts_per_iteration=13, exchange_gets_per_iteration=24,
                   exchange_get_misses_per_iteration=12.5)  # fmt: skip
    assert predicted_requests(p, 10) == {"put": 13, "get": 36.5, "get_miss": 12.5, "list": 0.0}


def test_the_links_starts_and_ends_are_spread_over_the_iterations() -> None:
    p = prediction(exchange_puts_per_iteration=27, exchange_gets_per_iteration=48,
                   exchange_link_puts=9, exchange_link_gets=51, exchange_link_lists=22)  # fmt: skip
    got = predicted_requests(p, 2)
    assert got == {"put": 31.5, "get": 73.5, "get_miss": 0.0, "list": 11.0}


def test_measured_over_predicted_for_each_priced_kind() -> None:
    measured = {"delete": 1.0, "get": 73.0, "get_miss": 16.0, "put": 13.0}
    got = requests_per_iteration(measured, {"put": 13, "get": 36.5, "get_miss": 0.0})
    assert got["measured_over_predicted"] == {"put": 1.0, "get": 2.0, "get_miss": None}
    assert requests_per_iteration(measured, None)["measured_over_predicted"] is None


def test_the_table_shows_both_and_the_ratio() -> None:
    requests = requests_per_iteration({"get": 40.15, "put": 13.0}, {"put": 13, "get": 36.5})
    exchange = {
        "reducers": 1,
        "per_iteration_s": {"measured": 0.2, "predicted_local": 0.15},
        "requests_per_iteration": requests,
    }
    lines = exchange_lines(exchange)
    assert lines[1].startswith("S3 requests per iteration: measured get 40.15, put 13.00")
    assert lines[2] == (
        "S3 requests per iteration: predicted here put 13.00, get 36.50; "
        "measured / predicted put 1.00, get 1.10"
    )
