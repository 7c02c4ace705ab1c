"""The chapter's property checks, one per contract function, each run inside the test whose rule-table row
covers it (rules.toml [[domain]]): `problem = properties.prompt_lookup(impl, golden)` is None or the
failure message. Inputs come from judge.domains; answers are compared with the judge's reference by
judge.props (exactly, but for dense_distribution's probabilities and the logprobs, within their tolerance).
"""

import math

from hypothesis import strategies as st

from harness.pack import Raised

from . import domains as D
from .props import check, close
from ..cases import LOGPROB_TOL


def _seed(golden: dict) -> int:
    return int(golden.get("master_seed", 0))


def _args(**kw) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in kw.items())


# ---- the drafts and the configuration ---------------------------------------------------------------------

PL_ARGS = D.lookup_args()


def prompt_lookup(impl, golden: dict) -> str | None:
    return check(impl, _seed(golden), "prompt_lookup", PL_ARGS, lambda i, *a: i.prompt_lookup(*a),
                 lambda ctx, k, mx, mn: f"prompt_lookup({ctx}, {_args(k=k, max_ngram=mx, min_ngram=mn)})",
                 explicit=[([4, 4], 5, 9, 1), ([1, 2, 1], D.U64_MAX, 3, 1), ([1, 2, 1, 2], 2, D.NGRAM_MAX, 1),
                           ([5, 6, 7, 8, 5, 6], 3, D.NGRAM_MAX, D.NGRAM_MAX), ([], 3, 3, 1), ([7], 3, 3, 1)])


# k bounded: an n-gram draft of a repetitive context runs to k tokens, so a huge k would be a huge answer
NG_ARGS = st.one_of(
    st.tuples(st.one_of(D.CTX, D.CTX, D.BAD_CTX), D.count(0, 8, huge=False), st.one_of(D.count(0, 6, huge=False), st.just(D.NGRAM_MAX))),
    st.tuples(D.tied_followers(), st.integers(1, 3), st.sampled_from([2, 3])),
)


def ngram_draft(impl, golden: dict) -> str | None:
    return check(impl, _seed(golden), "ngram_draft", NG_ARGS, lambda i, *a: i.ngram_draft(*a),
                 lambda ctx, k, n: f"ngram_draft({ctx}, {_args(k=k, n=n)})",
                 explicit=[([4, 4], 2, D.NGRAM_MAX), ([], 2, 3), ([1], 2, 3)])


NAMES = st.sampled_from(["none", "ngram", "prompt_lookup", "NGRAM", "Prompt_Lookup", "None", "prompt-lookup",
                         " ngram", "ngram ", "", "ngrams", "prompt_lookup\n"])
@st.composite
def _parse_args(draw):
    """(draft, k, max_ngram, min_ngram): any of the names; k and the bounds valid unless one draw in three
    breaks one of them (an edge of i64 or u64, a float or bool k, a bound out of 1..8)."""
    name = draw(NAMES)
    k = draw(st.integers(1, 16))
    mx = draw(_MAYBE_BOUND)
    mn = None if mx is None or draw(st.booleans()) else draw(st.integers(1, mx))
    broken = draw(st.integers(0, 5))
    if broken == 1:
        k = draw(_BAD_K)
    elif broken == 2:
        mx = draw(_BAD_BOUND)
    elif broken == 3:
        mn = draw(_BAD_BOUND)
    return name, k, mx, mn


_EDGES = [-1, 0, 9, 17, 2**63 - 1, -(2**63), D.U64_MAX]
_MAYBE_BOUND = st.one_of(st.none(), st.integers(1, 8))
_BAD_K = st.sampled_from(_EDGES + [4.0, 1.5, True, False])
_BAD_BOUND = st.sampled_from(_EDGES)


PARSE_ARGS = _parse_args()


def _parse(i, draft, k, mx, mn):
    extra = {name: v for name, v in (("max_ngram", mx), ("min_ngram", mn)) if v is not None}
    return i.parse_config(draft, k, **extra)


def parse_config(impl, golden: dict) -> str | None:
    return check(impl, _seed(golden), "SpecConfig.parse", PARSE_ARGS, _parse,
                 lambda d, k, mx, mn: f"SpecConfig.parse({d!r}, {k!r}" + "".join(
                     f", {n}={v!r}" for n, v in (("max_ngram", mx), ("min_ngram", mn)) if v is not None) + ")",
                 explicit=[("NGRAM", 4, None, None), ("ngram", 4, -1, 1), ("ngram", 4, 9, 1), ("ngram", 4, 8, 8)])


