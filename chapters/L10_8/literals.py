"""A golden case of L10.8 as a test a student can paste into their own code (`ol diff --case ID`).

Rust: a `#[cfg(test)]` module for the bottom of `spec.rs`, with the case's inputs as Rust literals
(f32 logits written with the shortest digits that read back as the same f32, seeds as u64) and its
expected answer as assertions (tokens, n_accepted and the generator's next u32 exact; logprobs within
the tests' tolerance). Python: the same as a pytest function over `tinyllm`.
"""

import json

from typing import Any

import numpy as np

from harness.pack import REPO

from .cases import KNOBS, LOGPROB_TOL, SECTIONS, student_tags
from .spelling import _f64, params_rust

REFERENCE = REPO / "reference"  # the course's reference package's folder (--ref-deps takes the earlier chapters from it)


def find(golden: dict, case_id: str) -> tuple[str, dict] | None:
    for section in SECTIONS:
        for c in golden.get(section, []):
            if c.get("id") == case_id:
                return section, c
    return None


def _f32(x) -> str:
    if x == "-inf" or x == float("-inf"):
        return "f32::NEG_INFINITY"
    text = str(np.float32(x))  # numpy prints the shortest digits that read back as the same f32
    return text if ("." in text or "e" in text or "inf" in text) else text + ".0"


def _u32s(xs) -> str:
    return "vec![" + ", ".join(str(int(x)) for x in xs) + "]"


def _rust_verify(c: dict) -> list[str]:
    rows = ",\n        ".join("vec![" + ", ".join(_f32(v) for v in r) + "]" for r in c["rows"])
    probs = "None" if c["draft_probs"] is None else (
        "Some(vec![" + ", ".join("vec![" + ", ".join(_f64(v) for v in q) + "]" for q in c["draft_probs"]) + "])")
    e = c["expect"]
    return [
        f"    let rows: Vec<Vec<f32>> = vec![\n        {rows},\n    ];",
        f"    let draft: Vec<u32> = {_u32s(c['draft'])};",
        f"    let draft_probs: Option<Vec<Vec<f64>>> = {probs};",
        f"    let params = {params_rust(c['params'])};",
        f"    let prompt: Vec<u32> = {_u32s(c['prompt'])};",
        f"    let output: Vec<u32> = {_u32s(c['output'])};",
        f"    let mut rng = Pcg32::from_seed({int(c['seed'])});",
        "    let v = verify_draft(&rows, &draft, draft_probs.as_deref(), &params, &prompt, &output, &mut rng).expect(\"a valid case\");",
        f"    assert_eq!(v.tokens, {_u32s(e['tokens'])}, \"emitted tokens\");",
        f"    assert_eq!(v.n_accepted, {int(e['n_accepted'])}, \"drafts accepted\");",
        f"    assert_eq!(rng.next_u32(), {int(e['next_u32'])}, \"the generator's next u32 (how many uniforms you drew)\");",
        f"    let want = [{', '.join(_f64(x) for x in e['logprobs'])}];",
        "    assert_eq!(v.logprobs.len(), want.len());",
        f"    for (i, (got, want)) in v.logprobs.iter().zip(want).enumerate() {{\n"
        f"        assert!((got - want).abs() <= {LOGPROB_TOL:g}, \"logprob {{i}}: got {{got}}, want {{want}}\");\n    }}",
    ]


def _rust_body(section: str, c: dict) -> list[str] | None:
    if section == "verify":
        return _rust_verify(c)
    if section == "prompt_lookup":
        return [f"    let ctx: Vec<u32> = {_u32s(c['ctx'])};",
                f"    assert_eq!(prompt_lookup(&ctx, {c['k']}, {c['max_ngram']}, {c['min_ngram']}).expect(\"a valid case\"), "
                f"{_u32s(c['expect'])});"]
    if section == "ngram":
        return [f"    let ctx: Vec<u32> = {_u32s(c['ctx'])};",
                f"    assert_eq!(ngram_draft(&ctx, {c['k']}, {c['n']}).expect(\"a valid case\"), {_u32s(c['expect'])});"]
    if section == "rollback":
        e = c["expect"]
        return [f"    let mut pool = KvPool::new({c['num_blocks']}, {c['block_tokens']}).unwrap();",
                "    let mut table: Vec<u32> = Vec::new();",
                f"    for fill in [{', '.join(str(f) for f in c['fills'])}] {{",
                "        let b = pool.alloc().unwrap();",
                "        pool.set_fill(b, fill).unwrap();",
                "        table.push(b);\n    }",
                f"    assert_eq!(rollback(&mut pool, &mut table, {c['keep']}).expect(\"a valid case\"), {e['released']}, \"blocks released\");",
                f"    let fills: Vec<usize> = table.iter().map(|&b| pool.fill(b).unwrap()).collect();",
                f"    assert_eq!(fills, vec![{', '.join(str(f) for f in e['fills'])}], \"the kept blocks' fills\");"]
    return None


