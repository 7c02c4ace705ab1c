"""The domain table of every contract function the property checks judge: per parameter, its categories, derived
by rule from the parameter's type and constraints (rules.toml's [[domain]] rows say the same in words):
- integers: each stated bound and bound +- 1; the limits of the type (usize/u64: 2^64 - 1) and of each narrower
  type a port may use by mistake (i32, u32, f64's exact integers, i64), with values whose truncation to 32 or 63
  bits lands back inside the valid range; zero, one, a small value; a refused negative and i64's minimum;
- token lists: empty, one token, several, many; duplicates, periodic repeats, long runs, ties among followers,
  ids at u32's edge; a refused negative id;
- floats: +-0, a subnormal, a tiny positive value, huge, values not exact in float32 (0.1), one ulp either side of
  each comparison the contract makes (p - q > 0, the running sum > u, u < p(x)/q(x), u < 1; a p's mass against none:
  zeros and one 5e-324; temperature == 0: its least graded neighbour, where the free region of an overflowing x / T
  ends; a quotient the contract compares (u < p[x]/q[x]): operands whose quotient is inexact, rounding back below
  the dividend), NaN and +-inf; for an index bound (the n-gram's i + m < len(e)), the last admitted value deciding
  the answer;
- options: each knob of the sampler a parameter of its own, so pairwise frames cross every value of one with
  every value of another (penalties at temperature 0, a tiny temperature, top-k at and past V); a pairwise frame
  draws the others at random, which may undo what the pair meant (a penalty on a tied token breaks the tie), so
  where the knobs are the function's own steps (dense_distribution) they are modes as well: each crossed with
  every other argument's categories with the rest at base, on every run;
- indexes and ids: each bound of [0, V) and one past it on both sides (V; -1, and i32's or i64's minimum);
- a check the contract makes before a loop (verify's "SpecError before the walk": ids, row shapes, draft_probs; the
  drafts' negative ids, refused whatever k) is judged where the loop would stop before the refused element: the
  drafts' negative id first, before a suffix that recurs; verify's a mode of its own (`walk`), under which
  every category is drawn again with the walk stopping at its first step, and no second check that would refuse
  the same element first (draft_probs absent: present, each q[d]'s check reads the draft ids too);
- a base per parameter (`Param.base`: a valid, typical category) and a domain's modes (verify's temperature and walk,
  speculative_step's branch: as drawn, or the draft rejected; propose's draft kind, dense_distribution's every
  knob): every category is also judged with every other argument valid, under each mode, so that no refused
  argument masks the check of another (harness.pack.frames.base_choice).
Inputs the contract leaves free are never drawn: ids of 2^32 or more and counts of 2^64 or more (R-ER-04), n-gram
bounds past 2^16, NaN or +inf in a verify row the walk may skip, a reached row that is -inf everywhere, top_p's
boundary. Each category is a small function (rng, values drawn so far) -> value (harness.pack.frames).
"""

import math
import random
from typing import Any, Callable

from harness.pack import Domain, Param

U64_MAX = 2**64 - 1
NGRAM_MAX = 2**16  # the n-gram bounds' domain ends here: past it a bound is free (spec.pyi prompt_lookup)
NAN, INF = float("nan"), float("inf")
ALPHABET = (0, 1, 2, 3, 4, 5)  # a small alphabet, so suffixes recur


def just(v):
    return lambda r, g: list(v) if isinstance(v, list) else v


def pick(*vs):
    return lambda r, g: r.choice(vs)


def ints(lo: int, hi: int):
    return lambda r, g: r.randint(lo, hi)


def toks(r, lo: int, hi: int, alphabet=ALPHABET) -> list:
    return [r.choice(alphabet) for _ in range(r.randint(lo, hi))]


# ---- token contexts -----------------------------------------------------------------------------------------

def _periodic(r, g) -> list:
    period = toks(r, 1, 4, (0, 1, 2, 3))
    n = len(period) * r.randint(2, 60)
    return (period * r.randint(2, 60))[: max(1, n - r.randint(0, 3))]


def _recent_wins(r, g) -> list:
    """The suffix occurred twice earlier with different continuations: the most recent one is the answer."""
    s = toks(r, 1, 3)
    a, b = r.sample(ALPHABET, 2)
    return s + [a] + toks(r, 0, 3) + s + [b] + toks(r, 0, 3) + s


def _tied_followers(r, g) -> list:
    """Token 0 followed by 20-40 distinct ids, once or twice each, shuffled: only 'ties to the lowest id' decides."""
    order = [f + 1 for f in range(r.randint(20, 40)) for _ in range(r.randint(1, 2))]
    r.shuffle(order)
    return [x for f in order for x in (0, f)] + [0]


