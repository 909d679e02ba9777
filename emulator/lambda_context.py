"""A Lambda-shaped context object whose remaining time counts down from the invocation limit.

The worker handler only relies on `get_remaining_time_in_millis()` (to checkpoint and return
before the limit) plus the descriptive attributes Lambda provides; this gives it the same.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class CountdownContext:
    """Lambda context for one invocation: the clock starts when the object is created."""

    limit_s: float
    function_name: str = "emulated-worker"
    memory_limit_in_mb: int = 128
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    clock: Callable[[], float] = time.monotonic  # injectable for tests
    started_monotonic_s: float = field(default=-1.0)

    def __post_init__(self) -> None:
        if self.started_monotonic_s < 0:
            object.__setattr__(self, "started_monotonic_s", self.clock())

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:000000000000:function:{self.function_name}"

    @property
    def log_group_name(self) -> str:
        return f"/aws/lambda/{self.function_name}"

    @property
    def log_stream_name(self) -> str:
        return f"emulator/{self.aws_request_id}"

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before the invocation limit; never negative (as in Lambda)."""
        elapsed_s = self.clock() - self.started_monotonic_s
        return max(0, int((self.limit_s - elapsed_s) * 1000))
