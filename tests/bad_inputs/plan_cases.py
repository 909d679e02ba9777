"""Bad inputs to `python -m provisioner plan|frontier|calibrate`."""

from __future__ import annotations

import json
from typing import Any

from tests.bad_inputs.case import DIGITS, HOUR, REPO, Case, plan_case
from tests.local_catalog import local_catalog_dict, shared_core_catalog_dict


def interval_case(value: Any, says: str) -> Case:
    """`plan` on a catalog whose orchestration.prediction_interval holds `value`."""
    doc = local_catalog_dict()
    doc["orchestration"]["prediction_interval"] = {
        "value": value, "unit": "measured/predicted total", "source": "-", "date": "-",
        "tag": "measured",
    }  # fmt: skip
    name = "interval-catalog.json"
    return Case(
        "plan", ("plan", *HOUR, "--catalog", f"{{dir}}/{name}"), 2, says,
        given=f"{name}: orchestration.prediction_interval {json.dumps(value)}",
        files=((name, json.dumps(doc)),),
    )  # fmt: skip


def too_big_without_blocks() -> Case:
    """`plan` for a profile that needs more memory than any function and declares no blocks."""
    doc = json.loads((REPO / "profiles" / "digits-mlp.json").read_text())
    doc.update(name="too-big", min_memory_mb=20_000)
    name = "too-big.json"
    return Case(
        "plan", ("plan", "--workload", f"{{dir}}/{name}", "--deadline", "1h"), 3,
        "workload too-big needs ≥ 20000 MB but a function of catalog lambda-2025 has at most "
        "10240 MB, and its profile declares no blocks",
        given=f"{name}: min_memory_mb 20000, no blocks", files=((name, json.dumps(doc)),),
    )  # fmt: skip


SHARED_CORES = "shared-cores-local.json"


def ceiling_case(*args: str, says: str, catalog_ceiling_mb: int | None = None) -> Case:
    """`plan` of digits-mlp-blocks (a profile with blocks) on the local machine's catalog (2
    shared cores), its memory_ceiling_mb `catalog_ceiling_mb` (None: none)."""
    doc = shared_core_catalog_dict(catalog_ceiling_mb)
    given = f"{SHARED_CORES}: the local machine's catalog (shared cores)"
    if catalog_ceiling_mb is not None:
        given += f", lambda.memory_ceiling_mb {catalog_ceiling_mb}"
    return Case(
        "plan", ("plan", "--workload", "digits-mlp-blocks", "--deadline", "1h", "--catalog",
                 f"{{dir}}/{SHARED_CORES}", *args), 2, says,
        given=given, files=((SHARED_CORES, json.dumps(doc)),),
    )  # fmt: skip


