"""The L10.8 golden fixture: replayed through the reference, schema-valid, reproducible, well designed.

The pack's fixtures/spec_golden.json is what the Rust differential tests of chapter L10.8 compare
a port against, and the grader's pitfall hints compare a submission's answers with the answers it
records per pitfall; these tests make sure it says what the reference says (a), records what each
mutant patch actually answers, exactly where it differs (a'), is what its README and schema say
(b), is what the generator (chapters.L10_8.oracle) writes byte for byte (c), and covers what the
chapter's pitfalls need (d).
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from chapters.L10_8 import oracle
from chapters.L10_8.judge.fake_target import FakeTarget
from chapters.L10_8.oracle import document
from chapters.L10_8.cases import ANSWERS, comparable
from harness.pack import pristine
from harness.pack import load_chapter
from harness.pack import open_impl

PACK = Path(__file__).resolve().parents[1]  # the chapter pack chapters/L10_8
FIXTURE = PACK / "fixtures" / "spec_golden.json"
SCHEMA = PACK / "fixtures" / "spec_golden.schema.json"

REF = pristine("L10.8")  # the judge's pristine reference, loaded by path (never `import tinyllm`)
S = REF.module("infer.spec")
SamplingParams = REF.module("infer.sampling").SamplingParams
Pcg32 = REF.module("rng").Pcg32
LIB = oracle.bind(REF)  # the reference's modules as the oracle's helpers take them

LOGPROB_ABS_TOL = 1e-12  # logprobs are float64 from the same code: they agree to the last bit here;
# 1e-12 absolute is the documented contract for ports (last-ulp exp/ln differences across libms)


RAW = FIXTURE.read_bytes()
DOC = oracle.load(FIXTURE)  # rows decoded: "-inf" -> float("-inf")
V_CASES, PL_CASES, NG_CASES = DOC["verify"], DOC["prompt_lookup"], DOC["ngram"]
G_CASES, R_CASES = DOC["generate"], DOC["rollback"]
PITFALLS = [f"s{i:02d}" for i in range(1, 14)]  # the chapter's section 5 table, s01..s13


def _params(d: dict) -> SamplingParams:
    return SamplingParams(**d)


def answer(impl, section: str, c: dict, ref):
    """The implementation's answer, as a check records it (a failure that is no refusal propagates)."""
    return ANSWERS[section](impl, ref, c)


# ---- (a) every case replayed through the reference ------------------------------------------------

@pytest.mark.parametrize("case", V_CASES, ids=[c["id"] for c in V_CASES])
def test_verify_case_replays(case):
    rng = Pcg32.from_seed(case["seed"])
    v = S.verify_draft(case["rows"], case["draft"], case["draft_probs"], _params(case["params"]),
                       case["prompt"], case["output"], rng)
    exp = case["expect"]
    assert v.tokens == exp["tokens"]
    assert v.n_accepted == exp["n_accepted"]
    assert rng.next_u32() == exp["next_u32"]
    assert len(v.logprobs) == len(exp["logprobs"])
    for got, want in zip(v.logprobs, exp["logprobs"]):
        assert math.isfinite(want) and abs(got - want) <= LOGPROB_ABS_TOL, (got, want)


@pytest.mark.parametrize("case", V_CASES, ids=[c["id"] for c in V_CASES])
def test_verify_case_shapes_and_numbers(case):
    rows, draft, qs = case["rows"], case["draft"], case["draft_probs"]
    V = len(rows[0])
    assert len(rows) == len(draft) + 1
    assert all(len(r) == V for r in rows)
    for r in rows:
        for x in r:  # float32 exactly, or -inf; never NaN or +inf
            assert x == float("-inf") or (math.isfinite(x) and float(np.float32(x)) == x), x
        assert any(math.isfinite(x) for x in r)
    assert all(0 <= t < V for t in draft + case["prompt"] + case["output"] + case["expect"]["tokens"])
    if qs is not None:
        assert len(qs) == len(draft)
        for q, d in zip(qs, draft):
            assert len(q) == V and q[d] > 0
            assert all(x * oracle.Q_DENOM == int(x * oracle.Q_DENOM) for x in q)
            assert sum(int(x * oracle.Q_DENOM) for x in q) == oracle.Q_DENOM
    assert 0 <= case["seed"] < 2**64
    assert len(case["expect"]["tokens"]) == case["expect"]["n_accepted"] + 1
    assert list(case["params"]) == list(oracle.KNOBS)