def _negative_id(r, g) -> list:
    """A negative id first, then a body twice: every suffix up to the body's length (4 to 6, past the base n-gram
    bounds) recurs, so a search from the end that stops at its match never reads the first id (the ids are refused
    before any search: a check the contract makes before a loop, judged where the loop stops before the element)."""
    body = toks(r, 4, 6, (0, 1))
    return [r.choice([-1, -(2**31)])] + body + body


CTX = {
    "empty": just([]),
    "one token": lambda r, g: toks(r, 1, 1),
    "two equal tokens": lambda r, g: [r.choice(ALPHABET)] * 2,
    "short": lambda r, g: toks(r, 2, 11),
    "long": lambda r, g: toks(r, 12, 40),
    "periodic": _periodic,
    "long run": lambda r, g: toks(r, 0, 2) + [r.choice(ALPHABET)] * r.randint(10, 60),
    "suffix seen twice": _recent_wins,
    "ids at u32's edge": lambda r, g: toks(r, 1, 10, (0, 1, 2**32 - 1, 2**31)),
    "a negative id": _negative_id,
}

# counts a port holds in usize/u64: every value up to 2^64 - 1 admitted, negatives refused
NARROW = {
    "i32 max + 1": just(2**31),
    "u32 max": just(2**32 - 1),
    "truncates to a small value in 32 bits": lambda r, g: 2**32 + r.randint(1, 6),
    "2^53 + 1": just(2**53 + 1),
    "truncates to a small value in 63 bits": lambda r, g: 2**63 + r.randint(1, 6),
    "u64 max": pick(U64_MAX, U64_MAX - 1),
}
NEGATIVE = {"minus one": just(-1), "i64 min": just(-(2**63))}


def _len(g, key: str = "ctx") -> int:
    return len(g[key])


# The configuration bounds k (1..16) and the n-gram sizes (1..8); the draft functions take any k and n. A port may
# apply the configuration's bound where it does not hold, as it may a narrower type: each function's k or n is
# drawn at that bound + 1, and a context where the bound changes the answer, crossed (the parameter is a mode, so
# every value of it meets every other category with the rest at base, on every run).
CONFIG_K, CONFIG_NGRAM = 16, 8


def _match_far_back(r, g) -> list:
    """s (4 distinct ids), 30-40 distinct other ids, s again: every suffix of length <= 4 occurred once, followed by
    more than CONFIG_K + 1 tokens."""
    s = r.sample(ALPHABET, 4)
    return s + r.sample(range(10, 60), r.randint(30, 40)) + s


def _levels_disagree(r, g) -> list:
    """The suffix of CONFIG_NGRAM tokens occurred once, followed by x; its last CONFIG_NGRAM - 1 tokens occurred three
    times, followed by x, y, y: n = CONFIG_NGRAM + 1 drafts x, n = CONFIG_NGRAM drafts y."""
    body = r.sample(range(10, 40), CONFIG_NGRAM - 1)
    a, b, c, x, y = r.sample(range(40, 60), 5)
    return [a, *body, x, b, *body, y, c, *body, y, a, *body]


LOOKUP = Domain("prompt_lookup", (
    Param("ctx", {**CTX, "a match far back": _match_far_back}, base="periodic"),
    Param("k", {"zero": just(0), "one": just(1), "small": ints(2, 8), "past the context": lambda r, g: _len(g) + r.randint(1, 3),
                "the configuration's bound + 1": just(CONFIG_K + 1), **NARROW, **NEGATIVE}, base="small"),
    Param("max_ngram", {"one": just(1), "small": ints(2, 4), "the context's length": lambda r, g: max(1, _len(g)),
                        "the context's length + 1": lambda r, g: _len(g) + 1, "past the context": lambda r, g: _len(g) + r.randint(2, 5),
                        "the domain's end": just(NGRAM_MAX), "zero": just(0), **NEGATIVE}, base="small"),
    Param("min_ngram", {"one": just(1), "equal to max_ngram": lambda r, g: g["max_ngram"],
                        "between": lambda r, g: r.randint(1, max(1, min(g["max_ngram"], 4))), "zero": just(0),
                        "max_ngram + 1": lambda r, g: g["max_ngram"] + 1, "minus one": just(-1), "u64 max": just(U64_MAX)}),
), random_frames=20, modes=("k",))


