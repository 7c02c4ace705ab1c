"""The judge's differential property checks (harness.pack.differential over judge/domains.py and
judge/properties.py): a submission that differs from the reference anywhere in a function's domain is shown its
smallest differing input; the same grading seed draws the same inputs, another draws others; every category of
every parameter is reached on every run; every explicit input names a category; a timeout is no difference to
shrink but its own outcome."""

import math
import os
import subprocess
import sys

import pytest

from harness.pack import ALL, ANSWERS, REFUSALS, REPO, Domain, Explicit, Param, Property, Raised, Timeout, check, drawn, reach
from harness.pack.frames import base_choice
from chapters.L10_8.judge import properties
from chapters.L10_8.judge.properties import PROPERTIES, judge_reference

GOLDEN = {"master_seed": 20261204}


class Fake:
    """An implementation answering as the reference does, but for what a test overrides."""

    def __getattr__(self, name):
        return getattr(judge_reference(), name)


def _run_all(impl, golden) -> None:
    for name in PROPERTIES:
        for judge in (ANSWERS, REFUSALS):
            assert getattr(properties, name)(impl, golden, judge) is None, (name, judge)


@pytest.mark.slow(s=6)
@pytest.mark.parametrize("seed", [20261204, 1, 987654321])
def test_every_category_is_reached_on_every_run_and_the_reference_agrees_with_itself(seed):
    """Each category of each parameter of each domain is reached by an input the check compares (under the
    judge that owns it: answers or refusals), on every run: the frames cover every pair of categories."""
    _run_all(judge_reference(), {"master_seed": seed})
    missed = {name: sorted(prop.domain.names - reach(prop.domain.name)) for name, prop in PROPERTIES.items()}
    missed = {name: m for name, m in missed.items() if m}
    assert not missed, f"categories no compared input reached on seed {seed}: {missed}"


def test_the_reach_check_sees_a_category_never_reached():
    """A category whose every input the contract leaves free is never reached: the reach check names it."""
    dom = Domain("toy", (Param("x", {"small": lambda r, g: r.randint(0, 5), "free": lambda r, g: -1}),))
    prop = Property(dom, lambda i, x: i(x), str, free=lambda x: x < 0)
    assert check(prop, abs, abs, 1) is None
    assert dom.names - reach("toy") == {"x:free"}


def test_every_explicit_input_names_a_category_and_the_check_sees_one_that_does_not():
    unnamed = {name: prop.unnamed() for name, prop in PROPERTIES.items() if prop.unnamed()}
    assert not unnamed, f"explicit inputs that name no category of their domain: {unnamed}"
    dom = Domain("toy", (Param("x", {"small": lambda r, g: 1}),))
    assert Property(dom, abs, str, explicit=(Explicit("x:the bug of last week", (4,)),)).unnamed()


def test_a_float_ceiling_is_shown_its_smallest_differing_input():
    fake = Fake()
    fake.blocks_for = lambda t, b: math.ceil(t / b) if t >= 0 and b >= 1 else judge_reference().blocks_for(t, b)
    problem = properties.blocks_for(fake, GOLDEN)
    assert problem is not None and "input where yours differs: blocks_for(" in problem, problem
    assert "expected" in problem and "got" in problem


@pytest.mark.slow(s=2)
def test_prompt_lookup_that_gives_up_at_the_context_length_shrinks_to_a_short_context():
    def gives_up(ctx, k, max_ngram, min_ngram):  # no back-off once n reaches len(ctx)
        if 1 <= min_ngram <= max_ngram and k >= 0 and all(x >= 0 for x in ctx) and max_ngram >= len(ctx):
            return []
        return judge_reference().prompt_lookup(ctx, k, max_ngram, min_ngram)
    fake = Fake()
    fake.prompt_lookup = gives_up
    problem = properties.prompt_lookup(fake, GOLDEN, ANSWERS)
    assert problem is not None and problem.startswith("smallest input where yours differs: prompt_lookup(["), problem
    shown = problem.split("prompt_lookup(")[1]
    ctx = eval(shown[:shown.index("]") + 1])  # noqa: S307 -- the judge's own message
    assert len(ctx) <= 4, f"the shrinker should reach a short context: {problem}"
    assert problem.endswith("got []"), problem


def test_a_refusal_where_the_reference_answers_is_a_difference_and_a_refusal_test_ignores_it():
    fake = Fake()
    def refuses(p, u):
        raise Raised("sample_dense", {"type": "SpecError", "spec_error": True, "message": "no"})
    fake.sample_dense = refuses
    problem = properties.sample_dense(fake, GOLDEN, ANSWERS)
    assert problem is not None and "got SpecError" in problem, problem
    assert properties.sample_dense(fake, GOLDEN, REFUSALS) is None, "refusing every input is right where the reference refuses"


def test_an_answer_where_the_reference_refuses_is_a_difference_only_to_the_refusal_test():
    fake = Fake()
    fake.sample_dense = lambda p, u: 0
    assert properties.sample_dense(fake, GOLDEN, REFUSALS) is not None
    problem = properties.sample_dense(fake, GOLDEN, ANSWERS)
    assert problem is None or "expected SpecError" not in problem, problem


def test_the_grading_seed_decides_the_inputs():
    for prop in PROPERTIES.values():
        one, again, other = (repr(list(drawn(prop.domain, s))) for s in (1, 1, 2))
        assert one == again, f"{prop.domain.name}: the same grading seed must draw the same inputs"
        assert one != other, f"{prop.domain.name}: another grading seed (--fresh) must draw other inputs"


