"""The countdown context behaves like Lambda's: remaining time falls from the limit to zero."""

from __future__ import annotations

from emulator.lambda_context import CountdownContext


def test_remaining_time_counts_down_from_the_limit() -> None:
    clock = iter([100.0, 100.0, 104.5, 200.0])
    ctx = CountdownContext(limit_s=10.0, clock=lambda: next(clock))
    assert ctx.get_remaining_time_in_millis() == 10_000
    assert ctx.get_remaining_time_in_millis() == 5_500
    assert ctx.get_remaining_time_in_millis() == 0  # never negative, as in Lambda


def test_context_carries_lambda_attributes() -> None:
    ticks = iter([100.0, 100.25])  # a clock the test drives: created at 100 s, asked at 100.25
    ctx = CountdownContext(
        limit_s=1.0,
        function_name="job-worker",
        memory_limit_in_mb=2048,
        clock=lambda: next(ticks),
    )
    assert ctx.invoked_function_arn.endswith(":function:job-worker")
    assert ctx.memory_limit_in_mb == 2048
    assert ctx.aws_request_id != CountdownContext(limit_s=1.0).aws_request_id
    assert ctx.get_remaining_time_in_millis() == 750