def _ngram_k(r, g) -> int:  # k bounded: a repetitive context drafts k tokens, so a huge k is a huge answer
    return min(_len(g) + r.randint(1, 3), 40)


def _last_start_decides(r, g) -> list:
    """[a, a, b, a, a, a], a < b: the suffix [a, a] occurred at 0 (followed by b) and at the last start the bound
    i + m < len(e) admits (3, followed by the suffix's own a): counted, the tie goes to a; left out, b wins."""
    a, b = sorted(r.sample(ALPHABET, 2))
    return [a, a, b, a, a, a]


NGRAM = Domain("ngram_draft", (
    Param("ctx", {**CTX, "tied followers": _tied_followers, "the last admitted start decides": _last_start_decides,
                  "the levels at the configuration's bound disagree": _levels_disagree}, base="periodic"),
    Param("k", {"zero": just(0), "one": just(1), "small": ints(2, 8), "past the context": _ngram_k, **NEGATIVE}, base="small"),
    Param("n", {"one": just(1), "two": just(2), "three": just(3), "small": ints(4, 6),
                "the configuration's bound + 1": just(CONFIG_NGRAM + 1),
                "past the context": lambda r, g: _len(g) + r.randint(1, 2), "the domain's end": just(NGRAM_MAX),
                "zero": just(0), **NEGATIVE}, base="three"),
), random_frames=20, modes=("n",))


# ---- the configuration and propose ------------------------------------------------------------------------------

_MAX = lambda g: g["max_ngram"] if isinstance(g["max_ngram"], int) and g["max_ngram"] is not None else 3  # noqa: E731
PARSE = Domain("SpecConfig.parse", (
    Param("draft", {"none": just("none"), "ngram": just("ngram"), "prompt_lookup": just("prompt_lookup"),
                    "another case": pick("NGRAM", "Prompt_Lookup", "None", "NONE"),
                    "padded": pick(" ngram", "ngram ", "prompt_lookup\n", "\tnone"),
                    "a near miss": pick("prompt-lookup", "ngrams", "ngarm", "promptlookup"), "empty": just("")}, base="ngram"),
    Param("k", {"one": just(1), "MAX_K": just(16), "zero": just(0), "MAX_K + 1": just(17), "between": ints(2, 15),
                "minus one": just(-1), "i64 max": just(2**63 - 1), "i64 min": just(-(2**63)), "u64 max": just(U64_MAX),
                "truncates into 1..16 in 32 bits": lambda r, g: 2**32 + r.randint(1, 16),
                "truncates into 1..16 in 63 bits": lambda r, g: 2**63 + r.randint(1, 16),
                "a float equal to an integer": pick(1.0, 4.0, 16.0), "a fractional float": just(1.5), "a bool": pick(True, False)},
          base="between"),
    Param("max_ngram", {"absent": just(None), "one": just(1), "MAX_NGRAM": just(8), "MAX_NGRAM + 1": just(9),
                        "between": ints(2, 7), "zero": just(0), "minus one": just(-1), "i64 min": just(-(2**63)),
                        "truncates into 1..8 in 32 bits": lambda r, g: 2**32 + r.randint(1, 8), "u64 max": just(U64_MAX)},
          base="between"),
    Param("min_ngram", {"absent": just(None), "one": just(1), "equal to max_ngram": lambda r, g: _MAX(g),
                        "between": lambda r, g: r.randint(1, max(1, min(_MAX(g), 8))), "zero": just(0),
                        "max_ngram + 1": lambda r, g: _MAX(g) + 1, "minus one": just(-1),
                        "truncates into 1..8 in 32 bits": lambda r, g: 2**32 + 1}, base="one"),
), random_frames=30)


def _cfg(draft: str, raw: bool = False):
    def draw(r, g) -> dict:
        mx = r.randint(1, 8)
        # cfg.k up to CONFIG_K - 3, so that "above cfg.k" stays within the configuration's bound: a draft function
        # that caps k there is its own test's slip (the draft functions' rules are judged in their rows), on every seed
        c = {"draft": draft, "k": r.randint(1, CONFIG_K - 3), "max_ngram": mx, "min_ngram": r.randint(1, mx)}
        if raw:  # built without parse: bounds its function refuses
            c.update(raw=True, **dict(zip(("max_ngram", "min_ngram"), r.choice([(0, 0), (1, 2), (3, 0), (0, 1), (2, 3)]))))
        return c
    return draw


