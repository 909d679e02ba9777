"""A stage's event: parsed once into a StageTask, carried to the next link, bad values refused
in one line; its boundary keys and tensor bodies."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from functions import models
from functions.boundary import boundary_key, decode_tensor, encode_tensor
from functions.model_spec import ModelError
from functions.pipeline import needs_data, stage_flat, stage_link_record_key
from functions.task import StageTask, TaskError, WorkerTask

from .helpers import worker_event

STAGE = {"index": 1, "count": 3, "first_block": 2, "stop_block": 4, "micro_batches": 4,
         "boundary_prefix": "job-test/pipe"}  # fmt: skip
EXPECTED = (
    "an object with keys index, count, first_block, stop_block, micro_batches, boundary_prefix"
)


def _event(**overrides: Any) -> dict[str, Any]:
    return worker_event(1, 2, ["127.0.0.1:9000"], "bucket", **overrides)


def test_a_stage_is_parsed_once_and_carried_to_the_next_link() -> None:
    task = WorkerTask.from_event(_event(stage=STAGE))
    assert task.stage == StageTask(1, 3, 2, 4, 4, "job-test/pipe")
    assert not task.stage.is_first and not task.stage.is_last and not needs_data(task.stage)
    following = task.next_task(5)
    assert following.stage == task.stage and following.to_event()["stage"] == STAGE
    assert WorkerTask.from_event(following.to_event()) == following


def test_a_one_stage_event_has_no_stage_key() -> None:
    task = WorkerTask.from_event(_event())
    assert task.stage is None and "stage" not in task.to_event()
    assert "stage" not in task.next_task(1).to_event()


@pytest.mark.parametrize(
    ("stage", "message"),
    [
        ({}, f"worker event key 'stage' = {{}}: expected {EXPECTED}"),
        (None, f"worker event key 'stage' = None: expected {EXPECTED}"),
        ([1, 2], f"worker event key 'stage' = [1, 2]: expected {EXPECTED}"),
        ({**STAGE, "cuts": 2},
         f"worker event key 'stage' has unknown members ['cuts']: expected {EXPECTED}"),
        ({k: v for k, v in STAGE.items() if k != "index"},
         f"worker event key 'stage' lacks members ['index']: expected {EXPECTED}"),
        ({**STAGE, "index": 3}, "worker event key 'stage.index' = 3: expected 0..2"),
        ({**STAGE, "index": -1}, "worker event key 'stage.index' = -1: expected 0..2"),
        ({**STAGE, "count": 1},
         "worker event key 'stage.count' = 1: expected an integer >= 2 "
         "(one stage: no 'stage' key)"),
        ({**STAGE, "count": True}, "worker event key 'stage.count' = True: expected an integer"),
        ({**STAGE, "stop_block": 2},
         "worker event key 'stage.stop_block' = 2: expected an integer > first_block (2)"),
        ({**STAGE, "first_block": -1},
         "worker event key 'stage.first_block' = -1: expected an integer >= 0"),
        ({**STAGE, "micro_batches": 3},
         "worker event key 'stage.micro_batches' = 3: expected a divisor of local_batch (8)"),
        ({**STAGE, "micro_batches": 0},
         "worker event key 'stage.micro_batches' = 0: expected an integer >= 1"),
        ({**STAGE, "boundary_prefix": "/"},
         "worker event key 'stage.boundary_prefix' = '/': expected a non-empty S3 key prefix"),
        ({**STAGE, "boundary_prefix": 7},
         "worker event key 'stage.boundary_prefix' = 7: expected a string"),
    ],
)  # fmt: skip
def test_bad_stages_are_refused_in_one_line(stage: Any, message: str) -> None:
    with pytest.raises(TaskError) as caught:
        WorkerTask.from_event(_event(stage=stage))
    assert str(caught.value) == message and "\n" not in message


def test_a_cut_past_the_models_blocks_is_refused_in_one_line() -> None:
    model = models.build("mlp", (64,), 10, seed=0)  # 6 blocks
    with pytest.raises(ModelError, match=r"^stage blocks \[4, 7\) is not a cut of 6 blocks; "):
        stage_flat(model, StageTask(2, 3, 4, 7, 1, "p"))
    flat = stage_flat(model, StageTask(2, 3, 4, 6, 1, "p"))
    assert flat.params.numel() == 64 * 10 + 10  # the last Linear only


def test_boundary_keys_follow_the_contract() -> None:
    key = boundary_key("job/pipe/", "job", "run-1", 2, "grad", 17, 3, 1)
    assert key == "job/pipe/b02/job/run-1/grad/0000000017/0003/0001"
    with pytest.raises(ValueError, match=r"^boundary object kind 'acts': expected one of"):
        boundary_key("job/pipe", "job", "run-1", 0, "acts", 0, 0, 0)


def test_stage_link_records_do_not_collide_across_stages() -> None:
    task = WorkerTask.from_event(_event(stage=STAGE, invocation=2))
    assert task.stage is not None
    assert stage_link_record_key(task, task.stage) == (
        "job-test/runs/run-test/links/stage-01-rank-00001-link-00002.json"
    )


def test_tensors_round_trip_and_garbage_is_named() -> None:
    array = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    back = decode_tensor(encode_tensor(array), "s3://b/k")
    assert back.dtype == np.float32 and back.shape == (2, 3, 4)
    np.testing.assert_array_equal(back, array)
    with pytest.raises(ValueError, match=r"^s3://b/k: not a \.npy tensor"):
        decode_tensor(b"not a tensor", "s3://b/k")
