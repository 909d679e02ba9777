"""The one place that reads CDK context: every key parsed, validated and turned into a JobContext.

Context arrives as strings from `cdk synth -c key=value` and as JSON types from cdk.json; both
are accepted. All problems are collected and raised together as one `ContextError` whose lines
each name the key, the bad value and what would be accepted, so a user fixes everything in one go.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from functions.formats import DatasetError, LocalFolder, detect_layout, resolve
from functions.model_spec import ModelError, defines_function
from provisioner.catalog_domains import LAMBDA_MEMORY_MB
from provisioner.envelope import CEILING_FACTOR, MAX_CEILING_FACTOR
from provisioner.parse import JOB_NAME_FORMS, JOB_NAME_PATTERN, MAX_SYNTHETIC_SAMPLES

# Where a local dataset folder is uploaded in our dataset bucket: here, not in stacks.data, so
# the emulator (which uploads it itself) reads it without importing the CDK.
LOCAL_SOURCE_PREFIX = "source"

ARCH_CHOICES = ("x86_64", "arm64", "mixed", "any")  # the last is the default
SYNC_CHOICES = ("ps", "s3", "auto")  # gradient exchange; auto: the planner picks (the default)
# Re-planning during the run (provisioner/replan_attach.py), the default last as parse_choice
# takes it: on, off, or scale-down (on, and a run well ahead may switch to a cheaper plan).
REPLAN_CHOICES = ("off", "scale-down", "on")
MEMORY_MB_MIN, MEMORY_MB_MAX = LAMBDA_MEMORY_MB
INSTANCE_TYPE_PATTERN = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9]+$")
BUCKET_PATTERN = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
SYNTHETIC_PATTERN = re.compile(r"^(synthetic-(?:cifar|tokens)):(\d+)$")
AZ_PATTERN = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d[a-z]$")  # us-east-1b, ap-southeast-2a
BUILTIN_DATASETS = ("digits",)
# A dataset that is one file (functions/formats.py).
DATA_FILE_SUFFIXES = (".npz", ".csv", ".parquet")

# Keys this app reads. Anything else that looks like ours (plain snake_case) is a typo; CDK's own
# keys contain ':' or '@' and are left alone.
KNOWN_KEYS = (
    "arch",
    "az",
    "budget",
    "catalog",
    "dataset",
    "deadline",
    "default_deadline",
    "job",
    "max_concurrency",
    "max_memory_mb",
    "mode",
    "profile_iterations",
    "profile_memory",
    "ps_types",
    "replan",
    "replan_ceiling",
    "reserve_concurrency",
    "slack",
    "sync",
    "workload",
)
_OWN_KEY_SHAPE = re.compile(r"^[a-z][a-z0-9_]*$")
# Keys whose absence means a default: given empty (`-c deadline=`), they would fall back to it
# without a word, so an empty value is refused instead. (workload, catalog, dataset and job say
# what they accept when empty themselves.)
DEFAULTED_KEYS = tuple(
    k for k in KNOWN_KEYS if k not in ("workload", "catalog", "dataset", "job", "default_deadline")
)

DurationParser = Callable[[object], float]


class ContextError(ValueError):
    """Every context problem found, one line each."""

    def __init__(self, errors: tuple[str, ...]) -> None:
        super().__init__("\n".join(errors))
        self.errors = errors


@dataclass(frozen=True)
class DatasetSource:
    """Where the training data comes from.

    kind is "builtin" (name), "synthetic" (samples), "local" (path, a folder uploaded at deploy)
    or "s3" (bucket + prefix of an existing bucket we import and never delete; for an object key,
    its folder). A local .npz, .csv or .parquet file is uploaded with its folder (CDK uploads
    folders), so the prepare step reads the uploaded prefix plus `source_suffix`
    ("/table.csv#label=species").
    """

    kind: str
    spec: str  # the value as the user wrote it
    name: str = ""
    samples: int = 0
    path: str = ""
    bucket: str = ""
    prefix: str = ""
    source_suffix: str = ""  # after the uploaded prefix: "/<file>" and "#label=<column>", if any


@dataclass(frozen=True)
class JobContext:
    """The validated inputs of one synth."""

    job: str
    workload: str
    catalog: str
    dataset: DatasetSource
    deadline_s: float | None
    budget_usd: float | None
    deadline_is_default: bool
    arch: str
    max_memory_mb: int | None
    max_concurrency: int | None
    reserve_concurrency: bool
    ps_types: tuple[str, ...] | None
    # Share of the deadline kept in reserve (plans aim at the rest); None: the catalog's.
    slack: float | None = None
    mode: str = "train"  # "profile": deploy a profiling run (stacks/profile_stack.py) instead
    profile_memory_mb: tuple[int, ...] = ()  # sizes to profile; () = the default sizes
    profile_iterations: int | None = None  # timed iterations per size; None = the default
    az: str | None = None  # the VPC's one AZ (where the PS type is offered); None = the first
    # -c sync: force "ps" or "s3" gradient exchange, or let the planner pick ("auto"). Read and
    # checked here; app.py passes it on once provisioner.Limits takes a sync mode.
    sync: str = "auto"
    replan: str = "on"  # -c replan: on, off or scale-down (provisioner/replan_attach.py)
    # -c replan_ceiling: a re-plan's envelope, up to that many times the plan's workers and
    # memory (provisioner/envelope.py; the worst case grows with it)
    replan_ceiling: int = CEILING_FACTOR


def parse_az(value: object, errors: list[str]) -> str | None:
    """An availability zone name (us-east-1b); None when absent."""
    if _is_missing(value):
        return None
    text = str(value).strip()
    if AZ_PATTERN.match(text):
        return text
    errors.append(f"az={value!r} is not accepted; use an availability zone name like us-east-1b")
    return None


def _is_missing(value: object) -> bool:
    return value is None or (isinstance(value, str) and value.strip() == "")


def parse_int(key: str, value: object, low: int, high: int | None, errors: list[str]) -> int | None:
    """An integer in [low, high] from an int or a decimal string; None when absent."""
    if _is_missing(value):
        return None
    accepted = f"an integer from {low} to {high}" if high else f"an integer of at least {low}"
    if isinstance(value, bool):
        errors.append(f"{key}={value!r} is not accepted; use {accepted}")
        return None
    try:
        number = int(value) if isinstance(value, int) else int(str(value).strip(), 10)
    except ValueError:
        errors.append(f"{key}={value!r} is not accepted; use {accepted}")
        return None
    if number < low or (high is not None and number > high):
        errors.append(f"{key}={value!r} is out of range; use {accepted}")
        return None
    return number


def parse_bool(key: str, value: object, errors: list[str]) -> bool:
    """true/false from a JSON bool or the strings "true"/"false" (any case); absent is false."""
    if _is_missing(value):
        return False
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    errors.append(f"{key}={value!r} is not accepted; use true or false")
    return False


def parse_choice(key: str, value: object, choices: tuple[str, ...], errors: list[str]) -> str:
    """One of `choices`; absent means the last choice (the permissive default)."""
    if _is_missing(value):
        return choices[-1]
    text = str(value).strip()
    if text in choices:
        return text
    errors.append(f"{key}={value!r} is not accepted; use one of {', '.join(choices)}")
    return choices[-1]


def parse_ps_types(value: object, errors: list[str]) -> tuple[str, ...] | None:
    """A comma list (string) or JSON list of EC2 instance types; None means the catalog's all."""
    if _is_missing(value):
        return None
    items = value if isinstance(value, list) else str(value).split(",")
    names = tuple(str(item).strip() for item in items)
    bad = [name for name in names if not INSTANCE_TYPE_PATTERN.match(name)]
    if bad or not names:
        errors.append(
            f"ps_types={value!r} is not accepted; use a comma list of EC2 instance types, "
            "e.g. c5.large,m5.large"
        )
        return None
    return tuple(dict.fromkeys(names))  # keep the user's order, drop repeats


