"""Bring a profile measured in AWS (`cdk deploy -c mode=profile`) into `profiles/`.

    python -m tools.fetch_profile s3://<job>-artifacts-<account>/<job>/profiles/<name>.json

The URI is the profile stack's `Profile` output. The document is validated with the planner's
own loader (provisioner.profile.profile_from_dict) before anything is written, then written
whole to `profiles/<name>.json` (or `--output-dir`). S3 access lives here, not in the pure
provisioner. Exit codes: 2 bad input (URI, missing object, invalid profile), 1 S3 or disk failure.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from provisioner.files import write_text_atomically
from provisioner.profile import PROFILE_DIR, WorkloadProfile, profile_from_dict

EXIT_FAILED, EXIT_BAD_INPUT = 1, 2
URI_PATTERN = re.compile(r"^s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(\S+\.json)$")
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")  # a file stem, never a path
MISSING_CODES = ("NoSuchKey", "NoSuchBucket", "404")


class FetchError(Exception):
    """One line for the user, and the exit code it ends with."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def parse_uri(uri: str) -> tuple[str, str]:
    """(bucket, key) of an `s3://bucket/key.json` URI."""
    found = URI_PATTERN.match(uri.strip())
    if not found:
        raise FetchError(f"bad URI {uri!r}: expected s3://bucket/key.json (the profile stack's "
                         "Profile output)", EXIT_BAD_INPUT)  # fmt: skip
    return found.group(1), found.group(2)


def read_document(s3: Any, bucket: str, key: str) -> Any:
    """The object's JSON; a missing object is bad input, other S3 failures are failures."""
    from botocore.exceptions import BotoCoreError, ClientError

    from functions.aws import S3Unreachable, naming_s3_failures

    try:
        with naming_s3_failures():
            body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", "?"))
        exit_code = EXIT_BAD_INPUT if code in MISSING_CODES else EXIT_FAILED
        raise FetchError(f"cannot read s3://{bucket}/{key}: {code}", exit_code) from None
    except (S3Unreachable, BotoCoreError) as exc:
        raise FetchError(f"cannot read s3://{bucket}/{key}: {exc}", EXIT_FAILED) from None
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FetchError(f"s3://{bucket}/{key} is not JSON: {exc}", EXIT_BAD_INPUT) from None


def validated(document: Any, where: str) -> WorkloadProfile:
    """The planner's loader on the document, and a name that is a safe file stem."""
    try:
        profile = profile_from_dict(document)
    except ValueError as exc:
        raise FetchError(f"{where} is not a valid profile: {exc}", EXIT_BAD_INPUT) from None
    if not NAME_PATTERN.match(profile.name):
        raise FetchError(f"{where} has name {profile.name!r}: expected letters, digits, '.', '_'"
                         " or '-' (it names the file)", EXIT_BAD_INPUT)  # fmt: skip
    return profile


def fetch(uri: str, output_dir: Path, s3: Any) -> Path:
    """Read, validate and write one profile; the path written."""
    bucket, key = parse_uri(uri)
    if not output_dir.is_dir():
        raise FetchError(f"bad --output-dir {str(output_dir)!r}: not a directory", EXIT_BAD_INPUT)
    document = read_document(s3, bucket, key)
    profile = validated(document, uri)
    target = output_dir / f"{profile.name}.json"
    try:
        write_text_atomically(target, json.dumps(document, indent=2) + "\n")
    except OSError as exc:
        raise FetchError(f"cannot write {target}: {exc.strerror or exc}", EXIT_FAILED) from None
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.fetch_profile", description=__doc__)
    parser.add_argument("uri", help="s3://bucket/key.json, the profile stack's Profile output")
    parser.add_argument("--output-dir", type=Path, default=PROFILE_DIR,
                        help="where <name>.json is written (default: profiles/)")  # fmt: skip
    args = parser.parse_args(argv)
    from functions.aws import s3_client

    try:
        target = fetch(args.uri, args.output_dir, s3_client())
    except FetchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    print(f"wrote {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
