"""The values a property check shows (its input, the expected and the given answer) as a Rust student reads them:
`true`, `SamplingParams { temperature: 0.0, ..Default::default() }`, `"ngram"`, `f64::NAN`. Only for display: the
call itself always gets the original values. Lists stay lists (a check's wording may index them)."""

import math

from ..literals import KNOBS, params_rust


class _Shown:
    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return self.text


class _List(list):
    def __repr__(self) -> str:
        return "[" + ", ".join(repr(x) for x in self) + "]"

    __str__ = __repr__


class _Tuple(tuple):
    def __repr__(self) -> str:
        return "(" + ", ".join(repr(x) for x in self) + ")"

    __str__ = __repr__


def rust_shown(v):
    """`v` with a Rust spelling wherever Python's differs."""
    if isinstance(v, bool):
        return _Shown("true" if v else "false")
    if isinstance(v, float) and not math.isfinite(v):
        return _Shown("f64::NAN" if math.isnan(v) else "f64::INFINITY" if v > 0 else "f64::NEG_INFINITY")
    if isinstance(v, str):
        return _Shown('"' + v.encode("unicode_escape").decode().replace('"', '\\"') + '"')
    if isinstance(v, dict) and v and set(v) <= set(KNOBS):
        return _Shown(params_rust(v))
    if isinstance(v, dict):
        return _Shown("{" + ", ".join(f"{k}: {rust_shown(x)!r}" for k, x in v.items()) + "}")
    if isinstance(v, list):
        return _List(rust_shown(x) for x in v)
    if isinstance(v, tuple):
        return _Tuple(rust_shown(x) for x in v)
    return v
