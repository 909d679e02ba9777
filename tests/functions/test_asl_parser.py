"""Every synthesized state machine parses under moto's bundled ASL parser (LocalStack's ANTLR
grammar), besides running in tests/functions/asl.py: a definition our small interpreter accepts
but the language does not would fail here."""

from __future__ import annotations

import json
from typing import Any

import pytest
from moto.stepfunctions.parser.asl.parse.asl_parser import (
    AmazonStateLanguageParser,
    ASLParserException,
)

from emulator.asl import resolve_cfn
from tests.stacks.conftest import make_plan
from tests.stacks.test_profile_stack import build_profile, make_run
from tests.stacks.test_stacks import DIGITS, build


def _any_value(intrinsic: dict[str, Any]) -> str:
    """A placeholder of the right kind for a CloudFormation value inside a definition."""
    return "arn:aws:lambda:us-east-1:123456789012:function:f" if "Fn::GetAtt" in intrinsic else "x"


def _definitions() -> dict[str, str]:
    """The training stack's two state machines and the profiling run's, as deployed text."""
    _, templates = build(make_plan(), DIGITS)
    _, profile = build_profile(make_run())
    return {
        f"{stack} {lid}": resolve_cfn(m["Properties"]["DefinitionString"], _any_value)
        for stack, template in (("training", templates["training"]), ("profile", profile))
        for lid, m in template.find_resources("AWS::StepFunctions::StateMachine").items()
    }


def test_every_synthesized_definition_parses() -> None:
    definitions = _definitions()
    assert len(definitions) == 3  # the run, the stop when a run is cut off, the profiling run
    for logical_id, text in definitions.items():
        program, _ = AmazonStateLanguageParser.parse(text)
        assert program is not None, logical_id


def test_the_parser_rejects_what_the_language_does_not_have() -> None:
    text = next(iter(_definitions().values()))
    broken = json.loads(text)
    broken["States"][broken["StartAt"]]["Type"] = "Teleport"
    with pytest.raises(ASLParserException):
        AmazonStateLanguageParser.parse(json.dumps(broken))
