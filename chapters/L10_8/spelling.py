"""How L10.8's feedback writes a call and a value in the student's language: the one place that knows both.

Every student-visible call and value of the judge (a property check's smallest input and its two answers, a loop's
drawn request, a pool step, an exception's call) goes through `spelling(language)`:

    spell = spelling(impl.language)
    spell.call(spell.name("verify_draft", args), dict(rows=..., draft=..., draft_probs=None, params={...}, prompt=..., output=..., seed=7))
    spell.value({"tokens": [3], "logprobs": [-0.1], "n_accepted": 0, "next_u32": 9})

Python (ol's own language, and the default): the call as the Python contract takes it, the first argument positional,
the rest by keyword (`prompt_lookup([4, 4], k=5, max_ngram=9, min_ngram=1)`), values as repr writes them.
Rust: the Rust contract's call, every argument positional and borrowed as its signature borrows it
(`verify_draft(&[vec![800.0]], &[3], None, &SamplingParams { temperature: 0.0, ..Default::default() }, &[], &[],
&mut Pcg32::from_seed(7))`), values as Rust literals (`true`, `vec![4]`, `"ngram"`, `f64::NAN`, `Some(..)`, struct
literals for a SpecConfig, a SamplingParams and a Verified). Only for display: the calls get the original values.
"""

from collections.abc import Mapping
import math

from harness.pack import Bare, brief

from .ops import SAMPLING_FIELDS

KNOBS = SAMPLING_FIELDS
CONFIG = ("draft", "k", "max_ngram", "min_ngram")
STATS = {"drafted", "accepted", "target_calls"}
VERIFIED = ("tokens", "logprobs", "n_accepted", "next_u32")
DRAFTS = {"none": "Draft::None", "ngram": "Draft::Ngram", "prompt_lookup": "Draft::PromptLookup"}
# the contract's function each op calls, where its name is not the op's: (Python, Rust)
NAMES = {"spec_config_parse": ("SpecConfig.parse", "SpecConfig::parse_with"), "verify_first_tokens": ("verify_draft", "verify_draft"),
         "pool_new": ("KvPool", "KvPool::new"), "pool_state": ("KvPool", "KvPool"), "runner_target_new": ("RunnerTarget", "RunnerTarget::new")}
# Rust: how each argument is passed, by name (a slice or a struct borrowed, the generator and the pool mutably)
BORROWED = {"ctx", "p", "q", "logits", "rows", "draft", "prompt", "output", "params", "cfg", "eos", "ids"}
DEFAULT_NGRAMS = (3, 1)  # spec.rs's DEFAULT_MAX_NGRAM, DEFAULT_MIN_NGRAM
OPTIONAL = {"max_ngram", "min_ngram"}  # SpecConfig.parse's bounds: None is an argument left out (Rust: parse, not parse_with)
MUTABLE = {"pool", "table", "target", "on_token"}


def _f64(x) -> str:
    text = repr(float(x))
    return text if ("." in text or "e" in text) else text + ".0"


def _knob(k: str, v) -> str:
    """A knob's value as Rust writes it; a value no knob takes (a string, NaN: a refused input) written as itself."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return repr(rust_value(v))
    return str(int(v)) if k == "top_k" and float(v).is_integer() else _f64(v)


def params_rust(p: dict) -> str:
    fields = []
    for k in KNOBS:
        v = p.get(k)
        if v is not None:
            fields.append(f"{k}: {_knob(k, v)}")
    rest = "" if len(fields) == len(KNOBS) else ", ..Default::default()"
    return "SamplingParams { " + ", ".join(fields) + rest + " }"


class _Code:
    """A value's text in the language, shown as is (repr and format are the text)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return self.text


class _Vec(list):
    """A Rust Vec (`vec![..]`), or a borrowed slice (`&[..]`); feedback's `shown` cuts it with these brackets."""
    brackets = ("vec![", "]")

    def __repr__(self) -> str:
        return self.brackets[0] + ", ".join(repr(x) for x in self) + self.brackets[1]

    __str__ = __repr__


class _Slice(_Vec):
    brackets = ("&[", "]")


class _Tuple(tuple):
    def __repr__(self) -> str:
        return "(" + ", ".join(repr(x) for x in self) + ")"

    __str__ = __repr__


def _struct(name: str, fields: dict) -> _Code:
    return _Code(name + " { " + ", ".join(f"{k}: {rust_value(v)!r}" for k, v in fields.items()) + " }")


def _config(c: Mapping) -> _Code:
    """A configuration as the worker builds it: parsed (SpecConfig::parse, no bound given) or a struct literal."""
    if "max_ngram" not in c and "min_ngram" not in c and not c.get("raw"):
        return _Code(f"SpecConfig::parse({rust_value(c.get('draft'))!r}, {rust_value(c.get('k'))!r})?")
    name = c.get("draft")
    draft = DRAFTS.get(name) if isinstance(name, str) else None
    fields = {k: c[k] for k in CONFIG if k in c}
    if draft is not None:
        fields["draft"] = _Code(draft)
    return _struct("SpecConfig", fields)


def _verified(v: Mapping) -> _Code:
    shown = _struct("Verified", {k: v[k] for k in ("tokens", "logprobs", "n_accepted") if k in v})
    return _Code(f"{shown!r}, then rng.next_u32() = {v['next_u32']}") if "next_u32" in v else shown


