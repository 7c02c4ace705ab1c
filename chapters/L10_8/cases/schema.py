"""L10.8's golden case schema: the sections in order, what each section's answer holds, the tolerance, and how
an answer is compared with the case's `expect`. One definition each; the chapter's tests, `ol diff`, the oracle
and the pitfall hints read them from here."""

import numpy as np

from ..judge.judging import short
from ..ops import SAMPLING_FIELDS

SECTIONS = ("verify", "prompt_lookup", "ngram", "generate", "rollback")  # the golden file's, in its order
# `ol diff`'s sections in the chapter's order (its section 4 table), and the contract's functions each one calls
CHAPTER_ORDER = ("prompt_lookup", "ngram", "verify", "generate", "rollback")
FUNCTIONS = {"prompt_lookup": "prompt_lookup", "ngram_draft": "ngram", "verify_draft": "verify", "generate": "generate",
             "generate_stream": "generate", "rollback": "rollback"}

LOGPROB_TOL = 1e-9  # absolute; logprobs are float64 log-softmax values, a port may sum in another order
# a verify case's params: the seven SamplingParams fields, in the order the file writes them (ops.py's, the one
# definition: the worker loads ops.py by path, so it can import nothing of the pack)
KNOBS = SAMPLING_FIELDS

REFUSED = "refused"  # the answer of a run the judge's target or pool refused (the misuse is the answer)
VERIFY_KEYS = ("tokens", "n_accepted", "next_u32")  # a verify answer without its logprobs (they carry a tolerance)
# the key order of a recorded answer, per section (the drafts' answers are plain lists); the oracle writes them so
ANSWER_KEYS = {"verify": VERIFY_KEYS, "generate": ("tokens", "cached"), "rollback": ("released", "fills")}


def student_tags(c: dict) -> list[str]:
    """A case's tags a student reads: the oracle's own bookkeeping (shows:s02, alone:temperature) left out."""
    return [t for t in c.get("tags", []) if ":" not in t]


def label(c: dict) -> str:
    """How a failure names the case: its id and tags."""
    shown = student_tags(c)
    return f"case {c['id']}" + (f" (tags {', '.join(shown)})" if shown else "")


def case_inputs(c: dict) -> dict:
    """A golden case's question: every field but its id, tags and answers."""
    return {k: v for k, v in c.items() if k not in ("id", "tags", "expect", "pitfalls")}


def shown_params(params: dict) -> dict:
    """The sampling knobs worth printing: the temperature, and each knob off its neutral 0 or 1."""
    return {k: v for k, v in params.items() if k == "temperature" or v not in (0, 0.0, 1.0)}


def draft_inputs(section: str, c: dict, last: int) -> str:
    """A prompt_lookup or ngram case's question in words: the last `last` tokens of its context, k and n."""
    n = f"{c['max_ngram']}..{c['min_ngram']}" if section == "prompt_lookup" else f"{c['n']}"
    return f"ctx {short(c['ctx'][-last:], last)} (last {last} of {len(c['ctx'])}), k {c['k']}, n {n}"


def recorded(section: str, got):
    """An answer in the shape the oracle records a pitfall's answer (verify without its logprobs)."""
    return {k: got[k] for k in VERIFY_KEYS} if section == "verify" else got


def comparable(section: str, c: dict):
    """The case's expected answer in the shape of its pitfalls' answers."""
    return recorded(section, c["expect"])


def verify_differs(expect: dict, got: dict) -> list[str]:
    """The fields of a verify answer that differ: tokens, n_accepted and next_u32 exact, else logprobs within
    LOGPROB_TOL."""
    fields = [f for f in VERIFY_KEYS if got[f] != expect[f]]
    if not fields and not np.allclose(got["logprobs"], expect["logprobs"], atol=LOGPROB_TOL, rtol=0):
        fields = ["logprobs"]
    return fields


def equal(expect, got) -> list[str]:
    """An answer compared exactly: [] when it is the expected one."""
    return [] if got == expect else ["answer"]


DIFFERS = {"verify": verify_differs, "prompt_lookup": equal, "ngram": equal, "generate": equal, "rollback": equal}