def parse_memory_list(key: str, value: object, errors: list[str]) -> tuple[int, ...]:
    """A comma list (string) or JSON list of Lambda memory sizes in MB; () when absent."""
    if _is_missing(value):
        return ()
    items = value if isinstance(value, list) else str(value).split(",")
    sizes: list[int] = []
    for item in items:
        text = str(item).strip()
        if isinstance(item, bool) or not text.isdigit():
            sizes = []
            break
        sizes.append(int(text))
    if not sizes or any(not MEMORY_MB_MIN <= mb <= MEMORY_MB_MAX for mb in sizes):
        errors.append(
            f"{key}={value!r} is not accepted; use a comma list of memory sizes in MB from "
            f"{MEMORY_MB_MIN} to {MEMORY_MB_MAX}, e.g. 1024,1769,3008"
        )
        return ()
    return tuple(sorted(set(sizes)))


def parse_job(value: object, errors: list[str]) -> str:
    """The job name: it names the stacks, buckets and run folders (provisioner.parse's rule)."""
    text = "" if value is None else str(value).strip()
    if JOB_NAME_PATTERN.fullmatch(text):
        return text
    errors.append(f"job={value!r} is not a job name; use {JOB_NAME_FORMS}")
    return "invalid"


def parse_dataset(
    value: object, errors: list[str], *, cwd: str, reader: bool = False
) -> DatasetSource:
    """builtin:NAME, synthetic-cifar:N, synthetic-tokens:N, s3://bucket/prefix (or key), or an
    existing local folder or .npz/.csv/.parquet file that the prepare step can read
    (functions/formats.py)."""
    spec = "" if value is None else str(value).strip()
    accepted = (
        f"use builtin:{'|'.join(BUILTIN_DATASETS)}, "
        f"synthetic-cifar:N or synthetic-tokens:N (N from 1 to {MAX_SYNTHETIC_SAMPLES} samples), "
        "s3://bucket/prefix, or an existing local folder (of .npz files, of class folders of "
        "images, or with one .csv or .parquet table) or .npz, .csv or .parquet file"
    )
    if spec.startswith("builtin:") and spec[len("builtin:") :] in BUILTIN_DATASETS:
        return DatasetSource(kind="builtin", spec=spec, name=spec[len("builtin:") :])
    synthetic = SYNTHETIC_PATTERN.match(spec)
    if synthetic and 0 < int(synthetic.group(2)) <= MAX_SYNTHETIC_SAMPLES:
        name, samples = synthetic.group(1), int(synthetic.group(2))
        return DatasetSource(kind="synthetic", spec=spec, name=name, samples=samples)
    location = spec.partition("#")[0]
    if spec.startswith("s3://"):
        bucket, _, prefix = location[len("s3://") :].partition("/")
        if prefix.lower().endswith(DATA_FILE_SUFFIXES):  # one object: grant its folder
            prefix = prefix.rpartition("/")[0]
        if BUCKET_PATTERN.match(bucket) and ".." not in bucket:
            return DatasetSource(kind="s3", spec=spec, bucket=bucket, prefix=prefix.strip("/"))
    elif location and ":" not in location and os.path.exists(os.path.join(cwd, location)):
        return _local_dataset(value, spec, errors, cwd=cwd, reader=reader)
    errors.append(f"dataset={value!r} is not accepted; {accepted}")
    return DatasetSource(kind="builtin", spec="builtin:digits", name="digits")


