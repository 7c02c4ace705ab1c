"""`ol diff`: the submission against every golden case, divergences side by side, counted by tag."""

from collections import Counter

import numpy as np

from .errors import SubmissionFailure
from .impls import open_impl
from .judging import short, uniforms_drawn
from .registry import Chapter

LOGPROB_TOL = 1e-9


def _first_diff(a: list, b: list) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _call(fn):
    try:
        return fn(), None
    except SubmissionFailure as e:
        return None, str(e)


def diff_cases(impl, golden: dict) -> dict:
    sections = {}
    rows = []
    for c in golden["verify"]:
        got, error = _call(lambda: impl.verify_draft(c["rows"], c["draft"], c["draft_probs"], c["params"], c["prompt"], c["output"], c["seed"]))
        e = c["expect"]
        if error is None:
            fields = [f for f in ("tokens", "n_accepted", "next_u32") if got[f] != e[f]]
            if not fields and not np.allclose(got["logprobs"], e["logprobs"], atol=LOGPROB_TOL, rtol=0):
                fields = ["logprobs"]
            if not fields:
                continue
        rows.append({"id": c["id"], "tags": c["tags"], "error": error,
                     "inputs": f"vocab {len(c['rows'][0])}, draft {short(c['draft'])}, stochastic draft {c['draft_probs'] is not None}, "
                               f"params { {k: v for k, v in c['params'].items() if k == 'temperature' or v not in (0, 0.0, 1.0)} }, seed {c['seed']}",
                     "expected": e, "got": got,
                     "first_differing_token": None if error else _first_diff(e["tokens"], got["tokens"]),
                     "draws": {"expected": uniforms_drawn(c["seed"], e["next_u32"]),
                               "got": None if error else uniforms_drawn(c["seed"], got["next_u32"])}})
    sections["verify"] = {"total": len(golden["verify"]), "divergent": rows}
    for name, call in (("prompt_lookup", lambda c: impl.prompt_lookup(c["ctx"], c["k"], c["max_ngram"], c["min_ngram"])),
                       ("ngram", lambda c: impl.ngram_draft(c["ctx"], c["k"], c["n"]))):
        rows = []
        for c in golden.get(name, []):
            got, error = _call(lambda: call(c))
            if error is None and got == c["expect"]:
                continue
            rows.append({"id": c["id"], "tags": c["tags"], "error": error, "expected": c["expect"], "got": got,
                         "inputs": f"ctx {short(c['ctx'][-16:], 16)} (last 16 of {len(c['ctx'])}), k {c['k']}" +
                                   (f", n {c['max_ngram']}..{c['min_ngram']}" if name == "prompt_lookup" else f", n {c['n']}"),
                         "first_differing_token": None if error else _first_diff(c["expect"], got)})
        sections[name] = {"total": len(golden.get(name, [])), "divergent": rows}
    by_tag = Counter(t for s in sections.values() for r in s["divergent"] for t in r["tags"])
    return {"sections": sections, "by_tag": dict(sorted(by_tag.items(), key=lambda kv: -kv[1])),
            "divergent": sum(len(s["divergent"]) for s in sections.values())}


def run_diff(chapter: Chapter, submission: str, ref_deps: bool = False) -> dict:
    import json

    golden = json.loads(chapter.golden.read_text())
    impl = open_impl(chapter, submission, ref_deps)
    try:
        result = diff_cases(impl, golden)
    finally:
        impl.close()
    return {"chapter": chapter.chapter, "submission": submission, **result}


def render(console, result: dict, show_all: bool = False, limit: int = 10) -> None:
    from rich.table import Table

    for name, sec in result["sections"].items():
        n = len(sec["divergent"])
        console.print(f"[bold]{name}[/]: {n} of {sec['total']} cases diverge")
        if not n:
            continue
        t = Table(show_lines=True)
        for col in ("case", "tags", "inputs", "expected", "got", "first diff", "draws (expected / got)"):
            t.add_column(col, overflow="fold")
        for r in sec["divergent"][: None if show_all else limit]:
            exp = r["expected"]
            got = r["got"] if r["error"] is None else f"error: {r['error'][:200]}"
            if isinstance(exp, dict):
                exp = f"{exp['tokens']} n_acc {exp['n_accepted']} next_u32 {exp['next_u32']}"
                if isinstance(got, dict):
                    got = f"{got['tokens']} n_acc {got['n_accepted']} next_u32 {got['next_u32']}"
            draws = r.get("draws")
            t.add_row(r["id"], ", ".join(r["tags"]), r["inputs"], str(exp), str(got), str(r["first_differing_token"]),
                      f"{draws['expected']} / {draws['got']}" if draws else "")
        console.print(t)
        if not show_all and n > limit:
            console.print(f"... and {n - limit} more (--all shows them)")
    if result["by_tag"]:
        console.print("[bold]divergences by tag:[/] " + ", ".join(f"{k} {v}" for k, v in result["by_tag"].items()))
    console.print(f"[bold]{result['divergent']} divergent cases[/] for {result['submission']}")
