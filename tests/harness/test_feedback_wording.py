"""Feedback wording (issue 26, item 4): an untouched stub's error is one line, `not implemented: f`, naming
the contract's function the test called (not the protocol's op), and the one whose stub ran when that is
another."""

from chapters.L10_8.client import Client
from harness.errors import Raised
from harness.registry import load_chapter
from harness.stub import make_stub


def _stub_error(op: str, args: dict, message: str, language: str) -> str:
    e = Raised(op, {"type": "NotImplementedError", "message": message}, language)
    e.name_call(Client.called(op, args, language))
    return str(e)


def test_a_python_stub_names_the_function_the_test_called():
    assert _stub_error("spec_config_parse", {"draft": "none", "k": 1}, "SpecConfig.parse: not implemented yet",
                       "python") == "not implemented: SpecConfig.parse"
    assert _stub_error("verify_first_tokens", {}, "verify_draft: not implemented yet", "python") == \
        "not implemented: verify_draft"
    assert _stub_error("rollback", {}, "rollback: not implemented yet", "python") == "not implemented: rollback"


def test_a_rust_stub_names_the_function_the_test_called():
    assert _stub_error("spec_config_parse", {}, "not yet implemented: SpecConfig::parse_with", "rust") == \
        "not implemented: SpecConfig::parse_with"
    assert _stub_error("prompt_lookup", {}, "not yet implemented: prompt_lookup", "rust") == \
        "not implemented: prompt_lookup"


def test_a_stub_reached_through_another_function_names_both():
    got = _stub_error("generate", {"stream": True}, "not yet implemented: SpecConfig::parse_with", "rust")
    assert got == "not implemented: SpecConfig::parse_with (the test called generate_stream, which needs it)"
    got = _stub_error("runner_target_call", {"method": "extend"}, "blocks_for: not implemented yet", "python")
    assert got == "not implemented: blocks_for (the test called RunnerTarget.extend, which needs it)"


def test_an_older_stub_message_still_names_the_method():
    """Stubs written before the class was named in the message say `parse: not implemented yet`."""
    assert _stub_error("spec_config_parse", {}, "parse: not implemented yet", "python") == "not implemented: SpecConfig.parse"


def test_the_python_stub_names_each_method_with_its_class():
    text = make_stub(load_chapter("L10.8"))
    assert 'raise NotImplementedError("SpecConfig.parse: not implemented yet")' in text
    assert 'raise NotImplementedError("prompt_lookup: not implemented yet")' in text