def _local_dataset(
    value: object, spec: str, errors: list[str], *, cwd: str, reader: bool = False
) -> DatasetSource:
    """A local folder or file, checked by file names with the prepare step's own rules; any
    folder or file when the model file brings its own `read_dataset` (`reader`)."""
    location, hashed, options = spec.partition("#")
    target = os.path.normpath(os.path.join(cwd, location))
    folder, file = (target, "") if os.path.isdir(target) else os.path.split(target)
    try:
        resolve(os.path.join(cwd, spec))
        if file and not _alone(folder, file):
            raise DatasetError(
                f"{file} is uploaded with its folder, which holds other data too; "
                "move it to a folder of its own"
            )
    except DatasetError as exc:
        if not reader:
            errors.append(f"dataset={value!r} is not usable: {exc}")
            return DatasetSource(kind="builtin", spec="builtin:digits", name="digits")
    suffix = (f"/{file}" if file else "") + hashed + options
    return DatasetSource(kind="local", spec=spec, path=folder, source_suffix=suffix)


def _alone(folder: str, file: str) -> bool:
    """Is `file` all the prepare step would read in `folder` (what a folder upload carries)?"""
    try:
        return detect_layout(LocalFolder(Path(folder)).names())[1] == [file]
    except DatasetError:  # several .csv files, say
        return False


