"""Whole generations under drawn configurations (issue 37, item 3): `generate` and `generate_stream` compared round by
round with the judge's expected generation (judge/replay.py: the reference's own generate for requests without a
draft, else the implementation's own propose and verify_draft composed as spec.pyi composes them, so the loop alone is
judged) on requests drawn from the grading seed.

Each test of the loop draws the requests of its own row (rules.toml), every category on every run, the rest drawn:
    greedy_spec_equals_greedy_without_spec            every draft kind at each k of K_EDGES, greedy, with and without
                                                      penalties, no EOS, no listener: the tokens, what each round fed
                                                      and kept, the stats, the positions cached at the end.
    eos_and_max_tokens_end_generation                 every draft kind at each edge of max_new (0, 1, 2, k, k + 1 and
                                                      near MAX_NEW), greedy and sampled, several EOS ids in any order
                                                      (ids the request emits, ids not below V), each k of K_EDGES.
    generate_stream_hands_over_each_token_and_stops_when_told
                                                      every draft kind, greedy and sampled with penalties, a listener
                                                      that says stop inside a round, at a round's last token, never or
                                                      on the first token (STOPS), each k of K_EDGES.
On a difference the request is made smaller (a shorter max_new, one EOS id) while it still differs, and the message
names the smallest request found and the round and token where the generations part.
"""

from dataclasses import dataclass, replace
import random
from typing import Callable

from harness.pack import Raised

from ..spelling import Spelling, spelling
from .replay import check_generation
from .requests import MAX_NEW, PROMPTS, VOCAB

DRAFTS = ("none", "ngram", "prompt_lookup")
K_EDGES = (1, 2, 16)  # k's edges: the smallest draft, the smallest that can be cut inside, MAX_K
K_OTHERS = (3, 4, 5, 8, 15)
PENALTIES: tuple[dict[str, float], ...] = ({}, {"repetition_penalty": 1.3}, {"presence_penalty": 0.4, "frequency_penalty": 0.3},
             {"repetition_penalty": 2.0, "presence_penalty": 0.2, "frequency_penalty": 0.5})
TEMPERATURES = (0.3, 0.7, 1.0, 1.5)
SEEDS = (0, 1, 2**63, 2**64 - 1)  # the seed's edges, beside drawn ones
MAX_TRIES = 8  # smaller requests tried on a difference
LONGEST = 24  # the longest drawn request (besides eos's "near MAX_NEW"): several rounds, and a check's time kept small


@dataclass(frozen=True)
class Request:
    draft: str
    k: int
    prompt: tuple
    params: tuple  # SamplingParams' fields as (name, value) pairs
    seed: int
    max_new: int
    eos: tuple = ()
    stop_at: int | None = None  # the listener says stop on this call (1-based); None: never
    stream: bool = False

    def words(self, i: int, n: int, spell: Spelling = Spelling()) -> str:
        extra = (f", eos {list(self.eos)}" if self.eos else "") + (f", a listener that says stop at token {self.stop_at}"
                                                                    if self.stop_at else "")
        return (f"drawn request {i + 1} of {n} (from the grading seed): draft {self.draft}, k {self.k}, prompt "
                f"{list(self.prompt)}, params {spell.value(dict(self.params))!r}, seed {self.seed}, max_new {self.max_new}{extra}")


def _prompt(rng: random.Random) -> tuple:
    """One of the tests' prompts, a periodic one, or ids drawn over the vocabulary (1 to 8 of them)."""
    kind = rng.randrange(3)
    if kind == 0:
        return tuple(rng.choice(PROMPTS))
    if kind == 1:
        period = [rng.randrange(VOCAB) for _ in range(rng.randint(1, 3))]
        return tuple((period * 6)[:rng.randint(len(period) + 1, 12)])
    return tuple(rng.randrange(VOCAB) for _ in range(rng.randint(1, 8)))


def _reaching(rng: random.Random, k: int) -> tuple:
    """A prompt whose drafts reach k tokens in the first round: a block X of k + 3 drawn ids, then X's first 3 again
    (prompt lookup copies what followed them, k tokens; the n-gram draft follows the same counts)."""
    x = [rng.randrange(VOCAB) for _ in range(k + 3)]
    return tuple(x + x[:3])