@pytest.mark.parametrize("case", PL_CASES, ids=[c["id"] for c in PL_CASES])
def test_prompt_lookup_case_replays(case):
    assert S.prompt_lookup(case["ctx"], case["k"], case["max_ngram"], case["min_ngram"]) == case["expect"]


@pytest.mark.parametrize("case", NG_CASES, ids=[c["id"] for c in NG_CASES])
def test_ngram_case_replays(case):
    assert S.ngram_draft(case["ctx"], case["k"], case["n"]) == case["expect"]


@pytest.mark.parametrize("case", G_CASES, ids=[c["id"] for c in G_CASES])
def test_generate_case_replays(case):
    target = FakeTarget(REF, case["vocab"], budget=len(case["prompt"]) + case["max_new"] - 1)  # the request's KV
    g = S.generate(target, S.SpecConfig.parse(case["cfg"]["draft"], case["cfg"]["k"]), case["prompt"],
                   SamplingParams(temperature=0.0), case["seed"], case["max_new"], [])
    assert not target.misuse
    assert {"tokens": g.tokens, "cached": target.cached()} == case["expect"]
    assert case["expect"]["cached"] == len(case["prompt"]) + case["max_new"] - 1


@pytest.mark.parametrize("case", R_CASES, ids=[c["id"] for c in R_CASES])
def test_rollback_case_replays(case):
    pool = REF.module("kv").KvPool(case["num_blocks"], case["block_tokens"])
    table = [pool.alloc() for _ in case["fills"]]
    for b, f in zip(table, case["fills"]):
        pool.set_fill(b, f)
    released = S.rollback(pool, table, case["keep"])
    assert {"released": released, "fills": [pool.fill(b) for b in table]} == case["expect"]
    assert 0 <= case["keep"] <= sum(case["fills"]) and len(case["fills"]) <= case["num_blocks"]


def test_the_local_copy_of_the_verifier_is_the_reference():
    """The pitfall tags compare variants of run_variant; with no pitfall it must be the reference."""
    for case in V_CASES:
        v, nxt = oracle.run_reference(LIB, case)
        assert oracle.run_variant(LIB, case, None) == (v.tokens, v.logprobs, v.n_accepted, nxt), case["id"]


# ---- (a') the recorded pitfall answers are the mutants' -------------------------------------------

@pytest.mark.parametrize("mid", PITFALLS)
def test_recorded_pitfall_answers_are_what_the_mutant_answers(mid):
    """Where the file records mutant `mid`, it answers that; everywhere else it answers `expect`."""
    impl = open_impl(load_chapter("L10.8"), f"mutant:{mid}")
    raw, wrong, shows = json.loads(RAW), [], 0  # raw: rows as the chapter's tests send them ("-inf")
    try:
        for section in document.SECTIONS:
            for c in raw[section]:
                got, want = answer(impl, section, c, REF), c["pitfalls"].get(mid, comparable(section, c))
                shows += mid in c["pitfalls"]
                if got != want:
                    wrong.append(f"{c['id']}: recorded {str(want)[:80]}, the mutant answers {str(got)[:80]}")
    finally:
        impl.close()
    assert not wrong, f"{len(wrong)} cases: " + "; ".join(wrong[:5])
    assert shows >= 3, f"{mid} is recorded on {shows} cases"


