"""runtime.toml: the example loads, the schema is valid, every kind of mistake names its key."""
import json
from pathlib import Path
import sys
import types

import jsonschema
import pytest

from tinyllm import config as cfgmod
from tinyllm.config import ConfigError, RuntimeConfig, SpeculativeSettings, load_runtime, parse_runtime

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "config" / "runtime.example.toml"
SCHEMA = REPO / "config" / "runtime.schema.json"


def spec_line(inline: str) -> str:
    return f"[engine]\nspeculative = {{ {inline} }}\n"


def error_of(text) -> str:
    with pytest.raises(ConfigError) as e:
        parse_runtime(text, source="rt.toml")
    return str(e.value)


def test_schema_is_valid_draft_2020_12():
    schema = json.loads(SCHEMA.read_text())
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    assert cfgmod.SCHEMA_PATH == SCHEMA


def test_example_file_loads():
    cfg = load_runtime(EXAMPLE)
    assert isinstance(cfg, RuntimeConfig)
    assert cfg.speculative == SpeculativeSettings(draft="prompt_lookup", k=4, max_ngram=3, min_ngram=1)
    assert (cfg.block_tokens, cfg.num_blocks, cfg.max_batch) == (16, 1024, 8)


def test_defaults_when_absent():
    cfg = parse_runtime("")
    assert cfg.speculative is None
    assert (cfg.block_tokens, cfg.num_blocks, cfg.max_batch) == (16, 1024, 8)
    s = parse_runtime(spec_line('draft = "ngram", k = 2')).speculative
    assert (s.max_ngram, s.min_ngram) == (3, 1)


@pytest.mark.parametrize("draft", ["none", "ngram", "prompt_lookup"])
@pytest.mark.parametrize("k", [1, 16])
def test_the_three_drafts_and_k_edges(draft, k):
    s = parse_runtime(spec_line(f'draft = "{draft}", k = {k}, max_ngram = 8, min_ngram = 8')).speculative
    assert s == SpeculativeSettings(draft, k, 8, 8)


def test_table_form_and_dict_input():
    text = '[engine.speculative]\ndraft = "ngram"\nk = 3\n'
    assert parse_runtime(text).speculative.k == 3
    assert parse_runtime({"engine": {"speculative": {"draft": "ngram", "k": 3}}}).speculative.k == 3


def test_settings_are_frozen():
    s = SpeculativeSettings("ngram", 4, 3, 1)
    with pytest.raises(Exception):
        s.k = 5


def test_unknown_draft():
    msg = error_of(spec_line('draft = "eagle", k = 4'))
    assert "engine.speculative.draft = 'eagle'" in msg
    assert '"none", "ngram", "prompt_lookup"' in msg


@pytest.mark.parametrize("k", [0, 17, -3])
def test_k_out_of_range(k):
    msg = error_of(spec_line(f'draft = "ngram", k = {k}'))
    assert f"engine.speculative.k = {k} is out of range: allowed 1 <= k <= 16" in msg
    assert "rt.toml" in msg


@pytest.mark.parametrize("value", ['"4"', "4.0", "true"])
def test_k_wrong_type(value):
    msg = error_of(spec_line(f'draft = "ngram", k = {value}'))
    assert "engine.speculative.k = " in msg and "expected an integer" in msg


@pytest.mark.parametrize("key,value", [("max_ngram", 0), ("max_ngram", 9), ("min_ngram", 0), ("min_ngram", 9)])
def test_ngram_out_of_range(key, value):
    msg = error_of(spec_line(f'draft = "ngram", k = 4, {key} = {value}'))
    assert f"engine.speculative.{key} = {value} is out of range: allowed 1 <= {key} <= 8" in msg


def test_min_ngram_greater_than_max_ngram():
    msg = error_of(spec_line('draft = "prompt_lookup", k = 4, max_ngram = 2, min_ngram = 3'))
    assert "engine.speculative.min_ngram = 3" in msg and "engine.speculative.max_ngram = 2" in msg
    assert "min_ngram <= max_ngram" in msg


def test_min_ngram_against_default_max():
    msg = error_of(spec_line('draft = "prompt_lookup", k = 4, min_ngram = 4'))  # default max_ngram 3
    assert "engine.speculative.min_ngram = 4" in msg


def test_typo_in_engine_key():
    msg = error_of('[engine]\nspeculatve = { draft = "ngram", k = 4 }\n')
    assert "engine.speculatve is an unknown key" in msg
    assert "did you mean 'speculative'" in msg
    assert "block_tokens, max_batch, num_blocks, speculative" in msg


def test_typo_inside_speculative():
    msg = error_of(spec_line('draft = "ngram", k = 4, max_ngrams = 3'))
    assert "engine.speculative.max_ngrams is an unknown key" in msg
    assert "draft, k, max_ngram, min_ngram" in msg


def test_typo_in_table_name():
    msg = error_of("[engin]\nblock_tokens = 16\n")
    assert "engin is an unknown key" in msg and "engine" in msg


def test_missing_required_key():
    msg = error_of(spec_line('draft = "ngram"'))
    assert "engine.speculative" in msg and "missing" in msg and " k" in msg


def test_speculative_must_be_a_table():
    msg = error_of('[engine]\nspeculative = "ngram"\n')
    assert "engine.speculative = 'ngram'" in msg and "table" in msg


def test_every_problem_is_reported():
    msg = error_of("[engine]\nblock_tokens = 0\nspeculative = { draft = \"x\", k = 99 }\n")
    for key in ("engine.block_tokens = 0", "engine.speculative.draft = 'x'", "engine.speculative.k = 99"):
        assert key in msg


def test_toml_syntax_error_names_file_and_line(tmp_path):
    bad = tmp_path / "runtime.toml"
    bad.write_text('[engine]\nblock_tokens = 16\nspeculative = { draft = ngram, k = 4 }\n')
    with pytest.raises(ConfigError) as e:
        load_runtime(bad)
    assert f"{bad}, line 3" in str(e.value) and "TOML syntax error" in str(e.value)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_runtime(tmp_path / "nope.toml")


def test_missing_schema(tmp_path):
    with pytest.raises(ConfigError, match="schema .* is missing"):
        parse_runtime("", schema_path=tmp_path / "runtime.schema.json")


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


class FakeSpecConfig:
    @classmethod
    def parse(cls, draft, k, max_ngram, min_ngram):
        return ("parsed", draft, k, max_ngram, min_ngram)


def test_to_spec_config_calls_parse():
    fake = types.SimpleNamespace(SpecConfig=FakeSpecConfig)
    s = parse_runtime(spec_line('draft = "ngram", k = 5, max_ngram = 4, min_ngram = 2')).speculative
    assert s.to_spec_config(fake) == ("parsed", "ngram", 5, 4, 2)


def test_to_spec_config_imports_infer_spec_lazily(monkeypatch):
    import tinyllm.infer
    fake = types.ModuleType("tinyllm.infer.spec")
    fake.SpecConfig = FakeSpecConfig
    monkeypatch.setitem(sys.modules, "tinyllm.infer.spec", fake)
    monkeypatch.setattr(tinyllm.infer, "spec", fake, raising=False)
    assert SpeculativeSettings("none", 1, 3, 1).to_spec_config() == ("parsed", "none", 1, 3, 1)
