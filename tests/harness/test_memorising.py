"""Nothing earned by memorising (issue 36, item 5): a submission that is the stub plus a table of the calls a check
of the reference makes on the shipped cases (their seed is public) passes, on fresh cases, at most the chapter's
fixed worked examples: every other test draws part of its inputs from the grading seed.

The table is recorded in this process: the judge's pristine reference, whose plain-data functions (the drafts,
propose, residual, sample_dense, speculative_step, dense_distribution, blocks_for, SpecConfig.parse) are wrapped
to record each call's arguments and answer while `run_check` checks the reference on the shipped cases. The
memorising submission is the reference's spec.py with every public function rebound to a table lookup (a miss is
the stub's NotImplementedError), run through the worker as any upload."""

import base64
import enum
import importlib
import pickle
from dataclasses import fields, is_dataclass
from pathlib import Path

import numpy as np
import pytest

from harness.check.golden import fresh_golden
from harness.check.runner import CheckOptions, run_check
from harness.registry import load_chapter
from harness.languages import in_process
from harness.subjects.reference import pristine, use_reference

WORKED_EXAMPLES = {"hand_example_prompt_lookup", "hand_example_greedy_verify", "hand_example_sampled_step",
                   "rollback_hand_example"}
PLAIN = ("prompt_lookup", "ngram_draft", "propose", "residual", "sample_dense", "speculative_step", "dense_distribution",
         "blocks_for")
UNMEMORISED = ("verify_draft", "rollback", "generate_stream", "generate")  # answers that act on a generator, a pool, a target

KEY_SOURCE = '''
def _key(x):
    """A call's arguments as plain data, the same in the judge and in the worker."""
    if isinstance(x, np.ndarray):
        return ("nd", _key(x.tolist()))
    if isinstance(x, (list, tuple)):
        return tuple(_key(y) for y in x)
    if isinstance(x, dict):
        return tuple(sorted((k, _key(v)) for k, v in x.items()))
    if isinstance(x, enum.Enum):
        return _key(x.value)
    if is_dataclass(x):
        return (type(x).__name__, tuple((f.name, _key(getattr(x, f.name))) for f in fields(x)))
    if isinstance(x, float):
        return repr(x)
    return x
'''
exec(KEY_SOURCE)  # noqa: S102 -- the one definition both sides use


def _plain(value):
    if isinstance(value, np.ndarray):
        return ("nd", value.tolist())
    if is_dataclass(value):  # SpecConfig
        return ("cfg", (value.draft.value, value.k, value.max_ngram, value.min_ngram))
    if isinstance(value, tuple):
        return ("tuple", [v.item() if hasattr(v, "item") else v for v in value])
    return ("value", value)


def record(chapter) -> dict:
    """(name, key of the arguments) -> ("ok", answer as plain data) | ("raise", message), over a check of the reference:
    every call of the reference the check makes, the judge's own expected answers included."""
    lang = chapter.language(in_process().name)
    use_reference(lang.reference)
    modules = [pristine(chapter).module("infer.spec"), importlib.import_module(f"{lang.package}.infer.spec")]
    table: dict = {}

    def wrap(spec, name, fn):
        def recorded(*args, **kw):
            key = (name, _key((args[1:] if name == "parse" else args, kw)))  # noqa: F821 -- defined by exec above (parse: not cls)
            try:
                value = fn(*args, **kw)
            except spec.SpecError as e:
                table[key] = ("raise", str(e))
                raise
            table[key] = ("ok", _plain(value))
            return value
        return recorded

    saved = [(spec, {name: getattr(spec, name) for name in PLAIN}, spec.SpecConfig.__dict__["parse"]) for spec in modules]
    try:
        for spec, originals, parse in saved:
            for name, fn in originals.items():
                setattr(spec, name, wrap(spec, name, fn))
            spec.SpecConfig.parse = classmethod(wrap(spec, "parse", lambda cls, *a, parse=parse, spec=spec, **kw: parse.__func__(spec.SpecConfig, *a, **kw)))
        rep = run_check(chapter, "reference")
        assert rep.passed == len(rep.tests), "the reference passes on the shipped cases"
    finally:
        for spec, originals, parse in saved:
            for name, fn in originals.items():
                setattr(spec, name, fn)
            spec.SpecConfig.parse = parse
    return table


MEMORISER = '''

# ---- a memorising submission: every public function answers from a table of a check of the reference -----------
import base64 as _b64, enum, pickle as _pk
from dataclasses import fields, is_dataclass
{key}
_TABLE = _pk.loads(_b64.b64decode("{table}"))


def _answer(name, args, kw):
    hit = _TABLE.get((name, _key((args, kw))))
    if hit is None:
        raise NotImplementedError(name)
    kind, value = hit
    if kind == "raise":
        raise SpecError(value)
    how, data = value
    if how == "nd":
        return np.asarray(data, dtype=float)
    if how == "cfg":
        return SpecConfig(Draft(data[0]), *data[1:])
    return tuple(data) if how == "tuple" else data


def _memorised(name):
    return lambda *args, **kw: _answer(name, args, kw)


for _name in {plain}:
    globals()[_name] = _memorised(_name)
SpecConfig.parse = classmethod(lambda cls, *args, **kw: _answer("parse", args, kw))


def _stub(*args, **kw):
    raise NotImplementedError("not memorised")


for _name in {unmemorised}:
    globals()[_name] = _stub
'''


def memoriser(tmp_path: Path, chapter, table: dict) -> Path:
    root = tmp_path / "memoriser"
    (root / "tinyllm" / "infer").mkdir(parents=True)
    (root / "tinyllm" / "__init__.py").write_text("")
    (root / "tinyllm" / "infer" / "__init__.py").write_text("")
    source = (pristine(chapter).package_dir / "infer" / "spec.py").read_text()
    blob = base64.b64encode(pickle.dumps(table)).decode()
    (root / "tinyllm" / "infer" / "spec.py").write_text(source + MEMORISER.format(
        key=KEY_SOURCE, table=blob, plain=repr(PLAIN), unmemorised=repr(UNMEMORISED)))
    return root


def _passed(rep) -> set[str]:
    return {t.name for t in rep.tests if t.outcome.passed}


@pytest.mark.slow(s=120)
def test_a_recorded_table_passes_at_most_the_worked_examples_on_fresh_cases(tmp_path):
    chapter = load_chapter("L10.8")
    table = record(chapter)
    assert len(table) > 500, f"a check of the reference makes many plain calls; recorded {len(table)}"
    sub = str(memoriser(tmp_path, chapter, table))
    shipped = _passed(run_check(chapter, sub, CheckOptions(ref_deps=True)))
    assert shipped - WORKED_EXAMPLES, f"on the shipped cases the table should earn some test beyond the worked examples: {shipped}"
    golden = str(fresh_golden(chapter, 5, tmp_path))
    fresh = _passed(run_check(chapter, sub, CheckOptions(ref_deps=True, golden=golden, fresh_seed=5)))
    assert fresh <= WORKED_EXAMPLES, (f"on fresh cases a recorded table earned {sorted(fresh - WORKED_EXAMPLES)} beyond the "
                                      f"worked examples (on the shipped cases: {sorted(shipped)})")
