"""The judge's differential property checks (judge/props.py, judge/properties.py): a submission that differs
from the reference anywhere in a function's domain is shown its smallest differing input; the same grading
seed draws the same inputs, another draws others; a timeout is no difference to shrink but its own outcome; the
inputs a second check reads back (harness.memo) are the inputs drawn.

Every test here has its own empty cache folder and draws anew (the `own_cache` fixture; `_drawn` forgets between
draws): a test that the drawing is reproducible must draw, not read back what it drew a moment before."""

import math
import os
import subprocess
import sys

import pytest

from harness.pack import Raised, Timeout, memo
from chapters.L10_8.judge import properties, props
from harness.pack import REPO
from chapters.L10_8.judge.props import judge_reference

GOLDEN = {"master_seed": 20261204}
PROPERTIES = ("prompt_lookup", "ngram_draft", "parse_config", "propose", "residual", "sample_dense",
              "speculative_step", "dense_distribution", "verify_draft", "blocks_for")


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """This test's own cache folder, and nothing in this process's memory: what it draws, it draws."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    memo.forget()
    yield tmp_path / "cache"
    memo.forget()


class Fake:
    """An implementation answering as the reference does, but for what a test overrides."""

    def __getattr__(self, name):
        return getattr(judge_reference(), name)


@pytest.mark.slow(s=4)
def test_the_reference_agrees_with_itself_on_every_property():
    ref = judge_reference()
    for name in PROPERTIES:
        assert getattr(properties, name)(ref, GOLDEN) is None, name


def test_a_float_ceiling_is_shown_its_smallest_differing_input():
    fake = Fake()
    fake.blocks_for = lambda t, b: math.ceil(t / b) if t >= 0 and b >= 1 else judge_reference().blocks_for(t, b)
    problem = properties.blocks_for(fake, GOLDEN)
    assert problem is not None and "input where yours differs: blocks_for(tokens=" in problem, problem
    assert "expected" in problem and "got" in problem


@pytest.mark.slow(s=2)
def test_prompt_lookup_that_gives_up_at_the_context_length_shrinks_to_a_short_context():
    def gives_up(ctx, k, max_ngram, min_ngram):  # the example: no back-off once n reaches len(ctx)
        if 1 <= min_ngram <= max_ngram and k >= 0 and all(x >= 0 for x in ctx) and max_ngram >= len(ctx):
            return []
        return judge_reference().prompt_lookup(ctx, k, max_ngram, min_ngram)
    fake = Fake()
    fake.prompt_lookup = gives_up
    problem = properties.prompt_lookup(fake, GOLDEN)
    assert problem is not None and problem.startswith("smallest input where yours differs: prompt_lookup(["), problem
    shown = problem.split("prompt_lookup(")[1]
    ctx = eval(shown[:shown.index("]") + 1])  # noqa: S307 -- the judge's own message
    assert len(ctx) <= 3, f"the shrinker should reach a context of 2 or 3 tokens: {problem}"
    assert problem.endswith("got []"), problem


def test_a_refusal_where_the_reference_answers_is_a_difference():
    fake = Fake()
    def refuses_nan_only(p, u):
        raise Raised("sample_dense", {"type": "SpecError", "spec_error": True, "message": "no"})
    fake.sample_dense = refuses_nan_only
    problem = properties.sample_dense(fake, GOLDEN)
    assert problem is not None and "got SpecError" in problem, problem


def _drawn(seed: int) -> list:
    """The inputs blocks_for's check asks for `seed`, drawn anew (nothing read back from memory or disk)."""
    memo.forget()
    for kept in memo.folder("draws").glob("*"):
        kept.unlink()
    seen, fake = [], Fake()
    def record(t, b):
        seen.append((t, b))
        return judge_reference().blocks_for(t, b)
    fake.blocks_for = record
    assert properties.blocks_for(fake, {"master_seed": seed}) is None
    return seen


@pytest.mark.slow(s=2)
def test_the_grading_seed_decides_the_inputs():
    assert _drawn(1) == _drawn(1), "the same grading seed must draw the same inputs (a run is reproducible)"
    assert _drawn(1) != _drawn(2), "another grading seed (--fresh) must draw other inputs"