def _unambiguous(length=None):
    """Distinct tokens, then a copy of L of them (L = length(cfg), else 1 to 3): every suffix of length <= L occurred
    once earlier, followed by distinct tokens with room for any k <= CONFIG_K. Every rule of the drafts but the n
    range gives one answer here (most recent or first occurrence, stopping at the suffix or not, ties, back-off), so
    propose is judged on what it dispatches to and passes on (draft kind, bounds, k) and on prompt lookup's n range
    (R-PL-03, propose's row too): the longest match is L long, so a copy exactly min_ngram long is found only by a
    loop that tries n = min_ngram (the range's last n, a bound), and one a token shorter by none (a bound - 1)."""
    def draw(r, g) -> list:
        a = r.sample(range(60), r.randint(38, 50))
        n = r.randint(1, 3) if length is None else length(g["cfg"])
        i = r.randint(0, len(a) - 30)  # room for a copy of up to 8 and any k up to CONFIG_K after it, 3 to spare
        return a + a[i:i + n]
    return draw


def _min_ngram(cfg: dict) -> int:
    """cfg's min_ngram as a length in 1..CONFIG_NGRAM (a raw cfg's bad bound, 0 or above max_ngram, clipped)."""
    return min(max(cfg["min_ngram"], 1), CONFIG_NGRAM)


def _long_negative_id(r, g) -> list:
    body = r.sample(range(60), r.randint(9, 20))  # as _negative_id, the body past any n-gram bound
    return [-1] + body + body


# every context longer than any n-gram bound drawn here (8): contexts no longer than a bound are the draft functions'
# own rows (R-PL-10, R-PL-15: a slip there costs their tests, not propose's)
CTX_FOR_PROPOSE: dict[str, Callable[[random.Random, dict], Any]] = {
    "a suffix seen once": _unambiguous(),
    "a suffix seen once, min_ngram long": _unambiguous(_min_ngram),
    "a suffix seen once, a token shorter than min_ngram": _unambiguous(lambda cfg: _min_ngram(cfg) - 1),
    "nothing repeats": lambda r, g: r.sample(range(60), r.randint(9, 20)),
    "a negative id": _long_negative_id}
PROPOSE = Domain("propose", (
    Param("cfg", {"none": _cfg("none"), "ngram": _cfg("ngram"), "prompt_lookup": _cfg("prompt_lookup"),
                  "ngram built with bad bounds": _cfg("ngram", True),
                  "prompt_lookup built with bad bounds": _cfg("prompt_lookup", True)},  # none with bad bounds: free (R-PR-10)
          base="prompt_lookup"),
    Param("ctx", CTX_FOR_PROPOSE),
    Param("k", {"zero": just(0), "one": just(1), "small": ints(2, 8), "above cfg.k": lambda r, g: g["cfg"]["k"] + r.randint(1, 3),
                "minus one": just(-1), "i64 min": just(-(2**63))}, base="small"),
), random_frames=30, modes=("cfg",))  # each draft kind at each edge of k


# ---- distributions and uniforms ------------------------------------------------------------------------------

def up(x: float) -> float:
    return math.nextafter(x, INF)


def down(x: float) -> float:
    return math.nextafter(x, -INF)


PROB = (0.0, 0.1, 0.2, 0.25, 0.5, 0.6, 1.0, 2.0, 1 / 3)


def probs(r, n: int, values=PROB) -> list:
    return [r.choice(values) if r.random() < 0.7 else r.uniform(0.0, 4.0) for _ in range(n)]


def _one_entry(make, values):
    """A draw of `make(r, 2..6)` (a distribution, a row of logits) with one entry set to one of `values`."""
    def draw(r, g) -> list:
        x = make(r, r.randint(2, 6))
        x[r.randint(0, len(x) - 1)] = r.choice(values)
        return x
    return draw


def _with(values):
    return _one_entry(probs, values)


def _least_mass(r, g) -> list:
    """Zeros and one 5e-324: the contract branches on a p with no mass, and this is the least mass above it."""
    return _one_entry(lambda r, n: [0.0] * n, (5e-324,))(r, g)


DIST = {  # a p (or q) as given: finite and non-negative, of any sum; the refused kinds last
    "one entry": lambda r, g: probs(r, 1),
    "several": lambda r, g: probs(r, r.randint(2, 6)),
    "sums to one": pick([0.2, 0.5, 0.3], [0.1] * 10, [0.25, 0.25, 0.5], [0.7, 0.2, 0.1]),
    "ties": lambda r, g: [r.choice(PROB[1:])] * r.randint(2, 5),
    "zeros among them": _with((0.0,)),
    "a subnormal": _with((5e-324, 2.2250738585072014e-308)),
    "a tiny positive value": _with((1e-300, 1e-17)),
    "huge": _with((1e300, 1.7976931348623157e308)),
    "negative zero": _with((-0.0,)),
    "no mass": lambda r, g: [0.0] * r.randint(1, 4),
    "the least mass above none": _least_mass,
    "empty": just([]),
    "NaN": _with((NAN,)),
    "an infinity": _with((INF, -INF)),
    "negative": _with((-0.1, -5e-324)),
}


