"""runtime.toml: parsed with tomllib, validated against config/runtime.schema.json.

`load_runtime(path)` and `parse_runtime(text_or_dict)` return a `RuntimeConfig` or raise
`ConfigError`, whose message names the offending key path (`engine.speculative.k`), what is
wrong with it and how to fix it.
"""

from collections.abc import Mapping
from dataclasses import dataclass
import difflib
import json
from pathlib import Path
import re
import tomllib

import jsonschema

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "config" / "runtime.schema.json"

_TOML_TYPES = {"object": "a table", "integer": "an integer", "string": "a string",
               "number": "a number", "boolean": "a boolean", "array": "an array"}

# JSON Schema counts 4.0 as an integer; TOML distinguishes them, so `k = 4.0` is refused too.
_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _checker, x: isinstance(x, int) and not isinstance(x, bool)),
)


class ConfigError(ValueError):
    """runtime.toml is unreadable or invalid; the message says what is wrong and how to fix it."""


@dataclass(frozen=True)
class SpeculativeSettings:
    draft: str
    k: int
    max_ngram: int
    min_ngram: int

    def to_spec_config(self, spec_module=None):
        """`spec_module.SpecConfig.parse(...)`; by default the module is `tinyllm.infer.spec`."""
        if spec_module is None:
            from .infer import spec as spec_module
        return spec_module.SpecConfig.parse(self.draft, self.k, max_ngram=self.max_ngram, min_ngram=self.min_ngram)


@dataclass(frozen=True)
class RuntimeConfig:
    block_tokens: int
    num_blocks: int
    max_batch: int
    speculative: SpeculativeSettings | None  # None: speculative decoding is off


def load_schema(path: Path | None = None) -> dict:
    path = Path(path) if path is not None else SCHEMA_PATH
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"the runtime schema {path} is missing; restore config/runtime.schema.json "
                          f"in the repository (it is part of the contract, not generated)") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"the runtime schema {path} is not valid JSON ({e}); restore it from git") from None


def load_runtime(path, schema_path: Path | None = None) -> RuntimeConfig:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file; create it (config/runtime.example.toml is a template)") from None
    return parse_runtime(text, source=str(path), schema_path=schema_path)


def parse_runtime(text_or_dict, source: str = "<runtime.toml>", schema_path: Path | None = None) -> RuntimeConfig:
    if isinstance(text_or_dict, Mapping):
        data = dict(text_or_dict)
    else:
        try:
            data = tomllib.loads(text_or_dict)
        except tomllib.TOMLDecodeError as e:
            m = re.search(r"line (\d+)", str(e))
            where = f"{source}, line {m.group(1)}" if m else source
            raise ConfigError(f"{where}: TOML syntax error: {e}; fix the syntax there "
                              f"(strings need quotes, tables are {{ key = value, ... }})") from None
    schema = load_schema(schema_path)
    problems = [_describe(err) for err in sorted(_Validator(schema).iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))]
    if problems:
        raise ConfigError(f"{source}: invalid runtime configuration:\n  " + "\n  ".join(problems)
                          + f"\nfix these keys in {source} (config/runtime.schema.json lists every key and range)")
    return _build(data, schema, source)


def _key(path) -> str:
    return ".".join(str(p) for p in path) or "(top level)"


def _describe(err) -> str:
    """One line per schema violation: the key path, the cause, the remedy."""
    key, value, sub = _key(err.absolute_path), err.instance, err.schema
    name = str(err.absolute_path[-1]) if err.absolute_path else key
    if err.validator == "additionalProperties":
        allowed = sorted(sub.get("properties", {}))
        lines = []
        for extra in sorted(set(value) - set(allowed)):
            full = f"{key}.{extra}" if err.absolute_path else extra
            hint = difflib.get_close_matches(extra, allowed, n=1)
            lines.append(f"{full} is an unknown key{f' (did you mean {hint[0]!r}?)' if hint else ''}; "
                         f"allowed keys in {key}: {', '.join(allowed)}")
        return "\n  ".join(lines)
    if err.validator == "enum":
        choices = ", ".join(json.dumps(c) for c in sub["enum"])
        return f"{key} = {value!r} is not allowed: allowed values are {choices}"
    if err.validator in ("minimum", "maximum"):
        lo, hi = sub.get("minimum"), sub.get("maximum")
        rng = f"{lo} <= {name} <= {hi}" if lo is not None and hi is not None else (
            f"{name} >= {lo}" if lo is not None else f"{name} <= {hi}")
        return f"{key} = {value!r} is out of range: allowed {rng}"
    if err.validator == "type":
        want = _TOML_TYPES.get(sub["type"], sub["type"])
        hint = " (write it without quotes)" if isinstance(value, str) and sub["type"] == "integer" else ""
        return f"{key} = {value!r} has the wrong type: expected {want}{hint}"
    if err.validator == "required":
        missing = [r for r in sub["required"] if r not in value]
        return f"{key} is missing the required key(s) {', '.join(missing)}; add them"
    return f"{key}: {err.message}"


def _build(data: dict, schema: dict, source: str) -> RuntimeConfig:
    eschema = schema["properties"]["engine"]["properties"]
    engine = data.get("engine", {})
    get = lambda table, props, k: table.get(k, props[k].get("default"))
    spec = None
    if "speculative" in engine:
        s, props = engine["speculative"], eschema["speculative"]["properties"]
        spec = SpeculativeSettings(draft=s["draft"], k=s["k"],
                                   max_ngram=get(s, props, "max_ngram"), min_ngram=get(s, props, "min_ngram"))
        if spec.min_ngram > spec.max_ngram:
            raise ConfigError(f"{source}: engine.speculative.min_ngram = {spec.min_ngram} is greater than "
                              f"engine.speculative.max_ngram = {spec.max_ngram}: allowed min_ngram <= max_ngram; "
                              f"lower min_ngram or raise max_ngram")
    return RuntimeConfig(block_tokens=get(engine, eschema, "block_tokens"), num_blocks=get(engine, eschema, "num_blocks"),
                         max_batch=get(engine, eschema, "max_batch"), speculative=spec)