def _params(rng: random.Random, temperature: float, penalties: dict) -> tuple:
    d = {"temperature": temperature, **penalties}
    if temperature > 0 and rng.randrange(3) == 0:
        d.update(rng.choice(({"top_k": 3}, {"min_p": 0.05}, {"top_k": 1})))
    return tuple(sorted(d.items()))


def _k(rng: random.Random, i: int) -> int:
    """The k of a test's i-th request: each of K_EDGES in turn for the first ones (every edge on every run: SpecConfig
    takes k, and a port that refuses an edge fails the same tests on every seed), drawn after."""
    return K_EDGES[i] if i < len(K_EDGES) else rng.choice(K_EDGES + K_OTHERS)


def _seed(rng: random.Random, i: int) -> int:
    return SEEDS[i % len(SEEDS)] if i % 2 else rng.randrange(2**64)


def greedy_requests(grading_seed: int) -> list[Request]:
    """Every draft kind at each k edge, with room for a whole draft of k tokens (max_new >= k + 2); greedy, penalised
    every other request."""
    rng = random.Random(f"{grading_seed}:greedy_spec_equals_greedy_without_spec")
    cells = [(d, k) for d in DRAFTS for k in K_EDGES]
    return [Request(d, k, _reaching(rng, k) if k == max(K_EDGES) else _prompt(rng),
                    _params(rng, 0.0, PENALTIES[i % 2 * rng.randrange(1, len(PENALTIES))]),
                    _seed(rng, i), rng.randint(k + 2, max(k + 2, LONGEST))) for i, (d, k) in enumerate(cells)]


def eos_requests(grading_seed: int, emitted) -> list[Request]:
    """Every draft kind at each edge of max_new, greedy and sampled in turn, with several EOS ids in a drawn order:
    one to three the request emits (`emitted(request)`: the tokens of the same request without EOS), and one not below
    V now and then."""
    rng = random.Random(f"{grading_seed}:eos_and_max_tokens_end_generation")
    out = []
    for i, (d, edge) in enumerate((d, e) for d in DRAFTS for e in ("0", "1", "2", "k", "k+1", "near")):
        k = _k(rng, i % 6)
        max_new = {"0": 0, "1": 1, "2": 2, "k": k, "k+1": k + 1, "near": MAX_NEW - rng.randrange(3)}[edge]
        temperature = 0.0 if i % 2 == 0 else rng.choice(TEMPERATURES)
        r = Request(d, k, _prompt(rng), _params(rng, temperature, rng.choice(PENALTIES)), _seed(rng, i), max_new)
        tokens = emitted(r)
        eos = rng.sample(tokens, min(len(set(tokens)), rng.randint(1, 3))) if tokens else []
        eos = list(dict.fromkeys(eos)) + ([rng.choice((VOCAB, 2**32 - 1))] if rng.randrange(2) else [])
        rng.shuffle(eos)
        out.append(replace(r, eos=tuple(eos)))
    return out


STOPS = ("inside a round", "a round's last token", "never", "the first token")  # where the listener says stop
TRIES = 20  # requests drawn for a cell until its generation has a round that can be stopped inside


def _stop_at(rng: random.Random, where: str, rounds: Callable[[], list[list[int]]],
             least: int = 2) -> int | None:
    """The 1-based token the listener says stop on, by category: inside a round (the first token of the round that
    emits the most: None when none emits `least`), at a round's last token, never, on the first token. `rounds()`:
    the tokens of each round of the request's generation, asked only where the category needs them."""
    if where == "never":
        return None
    if where == "the first token":
        return 1
    ends, at = [], 0
    for tokens in rounds():
        ends.append((at, at + len(tokens)))
        at += len(tokens)
    if where == "a round's last token":
        return rng.choice([end for _, end in ends if end > 0])
    # inside: on the first token of the round that emits the most, so that what the stop leaves undelivered holds
    # accepted drafts as well as the round's last token, whenever some round has them (a random token inside left
    # only the last one on some draws, and a slip in what the stop leaves uncounted showed on some seeds only)
    lo, hi = max(ends, key=lambda e: e[1] - e[0], default=(0, 0))
    return lo + 1 if hi - lo >= least else None