def _brings_reader(profile: object) -> bool:
    """Does the workload's model file define `read_dataset` (read, not imported)?"""
    model = getattr(profile, "model", None)
    if not isinstance(model, str):
        return False
    try:
        return defines_function(model, "read_dataset")
    except ModelError:  # the spec is the profile's to report
        return False


def parse_goal(
    values: Mapping[str, object],
    errors: list[str],
    *,
    parse_duration_s: DurationParser,
    parse_usd: DurationParser,
) -> tuple[float | None, float | None, bool]:
    """(deadline_s, budget_usd, deadline_is_default); default_deadline applies only alone."""
    deadline_s = budget_usd = None
    for key, parser, accepted, target in (
        ("deadline", parse_duration_s, "seconds or e.g. 90m, 2h, 1h30m", "deadline"),
        ("budget", parse_usd, "US dollars, e.g. 5, 2.50 or $2.50", "budget"),
    ):
        value = values.get(key)
        if _is_missing(value):
            continue
        try:
            parsed = parser(value)
        except ValueError:
            parsed = -1.0
        if not parsed > 0:
            errors.append(f"{key}={value!r} is not accepted; use a positive amount: {accepted}")
        elif target == "deadline":
            deadline_s = parsed
        else:
            budget_usd = parsed
    given = not _is_missing(values.get("deadline")) or not _is_missing(values.get("budget"))
    if given:
        return deadline_s, budget_usd, False
    default = values.get("default_deadline")
    try:
        parsed_default = parse_duration_s(default) if not _is_missing(default) else -1.0
    except ValueError:
        parsed_default = -1.0
    if parsed_default > 0:
        return parsed_default, None, True
    errors.append(
        f"deadline=None and default_deadline={default!r} give no goal; "
        "use -c deadline=2h or -c budget=5 (or set default_deadline in cdk.json)"
    )
    return None, None, False


def _slack(value: object, parse: DurationParser | None, errors: list[str]) -> float | None:
    """`slack`: the share of the deadline held back; None when absent (the catalog's)."""
    if _is_missing(value):
        return None
    try:
        if parse is None:
            raise ValueError("no slack parser")
        return parse(value)
    except ValueError:
        errors.append(
            f"slack={value!r} is not accepted; use a share of the deadline below 90%, "
            "e.g. 10% or 0.1"
        )
        return 0.0


def empty_keys(values: Mapping[str, object]) -> list[str]:
    """One line per defaulted key given as an empty string: a value left out by mistake."""
    return [
        f"{key}={values[key]!r} is empty; give a value (docs/stacks.md says which) or leave "
        f"-c {key}= out for its default"
        for key in DEFAULTED_KEYS
        if isinstance(values.get(key), str) and _is_missing(values[key])
    ]


def unknown_keys(keys: list[str]) -> list[str]:
    """Keys shaped like ours that we do not read: almost always a typo of a real key."""
    return sorted(k for k in keys if _OWN_KEY_SHAPE.match(k) and k not in KNOWN_KEYS)


