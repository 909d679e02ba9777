"""Bad figures in a catalog or a profile, generated from the declared domains.

For every numeric figure of provisioner.catalog_domains.CATALOG_DOMAINS and
provisioner.profile.PROFILE_DOMAINS, the values outside its domain that a hand edit or a bad
measurement gives (NaN, Infinity, a negative, 0 where only a positive value means anything, above
its range), each written into a copy of lambda-2025 or digits-mlp and planned with
`python -m provisioner plan`: one line naming the figure, the value and the domain.
"""

from __future__ import annotations

import json
import math
from typing import Any

from provisioner.catalog import CATALOG_DIR
from provisioner.catalog_domains import CATALOG_DOMAINS
from provisioner.domain import Domain
from provisioner.profile import PROFILE_DIR, PROFILE_DOMAINS
from tests.bad_inputs.case import HOUR, Case

CATALOG = "lambda-2025"
PROFILE = "digits-mlp"
_DOC_FIGURE = {"unit": "as named", "source": "bad-input case", "date": "-", "tag": "est"}


def outside(domain: Domain) -> list[float]:
    """NaN, Infinity, below the range (a negative, or 0 where it must be positive), above it."""
    below = -1 if domain.low >= 0 else domain.low * 10
    if domain.high_open:
        above = domain.high
    elif domain.whole and domain.high < 1e7:
        above = int(domain.high) + 1
    else:
        above = domain.high * 10
    values = [math.nan, math.inf, below, 0, above]
    return [v for v in values if not domain.accepts(v)]


def _shown(value: float) -> str:
    return json.dumps(value)  # NaN, Infinity: as a JSON file holds them


def _catalog_with(path: str, value: float) -> tuple[dict[str, Any], str]:
    """lambda-2025 with the figure at `path` set to `value`, and where the loader names it."""
    doc = json.loads((CATALOG_DIR / f"{CATALOG}.json").read_text(encoding="utf-8"))
    section, _, key = path.partition(".")
    node = doc[section]
    if key.startswith("candidates."):
        key = key.removeprefix("candidates.")
        candidate = node["candidates"][0]
        candidate[key] = {**candidate.get(key, _DOC_FIGURE), "value": value}
        return doc, f"{section}.{candidate['name']}.{key}"
    if key.startswith("architectures."):
        key = key.removeprefix("architectures.")
        node["architectures"]["x86_64"]["gb_s_price_tiers"][0][key] = value
        return doc, f"{section}.architectures.x86_64.gb_s_price_tiers[0].{key}"
    node[key] = {**node.get(key, _DOC_FIGURE), "value": value}
    return doc, path


def catalog_case(path: str, domain: Domain, value: float) -> Case:
    doc, where = _catalog_with(path, value)
    name = f"{path}.json"
    return Case(
        "plan", ("plan", *HOUR, "--catalog", f"{{dir}}/{name}"), 2,
        f"catalog {CATALOG}: {where}: {value!r} is not {domain.text}",
        given=f"{name}: {CATALOG} with {path} {_shown(value)}",
        files=((name, json.dumps(doc)),),
    )  # fmt: skip


def _profile_with(field: str, value: float) -> dict[str, Any]:
    """digits-mlp with the field (a point's field: in its first point) set to `value`."""
    doc = json.loads((PROFILE_DIR / f"{PROFILE}.json").read_text(encoding="utf-8"))
    rates = doc["training_rate"]
    if field in ("vcpu_share", "samples_per_s"):
        rates["x86_64"]["points"][0][field] = value
    elif field == "memory_mb":
        rates["x86_64"] = {"points": [{"memory_mb": value, "samples_per_s": 1000.0}]}
    elif field in ("alpha1_samples_s_per_mb", "beta1_samples_s"):
        linear = {"alpha1_samples_s_per_mb": 1.0, "beta1_samples_s": 0.0, field: value}
        rates["x86_64"] = {"linear": linear}
    elif "." in field:  # a list of (vcpu_share, figure) points
        points, _, key = field.partition(".")
        doc[points] = [{"vcpu_share": 1.0, key: value}]
    else:
        doc[field] = value
    return doc  # type: ignore[no-any-return]


def profile_case(field: str, domain: Domain, value: float) -> Case:
    name = f"{field}.json"
    shown = field.rpartition(".")[2]
    return Case(
        "plan", ("plan", "--workload", f"{{dir}}/{name}", "--deadline", "1h"), 2,
        f"profile field {shown!r}: {value!r} is not {domain.text}",
        given=f"{name}: {PROFILE} with {field} {_shown(value)}",
        files=((name, json.dumps(_profile_with(field, value))),),
    )  # fmt: skip


CASES = [
    *(
        catalog_case(path, domain, value)
        for path, domain in CATALOG_DOMAINS.items()
        for value in outside(domain)
    ),
    *(
        profile_case(field, domain, value)
        for field, domain in PROFILE_DOMAINS.items()
        for value in outside(domain)
    ),
]