def test_the_reference_answers_every_case_as_expected_through_the_protocol():
    impl = open_impl(load_chapter("L10.8"), "reference")
    try:
        raw = json.loads(RAW)
        wrong = [c["id"] for s in document.SECTIONS for c in raw[s] if answer(impl, s, c, REF) != comparable(s, c)]
    finally:
        impl.close()
    assert not wrong, wrong


# ---- (b) the schema -------------------------------------------------------------------------------

@pytest.mark.slow
def test_fixture_validates_against_its_schema():
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(json.loads(RAW))


def test_schema_tag_enums_are_the_generators_vocabulary():
    defs = json.loads(SCHEMA.read_text())["$defs"]
    assert defs["verify_tag"]["enum"] == list(oracle.VERIFY_TAGS)
    assert defs["prompt_lookup_tag"]["enum"] == list(oracle.PROMPT_LOOKUP_TAGS)
    assert defs["ngram_tag"]["enum"] == list(oracle.NGRAM_TAGS)
    assert defs["generate_tag"]["enum"] == list(oracle.GENERATE_TAGS)
    assert defs["rollback_tag"]["enum"] == list(oracle.ROLLBACK_TAGS)
    bugs = {"verify": oracle.VERIFY_BUGS, "prompt_lookup": oracle.PROMPT_LOOKUP_BUGS, "ngram": oracle.NGRAM_BUGS,
            "generate": oracle.GENERATE_BUGS, "rollback": oracle.ROLLBACK_BUGS}
    for section, ids in bugs.items():
        pitfalls = defs[f"{section}_case"]["properties"]["pitfalls"]
        assert pitfalls["propertyNames"]["enum"] == list(ids), section


def test_schema_rejects_a_broken_case():
    schema = json.loads(SCHEMA.read_text())
    case_schema = {"$ref": "#/$defs/verify_case", "$defs": schema["$defs"]}
    case = json.loads(RAW)["verify"][0]
    jsonschema.Draft202012Validator(case_schema).validate(case)
    for path, bad in ((("rows", 0, 0), "inf"),  # only "-inf" is allowed as a string
                      (("seed",), 2**64), (("params", "top_k"), 1.5), (("tags", 0), "greedy!")):
        broken = json.loads(json.dumps(case))
        target = broken
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = bad
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.Draft202012Validator(case_schema).validate(broken)


# ---- (c) reproducible, byte for byte ----------------------------------------------------------------

@pytest.fixture(scope="module")
def rebuilt_doc() -> dict:
    return oracle.build(REF, DOC["master_seed"])


@pytest.fixture(scope="module")
def rebuilt(rebuilt_doc) -> bytes:
    return oracle.dumps(rebuilt_doc)


@pytest.mark.xdist_group("golden_rebuild")  # the file rebuilt once, not once per xdist worker
def test_regenerating_gives_identical_bytes(rebuilt):
    assert DOC["master_seed"] == oracle.MASTER_SEED
    assert rebuilt == RAW
    n_cases = sum(len(DOC[s]) for s in document.SECTIONS)
    assert RAW.endswith(b"\n") and RAW.count(b"\n") == 3 + 2 * len(document.SECTIONS) + n_cases + 2


# numpy's float64 kernels, narrowest first (numpy 2.4 on x86-64: X86_V3, X86_V4, AVX512_ICL,
# AVX512_SPR); switching off a suffix of the list leaves each narrower kernel in turn, the last the baseline
from numpy._core._multiarray_umath import __cpu_dispatch__ as DISPATCHED  # noqa: E402

KERNEL_LEVELS = [DISPATCHED[i:] for i in range(len(DISPATCHED))]