@st.composite
def _cfg(draw):
    """A configuration parse accepts, or (raw) one built without parse, its bounds possibly bad."""
    draft = draw(_DRAFTS)
    mx = draw(st.integers(1, 8))
    c = {"draft": draft, "k": draw(st.integers(1, 16)), "max_ngram": mx, "min_ngram": draw(st.integers(1, mx))}
    if draw(st.integers(0, 3)) == 0:
        c.update(raw=True, max_ngram=draw(st.integers(0, 10)), min_ngram=draw(st.integers(0, 10)))
    return c


_DRAFTS = st.sampled_from(["none", "ngram", "prompt_lookup"])


# contexts longer than any bound drawn here: a draft function's own slips on short contexts (a hang, a crash)
# are its own test's (one slip, one test); propose is graded on what it dispatches to and what it refuses
LONG_CTX = D.tokens(11, 40)
PROPOSE_ARGS = st.tuples(_cfg(), st.one_of(LONG_CTX, LONG_CTX, D.BAD_CTX), D.count(0, 8, huge=False))


def _propose_free(c, ctx, k) -> bool:
    """Draft none with a bad k, ctx or bounds, ngram with a bad min_ngram alone: free (spec.pyi propose)."""
    if c["draft"] == "none":
        return k < 0 or any(x < 0 for x in ctx) or bool(c.get("raw"))
    return c["draft"] == "ngram" and bool(c.get("raw")) and c["max_ngram"] >= 1 and not 1 <= c["min_ngram"] <= c["max_ngram"]


class _OwnDraft:
    """propose's answer when it is the implementation's own draft function's on the same input: propose is
    graded on what it dispatches to and refuses; the drafts themselves are graded by their own tests (so one
    prompt-lookup slip costs one test, whichever inputs a seed draws)."""

    def __eq__(self, other) -> bool:
        return isinstance(other, _OwnDraft)

    def __repr__(self) -> str:
        return "the draft your own draft function gives"


def _propose_call(i, c, ctx, k):
    got = i.propose(c, ctx, k)
    if c["draft"] == "none":
        return got
    try:
        own = (i.ngram_draft(ctx, k, c["max_ngram"]) if c["draft"] == "ngram"
               else i.prompt_lookup(ctx, k, c["max_ngram"], c["min_ngram"]))
    except Raised:  # its own function refuses where propose answered: propose's answer is what is compared
        return got
    return _OwnDraft() if got == own else got


def propose(impl, golden: dict) -> str | None:
    return check(impl, _seed(golden), "propose", PROPOSE_ARGS, _propose_call,
                 lambda c, ctx, k: f"propose({c}, {ctx}, k={k})", free=_propose_free,
                 explicit=[({"draft": "prompt_lookup", "k": 4, "max_ngram": 1, "min_ngram": 2, "raw": True}, [5, 6, 5], 0),
                           ({"draft": "ngram", "k": 4, "max_ngram": 0, "min_ngram": 0, "raw": True}, [5, 6, 5], 0)])


# ---- accept or resample, and the sampler's p -------------------------------------------------------------

def residual(impl, golden: dict) -> str | None:
    def free(pq):  # a p with no mass (and nothing refused): the contract leaves it free
        p, q = pq
        good = p and len(p) == len(q) and all(math.isfinite(x) and x >= 0 for x in p + q)
        return bool(good) and not any(x > 0 for x in p)
    return check(impl, _seed(golden), "residual", st.tuples(D.dist_pair()), lambda i, pq: i.residual(*pq),
                 lambda pq: f"residual(p={pq[0]}, q={pq[1]})", free=free)


def sample_dense(impl, golden: dict) -> str | None:
    args = st.tuples(D.dist_pair().map(lambda pq: pq[0]), D.UNIFORM)
    return check(impl, _seed(golden), "sample_dense", args, lambda i, p, u: i.sample_dense(p, u),
                 lambda p, u: f"sample_dense({p}, u={u!r})", explicit=[([0.5, 0.5], float("nan"))])