def test_a_timeout_is_its_own_outcome_naming_the_input():
    fake = Fake()
    def hangs(t, b):
        raise Timeout("blocks_for: the deadline passed")
    fake.blocks_for = hangs
    with pytest.raises(Timeout, match=r"blocks_for\(tokens=.*the deadline passed"):
        properties.blocks_for(fake, GOLDEN)


def test_a_difference_the_search_does_not_meet_again_shows_the_drawn_input():
    edges = {2**64 - 1, 2**64 - 2, 2**63, 2**53 + 1, 2**53, 2**32, 2**32 - 1}  # drawn often: a search meets them again
    drawn = [(t, b) for t, b in _drawn(7) if t > 2**40 and t not in edges and b > 1]  # one no search will draw again
    assert drawn, "the seed should draw some huge token count"
    odd = drawn[0]
    fake = Fake()
    fake.blocks_for = lambda t, b: -1 if (t, b) == odd else judge_reference().blocks_for(t, b)
    problem = properties.blocks_for(fake, {"master_seed": 7})
    assert problem == (f"input where yours differs: blocks_for(tokens={odd[0]}, block_tokens={odd[1]}): "
                       f"expected {judge_reference().blocks_for(*odd)}, got -1"), problem


def test_the_inputs_do_not_depend_on_the_modules_the_judge_imported(tmp_path, monkeypatch):
    before = _drawn(3)
    (tmp_path / "ol_constants_probe.py").write_text(
        "VALUES = (" + ", ".join(str(123456789 + 7919 * i) for i in range(200)) + ")\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import ol_constants_probe  # noqa: F401  -- a local module whose constants Hypothesis would mix into its draws
    assert _drawn(3) == before, "the same grading seed must draw the same inputs whatever else the process imported"


@pytest.mark.slow(s=2)
def test_a_property_check_writes_nothing_in_the_folder_it_runs_in(tmp_path, own_cache):
    """Hypothesis's ./.hypothesis and the like: a check writes only into the judge's own cache (its drawn inputs)."""
    student = tmp_path / "student"
    student.mkdir()
    code = ("import json; from chapters.L10_8.judge import properties; "
            "from chapters.L10_8.judge.props import judge_reference; "
            "assert properties.prompt_lookup(judge_reference(), {'master_seed': 1}) is None")
    r = subprocess.run([sys.executable, "-c", code], cwd=student, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr[-2000:]
    assert not list(student.iterdir()), f"a check wrote into the student's folder: {list(student.iterdir())}"
    assert len(list((own_cache / "ol" / "draws").iterdir())) == 1, "the drawn inputs are kept in the judge's cache"


@pytest.mark.slow(s=3)
def test_a_second_check_reads_back_the_inputs_drawn_and_draws_nothing(own_cache, monkeypatch):
    """Every property's inputs, drawn by one check and read back from disk by the next (another process's
    memory: forgotten here), are the same values of the same types (repr: a tuple is no list, -0.0 no 0.0)."""
    drawn, read, made = {}, {}, []
    real_draw, real_inputs = props._draw, props.drawn_inputs

    def draw(*a):
        made.append(a[1])
        return real_draw(*a)

    def inputs(into):
        def recorded(seed, name, strategy, examples=props.EXAMPLES):
            into[name] = repr(got := real_inputs(seed, name, strategy, examples))
            return got
        return recorded

    monkeypatch.setattr(props, "_draw", draw)
    for into in (drawn, read):
        memo.forget()
        monkeypatch.setattr(props, "drawn_inputs", inputs(into))
        for name in PROPERTIES:
            assert getattr(properties, name)(judge_reference(), GOLDEN) is None, name
    assert len(drawn) == len(PROPERTIES) and len(made) == len(PROPERTIES), (sorted(drawn), made)
    assert read == drawn, [name for name in drawn if read.get(name) != drawn[name]]
    assert len(list((own_cache / "ol" / "draws").glob("*.marshal"))) == len(PROPERTIES)
