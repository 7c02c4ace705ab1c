"""The domain of every contract function, as Hypothesis strategies biased to its edges (rules.toml's
[[domain]] rows say the same in words): the inputs the property checks of the chapter's tests draw.

Each strategy draws a tuple of arguments in the order the client method takes them. Inputs the contract
leaves free are never drawn (or are skipped by the property's `free` predicate): an id or count a Rust
type cannot hold (u32 ids, usize and u64 counts; Python's int has no limit there), a p with no mass to
`residual`, a row the walk never reaches holding NaN.
"""

from functools import lru_cache
import random

from hypothesis import strategies as st

U64_MAX = 2**64 - 1
NGRAM_MAX = 2**16  # the n-gram bounds' domain ends here: past it a bound is free (the chapter's loop over every n
# from max_ngram down is right, and may take that long; spec.pyi prompt_lookup)
NAN, INF = float("nan"), float("inf")

# ---- integers ---------------------------------------------------------------------------------------

# counts (k, n, tokens, block_tokens): small values, the edges of usize/u64, and a refused negative
HUGE = st.sampled_from([U64_MAX, U64_MAX - 1, 2**63, 2**53 + 1, 2**53, 2**32, 2**32 - 1])
NEGATIVE = st.sampled_from([-1, -2, -(2**63)])


@lru_cache(maxsize=None)  # a strategy is built once and reused: Hypothesis validates each new one on its first draw
def count(lo: int = 0, hi: int = 20, huge: bool = True, negative: bool = True):
    parts = [st.integers(lo, hi)] * 8  # small values most of the time
    if huge:
        parts.append(HUGE)
    if negative:
        parts.append(NEGATIVE)
    return st.one_of(*parts)


@st.composite
def bounds(draw, hi: int = 12):
    """(max_ngram, min_ngram): mostly 1 <= min <= max (max up to `hi`, now and then NGRAM_MAX), else any pair
    of counts (bad ones refused)."""
    if draw(st.integers(0, 5)) == 0:
        return draw(count(0, hi, huge=False)), draw(count(0, hi, huge=False))
    mx = draw(_mostly(st.integers(1, hi), st.just(NGRAM_MAX)))
    return mx, draw(_mostly(st.integers(1, min(mx, hi)), st.just(mx)))


@lru_cache(maxsize=None)
def _mostly(usual, edge, weight: int = 6):
    """`usual` `weight` times in `weight + 1`, else `edge`."""
    return st.one_of(*[usual] * weight, edge)


@lru_cache(maxsize=None)
def exactly(elements, n: int):
    """Lists of `n` entries of `elements`."""
    return st.lists(elements, min_size=n, max_size=n)


@lru_cache(maxsize=None)
def ids_below(v: int, max_size: int):
    """Lists of ids below V = `v`, now and then V itself (refused)."""
    return st.lists(st.one_of(*[st.integers(0, v - 1)] * 8, st.just(v)), max_size=max_size)


# ---- token sequences ----------------------------------------------------------------------------------

def _periodic(draw_period, reps, noise):
    return st.builds(lambda period, n, tail: (period * n)[: max(0, len(period) * n - tail)], draw_period, reps, noise)


def tokens(min_size: int = 0, max_size: int = 12, alphabet=(0, 1, 2, 3, 4, 5)):
    """Lists of ids from `alphabet` (a small one, so suffixes recur), drawn as one byte string (one choice for the
    whole list, where a list of integers costs two a token): Hypothesis shrinks it shorter and to lower bytes,
    which are the alphabet's first ids."""
    return st.binary(min_size=min_size, max_size=max_size).map(lambda bs: [alphabet[b % len(alphabet)] for b in bs])


CTX = st.one_of(
    tokens(0, 12),  # empty and one-element contexts included
    tokens(12, 40),
    _periodic(tokens(1, 4, (0, 1, 2, 3)), st.integers(1, 60), st.integers(0, 3)),  # long, periodic
    tokens(0, 10, (0, 1, 2**32 - 1, 2**31)),  # ids at the edge of u32
)


def _refused(ctx: list, at: int) -> list:
    ctx[at % len(ctx)] = -1
    return ctx


BAD_CTX = st.builds(_refused, tokens(1, 6, (0, 1, -1)), st.integers(0, 5))  # refused: one id at least is -1


