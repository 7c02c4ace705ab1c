"""L10.8's golden cases read for `ol diff`: what each case asks, what it expects.

The engine's diff is generic; it calls diff_cases(impl, golden, ref): the cases the implementation
gets wrong, per section, each row with its inputs, expected and got as text, the first differing
token and notes. (Pitfall hints need no re-run: harness.check.hints reads the recorded answers.)
"""

from harness.pack import SubmissionFailure

from ..judge.judging import short, uniforms_drawn
from ..spelling import Spelling, spelling
from .ask import ASK, PROPOSE_BROKE_IT
from .schema import CHAPTER_ORDER, DIFFERS, FUNCTIONS, case_inputs, draft_inputs, shown_params


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


def _verify_row(section: str, c: dict, got, error, ref, spell: Spelling) -> dict:
    e = c["expect"]
    return {"id": c["id"], "tags": c["tags"], "error": error,
            "inputs": f"vocab {len(c['rows'][0])}, draft {short(c['draft'])}, stochastic draft {c['draft_probs'] is not None}, "
                      f"params {spell.value(shown_params(c['params']))!r}, seed {c['seed']}",
            "expected": _verify_text(e), "got": f"error: {error[:200]}" if error else _verify_text(got),
            "first_differing_token": None if error else _first_diff(e["tokens"], got["tokens"]),
            "notes": f"draws: expected {uniforms_drawn(ref, c['seed'], e['next_u32'])}, "
                     f"got {'-' if error else uniforms_drawn(ref, c['seed'], got['next_u32'])}"}


def _request_row(section: str, c: dict, got, error, ref, spell: Spelling) -> dict:
    """A generate or rollback case: its inputs, and the answers in the recorded shape."""
    first = None
    if error is None and section == "generate" and isinstance(got, dict):
        first = _first_diff(c["expect"]["tokens"], got["tokens"])
    return {"id": c["id"], "tags": c["tags"], "error": error, "expected": repr(spell.value(c["expect"])),
            "got": f"error: {error[:200]}" if error else repr(spell.value(got)), "inputs": repr(spell.value(case_inputs(c)))[:300],
            "first_differing_token": first, "notes": ""}


def _draft_row(section: str, c: dict, got, error, ref, spell: Spelling) -> dict:
    return {"id": c["id"], "tags": c["tags"], "error": error, "expected": str(c["expect"]),
            "got": f"error: {error[:200]}" if error else str(got), "inputs": draft_inputs(section, c, 16),
            "first_differing_token": None if error else _first_diff(c["expect"], got), "notes": ""}


ROWS = {"verify": _verify_row, "prompt_lookup": _draft_row, "ngram": _draft_row, "generate": _request_row,
        "rollback": _request_row}


def sections_for(only: str | None) -> tuple[str, ...] | None:
    """The sections `ol diff --only NAME` shows: NAME a section or a contract function; None: no such name."""
    if only is None:
        return CHAPTER_ORDER
    name = only.strip().lower().removesuffix("()")
    if name in CHAPTER_ORDER:
        return (name,)
    return (FUNCTIONS[name],) if name in FUNCTIONS else None


def diff_cases(impl, golden: dict, ref, sections_shown: tuple[str, ...] = CHAPTER_ORDER) -> dict[str, dict]:
    """section -> {"total": n, "divergent": [row, ...]}, in the chapter's order; a row is a case whose call failed
    or whose answer differs (verify's logprobs within the tolerance)"""
    sections = {}
    for section in sections_shown:
        rows = []
        for c in golden.get(section, []):
            got, failure = _call(lambda: ASK[section](impl, ref, c))
            if got is PROPOSE_BROKE_IT:  # counted as ol check counts it: propose's slip, shown in its own sections
                continue
            error = None if failure is None else str(failure)
            if error is not None or DIFFERS[section](c["expect"], got):
                rows.append(ROWS[section](section, c, got, error, ref, spelling(getattr(impl, "language", ""))))
        sections[section] = {"total": len(golden.get(section, [])), "divergent": rows}
    return sections


# The property checks `ol check` runs, by the golden section whose functions they judge: (function, judge, test).
# `ol diff` runs those of the sections it shows (their smallest differing input, in the student's language).
PROPERTY_CHECKS = {
    "prompt_lookup": (("prompt_lookup", "refusals", "hand_example_prompt_lookup"),
                      ("prompt_lookup", "answers", "prompt_lookup_matches_python_l8_6")),
    "ngram": (("ngram_draft", "all", "ngram_draft_hand_example"),),
    "verify": (("verify_draft", "answers", "verify_matches_python_l8_6"),
               *((f, "answers", "hand_example_sampled_step") for f in ("residual", "sample_dense", "speculative_step",
                                                                       "dense_distribution")),
               *((f, "refusals", "verify_rejects_bad_shapes") for f in ("verify_draft", "residual", "sample_dense",
                                                                        "speculative_step", "dense_distribution"))),
    "generate": (("parse_config", "all", "config_parses_runtime_values"), ("propose", "all", "config_parses_runtime_values")),
    "rollback": (("blocks_for", "all", "rollback_hand_example"),),
}


def diff_properties(impl, golden: dict, sections_shown: tuple[str, ...] = CHAPTER_ORDER) -> list[dict]:
    """The property checks of the sections shown that fail: {"section", "function", "test", "message"} each, the
    message `ol check`'s (the smallest input where the answers differ, or the failure that ended the check)."""
    from ..judge import properties  # here: the judge's properties import this package

    failed = []
    for section in sections_shown:
        for function, judge, test in PROPERTY_CHECKS.get(section, ()):
            problem, failure = _call(lambda: getattr(properties, function)(impl, golden, judge))
            message = problem if failure is None else str(failure)
            if message is not None:
                failed.append({"section": section, "function": function, "test": test, "message": message})
    return failed