def test_a_timeout_is_its_own_outcome_naming_the_input():
    fake = Fake()
    def hangs(t, b):
        raise Timeout("blocks_for: the deadline passed")
    fake.blocks_for = hangs
    with pytest.raises(Timeout, match=r"blocks_for\(\d+, block_tokens=\d+\): blocks_for: the deadline passed"):  # the first input drawn
        properties.blocks_for(fake, GOLDEN)


def test_a_difference_the_search_does_not_meet_again_shows_the_drawn_input():
    seen = [args for _, args in drawn(properties.BLOCKS_FOR.domain, 7) if args[0] > 2**40 and args[1] > 1
            and args[0] not in (2**64 - 1, 2**64 - 2, 2**63 + 1, 2**53 + 1, 2**32 - 1, 2**31) and args[0] < 2**63]
    assert seen, "the seed should draw some huge token count"
    odd = seen[0]
    fake = Fake()
    fake.blocks_for = lambda t, b: -1 if (t, b) == odd else judge_reference().blocks_for(t, b)
    problem = properties.blocks_for(fake, {"master_seed": 7})
    assert problem == (f"input where yours differs: blocks_for({odd[0]}, block_tokens={odd[1]}): "
                       f"expected {judge_reference().blocks_for(*odd)}, got -1"), problem


@pytest.mark.slow(s=3)
def test_a_property_check_writes_nothing_in_the_folder_it_runs_in(tmp_path):
    """Hypothesis's ./.hypothesis and the like: a check that shrinks a difference writes nothing where it runs."""
    student = tmp_path / "student"
    student.mkdir()
    code = ("from chapters.L10_8.judge import properties\n"
            "from chapters.L10_8.judge.properties import judge_reference\n"
            "class F:\n    def __getattr__(self, n): return getattr(judge_reference(), n)\n"
            "f = F(); f.blocks_for = lambda t, b: t // b if b >= 1 and t >= 0 else judge_reference().blocks_for(t, b)\n"
            "assert properties.blocks_for(f, {'master_seed': 1}).startswith('smallest')\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=student, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(REPO), "XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert r.returncode == 0, r.stderr[-2000:]
    assert not list(student.iterdir()), f"a check wrote into the student's folder: {list(student.iterdir())}"


def test_the_inputs_do_not_depend_on_the_modules_the_judge_imported(tmp_path, monkeypatch):
    before = repr(list(drawn(properties.BLOCKS_FOR.domain, 3)))
    (tmp_path / "ol_constants_probe.py").write_text("VALUES = (" + ", ".join(str(123456789 + 7919 * i) for i in range(200)) + ")\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import ol_constants_probe  # noqa: F401  -- a local module whose constants Hypothesis would mix into its draws
    assert repr(list(drawn(properties.BLOCKS_FOR.domain, 3))) == before
    assert ALL == "all"


def test_the_reference_is_asked_once_per_input_over_a_functions_two_tests():
    """A function's answers and refusals are two tests drawing the same inputs from the grading seed: the second
    reads the reference's answers the first asked (a check's time), and another seed asks anew."""
    asked = []

    class Counting:
        def blocks_for(self, t, b):
            asked.append((t, b))
            return judge_reference().blocks_for(t, b)

    ref = Counting()
    assert check(properties.BLOCKS_FOR, judge_reference(), ref, 5, ANSWERS) is None
    first = len(asked)
    assert first and len(set(asked)) == first, "each distinct input asked once"
    assert check(properties.BLOCKS_FOR, judge_reference(), ref, 5, REFUSALS) is None
    assert len(asked) == first, "the refusals' test asked the reference again"
    assert check(properties.BLOCKS_FOR, judge_reference(), ref, 6, REFUSALS) is None
    assert len(asked) > first, "another seed's inputs are asked"


def test_every_category_is_drawn_with_every_other_argument_at_its_base_under_each_mode():
    """No refused argument masks the check of another: each category of each parameter is in a frame whose other
    parameters are at their base (a valid, typical category), once under each category of each of the domain's
    modes (verify's temperature and walk, propose's draft kind), the others held where a mode's category says
    (`mode_bases`: verify's walk that stops at once, draft_probs absent); a frame that strays is seen missing."""
    for prop in PROPERTIES.values():
        dom = prop.domain
        frames = [frame for frame, _ in drawn(dom, 11)]
        base = {p.name: p.base_category for p in dom.params}
        unders = [{m: c} for m in dom.modes for c in next(p for p in dom.params if p.name == m).categories] or [{}]
        for under in unders:
            held = dom.mode_bases.get(":".join(*under.items()), {}) if under else {}
            for p in dom.params:
                for c in p.categories:
                    assert {**base, **held, **under, p.name: c} in frames, f"{dom.name}: {p.name}:{c} under {under} never beside the base"
    toy = Domain("toy", (Param("a", {"bad": lambda r, g: -1, "ok": lambda r, g: 1}, base="ok"),
                         Param("b", {"bad": lambda r, g: -1, "ok": lambda r, g: 1, "edge": lambda r, g: 2}, base="ok")))
    assert {"a": "ok", "b": "edge"} in [f for f, _ in drawn(toy, 1)]
    assert {"a": "bad", "b": "ok"} in [f for f, _ in drawn(toy, 1)]
    m = Param("m", {"one": lambda r, g: 1, "two": lambda r, g: 2})
    held = Domain("held", (m, *toy.params), modes=("m",), mode_bases={"m:two": {"b": "edge"}}, random_frames=0)
    base_frames = base_choice(held)
    assert {"m": "two", "a": "bad", "b": "edge"} in base_frames and {"m": "one", "a": "bad", "b": "ok"} in base_frames
    assert {"m": "two", "a": "bad", "b": "ok"} not in base_frames
    with pytest.raises(ValueError, match="mode_bases"):
        Domain("held", (m, *toy.params), modes=("m",), mode_bases={"m:three": {"b": "edge"}})
