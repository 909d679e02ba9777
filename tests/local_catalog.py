"""A stand-in for `catalog/local.json` (made per machine by `python -m emulator.calibrate`).

Derived from catalog/lambda-2025.json in the same schema, so the tests neither need the
calibrator nor depend on this machine: name "local", one PS type `loopback` with a big
baseline, no VPC endpoints, 1 local core = 1 vCPU, and a few figures changed the way a
calibration would change them.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from provisioner.catalog import CATALOG_DIR, Catalog, catalog_from_dict


def _set(section: dict[str, Any], key: str, value: float) -> None:
    section[key] = {**section[key], "value": value, "tag": "measured", "source": "test fixture"}


def local_catalog_dict() -> dict[str, Any]:
    """The local catalog document (prices stay lambda-2025's, as the calibrator copies them)."""
    data = copy.deepcopy(json.loads((CATALOG_DIR / "lambda-2025.json").read_text()))
    data["name"] = "local"
    lam, net, ps = data["lambda"], data["network"], data["parameter_servers"]
    _set(lam, "mb_per_vcpu", 1769)
    _set(lam, "restart_s", 0.05)
    lam["launch_s"] = {**lam["restart_s"], "value": 0.3}  # not in the AWS catalogs
    _set(net, "function_ps_mb_s", 2000)
    _set(net, "function_ps_rtt_s", 0.0001)
    _set(net, "s3_max_mb_s", 400)
    _set(net, "vpc_endpoint_usd_per_hour", 0.0)
    net["vpc_interface_endpoints"] = {**net["vpc_interface_endpoints"], "value": []}
    del net["vpc_endpoint_ready_s"], ps["start_s"]  # the emulator's PS serves before the run
    loopback = copy.deepcopy(ps["candidates"][0])
    loopback["name"] = "loopback"
    _set(loopback, "baseline_gbps", 40.0)
    _set(loopback, "peak_gbps", 40.0)
    ps["candidates"], ps["default_type"] = [loopback], "loopback"
    return data


def local_catalog() -> Catalog:
    return catalog_from_dict(local_catalog_dict())


def write_local_catalog(path: Path) -> Path:
    """Write the document to `path` (a test's tmp folder, never the repo's catalog/)."""
    path.write_text(json.dumps(local_catalog_dict(), indent=2))
    return path


def shared_core_catalog_dict(ceiling_mb: int | None = None) -> dict[str, Any]:
    """The local catalog document as the calibrator writes it on a 2-core machine: the workers'
    1.5 vCPU on 2 shared cores (local_machine.applies), 8 functions at once, and the function
    memory ceiling `ceiling_mb` (None: none below what the cores buy)."""
    data = local_catalog_dict()
    lam = data["lambda"]
    for key, value in (("total_vcpu", 1.5), ("max_vcpu", 1.5), ("compute_cores", 2.0),
                       ("memory_max_mb", 2653), ("concurrency_limit", 8)):  # fmt: skip
        lam[key] = {**lam["max_vcpu"], "value": value, "tag": "measured", "source": "test fixture"}
    if ceiling_mb is not None:
        lam["memory_ceiling_mb"] = {**lam["memory_max_mb"], "value": ceiling_mb, "tag": "policy"}
    return data
