"""Durations and money: accepted forms and the exact text of every rejection."""

from __future__ import annotations

import pytest

from provisioner.parse import (
    format_duration_s,
    format_usd,
    parse_duration_s,
    parse_slack,
    parse_usd,
)

D_FORMS = "accepted: 2h, 90m, 1h30m, 45s, 5400s or 5400 (seconds), a positive amount"
U_FORMS = "accepted: 5, $5, 5.00 or $0.50 (US dollars), a positive amount"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2h", 7200.0),
        ("90m", 5400.0),
        ("1h30m", 5400.0),
        ("5400s", 5400.0),
        ("5400", 5400.0),
        (" 1H30M ", 5400.0),
        ("1.5h", 5400.0),
        ("1h0m30s", 3630.0),
        (5400, 5400.0),
        (2.5, 2.5),
    ],
)
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration_s(text) == seconds


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("2 hours", f"duration '2 hours' is not understood ({D_FORMS})"),
        ("", f"duration '' is not understood ({D_FORMS})"),
        ("h", f"duration 'h' is not understood ({D_FORMS})"),
        ("-5m", f"duration '-5m' is not understood ({D_FORMS})"),
        ("0", f"duration '0' is not positive ({D_FORMS})"),
        ("0h0m", f"duration '0h0m' is not positive ({D_FORMS})"),
        (0, f"duration 0 is not positive ({D_FORMS})"),
        (True, f"duration True is not understood ({D_FORMS})"),
        (None, f"duration None is not understood ({D_FORMS})"),
        (float("inf"), f"duration inf is not positive ({D_FORMS})"),
    ],
)
def test_bad_durations(value: object, message: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_duration_s(value)
    assert str(err.value) == message


@pytest.mark.parametrize(
    ("text", "usd"),
    [
        ("5", 5.0),
        ("$5", 5.0),
        ("5.00", 5.0),
        (" $0.50 ", 0.5),
        (5, 5.0),
        (0.25, 0.25),
    ],
)
def test_money(text: object, usd: float) -> None:
    assert parse_usd(text) == usd


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("5 USD", f"amount '5 USD' is not understood ({U_FORMS})"),
        ("€5", f"amount '€5' is not understood ({U_FORMS})"),
        ("$", f"amount '$' is not understood ({U_FORMS})"),
        ("-1", f"amount '-1' is not understood ({U_FORMS})"),
        ("$0", f"amount '$0' is not positive ({U_FORMS})"),
        (-3, f"amount -3 is not positive ({U_FORMS})"),
        (None, f"amount None is not understood ({U_FORMS})"),
    ],
)
def test_bad_money(value: object, message: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_usd(value)
    assert str(err.value) == message


def test_formatting() -> None:
    assert [format_duration_s(s) for s in (12.34, 245, 3723)] == ["12.3s", "4m05s", "1h02m03s"]
    assert [format_usd(u) for u in (0.12345, 12.345)] == ["$0.1235", "$12.35"]


@pytest.mark.parametrize(("value", "share"), [("10%", 0.1), ("0.1", 0.1), ("0", 0.0), (0.25, 0.25),
                                             (" 5 % ", 0.05), ("89.5%", 0.895)])  # fmt: skip
def test_slack(value: object, share: float) -> None:
    assert parse_slack(value) == pytest.approx(share)


@pytest.mark.parametrize("value", ["90%", "0.9", "-1%", "ten", True, float("nan"), ""])
def test_bad_slack_names_value_and_forms(value: object) -> None:
    with pytest.raises(ValueError, match=r"slack .* \(accepted: 10%, 0\.1 or 0, a share of the"):
        parse_slack(value)