def _exceeds_at_even(r, g) -> list:
    """q above p at every even index, below it at every odd one (a draft at an even index can be rejected, and the
    residual then has mass); above p, each quotient p/q is inexact and its product with q rounds below p: the
    accept test the contract states is the quotient u < p[x]/q[x], so its rounding is judged, not a rewrite's."""
    p = g["p"] if all(isinstance(x, float) and math.isfinite(x) and x > 0.0 for x in g["p"]) else probs(r, len(g["p"]))
    q = []
    for i, x in enumerate(p):
        f = r.uniform(0.3, 0.9)
        for _ in range(4096 if i % 2 == 0 and x > 0.0 else 0):  # 1 draw in 15 to 150 rounds below (x 0.1 to 0.7)
            f = r.uniform(1.1, 3.0)
            if (x / (x * f)) * (x * f) < x:
                break
        q.append(x * f if x > 0.0 else r.random())
    return q


def _q_like(f):
    def draw(r, g) -> list:
        p = g["p"] if all(isinstance(x, float) and math.isfinite(x) for x in g["p"]) else probs(r, len(g["p"]))
        return [f(x) for x in p]
    return draw


Q = {  # q beside p: one length, unless a category says otherwise
    "several": lambda r, g: probs(r, len(g["p"])),
    "equal to p": lambda r, g: list(g["p"]),
    "one ulp above p": _q_like(up),
    "one ulp below p": _q_like(lambda x: max(0.0, down(x))),
    "one-hot": lambda r, g: [float(i == r.randint(0, max(0, len(g["p"]) - 1))) for i in range(len(g["p"]))],
    "zeros": lambda r, g: [0.0] * len(g["p"]),
    "a subnormal": lambda r, g: [r.choice((5e-324, 0.5)) for _ in g["p"]],
    "longer": lambda r, g: probs(r, len(g["p"]) + 1),
    "shorter": lambda r, g: probs(r, max(0, len(g["p"]) - 1)),
    "NaN": lambda r, g: [NAN] + probs(r, max(0, len(g["p"]) - 1)),
    "an infinity": lambda r, g: probs(r, max(0, len(g["p"]) - 1)) + [r.choice((INF, -INF))],
    "negative": lambda r, g: [-0.25] + probs(r, max(0, len(g["p"]) - 1)),
    "above p at even indexes": _exceeds_at_even,
}


RESIDUAL = Domain("residual", (Param("p", DIST, base="sums to one"), Param("q", Q)), random_frames=20)


def _running(g) -> list:
    sums, s = [], 0.0
    for x in g["p"]:
        s += x
        sums.append(s)
    return sums or [0.5]


U = {  # a uniform in [0, 1), and every refused kind
    "zero": just(0.0), "negative zero": just(-0.0), "a subnormal": just(5e-324), "uniform": lambda r, g: r.random(),
    "largest below one": just(0.9999999999999999), "not exact in float32": pick(0.1, 0.3, 0.7),
    "one": just(1.0), "one ulp above one": just(1.0000000000000002), "negative": pick(-0.1, -5e-324),
    "NaN": just(NAN), "an infinity": pick(INF, -INF),
}
U_AT_SUMS = {
    "a running sum": lambda r, g: r.choice(_running(g)),
    "one ulp below a running sum": lambda r, g: down(r.choice(_running(g))),
    "one ulp above a running sum": lambda r, g: up(r.choice(_running(g))),
}
SAMPLE = Domain("sample_dense", (Param("p", DIST, base="sums to one"), Param("u", {**U, **U_AT_SUMS}, base="uniform")),
                random_frames=20)


def _ratio(g) -> float:
    p, q, x = g["p"], g["q"], g["x"]
    try:
        return p[x] / q[x] if q[x] > 0 else 0.5
    except (IndexError, TypeError, ZeroDivisionError):
        return 0.5


def _residual_sums(g) -> list:
    """The running sums of the residual normalize(max(0, p - q)) (p's own when no entry of p exceeds q's)."""
    p, q = g["p"], g["q"]
    try:
        res = [max(0.0, a - b) for a, b in zip(p, q)]
        mass = sum(res)
        res = [x / mass for x in res] if mass > 0.0 else [x / sum(p) for x in p]
    except (TypeError, ZeroDivisionError):
        return [0.5]
    return _running({"p": res})


