"""The emulator's own copies of the state machine's rules (until it runs the definition)."""

from __future__ import annotations

import io
import json
from typing import Any

from emulator.orchestrator import advanced, with_losses


def test_a_link_must_advance_like_in_the_state_machine() -> None:
    assert advanced({"start_iteration": 4}, {"start_iteration": 5})
    assert not advanced({"start_iteration": 4}, {"start_iteration": 4})
    assert not advanced({}, {"start_iteration": 0})


class _OneObject:
    def __init__(self, key: str, body: dict[str, Any]) -> None:
        self.key, self.body = key, json.dumps(body).encode()

    def get_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:  # noqa: N803  # boto3's
        assert Key == self.key
        return {"Body": io.BytesIO(self.body)}


def test_the_losses_of_a_link_come_from_its_record() -> None:
    s3 = _OneObject("j/runs/r/links/rank-00000-link-00000.json", {"losses": [[0, 2.3], [1, 2.1]]})
    result = {"done": True, "record_key": s3.key}
    assert with_losses(s3, "b", result) == {**result, "losses": [[0, 2.3], [1, 2.1]]}
    assert with_losses(s3, "b", {"done": True}) == {"done": True}  # a handler without records
