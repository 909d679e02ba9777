"""A user's model file goes into the image: in the build context, as MODEL_FILE, in the hash."""

from __future__ import annotations

import dataclasses
import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from functions.model_spec import file_digest

from .conftest import REPO_ROOT, run_synth

EXAMPLE_MODEL = Path(REPO_ROOT) / "examples" / "own-model" / "model.py"


def _profile(model: str, digest: str) -> dict[str, Any]:
    """A profile of the example CNN on 3×32×32 inputs (its pooling takes any size), so the
    generated SYNTHETIC CIFAR can stand in for the user's dataset at synth."""
    doc: dict[str, Any] = json.loads((Path(REPO_ROOT) / "profiles" / "synthetic-cifar-cnn.json")
                                     .read_text())  # fmt: skip
    doc.update(name="own-cnn", model=model, model_digest=digest, input_shape=[3, 32, 32])
    return doc


@pytest.fixture
def project_model() -> Iterator[Path]:
    """A copy of the example's model file inside the project (git-ignored runs/), removed after."""
    folder = Path(REPO_ROOT) / "runs" / f"test-own-model-{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    shutil.copy(EXAMPLE_MODEL, folder / "model.py")
    yield folder / "model.py"
    shutil.rmtree(folder)


def _synth(tmp_path: Path, model_file: Path, *, digest: str | None = None) -> Any:
    spec = f"{model_file.relative_to(REPO_ROOT).as_posix()}:build"
    profile = tmp_path / f"own-cnn-{uuid.uuid4().hex[:6]}.json"
    profile.write_text(json.dumps(_profile(spec, digest or file_digest(spec))))
    out = tmp_path / f"cdk.out-{uuid.uuid4().hex[:6]}"
    return run_synth(
        # a PS plan: the test checks the PS runs the same image (an S3 plan has no PS)
        {"workload": str(profile), "dataset": "synthetic-cifar:600", "job": "own",
         "deadline": "2h", "sync": "ps"},
        str(out),
    )  # fmt: skip


def _image(synth: Any) -> tuple[str, dict[str, Any]]:
    (manifest,) = Path(synth.outdir).glob("*-training.assets.json")
    ((digest, image),) = json.loads(manifest.read_text())["dockerImages"].items()
    return digest, image


def test_the_users_file_is_in_the_image_and_its_hash(tmp_path: Path, project_model: Path) -> None:
    first = _synth(tmp_path, project_model)
    assert first.code == 0, first.stderr
    spec = f"{project_model.relative_to(REPO_ROOT).as_posix()}:build"
    training = first.plan_json()["plan"]["training"]
    assert training["model"] == spec and training["model_digest"] == file_digest(spec)
    digest, image = _image(first)
    relative = project_model.relative_to(REPO_ROOT).as_posix()
    assert image["source"]["dockerBuildArgs"] == {"MODEL_FILE": relative}
    staged = Path(first.outdir) / image["source"]["directory"]
    assert (staged / relative).read_bytes() == project_model.read_bytes()
    # only the model's file of its folder, and nothing else of the project beyond functions/
    # and provisioner/ (the pace function's planner)
    assert sorted(p.name for p in staged.iterdir()) == sorted(
        {"functions", "provisioner", relative.split("/")[0]}
    )
    assert [p.name for p in (staged / relative).parent.iterdir()] == ["model.py"]
    # the PS runs the same image: one build
    (ps_manifest,) = Path(first.outdir).glob("*-ps.assets.json")
    assert digest in json.loads(ps_manifest.read_text())["dockerImages"]

    project_model.write_text(project_model.read_text() + "\n# a change of the user's\n")
    second = _synth(tmp_path, project_model)
    assert second.code == 0, second.stderr
    assert _image(second)[0] != digest  # a new image: `cdk diff` shows the functions change


def test_a_model_file_changed_since_profiling_is_refused(
    tmp_path: Path, project_model: Path
) -> None:
    result = _synth(tmp_path, project_model, digest="sha256:" + "0" * 64)
    assert result.code == 2
    relative = project_model.relative_to(REPO_ROOT).as_posix()
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("error:")]
    assert line.startswith(
        f"error: model file {relative} changed since profile 'own-cnn' measured it "
        "(sha256:00000000… then, sha256:"
    )
    assert line.endswith(
        f"now): re-profile it with python -m emulator.profile --model {relative}:build "
        "--dataset synthetic-cifar --output <profile>"
    )


def test_a_folder_only_the_model_files_reader_knows_is_accepted_with_it(
    tmp_path: Path, project_model: Path
) -> None:
    data = project_model.parent / "data"
    data.mkdir()
    (data / "part-0.jsonl").write_text('{"features": [1, 2], "label": 0}\n')
    dataset = data.relative_to(REPO_ROOT).as_posix()
    spec = f"{project_model.relative_to(REPO_ROOT).as_posix()}:build"

    def synth(model_text: str) -> Any:
        project_model.write_text(model_text)
        profile = tmp_path / f"p-{uuid.uuid4().hex[:6]}.json"
        profile.write_text(json.dumps({**_profile(spec, file_digest(spec)), "dataset": dataset}))
        out = tmp_path / f"cdk.out-{uuid.uuid4().hex[:6]}"
        return run_synth({"workload": str(profile), "dataset": dataset, "job": "own",
                          "deadline": "2h"}, str(out))  # fmt: skip

    plain = synth(EXAMPLE_MODEL.read_text())
    assert plain.code == 2 and f"dataset='{dataset}' is not usable: " in plain.stderr
    with_reader = synth(EXAMPLE_MODEL.read_text() + "\n\ndef read_dataset(path):\n    ...\n")
    assert with_reader.code == 0, with_reader.stderr
    machines = [
        "".join(p for p in r["Properties"]["DefinitionString"]["Fn::Join"][1] if isinstance(p, str))
        for r in with_reader.template("training")["Resources"].values()
        if r["Type"] == "AWS::StepFunctions::StateMachine"
    ]
    # the prepare step gets the model, to read the data with its read_dataset
    assert any(f'"model":"{spec}"' in m for m in machines)


def test_the_prepare_event_names_a_users_model_file_only() -> None:
    from stacks.events import prepare_event

    from .conftest import make_plan

    plan = make_plan()
    assert "model" not in prepare_event(plan, source="builtin:digits", dataset_bucket="b")
    user = dataclasses.replace(plan, training=dataclasses.replace(plan.training, model="m.py:f"))
    assert prepare_event(user, source="s3://b/source", dataset_bucket="b")["model"] == "m.py:f"