def rust_value(v):
    """`v` re-dressed so that repr (and feedback's `shown`) writes it as a Rust literal."""
    if isinstance(v, (_Code, Bare)):
        return v
    if isinstance(v, bool):
        return _Code("true" if v else "false")
    if v is None:
        return _Code("None")
    if isinstance(v, float) and not math.isfinite(v):
        return _Code("f64::NAN" if math.isnan(v) else "f64::INFINITY" if v > 0 else "f64::NEG_INFINITY")
    if isinstance(v, str):
        return _Code('"' + v.encode("unicode_escape").decode().replace('"', '\\"') + '"')
    if isinstance(v, Mapping) and not v:  # SamplingParams {} of the protocol: every knob its default
        return _Code("SamplingParams::default()")
    if isinstance(v, Mapping) and set(v) <= set(KNOBS):
        return _Code(params_rust(dict(v)))
    if isinstance(v, Mapping) and {"draft", "k"} <= set(v) <= {*CONFIG, "raw"}:
        return _config(v)
    if isinstance(v, Mapping) and {"tokens", "n_accepted"} <= set(v) <= set(VERIFIED):
        return _verified(v)
    if isinstance(v, Mapping) and v and set(v) <= STATS:
        return _struct("SpecStats", dict(v))
    if isinstance(v, Mapping) and set(v) == {"released", "table"}:  # rollback's count, and the table it left
        return _Code(f"Ok({v['released']}), the table left {rust_value(v['table'])!r}")
    if isinstance(v, Mapping):
        return _Code("{" + ", ".join(f"{k}: {rust_value(x)!r}" for k, x in v.items()) + "}")
    if isinstance(v, list):
        return _Vec(rust_value(x) for x in v)
    if isinstance(v, tuple):
        return _Tuple(rust_value(x) for x in v)
    return v


class Seeds(list):
    """The generators of a batch of verifications: one `Pcg32::from_seed(seed)` for each of these seeds."""


def _rng(v, sep: str) -> str:
    if isinstance(v, Seeds):
        return f"Pcg32{sep}from_seed(seed) for each seed of {brief(list(v))}"
    return f"Pcg32{sep}from_seed({v})"


def _rust_argument(name, v) -> str:
    """An argument as the Rust contract passes it: borrowed where the signature borrows."""
    if name == "rng":
        return "&mut " + _rng(v, "::")
    if isinstance(v, Bare):
        return ("&mut " if name in MUTABLE else "") + v
    if name == "draft_probs":
        return "None" if v is None else "Some(" + brief(_Slice(rust_value(x) for x in v)) + ")"
    value = rust_value(v)
    if isinstance(value, _Vec) and name in BORROWED:
        return brief(_Slice(value))
    if isinstance(v, str) or isinstance(name, int):
        return brief(value)
    return ("&mut " if name in MUTABLE else "&" if name in BORROWED else "") + brief(value)


class Spelling:
    """A call and a value as `language`'s contract writes them (Python's unless the language is Rust)."""

    def __init__(self, language: str = "") -> None:
        self.language = language
        self.rust = language == "rust"
        self.contract = "spec.rs" if self.rust else "spec.pyi"  # where the student reads the contract's rules

    def name(self, op: str, args: Mapping) -> str:
        """The contract's function an op calls (`SpecConfig::parse_with`, not `spec_config_parse`)."""
        sep = "::" if self.rust else "."
        if op == "generate":
            return "generate_stream" if args.get("stream") else "generate"
        if op in ("runner_target_call", "pool_call"):
            return f"{'RunnerTarget' if op == 'runner_target_call' else 'KvPool'}{sep}{args.get('method')}"
        if op == "spec_config_parse" and self.rust and args.get("max_ngram") is None and args.get("min_ngram") is None:
            return "SpecConfig::parse"
        return NAMES.get(op, (op, op))[self.rust]

    def value(self, v):
        """`v` as the language writes it (repr of the result)."""
        return rust_value(v) if self.rust else v

    def words(self, op: str, args: Mapping) -> str:
        """The call `op` makes with `args`, named as the contract names it."""
        return self.call(self.name(op, args), args)

    def call(self, name: str, args: Mapping) -> str:
        """The call of the contract's function `name` (see `name`) with `args` (its arguments by name, in order; an
        int key: positional; `rng`: the seed of the generator passed, or the Seeds of a batch)."""
        args = {k: v for k, v in args.items() if not (k in OPTIONAL and v is None)}
        if not self.rust:
            args = {k: Bare(_rng(v, ".")) if k == "rng" else v for k, v in args.items()}
            parts = [brief(v) if i == 0 or isinstance(k, int) else f"{k}={brief(v)}" for i, (k, v) in enumerate(args.items())]
        else:
            if name == "SpecConfig::parse_with":  # one bound given: the worker passes the other's default
                args = {"draft": args.get("draft"), "k": args.get("k"), "max_ngram": args.get("max_ngram", DEFAULT_NGRAMS[0]),
                        "min_ngram": args.get("min_ngram", DEFAULT_NGRAMS[1])}
            parts = [_rust_argument(k, v) for k, v in args.items()]
        return f"{name}({', '.join(parts)})"


def spelling(language: str) -> Spelling:
    """The spelling of `language` (a test's: `spelling(impl.language)`)."""
    return Spelling(language)
