"""The chapter's property checks, one per contract function: its domain (judge.domains), how the client calls it,
how a call is worded and how answers compare; harness.pack's differential engine draws the inputs from the
grading seed, compares with the judge's reference and shrinks a difference.

Each test judges only the rules of its own row of rules.toml (one slip, one cost, whatever the seed), so a
property whose refusals and answers belong to different rows runs in two tests:

    problem = properties.residual(impl, golden, ANSWERS)     # hand_example_sampled_step: what residual computes
    problem = properties.residual(impl, golden, REFUSALS)    # verify_rejects_bad_shapes: what it refuses

An explicit input names the category of the domain it stands for (a staff test refuses one that names none).
"""

from functools import lru_cache
import math
import random

from harness.pack import ALL, ANSWERS, REFUSALS, Explicit, InProcess, Property, check, close, pristine

from . import domains as D
from .. import ops
from ..cases import LOGPROB_TOL
from ..client import Client
from ..spelling import spelling

__all__ = ["ALL", "ANSWERS", "REFUSALS"]


@lru_cache(maxsize=1)
def judge_reference() -> Client:
    """The judge's pristine reference behind the chapter's client, in this process: the expected answers."""
    return Client(InProcess(pristine("L10.8").alias, ops), "the judge's reference")


def seed_of(golden: dict) -> int:
    """The grading seed: the golden file's master_seed (the shipped file's is public; `--fresh` and `ol grade` draw one)."""
    return int(golden.get("master_seed", 0))


def rng_for(golden: dict, name: str) -> random.Random:
    """A test's own generator from the grading seed: the part of its inputs a fresh case set changes."""
    return random.Random(f"{seed_of(golden)}:{name}")


def _run(prop: Property, impl, golden: dict, judge: str) -> str | None:
    # the message in the student's language: a Rust student reads the Rust contract's call and Rust values
    return check(prop, impl, judge_reference(), seed_of(golden), judge, spelling(impl.language))


# ---- the drafts, the configuration, propose ----------------------------------------------------------------------

PROMPT_LOOKUP = Property(D.LOOKUP, lambda i, *a: i.prompt_lookup(*a), refusal="SpecError",
                         op="prompt_lookup", names=("ctx", "k", "max_ngram", "min_ngram"))
NGRAM_DRAFT = Property(D.NGRAM, lambda i, *a: i.ngram_draft(*a), refusal="SpecError", op="ngram_draft", names=("ctx", "k", "n"))


def _parse(i, draft, k, mx, mn):
    return i.parse_config(draft, k, **{name: v for name, v in (("max_ngram", mx), ("min_ngram", mn)) if v is not None})


PARSE = Property(D.PARSE, _parse, refusal="SpecError", op="spec_config_parse", names=("draft", "k", "max_ngram", "min_ngram"),
                 explicit=(Explicit("draft:another case", ("NGRAM", 4, None, None)),))


def _propose_free(c, ctx, k) -> bool:
    """Draft none with a bad k, ctx or bounds, ngram with a bad min_ngram alone: free (spec.pyi propose)."""
    if c["draft"] == "none":
        return k < 0 or any(x < 0 for x in ctx) or bool(c.get("raw"))
    return c["draft"] == "ngram" and bool(c.get("raw")) and c["max_ngram"] >= 1 and not 1 <= c["min_ngram"] <= c["max_ngram"]


PROPOSE = Property(D.PROPOSE, lambda i, c, ctx, k: i.propose(c, ctx, k), free=_propose_free, refusal="SpecError",
                   op="propose", names=("cfg", "ctx", "k"))


def prompt_lookup(impl, golden: dict, judge: str = ALL) -> str | None:
    return _run(PROMPT_LOOKUP, impl, golden, judge)


def ngram_draft(impl, golden: dict, judge: str = ALL) -> str | None:
    return _run(NGRAM_DRAFT, impl, golden, judge)


def parse_config(impl, golden: dict, judge: str = ALL) -> str | None:
    return _run(PARSE, impl, golden, judge)


def propose(impl, golden: dict, judge: str = ALL) -> str | None:
    return _run(PROPOSE, impl, golden, judge)


# ---- accept or resample, and the sampler's p -------------------------------------------------------------------