@st.composite
def _step_args(draw):
    p, q = draw(D.dist_pair())
    x = draw(st.integers(0, len(p))) if draw(st.integers(0, 9)) else draw(_HUGE_X)
    u_accept = draw(D.UNIFORM)
    if draw(st.integers(0, 7)) == 7 and x < len(p) == len(q) and 0 < q[x] < math.inf and p[x] < q[x]:
        u_accept = p[x] / q[x]  # exactly the acceptance boundary: u < p(x)/q(x) accepts, u == p(x)/q(x) rejects
    return p, q, x, u_accept, draw(D.UNIFORM)


_HUGE_X = st.sampled_from([D.U64_MAX, 2**32])


def speculative_step(impl, golden: dict) -> str | None:
    return check(impl, _seed(golden), "speculative_step", _step_args(), lambda i, *a: i.speculative_step(*a),
                 lambda p, q, x, ua, ur: f"speculative_step(p={p}, q={q}, x={x}, u_accept={ua!r}, u_resample={ur!r})",
                 explicit=[([0.2, 0.5, 0.3], [0.6, 0.2, 0.2], 0, float("nan"), 0.8),
                           ([0.2, 0.5, 0.3], [1.2, 0.4, 0.4], 0, 0.2, 0.5)])


def dense_distribution(impl, golden: dict) -> str | None:
    args = st.tuples(D.logits_ids(), D.PARAMS)
    return check(impl, _seed(golden), "dense_distribution", args,
                 lambda i, lio, params: i.dense_distribution(lio[0], params, lio[1], lio[2]),
                 lambda lio, params: f"dense_distribution({lio[0]}, {params}, prompt={lio[1]}, output={lio[2]})",
                 same=D_CLOSE, explicit=DD_EDGES)


_ONE = {"temperature": 1.0, "top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0, "presence_penalty": 0.0,
        "frequency_penalty": 0.0}
DD_EDGES = [  # each penalty seeing the prompt alone, then the output alone (prompt and output swapped is a slip)
    (([0.0, 0.0], [0], []), {**_ONE, "frequency_penalty": 1.0}), (([0.0, 0.0], [], [0, 0]), {**_ONE, "frequency_penalty": 1.0}),
    (([0.0, 0.0], [0], []), {**_ONE, "presence_penalty": 1.5}), (([0.0, 0.0], [], [0]), {**_ONE, "presence_penalty": 1.5}),
    (([1.0, 1.0], [0], []), {**_ONE, "repetition_penalty": 2.0}), (([1.0, 1.0], [], [0]), {**_ONE, "repetition_penalty": 2.0}),
]


D_CLOSE = close(1e-12)


# ---- the verifier ------------------------------------------------------------------------------------------

def _verify_same(want, got) -> bool:
    if isinstance(want, dict) and isinstance(got, dict):
        keys = ("tokens", "n_accepted", "next_u32")
        return all(want[k] == got.get(k) for k in keys) and close(LOGPROB_TOL)(want["logprobs"], got.get("logprobs"))
    return close(0.0)(want, got)


def verify_draft(impl, golden: dict) -> str | None:
    return check(impl, _seed(golden), "verify_draft", st.tuples(D.verify_inputs()),
                 lambda i, a: i.verify_draft(*a),
                 lambda a: "verify_draft(rows={}, draft={}, draft_probs={}, params={}, prompt={}, output={}, seed={})".format(*a),
                 same=_verify_same,
                 explicit=[(([], [], None, {"temperature": 0.0}, [], [], 1),), (([[]], [], None, {"temperature": 0.0}, [], [], 1),)])


# ---- blocks_for -------------------------------------------------------------------------------------------------

BF_ARGS = st.tuples(st.one_of(D.count(0, 100), st.integers(0, D.U64_MAX)),
                    st.one_of(D.count(0, 9), st.integers(1, D.U64_MAX)))


def blocks_for(impl, golden: dict) -> str | None:
    return check(impl, _seed(golden), "blocks_for", BF_ARGS, lambda i, *a: i.blocks_for(*a),
                 lambda t, b: f"blocks_for(tokens={t}, block_tokens={b})",
                 explicit=[(2**53 + 1, 1), (D.U64_MAX, 2), (D.U64_MAX, 1), (D.U64_MAX, D.U64_MAX), (0, 0), (2**53 + 1, 2)])