def read_context(
    values: Mapping[str, object],
    *,
    parse_duration_s: DurationParser,
    parse_usd: DurationParser,
    cwd: str = ".",
    loaders: Mapping[str, Callable[[str], object]] | None = None,
    parse_slack: DurationParser | None = None,
) -> JobContext:
    """Validate every key; raise ContextError with all problems, one line each.

    `loaders` (e.g. {"workload": load_profile, "catalog": load_catalog}) are tried on those
    keys' values so an unknown profile is reported with the other problems; a loader's
    ValueError/OSError message becomes the line's explanation.
    """
    errors: list[str] = [
        f"{key}={values[key]!r} is not a context key of this app; "
        f"accepted keys: {', '.join(KNOWN_KEYS)}"
        for key in unknown_keys(list(values))
    ]
    errors += empty_keys(values)
    deadline_s, budget_usd, deadline_is_default = parse_goal(
        values, errors, parse_duration_s=parse_duration_s, parse_usd=parse_usd
    )
    workload = str(values.get("workload") or "").strip()
    if not workload:
        errors.append(
            f"workload={values.get('workload')!r} is not accepted; "
            "use a profile name (profiles/NAME.json) or a path to a profile JSON file"
        )
    catalog = str(values.get("catalog") or "").strip()
    if not catalog:
        errors.append(
            f"catalog={values.get('catalog')!r} is not accepted; "
            "use a catalog name (catalog/NAME.json) or a path to a catalog JSON file"
        )
    loaded: dict[str, object] = {}
    for key, loader in (loaders or {}).items():
        name = {"workload": workload, "catalog": catalog}.get(key, "")
        if name:
            try:
                loaded[key] = loader(name)
            except (ValueError, OSError) as exc:
                errors.append(f"{key}={name!r}: {exc}")
    context = JobContext(
        job=parse_job(values.get("job"), errors),
        workload=workload,
        catalog=catalog,
        dataset=parse_dataset(
            values.get("dataset"), errors, cwd=cwd, reader=_brings_reader(loaded.get("workload"))
        ),
        deadline_s=deadline_s,
        budget_usd=budget_usd,
        deadline_is_default=deadline_is_default,
        arch=parse_choice("arch", values.get("arch"), ARCH_CHOICES, errors),
        max_memory_mb=parse_int(
            "max_memory_mb", values.get("max_memory_mb"), MEMORY_MB_MIN, MEMORY_MB_MAX, errors
        ),
        max_concurrency=parse_int(
            "max_concurrency", values.get("max_concurrency"), 1, None, errors
        ),
        reserve_concurrency=parse_bool(
            "reserve_concurrency", values.get("reserve_concurrency"), errors
        ),
        ps_types=parse_ps_types(values.get("ps_types"), errors),
        slack=_slack(values.get("slack"), parse_slack, errors),
        mode=parse_choice("mode", values.get("mode"), ("profile", "train"), errors),
        profile_memory_mb=parse_memory_list("profile_memory", values.get("profile_memory"), errors),
        profile_iterations=parse_int(
            "profile_iterations", values.get("profile_iterations"), 1, 1000, errors
        ),
        az=parse_az(values.get("az"), errors),
        sync=parse_choice("sync", values.get("sync"), SYNC_CHOICES, errors),
        replan=parse_choice("replan", values.get("replan"), REPLAN_CHOICES, errors),
        replan_ceiling=parse_int(
            "replan_ceiling", values.get("replan_ceiling"), 1, MAX_CEILING_FACTOR, errors
        )
        or CEILING_FACTOR,
    )
    too_big = [mb for mb in context.profile_memory_mb if mb > (context.max_memory_mb or mb)]
    if too_big:
        errors.append(
            f"profile_memory={values.get('profile_memory')!r} holds {too_big} MB above "
            f"max_memory_mb={context.max_memory_mb}; use sizes up to max_memory_mb"
        )
    if errors:
        raise ContextError(tuple(errors))
    return context
