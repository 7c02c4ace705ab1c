"""L10.8's golden cases read for `ol diff`: what each case asks, what it expects.

The engine's diff is generic; it calls diff_cases(impl, golden, ref): the cases the implementation
gets wrong, per section, each row with its inputs, expected and got as text, the first differing
token and notes. (Pitfall hints need no re-run: harness.check.hints reads the recorded answers.)
"""

import numpy as np

from harness.pack import SubmissionFailure

from .judge.answers import ANSWERS, VERIFY_KEYS, case_inputs
from .judge.judging import short, uniforms_drawn

LOGPROB_TOL = 1e-9  # the chapter tests' tolerance on logprobs (float64; a port may sum in another order)


SECTIONS = ("verify", "prompt_lookup", "ngram", "generate", "rollback")  # the golden file's, in its order


def _call(fn):
    """(answer, None), or (None, the SubmissionFailure the implementation's call ended in)."""
    try:
        return fn(), None
    except SubmissionFailure as e:
        return None, e


def _first_diff(a: list, b: list) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _verify_text(v: dict) -> str:
    return f"{v['tokens']} n_acc {v['n_accepted']} next_u32 {v['next_u32']}"


def _verify_row(c: dict, got, error, ref) -> dict | None:
    e = c["expect"]
    if error is None:
        fields = [f for f in VERIFY_KEYS if got[f] != e[f]]
        if not fields and not np.allclose(got["logprobs"], e["logprobs"], atol=LOGPROB_TOL, rtol=0):
            fields = ["logprobs"]
        if not fields:
            return None
    knobs = {k: v for k, v in c["params"].items() if k == "temperature" or v not in (0, 0.0, 1.0)}
    return {"id": c["id"], "tags": c["tags"], "error": error,
            "inputs": f"vocab {len(c['rows'][0])}, draft {short(c['draft'])}, stochastic draft {c['draft_probs'] is not None}, "
                      f"params {knobs}, seed {c['seed']}",
            "expected": _verify_text(e), "got": f"error: {error[:200]}" if error else _verify_text(got),
            "first_differing_token": None if error else _first_diff(e["tokens"], got["tokens"]),
            "notes": f"draws: expected {uniforms_drawn(ref, c['seed'], e['next_u32'])}, "
                     f"got {'-' if error else uniforms_drawn(ref, c['seed'], got['next_u32'])}"}


def _request_row(section: str, c: dict, got, error) -> dict | None:
    """A generate or rollback case: its inputs, and the answers in the recorded shape."""
    if error is None and got == c["expect"]:
        return None
    inputs = case_inputs(c)
    first = None
    if error is None and section == "generate" and isinstance(got, dict):
        first = _first_diff(c["expect"]["tokens"], got["tokens"])
    return {"id": c["id"], "tags": c["tags"], "error": error, "expected": str(c["expect"]),
            "got": f"error: {error[:200]}" if error else str(got), "inputs": str(inputs)[:300],
            "first_differing_token": first, "notes": ""}


def _draft_row(section: str, c: dict, got, error) -> dict | None:
    if error is None and got == c["expect"]:
        return None
    n = f", n {c['max_ngram']}..{c['min_ngram']}" if section == "prompt_lookup" else f", n {c['n']}"
    return {"id": c["id"], "tags": c["tags"], "error": error, "expected": str(c["expect"]),
            "got": f"error: {error[:200]}" if error else str(got),
            "inputs": f"ctx {short(c['ctx'][-16:], 16)} (last 16 of {len(c['ctx'])}), k {c['k']}{n}",
            "first_differing_token": None if error else _first_diff(c["expect"], got), "notes": ""}


# `ol diff`'s sections in the chapter's order (its section 4 table), and the contract's functions each one calls
CHAPTER_ORDER = ("prompt_lookup", "ngram", "verify", "generate", "rollback")
FUNCTIONS = {"prompt_lookup": "prompt_lookup", "ngram_draft": "ngram", "verify_draft": "verify", "generate": "generate",
             "generate_stream": "generate", "rollback": "rollback"}


def sections_for(only: str | None) -> tuple[str, ...] | None:
    """The sections `ol diff --only NAME` shows: NAME a section or a contract function; None: no such name."""
    if only is None:
        return CHAPTER_ORDER
    name = only.strip().lower().removesuffix("()")
    if name in CHAPTER_ORDER:
        return (name,)
    return (FUNCTIONS[name],) if name in FUNCTIONS else None


def diff_cases(impl, golden: dict, ref, sections_shown: tuple[str, ...] = CHAPTER_ORDER) -> dict[str, dict]:
    """section -> {"total": n, "divergent": [row, ...]}, in the chapter's order"""
    sections = {}
    for section in sections_shown:
        rows = []
        for c in golden.get(section, []):
            full = section == "verify"  # a verify answer keeps its logprobs here: they are compared with a tolerance
            call = (lambda: impl.verify_draft(c["rows"], c["draft"], c["draft_probs"], c["params"], c["prompt"],
                                              c["output"], c["seed"])) if full else (lambda: ANSWERS[section](impl, ref, c))
            got, failure = _call(call)
            error = None if failure is None else str(failure)
            if full:
                row = _verify_row(c, got, error, ref)
            elif section in ("prompt_lookup", "ngram"):
                row = _draft_row(section, c, got, error)
            else:
                row = _request_row(section, c, got, error)
            if row is not None:
                rows.append(row)
        sections[section] = {"total": len(golden.get(section, [])), "divergent": rows}
    return sections