def _rejectable(r, g) -> int:
    """The first index where q exceeds p (a draft there can be rejected); 0 when none does."""
    return next((i for i, (a, b) in enumerate(zip(g["p"], g["q"])) if b > a), 0)


STEP = Domain("speculative_step", (
    Param("p", DIST, base="sums to one"), Param("q", Q, base="equal to p"),
    Param("x", {"first": just(0), "last": lambda r, g: max(0, len(g["p"]) - 1), "any": lambda r, g: r.randint(0, max(0, len(g["p"]) - 1)),
                "where q exceeds p": _rejectable,
                "where q is zero": lambda r, g: next((i for i, v in enumerate(g["q"]) if v == 0.0), len(g["p"])),
                "len(p)": lambda r, g: len(g["p"]), "truncates to 0 in 32 bits": just(2**32), "u64 max": just(U64_MAX),
                **NEGATIVE}, base="any"),  # an index: 0 - 1 and i64's minimum below its lower bound, len(p) at its upper
    Param("u_accept", {**U, "at the acceptance boundary": lambda r, g: _ratio(g),
                       "one ulp below the boundary": lambda r, g: down(_ratio(g)),
                       "one ulp above the boundary": lambda r, g: up(_ratio(g))}, base="uniform"),
    Param("u_resample", {**U, "a running sum of the residual": lambda r, g: r.choice(_residual_sums(g)),
                         "one ulp below a running sum of the residual": lambda r, g: down(r.choice(_residual_sums(g))),
                         "one ulp above a running sum of the residual": lambda r, g: up(r.choice(_residual_sums(g)))},
          base="uniform"),
    Param("branch", {"as drawn": just(None), "the draft rejected": just(None)}),  # a mode: not an argument
), assemble=lambda g: (g["p"], g["q"], g["x"], g["u_accept"], g["u_resample"]), random_frames=20, modes=("branch",),
    # the function's two ways of working: base choice holds q equal to p (always accepted), so every category is
    # judged again where the draft at x is rejected, u_resample's among them (the resample's comparisons)
    mode_bases={"branch:the draft rejected": {"q": "above p at even indexes", "x": "where q exceeds p",
                                              "u_accept": "at the acceptance boundary"}})


# ---- the sampler's knobs and logits ------------------------------------------------------------------------------

# The sampler branches on temperature == 0; its least graded neighbour above is where the free region ends (spec/
# sampling.md 5.2: a T so small that some x / T overflows is free). Every logit these domains draw, penalized, is
# below 2^11 in magnitude (800, doubled by a repetition penalty of 2, less the presence and frequency penalties of a
# few ids), so over 2^-1010 it stays below 2^1021: finite, and graded. A power of two: x / T and x * (1 / T) agree.
LEAST_GRADED_T = {"the least graded positive value (2^-1010)": just(2.0**-1010)}

KNOBS = (
    Param("temperature", {"zero": just(0.0), **LEAST_GRADED_T, "a tiny positive value": just(1e-6), "below one": just(0.5),
                          "one": just(1.0), "above one": just(2.0)}, base="one"),
    Param("top_k", {"off": just(0), "one": just(1), "two": just(2), "V": lambda r, g: vocab(g),
                    "past V": lambda r, g: vocab(g) + 1}),
    Param("min_p", {"off": just(0.0), "between": just(0.5), "one": just(1.0)}),
    Param("repetition_penalty", {"off": just(1.0), "1.5": just(1.5), "2": just(2.0)}),
    Param("presence_penalty", {"off": just(0.0), "0.5": just(0.5), "1.5": just(1.5)}),
    Param("frequency_penalty", {"off": just(0.0), "0.5": just(0.5), "1": just(1.0)}),
)  # top_p stays off: its boundary is a sum of exponentials, where an honest last-bit difference may flip it
KNOB_NAMES = tuple(p.name for p in KNOBS)
GRID = (0.0, 1.0, -1.0, 2.0, 0.5, -0.5, 3.0)


def logit(r) -> float:
    return r.choice(GRID) if r.random() < 0.5 else r.randint(-8, 8) / 4


def row(r, v: int) -> list:
    return [logit(r) for _ in range(v)]


def _row_with(values):
    return _one_entry(row, values)


def _tie_at_top(r, g) -> list:
    x = row(r, r.randint(2, 6))
    x[r.randint(0, len(x) - 1)] = max(x)
    return x