CASES = [
    # the local memory ceiling (provisioner/local_ceiling.py)
    ceiling_case("--memory-ceiling", "lots",
                 says="bad --memory-ceiling 'lots': expected a whole number of MB above 0"),
    ceiling_case("--memory-ceiling", "0",
                 says="bad --memory-ceiling '0': expected a whole number of MB above 0"),
    ceiling_case("--memory-ceiling", "-320",
                 says="bad --memory-ceiling '-320': expected a whole number of MB above 0"),
    ceiling_case("--memory-ceiling", "64",
                 says="bad --memory-ceiling 64: expected MB from 128 to 2653"),
    ceiling_case("--memory-ceiling", "200", says="bad memory ceiling 200 MB: block '0:Flatten' of "
                 "workload digits-mlp-blocks needs 224 MB alone (the runtime's 223 MB and the "
                 "block); accepted: a ceiling of at least 224 MB"),
    ceiling_case(says="bad memory ceiling 200 MB: block '0:Flatten' of workload "
                 "digits-mlp-blocks needs 224 MB alone", catalog_ceiling_mb=200),
    plan_case("plan", *HOUR, "--memory-ceiling", "320", says="bad --memory-ceiling 320: a memory "
              "ceiling applies to the local machine's catalog only"),
    # a catalog's prediction_interval (provisioner/interval.py)
    interval_case({"low": 1.1, "high": 1.3}, says="orchestration.prediction_interval: {'low': "
                  "1.1, 'high': 1.3} is out of range (accepted: {\"low\": r05, \"high\": r95}"),
    interval_case({"low": 0.9, "high": 1.2, "level": 0.95},
                  says="orchestration.prediction_interval: level 0.95 is not 0.9"),
    interval_case([0.9, 1.2], says="orchestration.prediction_interval: [0.9, 1.2] is not "
                  "understood"),
    # python -m provisioner plan|frontier
    too_big_without_blocks(),
    plan_case("plan", *DIGITS, "--deadline", "soon", says="duration 'soon' is not understood"),
    plan_case("plan", *DIGITS, "--budget", "-5", says="amount '-5' is not understood"),
    plan_case("plan", *DIGITS, says="give --deadline (e.g. 2h) or --budget (e.g. 5) or both"),
    plan_case("plan", "--workload", "nope", "--deadline", "1h", says="profile 'nope' not found"),
    plan_case("plan", *HOUR, "--slack", "95%", says="slack '95%' is out of range"),
    plan_case("plan", *DIGITS, "--budget", "5", "--slack", "10%",
              says="only a budget was given: add a deadline or drop the slack"),
    plan_case("plan", *HOUR, "--ps-types", ",,,", says="PS types: none given"),
    plan_case("plan", *HOUR, "--ps-types", "z9.huge",
              says="PS type 'z9.huge' is not in catalog lambda-2025"),
    plan_case("plan", *HOUR, "--job", "../../victim",
              says="job name '../../victim' is not accepted; use 1-32 letters"),
    plan_case("plan", *HOUR, "--max-memory-mb", "0", says="'0' is not a positive integer"),
    plan_case("plan", *HOUR, "--arch", "sparc", says="invalid choice: 'sparc'"),
    plan_case("plan", *HOUR, "--replan", "maybe", says="argument --replan: invalid choice: "
              "'maybe' (choose from 'on', 'off', 'scale-down')"),
    plan_case("plan", *HOUR, "--replan-ceiling", "40",
              says="error: replan ceiling 40 is not accepted; use an integer from 1 to 16"),
    plan_case("plan", *HOUR, "--frobnicate", says="unrecognized arguments: --frobnicate"),
    plan_case("plan", *DIGITS, "--deadline", "1s", code=3,
              says="infeasible: no plan meets deadline 1.0s"),
    plan_case("frontier", *HOUR, "--png", "/no/such/folder/f.png",
              says="'/no/such/folder' does not exist"),
    plan_case("frontier", *HOUR, "--png", "{dir}/a-file/f.png",
              says="a-file' is not a folder", given="a-file: a file"),
    plan_case("frontier", *HOUR, "--png", "{dir}", says="is not a .png file path"),
    plan_case("plan", *HOUR, "--invocation-limit", "soon",
              says="--invocation-limit: duration 'soon' is not understood"),
    plan_case("plan", *HOUR, "--invocation-limit", "20m",
              says="--invocation-limit '20m' exceeds catalog lambda-2025's 900 s limit"),
    plan_case("plan", *HOUR, "--iterations-per-invocation", "-1",
              says="'-1' is not a whole number >= 0"),
    plan_case("plan", *HOUR, "--out", "/no/such/folder/plan.json",
              says="folder '/no/such/folder' does not exist"),
    plan_case("plan", "--workload", "{dir}/latin1.json", "--deadline", "1h",
              says="latin1.json' is not UTF-8 text", given="latin1.json: Latin-1 bytes"),
    plan_case("plan", "--workload", "{dir}/momentum.json", "--deadline", "1h",
              says="profile field 'momentum': 1.0 is not a number in [0, 1)",
              given="momentum.json: momentum 1.0"),
    plan_case("plan", "--workload", "{dir}/nan-rate.json", "--deadline", "1h",
              says="profile field 'learning_rate': nan is not a number in (0, 1000]",
              given="nan-rate.json: learning_rate NaN"),
    plan_case("plan", *HOUR, "--iterations-per-invocation", "9223372036854775808",
              says="'9223372036854775808' is not a whole number >= 0 and <= 1000000000"),
    plan_case("plan", *HOUR, "--ps-types", "", says="PS types: none given (accepted: a comma "
              "list of m5.large"),
    plan_case("plan", "--workload", "{dir}/no-data.json", "--deadline", "1h",
              says="profile field 'dataset': dataset 'data/no-such-folder' does not exist in the "
              "project folder", given="no-data.json: dataset data/no-such-folder"),
    plan_case("plan", "--workload", "{dir}/etc-name.json", "--deadline", "1h",
              says="profile field 'name': profile name '../../etc/x' is not accepted; use 1-64",
              given="etc-name.json: name ../../etc/x"),
    # python -m provisioner calibrate report.json
    plan_case("calibrate", "{dir}/no-report.json",
              says="no-report.json' cannot be read: No such file or directory"),
    plan_case("calibrate", "{dir}/no-terms.json", says="is not a run report: no 'terms'",
              given="no-terms.json: a job summary, not a run report"),
    plan_case("calibrate", "{dir}/aws-run.json", says="is an AWS run's report (the workers' "
              "links, no plan): give --plan", given="aws-run.json: what finalize writes"),
    plan_case("calibrate", "{dir}/aws-run.json", "--plan", "{dir}/no-plan.json",
              says="cannot read plan", given="aws-run.json: what finalize writes"),
    plan_case("calibrate", "{dir}/interrupted.json",
              says="is from an unfinished run (status 'interrupted')",
              given="interrupted.json: status \"interrupted\""),
    plan_case("calibrate", "{dir}/cnn-run.json", "--profile", "digits-mlp",
              says="is a run of cnn on synthetic-cifar, but profile 'digits-mlp' is mlp on digits",
              given="cnn-run.json: a run of the CNN"),
    plan_case("calibrate", "{dir}/no-iterations.json",
              says="completed 0 iterations: there is no rate to refit",
              given="no-iterations.json: iterations.completed 0"),
]  # fmt: skip