@pytest.mark.slow(s=5)
@pytest.mark.parametrize("off", KERNEL_LEVELS, ids=["off:" + "+".join(o) for o in KERNEL_LEVELS])
def test_the_file_is_the_same_with_numpys_wider_kernels_switched_off(off):
    """The golden file does not depend on the CPU's vector unit: regenerated in a process whose numpy
    may use none of `off` (what a CPU without them runs), it is the committed file, byte for byte."""
    env = {**os.environ, "NPY_DISABLE_CPU_FEATURES": " ".join(off)}
    probe = "from numpy._core._multiarray_umath import __cpu_features__ as f, __cpu_dispatch__ as d; print(' '.join(x for x in d if f[x]))"
    on = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout.split()
    assert not set(on) & set(off), f"numpy still uses {on}: the switch did not take"
    r = subprocess.run([sys.executable, "-m", "chapters.L10_8.oracle", "--check"], env=env, cwd=PACK.parents[1],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def test_logprobs_are_the_exact_ones_to_the_bit():
    """Every recorded logprob is exact_logprob's: x[t] - logsumexp(x) of its penalized row, correctly
    rounded (not the reference's own, good to an ulp), so the file needs no CPU's exp or ln."""
    from chapters.L10_8.oracle.verify_cases import exact_logprobs
    wrong = [c["id"] for c in V_CASES if exact_logprobs(LIB, c, c["expect"]["tokens"]) != c["expect"]["logprobs"]]
    assert not wrong, f"logprobs that are not the exact ones: {wrong[:5]}"


@pytest.mark.xdist_group("golden_rebuild")  # the file rebuilt once, not once per xdist worker
def test_check_accepts_the_fixture(monkeypatch, rebuilt_doc):
    # check() rebuilds (document.build, which oracle.build is): the module's one build, which
    # test_regenerating_gives_identical_bytes holds to the file (`ol fixtures --check` runs it whole: test_cli.py)
    monkeypatch.setattr(document, "build", lambda ref, seed: rebuilt_doc)
    assert oracle.check(FIXTURE, REF) is None


def _edit(tmp_path, case_id: str, needle: bytes, replace) -> Path:
    lines = RAW.split(b"\n")
    n = next(i for i, l in enumerate(lines) if l.startswith(b'{"id":"' + case_id.encode() + b'"'))
    pos = lines[n].index(needle) + len(needle)
    line = bytearray(lines[n])
    line[pos] = replace(line[pos])
    lines[n] = bytes(line)
    path = tmp_path / "edited.json"
    path.write_bytes(b"\n".join(lines))
    assert len(path.read_bytes()) == len(RAW)  # one byte changed, nothing else
    return path


def _other_digit(b: int) -> int:
    return ord("7") if b != ord("7") else ord("3")


@pytest.mark.xdist_group("golden_rebuild")  # the file rebuilt once, not once per xdist worker
def test_check_names_the_case_and_field_of_a_one_byte_edit(tmp_path, monkeypatch, rebuilt_doc):
    # check() rebuilds (document.build, which oracle.build is): reuse one build
    monkeypatch.setattr(document, "build", lambda ref, seed: rebuilt_doc)
    msg = oracle.check(_edit(tmp_path, "v004", b'"next_u32":', _other_digit), REF)
    assert msg is not None and "v004" in msg and "expect.next_u32" in msg, msg
    msg = oracle.check(_edit(tmp_path, "v050", b'"rows":[[', lambda b: ord("9") if b != ord("9") else ord("8")), REF)
    assert msg is not None and "v050" in msg and "rows" in msg, msg
    msg = oracle.check(_edit(tmp_path, "pl010", b'"k":', _other_digit), REF)
    assert msg is not None and "pl010" in msg and "k" in msg, msg
    msg = oracle.check(_edit(tmp_path, "g002", b'"s08":{"tokens":[', _other_digit), REF)
    assert msg is not None and "g002" in msg and "pitfalls.s08.tokens" in msg, msg
    msg = oracle.check(_edit(tmp_path, "r003", b'"keep":', _other_digit), REF)
    assert msg is not None and "r003" in msg and "keep" in msg, msg
    # an edit that breaks the JSON still names the case and field
    msg = oracle.check(_edit(tmp_path, "ng007", b'"ctx":', lambda b: ord("{")), REF)
    assert msg is not None and "ng007" in msg and "ctx" in msg, msg