def _residual_free(p, q) -> bool:
    """A p with no mass (and nothing refused): the contract leaves residual's answer free."""
    good = p and len(p) == len(q) and all(isinstance(x, float) and math.isfinite(x) and x >= 0 for x in p + q)
    return bool(good) and not any(x > 0 for x in p)


RESIDUAL = Property(D.RESIDUAL, lambda i, p, q: i.residual(p, q), free=_residual_free, refusal="SpecError",
                    op="residual", names=("p", "q"))
SAMPLE_DENSE = Property(D.SAMPLE, lambda i, p, u: i.sample_dense(p, u), refusal="SpecError", op="sample_dense", names=("p", "u"))
STEP = Property(D.STEP, lambda i, *a: i.speculative_step(*a), refusal="SpecError",
                op="speculative_step", names=("p", "q", "x", "u_accept", "u_resample"))

_ONE = {"temperature": 1.0, "top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0, "presence_penalty": 0.0,
        "frequency_penalty": 0.0}
DENSE = Property(D.DENSE, lambda i, logits, params, prompt, output: i.dense_distribution(logits, params, prompt, output),
                 op="dense_distribution", names=("logits", "params", "prompt", "output"),
                 same=close(1e-12), refusal="SpecError", explicit=tuple(  # each penalty seeing the prompt alone, then the output alone
                     Explicit(category, args) for category, args in (
                         ("frequency_penalty:1", ([0.0, 0.0], {**_ONE, "frequency_penalty": 1.0}, [0], [])),
                         ("frequency_penalty:1", ([0.0, 0.0], {**_ONE, "frequency_penalty": 1.0}, [], [0, 0])),
                         ("presence_penalty:1.5", ([0.0, 0.0], {**_ONE, "presence_penalty": 1.5}, [0], [])),
                         ("presence_penalty:1.5", ([0.0, 0.0], {**_ONE, "presence_penalty": 1.5}, [], [0])),
                         ("repetition_penalty:2", ([1.0, 1.0], {**_ONE, "repetition_penalty": 2.0}, [0], [])),
                         ("repetition_penalty:2", ([1.0, 1.0], {**_ONE, "repetition_penalty": 2.0}, [], [0])))))


def residual(impl, golden: dict, judge: str = ALL) -> str | None:
    return _run(RESIDUAL, impl, golden, judge)


def sample_dense(impl, golden: dict, judge: str = ALL) -> str | None:
    return _run(SAMPLE_DENSE, impl, golden, judge)


def speculative_step(impl, golden: dict, judge: str = ALL) -> str | None:
    return _run(STEP, impl, golden, judge)


def dense_distribution(impl, golden: dict, judge: str = ALL) -> str | None:
    return _run(DENSE, impl, golden, judge)


# ---- the verifier and blocks_for --------------------------------------------------------------------------------

def _verify_same(want, got) -> bool:
    if isinstance(want, dict) and isinstance(got, dict):
        keys = ("tokens", "n_accepted", "next_u32")
        return all(want[k] == got.get(k) for k in keys) and close(LOGPROB_TOL)(want["logprobs"], got.get("logprobs"))
    return close(0.0)(want, got)


VERIFY = Property(D.VERIFY, lambda i, *a: i.verify_draft(*a), same=_verify_same, refusal="SpecError",
                  op="verify_draft", names=("rows", "draft", "draft_probs", "params", "prompt", "output", "rng"))
BLOCKS_FOR = Property(D.BLOCKS, lambda i, t, b: i.blocks_for(t, b), refusal="SpecError", op="blocks_for",
                      names=("tokens", "block_tokens"))


def verify_draft(impl, golden: dict, judge: str = ALL) -> str | None:
    return _run(VERIFY, impl, golden, judge)


def blocks_for(impl, golden: dict, judge: str = ALL) -> str | None:
    return _run(BLOCKS_FOR, impl, golden, judge)


PROPERTIES = {"prompt_lookup": PROMPT_LOOKUP, "ngram_draft": NGRAM_DRAFT, "parse_config": PARSE, "propose": PROPOSE,
              "residual": RESIDUAL, "sample_dense": SAMPLE_DENSE, "speculative_step": STEP,
              "dense_distribution": DENSE, "verify_draft": VERIFY, "blocks_for": BLOCKS_FOR}