LOGITS = {
    "one logit": lambda r, g: row(r, 1), "several": lambda r, g: row(r, r.randint(2, 6)), "a tie at the top": _tie_at_top,
    "minus infinity": _row_with((-INF,)), "+-800": _row_with((800.0, -800.0)), "a subnormal": _row_with((1.401298464324817e-45, -0.0)),
    "all minus infinity": lambda r, g: [-INF] * r.randint(1, 3), "NaN": _row_with((NAN,)), "+infinity": _row_with((INF,)),
}


def vocab(g) -> int:
    """V: the verify case's own, else the logits row's length (at least 1)."""
    return g["V"] if "V" in g else max(1, len(g["logits"]))


def _ids():
    """Ids below V: empty, one, repeats, several; at each bound of [0, V) and one past it (V; -1 and i32's minimum,
    which a port's u32 cannot hold)."""
    v = vocab
    return {"empty": just([]), "one id": lambda r, g: [r.randint(0, v(g) - 1)],
            "repeats": lambda r, g: [r.randint(0, v(g) - 1)] * r.randint(2, 4),
            "several": lambda r, g: [r.randint(0, v(g) - 1) for _ in range(r.randint(2, 5))],
            "the last id": lambda r, g: [v(g) - 1], "the id V": lambda r, g: [0, v(g)],
            "a negative id": lambda r, g: [0, r.choice((-1, -(2**31)))]}


def _knobs(g) -> dict:
    return {name: g[name] for name in KNOB_NAMES}


DENSE = Domain("dense_distribution", (Param("logits", LOGITS, base="several"), *KNOBS, Param("prompt", _ids(), base="several"),
                                        Param("output", _ids(), base="several")),
               assemble=lambda g: (g["logits"], _knobs(g), g["prompt"], g["output"]), random_frames=20,
               modes=KNOB_NAMES)  # each knob switches a step of the sampler: every value of it crossed with every category
# of every other argument, the rest at base (a tie at the top at temperature 0; repetition with presence on an output)


# ---- verify_draft ---------------------------------------------------------------------------------------------------

def _rows(r, g) -> list:
    return [row(r, g["V"]) for _ in range(g["m"] + 1)]


def _set_row0(values):
    def draw(r, g) -> list:
        rows = _rows(r, g)
        rows[0][r.randint(0, g["V"] - 1)] = r.choice(values)
        return rows
    return draw


def _argmax(x) -> int:
    return max(range(len(x)), key=lambda i: (x[i], -i))


ROWS = {
    "m + 1 rows": _rows,
    "a tie at the top": lambda r, g: [[max(x)] * 2 + x[2:] if len(x) > 1 else x for x in _rows(r, g)],
    "+-800": _set_row0((800.0, -800.0)),
    "a minus infinity": lambda r, g: [x if len(x) < 2 else x[:-1] + [-INF] for x in _rows(r, g)],
    "NaN in row 0": _set_row0((NAN,)), "+infinity in row 0": _set_row0((INF,)),
    "no rows": just([]), "m rows": lambda r, g: _rows(r, g)[1:], "m + 2 rows": lambda r, g: _rows(r, g) + [row(r, g["V"])],
    "an empty row": lambda r, g: _rows(r, g)[:-1] + [[]], "a ragged row": lambda r, g: _rows(r, g)[:-1] + [row(r, g["V"] + 1)],
}


def _draft_agreeing(r, g) -> list:
    """Each drafted id the argmax of its row for a while, then any: drafts that agree for a while."""
    keep = r.randint(0, g["m"])
    rows = g["rows"] + [[0.0]] * g["m"]
    return [(_argmax(rows[i]) if i < keep and rows[i] else r.randint(0, g["V"] - 1)) % g["V"] for i in range(g["m"])]


DRAFT = {"agrees with the argmax": _draft_agreeing, "any ids": lambda r, g: [r.randint(0, g["V"] - 1) for _ in range(g["m"])],
         "repeats one id": lambda r, g: [r.randint(0, g["V"] - 1)] * g["m"],
         "the id V": lambda r, g: [r.randint(0, g["V"] - 1) for _ in range(g["m"] - 1)] + [g["V"]] if g["m"] else [g["V"]],
         "a negative id": lambda r, g: [r.randint(0, g["V"] - 1) for _ in range(g["m"] - 1)] + [-1] if g["m"] else [-1]}