def _no_literal(section: str, c: dict, comment: str) -> str:
    """A case run on the judge's fake target: no literal form in a student's language, its data as comments."""
    tags = ", ".join(student_tags(c))
    data = json.dumps({k: v for k, v in c.items() if k not in ("pitfalls", "tags")})
    return (f"{comment} {c['id']} ({section}; {tags}) runs on the judge's fake target, which lives in the judge: it has\n"
            f"{comment} no literal form. Its inputs and expected answer:\n{comment} {data}")


def rust(section: str, c: dict) -> str:
    body = _rust_body(section, c)
    tags = ", ".join(student_tags(c))
    if body is None:
        return _no_literal(section, c, "//")
    name = c["id"].lower()
    return "\n".join([
        f"// Golden case {c['id']} ({section}; {tags}): paste at the bottom of crates/tl-engine/src/spec.rs,",
        f"// then `cargo test --lib golden_{name}`.",
        "#[cfg(test)]",
        f"mod golden_{name} {{",
        "use super::*;",
        "#[allow(unused_imports)]",
        "use crate::{kv::KvPool, rng::Pcg32, sampling::SamplingParams};",
        "",
        "#[test]",
        f"fn golden_{name}() {{",
        *body,
        "}",
        "}",
    ])


def _py_floats(xs) -> str:
    return "[" + ", ".join("float('-inf')" if v in ("-inf", float("-inf")) else repr(float(v)) for v in xs) + "]"


def _py_body(section: str, c: dict) -> list[str] | None:
    e: Any = c.get("expect")  # a case's answer key: its shape is the section's (cases.ANSWER_KEYS)
    if section == "verify":
        rows = ",\n        ".join(f"np.array({_py_floats(r)}, dtype=np.float32)" for r in c["rows"])
        probs = "None" if c["draft_probs"] is None else "[" + ", ".join(_py_floats(q) for q in c["draft_probs"]) + "]"
        params = ", ".join(f"{k}={int(v) if k == 'top_k' else float(v)!r}" for k in KNOBS
                           if (v := c["params"].get(k)) is not None)
        return [f"    rows = [\n        {rows},\n    ]",
                f"    rng = Pcg32.from_seed({int(c['seed'])})",
                f"    v = verify_draft(rows, {list(map(int, c['draft']))}, {probs}, SamplingParams({params}),",
                f"                     {list(map(int, c['prompt']))}, {list(map(int, c['output']))}, rng)",
                f"    assert list(v.tokens) == {list(map(int, e['tokens']))}, 'emitted tokens'",
                f"    assert v.n_accepted == {int(e['n_accepted'])}, 'drafts accepted'",
                f"    assert rng.next_u32() == {int(e['next_u32'])}, \"the generator's next u32 (how many uniforms you drew)\"",
                f"    want = {_py_floats(e['logprobs'])}",
                "    assert len(v.logprobs) == len(want)",
                f"    assert all(abs(g - w) <= {LOGPROB_TOL:g} for g, w in zip(v.logprobs, want)), f'logprobs {{list(v.logprobs)}} != {{want}}'"]
    if section == "prompt_lookup":
        return [f"    assert list(prompt_lookup({list(map(int, c['ctx']))}, {c['k']}, {c['max_ngram']}, {c['min_ngram']})) == "
                f"{list(map(int, e))}"]
    if section == "ngram":
        return [f"    assert list(ngram_draft({list(map(int, c['ctx']))}, {c['k']}, {c['n']})) == {list(map(int, e))}"]
    if section == "rollback":
        return [f"    pool = KvPool({c['num_blocks']}, {c['block_tokens']})",
                "    table = []",
                f"    for fill in {list(c['fills'])}:",
                "        b = pool.alloc()",
                "        pool.set_fill(b, fill)",
                "        table.append(b)",
                f"    assert rollback(pool, table, {c['keep']}) == {e['released']}, 'blocks released'",
                f"    assert [pool.fill(b) for b in table] == {list(e['fills'])}, \"the kept blocks' fills\""]
    return None


def python(section: str, c: dict) -> str:
    """The case as a pytest function over the student's `tinyllm` (py/, as `ol start L10.8 --lang python` lays it out)."""
    body = _py_body(section, c)
    tags = ", ".join(student_tags(c))
    if body is None:
        return _no_literal(section, c, "#")
    name = c["id"].lower()
    return "\n".join([
        f"# Golden case {c['id']} ({section}; {tags}): save as test_golden_{name}.py in py/ (beside tinyllm/),",
        f"# then `python -m pytest test_golden_{name}.py` there.",
        "import numpy as np",
        "",
        "import tinyllm.infer  # what py/ lacks of the earlier chapters (L10.1) comes from ol's reference, as --ref-deps",
        f"tinyllm.__path__.append({str(REFERENCE / 'tinyllm')!r})",
        f"tinyllm.infer.__path__.append({str(REFERENCE / 'tinyllm' / 'infer')!r})",
        "",
        "from tinyllm.infer.sampling import SamplingParams",
        "from tinyllm.infer.spec import ngram_draft, prompt_lookup, rollback, verify_draft",
        "from tinyllm.kv import KvPool",
        "from tinyllm.rng import Pcg32",
        "",
        "",
        f"def test_golden_{name}():",
        *body,
        "",
    ])
