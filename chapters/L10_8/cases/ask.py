"""How a golden case of L10.8 is asked, recorded and worded when the answer is wrong: the chapter's tests ask a
whole section through golden_section (which records each answer for the pitfall hints, harness.check.hints), the
staff tests ask through ANSWERS, `ol diff` through ASK."""

from contextlib import nullcontext
from functools import partial

from harness.pack import Raised, SubmissionFailure, expected_got

from ..judge.fake_target import FakeTarget
from ..judge.judging import case, uniforms_drawn
from ..judge.replay import propose_broke_it
from ..judge.requests import GREEDY
from ..spelling import spelling
from .schema import DIFFERS, REFUSED, SECTIONS, case_inputs, draft_inputs, label, recorded, shown_params


def filled_table(pool, fills) -> list[int]:
    """A block table of freshly allocated blocks with the given fills (a rollback case's table)."""
    table = []
    for f in fills:
        b = pool.alloc()
        pool.set_fill(b, f)
        table.append(b)
    return table


# A generate case's answer when the target refused a draft that the implementation's own propose gave its loop and no
# propose may answer (judge.replay.propose_broke_it): propose's slip, which its own tests judge; the case says
# nothing of the loop and is not counted (so the slip costs the same tests whatever state propose was left in).
PROPOSE_BROKE_IT = "propose's slip"


def generate_answer(impl, ref, c: dict):
    """{"tokens", "cached"} of a greedy generation on the case's fake target (with its KV budget, or none),
    or REFUSED when the target refused a call (KV past the budget), or PROPOSE_BROKE_IT; another failure
    propagates."""
    target = FakeTarget(ref, c["vocab"], budget=c["budget"])
    try:
        g = impl.generate(target, c["cfg"], c["prompt"], GREEDY, c["seed"], c["max_new"], [])
    except SubmissionFailure:
        if not target.misuse:
            raise
    if target.misuse:
        return PROPOSE_BROKE_IT if propose_broke_it(impl, target, c["prompt"], c["cfg"]["k"], c["max_new"]) else REFUSED
    return {"tokens": g["tokens"], "cached": target.cached()}


def rollback_answer(impl, ref, c: dict):
    """{"released", "fills"} of rollback on a fresh pool holding the case's table, or REFUSED when rollback
    refused (SpecError)."""
    pool = impl.new_pool(c["num_blocks"], c["block_tokens"])
    table = filled_table(pool, c["fills"])
    try:
        r = impl.rollback(pool, table, c["keep"])
    except Raised as e:
        if e.spec_error:
            return REFUSED
        raise
    return {"released": r["released"], "fills": [pool.fill(b) for b in r["table"]]}


def verify_answer(impl, ref, c: dict) -> dict:
    """verify_draft's whole answer, logprobs included."""
    return impl.verify_draft(c["rows"], c["draft"], c["draft_probs"], c["params"], c["prompt"], c["output"], c["seed"])


ASK = {  # section -> (impl, ref, case) -> the whole answer (a failure that is no refusal propagates)
    "verify": verify_answer,
    "prompt_lookup": lambda impl, ref, c: impl.prompt_lookup(c["ctx"], c["k"], c["max_ngram"], c["min_ngram"]),
    "ngram": lambda impl, ref, c: impl.ngram_draft(c["ctx"], c["k"], c["n"]),
    "generate": generate_answer,
    "rollback": rollback_answer,
}


def answer(section: str, impl, ref, c: dict):
    """The answer in the shape the oracle records a pitfall's (verify without its logprobs)."""
    return recorded(section, ASK[section](impl, ref, c))


ANSWERS = {s: partial(answer, s) for s in SECTIONS}  # section -> (impl, ref, case) -> the comparable answer
# the sections whose failures name the case (the generate and rollback tests' messages never did)
NAMES_THE_CASE = ("verify", "prompt_lookup", "ngram")


class Wrong(list):
    """golden_section's (case, answer) pairs that differ, and the language of the code that gave them (its messages
    show values as that language writes them)."""
    language = ""


def golden_section(impl, ref, golden: dict, section: str) -> list[tuple[dict, object]]:
    """Ask every case of a golden section, record each answer (for pitfall hints), and return the
    (case, answer) pairs that differ from the expected answer."""
    wrong = Wrong()
    wrong.language = getattr(impl, "language", "")
    for c in golden.get(section, []):
        with case(label(c)) if section in NAMES_THE_CASE else nullcontext():
            got = ASK[section](impl, ref, c)
        if got is PROPOSE_BROKE_IT:
            continue
        impl.record(c["id"], recorded(section, got))
        if DIFFERS[section](c["expect"], got):
            wrong.append((c, got))
    return wrong


def _params_text(params: dict, language: str) -> str:
    return repr(spelling(language).value(shown_params(params)))


def _verify_mismatch(ref, golden: dict, section: str, wrong: list) -> str:
    c, got = wrong[0]
    e = c["expect"]
    lines = [f"{len(wrong)} of {len(golden[section])} verification cases differ from the Python reference. First: "
             f"{label(c)}, draft {c['draft']}, params {_params_text(c['params'], getattr(wrong, 'language', ''))}:"]
    lines += [f"  {f}: expected {e[f]}, got {got[f]}" for f in DIFFERS[section](e, got)]
    lines.append(f"  draws: the reference drew {uniforms_drawn(ref, c['seed'], e['next_u32'])}, "
                 f"yours {uniforms_drawn(ref, c['seed'], got['next_u32'])}")
    return "\n".join(lines)


def _draft_mismatch(ref, golden: dict, section: str, wrong: list) -> str:
    c, got = wrong[0]
    what = "contexts" if section == "prompt_lookup" else "golden n-gram contexts"
    return (f"{len(wrong)} of {len(golden[section])} {what} differ from the Python reference. First: "
            f"{label(c)}: {draft_inputs(section, c, 24)}: expected {c['expect']}, got {got}")


def _request_mismatch(ref, golden: dict, section: str, wrong: list) -> str:
    c, got = wrong[0]
    spell = spelling(getattr(wrong, "language", ""))
    written = lambda v: str(spell.value(v))  # noqa: E731 -- the values as the student's language writes them
    return (f"{len(wrong)} of {len(golden[section])} golden {section} cases differ from the Python reference. First: "
            f"{label(c)}, {written(case_inputs(c))}:\n  {expected_got(c['expect'], got, written, sep=chr(10) + '  got      ')}")


MISMATCH = {"verify": _verify_mismatch, "prompt_lookup": _draft_mismatch, "ngram": _draft_mismatch,
            "generate": _request_mismatch, "rollback": _request_mismatch}


def golden_mismatch(ref, golden: dict, section: str, wrong: list) -> str:
    """The chapter test's failure message for golden_section's `wrong` (not empty): how many, and the first."""
    return MISMATCH[section](ref, golden, section, wrong)
