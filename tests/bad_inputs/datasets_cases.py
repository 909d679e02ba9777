"""Bad inputs to `python -m functions.datasets shard` (the image's sharding command), each refused
before any dataset is read or S3 is reached."""

from __future__ import annotations

from tests.bad_inputs.case import Case

GOOD = ("--bucket", "b", "--source", "builtin:digits")


def shard(*args: str, says: str) -> Case:
    return Case("datasets", ("shard", *args), 2, says)


CASES = [
    shard("--shards", "x", *GOOD, says="argument --shards: invalid int value: 'x'"),
    shard(*GOOD, says="the following arguments are required: --shards"),
    shard("--shards", "2", "--source", "builtin:digits",
          says="the following arguments are required: --bucket"),
    shard("--shards", "2", *GOOD, "--test-fraction", "abc",
          says="argument --test-fraction: invalid float value: 'abc'"),
    shard("--shards", "2", *GOOD, "--seed", "1.5",
          says="argument --seed: invalid int value: '1.5'"),
    Case("datasets", ("unshard",), 2, "argument command: invalid choice: 'unshard'"),
]  # fmt: skip