def _stops_at_once(r, g) -> list:
    """The draft as drawn, its first id replaced by row 0's least likely (the last of them on ties) when another id
    follows it: greedy rejects it, so the walk stops at its first step (the refusals the contract makes before the
    walk are then of elements the walk never reaches)."""
    draft, rows = list(g["draft"]), g["rows"]
    scores = [x for x in rows[0] if x == x] if rows else []
    if len(draft) >= 2 and scores and max(scores) > min(scores):
        draft[0] = max(i for i, x in enumerate(rows[0]) if x == min(scores))
    return draft


WALK: dict[str, Callable[[random.Random, dict], Any]] = {  # the draft as called
    "as drawn": lambda r, g: list(g["draft"]), "stops at once": _stops_at_once}


def _qs(r, g) -> list:
    qs = [probs(r, g["V"]) for _ in g["walk"]]
    for q, d in zip(qs, g["walk"]):
        if d < g["V"] and q[d] <= 0.0:
            q[d] = 0.5
    return qs


def _qs_then(change):
    def draw(r, g):
        qs = _qs(r, g)
        change(r, g, qs)
        return qs
    return draw


def _zero_at_d(r, g, qs) -> None:
    if qs and g["walk"][0] < g["V"]:
        qs[0][g["walk"][0]] = 0.0


DRAFT_PROBS = {
    "none": just(None), "valid": _qs, "one-hot": lambda r, g: [[float(i == d) for i in range(g["V"])] for d in g["walk"]],
    "one too many": _qs_then(lambda r, g, qs: qs.append([1.0] * g["V"])),
    "one too few": _qs_then(lambda r, g, qs: qs.pop() if qs else qs.append([1.0] * g["V"])),
    "a wrong length": _qs_then(lambda r, g, qs: qs[-1].append(0.5) if qs else qs.append([0.5] * (g["V"] + 1))),
    "q[d] zero": _qs_then(_zero_at_d), "NaN": _qs_then(lambda r, g, qs: qs[0].__setitem__(0, NAN) if qs else None),
}
SEED = {"zero": just(0), "small": ints(1, 2**16), "any 64-bit": ints(0, U64_MAX), "2^63": just(2**63), "u64 max": just(U64_MAX),
        "truncates in 32 bits": lambda r, g: 2**32 + r.randint(0, 6)}

VERIFY = Domain("verify_draft", (
    Param("V", {"one": just(1), "two": just(2), "several": ints(3, 5)}, base="several"),
    Param("m", {"empty": just(0), "one": just(1), "several": ints(2, 3)}, base="several"),
    Param("rows", ROWS), Param("draft", DRAFT, base="any ids"), Param("walk", WALK),
    Param("draft_probs", DRAFT_PROBS, base="valid"),
    Param("temperature", {"zero": just(0.0), **LEAST_GRADED_T, "a tiny positive value": just(1e-6), "one": just(1.0),
                          "other": pick(0.5, 2.0)}),
    *(p for p in KNOBS if p.name != "temperature"),
    Param("prompt", {**_ids(), "the id V": lambda r, g: [g["V"]]}, base="several"),
    Param("output", {**_ids(), "the id V": lambda r, g: [g["V"]]}, base="several"),
    Param("seed", SEED, base="small"),
), assemble=lambda g: (g["rows"], g["walk"], g["draft_probs"], _knobs(g), g["prompt"], g["output"], g["seed"]),
    random_frames=20, modes=("temperature", "walk"),  # every argument's check at every temperature, and greedy with
    # the walk stopping at its first step, draft_probs absent there (greedy never reads them; present, their own check
    # of each q[d] would also refuse a draft id the walk's check leaves to the walk)
    mode_bases={"walk:stops at once": {"draft_probs": "none"}})

# ---- blocks_for -------------------------------------------------------------------------------------------------------

BLOCKS = Domain("blocks_for", (
    Param("block_tokens", {"one": just(1), "small": ints(2, 9), "zero": just(0), **NARROW, **NEGATIVE}, base="small"),
    Param("tokens", {"zero": just(0), "one": just(1), "small": ints(2, 100),
                     "a multiple of block_tokens": lambda r, g: _multiple(r, g, 0),
                     "one past a multiple": lambda r, g: _multiple(r, g, 1), "one below a multiple": lambda r, g: _multiple(r, g, -1),
                     **NARROW, "any u64": ints(0, U64_MAX), **NEGATIVE}, base="small"),
), assemble=lambda g: (g["tokens"], g["block_tokens"]), random_frames=20)


def _multiple(r, g, off: int) -> int:
    b = g["block_tokens"]
    if b < 1:
        return r.randint(1, 9) + off
    return min(U64_MAX, max(0, b * r.randint(1, max(1, min(9, U64_MAX // b))) + off))