def stream_requests(grading_seed: int, rounds: Callable[[Request], list]) -> list[Request]:
    """Every draft kind, greedy and sampled with penalties, streamed to a listener that says stop at each category of
    STOPS on every run: inside a round (the drafted greedy requests: `rounds(request)` gives the rounds' tokens of
    its generation, and requests are drawn until one emits two tokens in a round), at a round's last token, never, on
    the first token; the rest drawn (the request without a draft sampled: a drawn token, or never)."""
    rng = random.Random(f"{grading_seed}:generate_stream_hands_over_each_token_and_stops_when_told")
    where = {("ngram", False): STOPS[0], ("prompt_lookup", False): STOPS[0], ("ngram", True): STOPS[1],
             ("prompt_lookup", True): STOPS[2], ("none", False): STOPS[3]}
    out = []
    for i, (d, sampled) in enumerate((d, s) for d in DRAFTS for s in (False, True)):
        for attempt in range(TRIES):
            max_new = rng.randint(2, LONGEST)
            temperature = rng.choice(TEMPERATURES) if sampled else 0.0
            k = _k(rng, i)
            prompt = _reaching(rng, k) if (d, sampled) in where and where[d, sampled] == STOPS[0] else _prompt(rng)
            r = Request(d, k, prompt, _params(rng, temperature, rng.choice(PENALTIES)), _seed(rng, i), max_new, stream=True)
            if (d, sampled) not in where:
                stop_at = None if rng.randrange(3) == 0 else rng.randint(1, max_new)
            else:
                # inside a round: one that emits 3 tokens or more (accepted drafts left undelivered), 2 at the last try
                stop_at = _stop_at(rng, where[d, sampled], lambda: [rd.tokens for rd in rounds(r)],
                                   3 if attempt < TRIES - 1 else 2)
            if stop_at is not None or where.get((d, sampled)) in (None, "never"):
                break
        out.append(replace(r, stop_at=stop_at))
    return out


# What every drawn request is judged against: the implementation's own propose and verify_draft composed, so the drawn
# requests judge the loop alone and a slip of a draft or of the verifier (the bonus token's draw, a penalty, the
# sampler) costs its own test, not these, on every seed. A request without a draft is no exception: its every round is
# verify_draft's bonus token. (The fixed requests of the loop's tests hold greedy speculation to plain greedy.)
ORACLE = "own parts"


def _differs(impl, ref, r: Request, where: str, hint: str) -> str | None:
    try:
        check_generation(impl, ref, where, ORACLE, {"draft": r.draft, "k": r.k}, list(r.prompt),
                         dict(r.params), r.seed, r.max_new, list(r.eos), stop_at=r.stop_at, stream=r.stream, hint=hint)
    except AssertionError as e:
        return str(e)
    return None


def _smaller(r: Request) -> list[Request]:
    """Smaller requests than `r`, smallest first: shorter max_new (the listener's stop kept within it), then one EOS id."""
    lengths = sorted({m for m in (0, 1, 2, 3, r.max_new // 4, r.max_new // 2, r.max_new - 1) if 0 <= m < r.max_new})
    out = [replace(r, max_new=m, stop_at=(r.stop_at if r.stop_at is None or r.stop_at <= m else m) or None) for m in lengths]
    return out + ([replace(r, eos=(e,)) for e in r.eos] if len(r.eos) > 1 else [])


def check(impl, ref, requests: list[Request], hint: str = "") -> str | None:
    """None when every request generates as expected; else the smallest failing request found and where it parts."""
    for i, r in enumerate(requests):
        where = r.words(i, len(requests), spelling(impl.language))
        problem = _differs(impl, ref, r, where, hint)
        if problem is None:
            continue
        tries = 0
        for smaller in _smaller(r):
            if tries >= MAX_TRIES:
                break
            tries += 1
            try:
                found = _differs(impl, ref, smaller, f"{smaller.words(i, len(requests), spelling(impl.language))} (made smaller)", hint)
            except Raised:
                found = None  # a smaller request that fails otherwise is no smaller case of this difference
            if found is not None:
                return found
        return problem
    return None