@st.composite
def tied_followers(draw):
    """A context whose last token was followed by 20-40 distinct ids, each once or twice in a shuffled order:
    many tied most-frequent followers, so only 'ties to the lowest id' decides (a sort that is not stable on
    the count alone picks another)."""
    n = draw(st.integers(20, 40))
    counts = draw(_twice(n))
    order = [f + 1 for f, c in enumerate(counts) for _ in range(c)]
    random.Random(draw(st.integers(0, 2**32 - 1))).shuffle(order)  # one choice for the order (shrinks to seed 0's)
    ctx = [x for f in order for x in (0, f)] + [0]
    return ctx


@lru_cache(maxsize=None)
def _twice(n: int):
    """`n` counts of 1 or 2."""
    return tokens(n, n, (1, 2))


@st.composite
def lookup_args(draw):
    """(ctx, k, max_ngram, min_ngram) for prompt_lookup: one draw in ten breaks one argument (refused); the
    rest are valid, a third of them with max_ngram at or past the context's length (the back-off edge)."""
    ctx = draw(CTX)
    k = draw(_LOOKUP_K)
    mx = draw(st.integers(1, 12))
    if draw(st.integers(0, 2)) == 0:
        mx = draw(_past_context(len(ctx)))
    mn = draw(st.integers(1, min(mx, 3)))  # min_ngram = max_ngram comes with a small max_ngram
    broken = draw(st.integers(0, 9))
    if broken == 0:
        ctx = draw(BAD_CTX)
    elif broken == 1:
        k = draw(NEGATIVE)
    elif broken == 2:
        mx, mn = draw(_BAD_BOUNDS)
    return ctx, k, mx, mn


_LOOKUP_K = _mostly(st.integers(0, 20), HUGE)
_BAD_BOUNDS = st.sampled_from([(1, 2), (3, 0), (0, 0), (2, U64_MAX)])


@lru_cache(maxsize=None)
def _past_context(t: int):
    """max_ngram at or just past a context of `t` tokens (at least 1), or the domain's end."""
    return st.one_of(st.integers(max(t, 1), t + 3), st.just(NGRAM_MAX))


# ---- floats -------------------------------------------------------------------------------------------

PROB = st.one_of(
    st.sampled_from([0.0, 0.0, 0.1, 0.2, 0.25, 0.5, 0.6, 1.0, 2.0, 5e-324, 1e-300, 1e300, -0.0]),
    st.floats(0.0, 4.0),
)
BAD_PROB = st.sampled_from([NAN, INF, -INF, -0.1, -5e-324])  # each refused in a distribution


@st.composite
def dist_pair(draw):
    """(p, q) of one length (sometimes another, or empty), entries finite and non-negative but seldom
    summing to 1 (p and q are used as given); now and then q equal to p, or one refused entry."""
    v = draw(st.integers(1, 6))
    p = draw(exactly(PROB, v))
    q = draw(exactly(PROB, v))
    shape = draw(_PAIR_SHAPE)
    if shape == "longer_q":
        q = q + [0.5]
    elif shape == "empty":
        p, q = [], []
    elif shape == "equal":
        q = list(p)
    elif shape in ("bad_p", "bad_q"):
        which = p if shape == "bad_p" else q
        which[draw(st.integers(0, v - 1))] = draw(BAD_PROB)
    return p, q


_PAIR_SHAPE = st.sampled_from(["same"] * 12 + ["longer_q", "empty", "bad_p", "bad_q", "equal"])

UNIFORM = st.one_of(
    st.floats(0.0, 1.0, exclude_max=True),
    st.sampled_from([0.0, -0.0, 0.5, 0.9999999999999999, 5e-324]),
    st.just(NAN),  # refused, and the easiest to let through (a comparison with NaN is false)
    st.sampled_from([1.0, -0.1, INF, -INF, 1.0000000000000002, -5e-324]),  # refused
)

# ---- sampling parameters and logits ---------------------------------------------------------------------

