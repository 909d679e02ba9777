"""Parsing and formatting of user-facing durations, money amounts and job names.

Context values arrive as strings from `cdk -c` and as JSON numbers from cdk.json; both parse
here, and every rejection is one line naming the value and the accepted forms.
"""

from __future__ import annotations

import math
import re

DURATION_FORMS = "accepted: 2h, 90m, 1h30m, 45s, 5400s or 5400 (seconds), a positive amount"
USD_FORMS = "accepted: 5, $5, 5.00 or $0.50 (US dollars), a positive amount"
SLACK_FORMS = "accepted: 10%, 0.1 or 0, a share of the deadline below 90%"
MAX_SLACK = 0.9
# A job name becomes CloudFormation stack names (`<job>-data`, `<job>-training`), S3 bucket names
# (`<job>-artifacts-<12-digit account>`, lower-cased: 32 + 10 + 13 < 63) and emulator folders
# (`runs/<job>`), so it is the set all three accept: no dots, slashes or underscores.
JOB_NAME_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,31}")
JOB_NAME_FORMS = "1-32 letters, digits or hyphens starting with a letter, e.g. digits-demo"
# A catalog or profile name, as plans and run reports carry it: the emulator and its report load
# `catalog/<name>.json` and `profiles/<name>.json` from it, so it is a file stem, never a path.
DATA_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
DATA_NAME_FORMS = "1-64 letters, digits, '.', '_' or '-' starting with a letter or digit, no '..'"
# The most iterations a plan may train, or an invocation may be capped at: far above any
# workload's (a billion steps), far below where counts times seconds overflow.
MAX_ITERATIONS = 1_000_000_000
MAX_WORKERS = 1000  # the most workers the planner ever sizes (space.concurrency_cap)
# synthetic-cifar:N is generated whole in the 3,008 MB prepare function: 60,000 samples (CIFAR-10's
# size) are 737 MB of float32 images, room for the shuffled copy and the shards beside them.
MAX_SYNTHETIC_SAMPLES = 60_000
_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?")
_USD = re.compile(r"\$?(\d+(?:\.\d+)?)")


def _number(value: object, what: str, forms: str) -> float | None:
    """A JSON/Python number as float (rejected unless positive and finite); None for strings."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    if not (math.isfinite(number) and number > 0):
        raise ValueError(f"{what} {value!r} is not positive ({forms})")
    return number


def parse_duration_s(value: object) -> float:
    """`2h`, `90m`, `1h30m`, `5400s`, `5400` or a positive number → seconds."""
    number = _number(value, "duration", DURATION_FORMS)
    if number is not None:
        return number
    text = value.strip().lower() if isinstance(value, str) else ""
    if text and re.fullmatch(r"\d+(?:\.\d+)?", text):
        seconds = float(text)
    else:
        match = _DURATION.fullmatch(text)
        if text == "" or match is None or not any(match.groups()):
            raise ValueError(f"duration {value!r} is not understood ({DURATION_FORMS})")
        hours, minutes, secs = (float(g) if g else 0.0 for g in match.groups())
        seconds = hours * 3600.0 + minutes * 60.0 + secs
    if seconds <= 0:
        raise ValueError(f"duration {value!r} is not positive ({DURATION_FORMS})")
    return seconds


def parse_usd(value: object) -> float:
    """`5`, `$5`, `5.00` or a positive number → US dollars."""
    number = _number(value, "amount", USD_FORMS)
    if number is not None:
        return number
    text = value.strip() if isinstance(value, str) else ""
    match = _USD.fullmatch(text)
    if match is None:
        raise ValueError(f"amount {value!r} is not understood ({USD_FORMS})")
    usd = float(match.group(1))
    if usd <= 0:
        raise ValueError(f"amount {value!r} is not positive ({USD_FORMS})")
    return usd


def parse_slack(value: object) -> float:
    """`10%`, `0.1` or `0` → the share of the deadline kept in reserve, in [0, 0.9)."""
    if isinstance(value, bool):
        raise ValueError(f"slack {value!r} is not understood ({SLACK_FORMS})")
    if isinstance(value, int | float):
        share = float(value)
    else:
        text = value.strip() if isinstance(value, str) else ""
        match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(%?)", text)
        if match is None:
            raise ValueError(f"slack {value!r} is not understood ({SLACK_FORMS})")
        share = float(match.group(1)) / (100.0 if match.group(2) else 1.0)
    if not (math.isfinite(share) and 0.0 <= share < MAX_SLACK):
        raise ValueError(f"slack {value!r} is out of range ({SLACK_FORMS})")
    return share


def parse_job_name(value: object) -> str:
    """A job name as CloudFormation, S3 and the file system all accept it (JOB_NAME_PATTERN)."""
    if isinstance(value, str) and JOB_NAME_PATTERN.fullmatch(value):
        return value
    raise ValueError(f"job name {value!r} is not accepted; use {JOB_NAME_FORMS}")


def parse_data_name(value: object, kind: str) -> str:
    """A catalog or profile name (DATA_NAME_PATTERN): a file stem in its folder, not a path."""
    if isinstance(value, str) and DATA_NAME_PATTERN.fullmatch(value) and ".." not in value:
        return value
    raise ValueError(f"{kind} name {value!r} is not accepted; use {DATA_NAME_FORMS}")


def parse_iteration_cap(value: str) -> int:
    """`--iterations-per-invocation`: a whole number from 0 (no cap) to MAX_ITERATIONS."""
    text = value.strip()
    if not text.isdigit() or int(text) > MAX_ITERATIONS:
        raise ValueError(
            f"{value!r} is not a whole number >= 0 and <= {MAX_ITERATIONS} "
            "(0 = only the invocation limit ends an invocation)"
        )
    return int(text)


def format_duration_s(seconds: float) -> str:
    """Seconds as `1h02m03s` / `4m05s` / `12.3s` for tables and messages."""
    if not math.isfinite(seconds):
        return "inf"
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


def format_usd(usd: float) -> str:
    """Dollars with enough digits to see sub-cent items."""
    if not math.isfinite(usd):
        return "inf"
    return f"${usd:.2f}" if usd >= 10 else f"${usd:.4f}"
