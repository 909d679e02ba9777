"""Bad inputs to `python -m emulator plan.json`."""

from __future__ import annotations

from provisioner.parse import MAX_SYNTHETIC_SAMPLES
from tests.bad_inputs.case import DROP, Case, emu


def two_stages(stop: int) -> dict[str, object]:
    """A pipeline member cutting the zoo's 6-block MLP at `stop`, second stage [stop, 6)."""

    def stage(index: int, first: int, end: int) -> dict[str, object]:
        return {
            "index": index, "first_block": first, "stop_block": end,
            "block_names": [f"{b}:block" for b in range(first, end)], "memory_mb": 512,
            "vcpu_share": 0.29, "parameter_bytes": 1, "memory_needed_mb": 1,
            "compute_per_micro_batch_s": 0.001, "boundary_per_micro_batch_s": 0.01,
            "sync_per_iteration_s": 0.01,
        }  # fmt: skip

    return {"stages": [stage(0, 0, stop), stage(1, stop, stop)], "micro_batches": 2,
            "reason": "cheaper"}  # fmt: skip


CASES = [
    # python -m emulator plan.json
    Case("emulator", ("{dir}/missing.json",), 2, "cannot read plan"),
    emu(plan="[]", says="plan: expected a JSON object, got list"),
    emu(plan='"plan"', says="plan: expected a JSON object, got str"),
    emu(plan="{", says="not JSON: Expecting property name"),
    emu(plan={"n_workers": 0}, says="plan field 'n_workers': 0 is out of range; use from 1 to"),
    emu(plan={"n_workers": "2"}, says="plan field 'n_workers': '2' is not an integer"),
    emu(plan={"memory_mb": 0}, says="plan field 'memory_mb': 0 is out of range; use from 128"),
    emu(plan={"memory_mb": 20000}, says="plan field 'memory_mb': 20000 is out of range"),
    emu(plan={"ps_count": 0}, says="plan fields 'ps_count', 'reducers': 0, 0 do not fit sync 'ps';"
        " use ps_count at least 1 and reducers 0"),
    emu(plan={"sync": "s3", "reducers": 3},
        says="plan fields 'ps_count', 'reducers': 1, 3 do not fit sync 's3'; use ps_count 0 and"
        " reducers from 1 to n_workers"),
    emu(plan={"training.model": "gpt5"},
        says="plan field 'training.model': model 'gpt5' is not accepted; use a zoo name (mlp, "),
    emu(plan={"training.dataset": "/etc"},
        says="plan field 'training.dataset': '/etc' is not accepted; use digits, synthetic-cifar"),
    emu(plan={"training.iterations": -1}, says="plan field 'training.iterations': -1 is out of"),
    emu(plan={"training.momentum": 1.5}, says="'training.momentum': 1.5 is not in [0, 1)"),
    emu(plan={"training.learning_rate": 0}, says="'training.learning_rate': 0 is not positive"),
    emu(plan={"training.dataset": "synthetic-cifar", "training.dataset_samples": 10**14},
        says=f"synthetic samples is out of range; use from 1 to {MAX_SYNTHETIC_SAMPLES}"),
    emu(plan={"job": "../../victim"}, says="plan field 'job': job name '../../victim'"),
    emu(plan={"memory_mb": DROP}, says="plan field 'memory_mb' is missing"),
    emu(plan={"colour": "red"}, says="plan field 'colour' is not a plan field"),
    emu("--invocation-limit", "1h", says="bad --invocation-limit '1h': expected between 3s"),
    emu("--cpu-scale", "zero", says="bad --cpu-scale 'zero': expected a positive number"),
    emu("--cpu-scale", "1e-9", says="bad --cpu-scale '1e-9': a "),
    emu("--max-attempts", "x", says="bad --max-attempts 'x': expected a whole number, 1 or more"),
    emu("--max-attempts", "0", says="bad --max-attempts '0'"),
    emu("--s3", "minio", says="argument --s3: invalid choice: 'minio'"),
    emu("--memory-ceiling", "lots",
        says="bad --memory-ceiling 'lots': expected a whole number of MB above 0"),
    emu("--memory-ceiling", "128",
        says="bad --memory-ceiling 128: the plan's functions hold 629 MB; accepted: a ceiling "
        "of at least 629 MB"),
    emu("--out", "{dir}/a-file", says="a-file' is not a folder", given="a-file: a file"),
    emu("--out", "{dir}/a-file/run", says="a-file' is a file)", given="a-file: a file"),
    # a plan's figures against each other and its catalog (provisioner.plan.check_plan_sense)
    emu(plan={"n_workers": 100_000}, says="plan field 'n_workers': 100000 is out of range; use "
        "from 1 to 1000"),
    emu(plan={"training.iterations": 10**12}, says="plan field 'training.iterations': "
        "1000000000000 is out of range; use from 1 to 1000000000"),
    emu(plan={"n_workers": 9}, says="plan fields 'n_workers', 'training.local_batch', "
        "'training.global_batch': 9 × 16 is not 32; the global batch is n_workers × local_batch"),
    emu(plan={"training.iterations": 5000}, says="plan field 'training.iterations': 5000 trains "
        "more than 50 epoch(s) of 1797 samples in global batches of 32; use at most 2808"),
    emu(plan={"training.dataset_samples": 1}, says="plan fields 'n_workers', "
        "'training.dataset_samples': 2 workers for 1 samples; use at most one worker per sample"),
    emu(plan={"invocations_per_worker": 1, "iterations_per_invocation": 3},
        says="plan fields 'invocations_per_worker', 'iterations_per_invocation': 1 × 3 do not "
        "fit 2808 iterations"),
    emu(plan={"invocations_per_worker": 50, "iterations_per_invocation": 60},
        says="50 × 60 do not fit 2808 iterations; use links that cover them, at most "
        "max_links_per_worker (5)"),
    emu(plan={"ps_count": 9}, says="plan field 'ps_count': 9 is outside catalog lambda-2025's "
        "limits; use from 0 to 8"),
    emu(plan={"ps_type": "z9.huge"}, says="plan field 'ps_type': 'z9.huge' is not in catalog "
        "lambda-2025; use one of m5.large, c5.large"),
    emu(plan={"catalog": "../../etc/passwd"}, says="plan field 'catalog': catalog name "
        "'../../etc/passwd' is not accepted; use 1-64 letters"),
    emu(plan={"workload": "../../etc/x"}, says="plan field 'workload': profile name "
        "'../../etc/x' is not accepted"),
    emu(plan={"training.dataset": "data/no-such-folder"}, says="plan field 'training.dataset': "
        "dataset 'data/no-such-folder' does not exist in the project folder"),
    emu("--workload", "nosuch", says="profile 'nosuch' not found: give a name"),
    emu("--workload", "{dir}/not-json.json", says="not-json.json' is not valid JSON",
        given="not-json.json: plain text"),
    emu("--workload", "{dir}/etc-name.json", says="profile field 'name': profile name "
        "'../../etc/x' is not accepted", given="etc-name.json: name ../../etc/x"),
    emu("--iterations-per-invocation", "9223372036854775808",
        says="bad --iterations-per-invocation '9223372036854775808' is not a whole number >= 0 "
        "and <= 1000000000"),
    # a pipelined plan (provisioner/pipeline_plan.py)
    emu(plan={"pipeline": two_stages(6)}, says="plan field 'pipeline.stages[1].stop_block': 6 "
        "leaves the stage empty; use more than first_block (6)",
        given="plan.json: pipeline of 2 stages, blocks [0, 6) and [6, 6)"),
]  # fmt: skip
