"""Bad inputs to `python -m functions.ps`, each refused before the shard listens."""

from __future__ import annotations

from tests.bad_inputs.case import ps_case

SECRET_ENV = "LDNN_BAD_INPUT_SECRET"  # set by the table's runner; UNSET_SECRET never is
FLAGS = {"--job-id": "j", "--workers": "2", "--secret-ref": f"env:{SECRET_ENV}"}
NUMBER = "expected a finite number > 0"
BUCKET_NAME = "expected an S3 bucket name (3-63 lowercase letters, digits, dots or hyphens)"


def ps(says: str, given: str = "", **changes: str) -> object:
    """The case of FLAGS with `changes` (job_id="" sets --job-id ''), in FLAGS's order."""
    flags = {**FLAGS, **{f"--{k.replace('_', '-')}": v for k, v in changes.items()}}
    return ps_case(*(part for pair in flags.items() for part in pair), says=says, given=given)


CASES = [
    ps("--job-id '': expected 1-32 letters, digits or hyphens starting with a letter",
       job_id=""),
    ps("--job-id '9lives': expected 1-32 letters, digits or hyphens", job_id="9lives"),
    ps("--job-id 'my job': expected 1-32 letters, digits or hyphens", job_id="my job"),
    ps("--workers 99999999999999999999: expected an integer from 1 to 100000",
       workers="99999999999999999999"),
    ps("--workers 0: expected an integer from 1 to 100000", workers="0"),
    ps("--workers -3: expected an integer from 1 to 100000", workers="-3"),
    ps("argument --workers: invalid int value: 'two'", workers="two"),
    ps("--artifacts-bucket 'ckpts': no S3 endpoint or region is configured; set "
       "AWS_ENDPOINT_URL_S3 (a local S3) or AWS_REGION", artifacts_bucket="ckpts",
       given="no AWS_ENDPOINT_URL_S3, AWS_REGION or AWS config file"),
    ps(f"--artifacts-bucket 'My_Bucket': {BUCKET_NAME}", artifacts_bucket="My_Bucket"),
    ps(f"--artifacts-bucket 'ab': {BUCKET_NAME}", artifacts_bucket="ab"),
    ps("--shards 0: expected an integer >= 1", shards="0"),
    ps("--shard 2: expected 0..1", shard="2", shards="2"),
    ps("--port 70000: expected 0..65535", port="70000"),
    ps(f"--learning-rate nan: {NUMBER}", learning_rate="nan"),
    ps(f"--learning-rate -0.1: {NUMBER}", learning_rate="-0.1"),
    ps("--momentum 1.0: expected a number in [0, 1)", momentum="1"),
    ps("--checkpoint-every -1: expected >= 0", checkpoint_every="-1"),
    ps(f"--idle-timeout-s 0.0: {NUMBER}", idle_timeout_s="0"),
    ps(f"--wait-timeout-s inf: {NUMBER}", wait_timeout_s="inf"),
    ps(f"--max-shard-mb nan: {NUMBER}", max_shard_mb="nan"),
    ps("--max-unauthenticated 0: expected >= 1", max_unauthenticated="0"),
    ps("secret_ref 'env:UNSET_SECRET': environment variable 'UNSET_SECRET' is unset or empty",
       secret_ref="env:UNSET_SECRET"),
]  # fmt: skip
