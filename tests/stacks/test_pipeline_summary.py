"""What synth prints for a pipelined plan: the cut, and each stage in a line (app.py)."""

from __future__ import annotations

from tests.stacks.pipeline_plans import pipelined_plan


def test_the_synth_summary_lists_each_stage_in_a_line() -> None:
    from types import SimpleNamespace

    import app as app_module
    from tests.stacks.conftest import make_plan

    ctx = SimpleNamespace(deadline_s=7200.0, budget_usd=None, deadline_is_default=False, slack=0)
    plan = pipelined_plan(3, sync="s3")
    lines = app_module.summary_lines(ctx, SimpleNamespace(plan=plan))  # type: ignore[arg-type]
    assert lines[1] == (
        "pipeline: 3 stages x 4 replicas (12 functions at once), 4 micro-batches per iteration "
        "(gpipe), 2 reducers per stage; cut because it is cheaper"
    )
    assert lines[2:5] == [
        "stage 0: blocks 0-0 (0:Linear), 1024 MB (needs 824), 0.01 MB of parameters; per "
        "micro-batch 0.010 s compute + 0.020 s boundary, sync 0.050 s per iteration",
        "stage 1: blocks 1-1 (1:Linear), 1536 MB (needs 1336), 0.01 MB of parameters; per "
        "micro-batch 0.010 s compute + 0.020 s boundary, sync 0.050 s per iteration",
        "stage 2: blocks 2-3 (2:Linear, 3:Linear), 2048 MB (needs 1848), 0.02 MB of parameters; "
        "per micro-batch 0.010 s compute + 0.020 s boundary, sync 0.050 s per iteration",
    ]
    one = app_module.summary_lines(ctx, SimpleNamespace(plan=make_plan()))  # type: ignore[arg-type]
    assert not [line for line in one if line.startswith(("pipeline:", "stage "))]
