"""An implementation's answer to a golden case, in the shape the oracle records a pitfall's answer (the
case's `expect`, verify without logprobs; or "refused"): what the chapter's tests record for pitfall
hints (harness.check.hints) and what the staff tests compare each mutant's answers with."""

from harness.pack import Raised, SubmissionFailure, expected_got

from .fake_target import FakeTarget
from .targets import filled_table

REFUSED = "refused"  # the answer of a run the judge's target or pool refused (the misuse is the answer)
VERIFY_KEYS = ("tokens", "n_accepted", "next_u32")  # a verify answer without its logprobs (they carry a tolerance)
# the key order of a recorded answer, per section (the drafts' answers are plain lists); the oracle writes them so
ANSWER_KEYS = {"verify": VERIFY_KEYS, "generate": ("tokens", "cached"), "rollback": ("released", "fills")}
GREEDY = {"temperature": 0.0}  # the generate section is greedy: the fake target's argmax walk


def generate_answer(impl, ref, c: dict):
    """{"tokens", "cached"} of a greedy generation on the case's fake target (with its KV budget, or none),
    or REFUSED when the target refused a call (KV past the budget); another failure propagates."""
    target = FakeTarget(ref, c["vocab"], budget=c["budget"])
    try:
        g = impl.generate(target, c["cfg"], c["prompt"], GREEDY, c["seed"], c["max_new"], [])
    except SubmissionFailure:
        if target.misuse:
            return REFUSED
        raise
    return REFUSED if target.misuse else {"tokens": g["tokens"], "cached": target.cached()}


def rollback_answer(impl, c: dict):
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
    got = impl.verify_draft(c["rows"], c["draft"], c["draft_probs"], c["params"], c["prompt"], c["output"], c["seed"])
    return {k: got[k] for k in VERIFY_KEYS}


ANSWERS = {  # section -> (impl, ref, case) -> the comparable answer
    "verify": verify_answer,
    "prompt_lookup": lambda impl, ref, c: impl.prompt_lookup(c["ctx"], c["k"], c["max_ngram"], c["min_ngram"]),
    "ngram": lambda impl, ref, c: impl.ngram_draft(c["ctx"], c["k"], c["n"]),
    "generate": generate_answer,
    "rollback": lambda impl, ref, c: rollback_answer(impl, c),
}


def comparable(section: str, c: dict):
    """The case's expected answer in the shape of its pitfalls' answers."""
    return {k: c["expect"][k] for k in VERIFY_KEYS} if section == "verify" else c["expect"]


def golden_section(impl, ref, golden: dict, section: str) -> list[tuple[dict, object]]:
    """Ask every case of a golden section, record each answer (for pitfall hints), and return the
    (case, answer) pairs that differ from the expected answer."""
    wrong = []
    for c in golden.get(section, []):
        got = ANSWERS[section](impl, ref, c)
        impl.record(c["id"], got)
        if got != c["expect"]:
            wrong.append((c, got))
    return wrong


def case_inputs(c: dict) -> dict:
    """A golden case's question: every field but its id, tags and answers."""
    return {k: v for k, v in c.items() if k not in ("id", "tags", "expect", "pitfalls")}


def golden_mismatch(golden: dict, section: str, wrong: list) -> str:
    c, got = wrong[0]
    inputs = case_inputs(c)
    return (f"{len(wrong)} of {len(golden[section])} golden {section} cases differ from the Python reference. First: "
            f"case {c['id']} (tags {', '.join(c['tags'])}), {inputs}:\n  {expected_got(c['expect'], got, str, sep=chr(10) + '  got      ')}")