PARAMS = st.fixed_dictionaries({
    "temperature": st.sampled_from([0.0, 0.5, 1.0, 2.0]),
    "top_k": st.sampled_from([0, 0, 1, 2, 3]),
    "min_p": st.sampled_from([0.0, 0.0, 1.0]),
    "repetition_penalty": st.sampled_from([1.0, 1.5, 2.0]),
    "presence_penalty": st.sampled_from([0.0, 0.5, 1.5]),
    "frequency_penalty": st.sampled_from([0.0, 0.5, 1.0]),
})  # top_p stays off: its boundary is a sum of exponentials, where an honest last-bit difference may flip it
LOGIT = st.one_of(st.sampled_from([0.0, 1.0, -1.0, 2.0, 0.5, -0.5, 3.0]), st.integers(-8, 8).map(lambda i: i / 4))
LOGIT_EDGE = st.sampled_from([-INF, NAN, INF, 800.0, -800.0])
_LOGIT_OR_EDGE = _mostly(LOGIT, LOGIT_EDGE)


def tied(draw, row: list) -> list:
    """`row`, one time in five with its maximum copied to another entry: a tie at the top (argmax's lowest id,
    top-k's cut, a walk over equal masses)."""
    if len(row) >= 2 and draw(st.integers(0, 4)) == 4:  # shrinks to no tie
        finite = [x for x in row if x == x]
        if finite:
            row[draw(st.integers(0, len(row) - 1))] = max(finite)
    return row


@st.composite
def logits_ids(draw):
    """(logits, prompt, output): a row of 1-6 logits (sometimes with an edge value, sometimes a tie at the top)
    and ids below V (sometimes V itself, refused)."""
    v = draw(st.integers(1, 6))
    logits = tied(draw, draw(exactly(_LOGIT_OR_EDGE, v)))
    ids = ids_below(v, 5)
    return logits, draw(ids), draw(ids)


# ---- verify_draft's shapes ----------------------------------------------------------------------------------

@st.composite
def verify_inputs(draw):
    """(rows, draft, draft_probs, params, prompt, output, seed) with every shape the contract names: 0 to 4
    rows of V logits (sometimes an empty or a ragged one), a draft of 0 to 3 ids (sometimes V), draft
    distributions (None, the right ones, a wrong count or length, a q[d] of 0), greedy or sampled. NaN and
    +inf appear in row 0 only (every walk reaches it; a row the walk may skip is free beyond its shape)."""
    v = draw(st.integers(1, 4))
    m = draw(st.integers(0, 3))
    n_rows = draw(_row_count(m))
    rows = [tied(draw, draw(exactly(LOGIT, v))) for _ in range(n_rows)]
    if rows and draw(st.integers(0, 7)) == 0:
        rows[0][draw(st.integers(0, v - 1))] = draw(_NAN_OR_INF)
    if rows and draw(st.integers(0, 9)) == 0:
        rows[draw(st.integers(0, n_rows - 1))] = [[], [0.0] * (v + 1)][draw(st.integers(0, 1))]  # empty or ragged
    draft = draw(_draft_ids(v, m))
    kind = draw(_PROBS_KIND)
    probs = None
    if kind != "none":
        probs = [draw(exactly(PROB, v)) for _ in draft]
        for q, d in zip(probs, draft):
            if d < v and q[d] <= 0.0:
                q[d] = 0.5
        if kind == "count":
            probs = probs + [[1.0] * v]
        elif kind == "length" and probs:
            probs[-1] = probs[-1] + [0.5]
        elif kind == "zero" and probs and draft[0] < v:
            probs[0][draft[0]] = 0.0
    params = draw(_VERIFY_PARAMS)
    ids = ids_below(v, 4)
    seed = draw(_SEED)
    return rows, draft, probs, params, draw(ids), draw(ids), seed


_NAN_OR_INF = st.sampled_from([NAN, INF])
_PROBS_KIND = st.sampled_from(["none"] * 4 + ["right"] * 4 + ["count", "length", "zero"])
_VERIFY_PARAMS = st.one_of(st.just({"temperature": 0.0}), PARAMS)
_SEED = st.one_of(st.integers(0, 2**16), st.sampled_from([0, U64_MAX, 2**63]))


@lru_cache(maxsize=None)
def _row_count(m: int):
    """m + 1 rows (one per draft token and the bonus) most of the time, else none, one short or one over."""
    return st.sampled_from([m + 1] * 8 + [0, m, m + 2])


@lru_cache(maxsize=None)
def _draft_ids(v: int, m: int):
    return st.lists(st.one_of(*[st.integers(0, v - 1)] * 8, st.just(v)), min_size=m, max_size=m)
