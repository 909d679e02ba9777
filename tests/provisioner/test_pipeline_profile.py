"""Parsing a profile's optional `blocks` and `runtime_memory_mb`: one-line errors, old profiles
unchanged."""

from __future__ import annotations

import pytest

from provisioner.profile import load_profile, profile_from_dict
from tests.provisioner.conftest import profile_dict
from tests.provisioner.pipeline_profiles import block_dict, blocks_profile, blocks_profile_dict


def two_blocks() -> list[dict]:
    return [block_dict("0:Linear", 3000, 64, 128, 400.0), block_dict("1:Linear", 1000, 4, 8, 900.0)]


def test_blocks_parse_with_their_figures() -> None:
    p = blocks_profile(two_blocks())
    assert [b.name for b in p.blocks] == ["0:Linear", "1:Linear"]
    assert p.blocks[0].parameter_bytes == 3000 and p.blocks[1].output_bytes_per_sample == 4
    assert p.blocks[0].activation_bytes_per_sample == 128
    assert p.runtime_memory_mb == 400
    curve = p.blocks[1].rate("x86_64")
    assert curve is not None and curve.samples_per_s == (450.0, 900.0)


def test_profiles_without_blocks_load_as_before() -> None:
    plain = profile_from_dict(profile_dict())
    assert plain.blocks == () and plain.runtime_memory_mb is None
    committed = load_profile("digits-mlp")
    assert committed.blocks == () and committed.runtime_memory_mb is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"model_bytes": 4001},
            "profile field 'blocks': parameter_bytes sum to 4000, not model_bytes 4001; give "
            "every block's float32 parameters so they sum to the model's",
        ),
        (
            {"runtime_memory_mb": None},
            "profile field 'runtime_memory_mb': missing; a profile with blocks gives the "
            "worker's memory before the model (a whole number of MB)",
        ),
        (
            {"runtime_memory_mb": 0},
            "profile field 'runtime_memory_mb': 0 is not a whole number in [1, 1048576]",
        ),
    ],
)
def test_bad_block_profiles_are_one_line(change: dict, message: str) -> None:
    doc = blocks_profile_dict(two_blocks())
    doc.update(change)
    if doc["runtime_memory_mb"] is None:
        del doc["runtime_memory_mb"]
    with pytest.raises(ValueError) as err:
        profile_from_dict(doc)
    assert str(err.value) == message


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("parameter_bytes", -1, "profile field 'blocks[1]'.parameter_bytes: -1 is not"),
        ("output_bytes_per_sample", 0, "profile field 'blocks[1]'.output_bytes_per_sample: 0"),
        ("name", "", "profile field 'blocks[1]'.name: '' is not a non-empty string"),
        ("flops", 3, "profile field 'blocks[1]': 'flops' is not a block field; use name,"),
    ],
)
def test_bad_block_fields_name_the_block(field: str, value: object, message: str) -> None:
    blocks = two_blocks()
    blocks[1][field] = value
    doc = blocks_profile_dict(blocks, model_bytes=4000)
    with pytest.raises(ValueError) as err:
        profile_from_dict(doc)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_a_block_needs_every_rated_architecture() -> None:
    blocks = two_blocks()
    del blocks[0]["training_rate"]["arm64"]
    with pytest.raises(ValueError, match=r"^profile field 'blocks\[0\].training_rate': no rate "):
        blocks_profile(blocks)


def test_runtime_without_blocks_is_refused() -> None:
    with pytest.raises(ValueError, match="given without 'blocks'"):
        profile_from_dict(profile_dict(runtime_memory_mb=300))


def test_one_block_is_not_a_pipeline() -> None:
    with pytest.raises(ValueError, match="expected a list of at least 2 blocks"):
        blocks_profile(two_blocks()[:1], model_bytes=3000)
