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
                                                      (ids the request emits, ids not below V).
    generate_stream_hands_over_each_token_and_stops_when_told
                                                      every draft kind, greedy and sampled with penalties, a listener
                                                      that says stop at a drawn token (or never).
On a difference the request is made smaller (a shorter max_new, one EOS id) while it still differs, and the message
names the smallest request found and the round and token where the generations part.
"""

from dataclasses import dataclass, replace
import random

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
        k = rng.choice(K_EDGES + K_OTHERS)
        max_new = {"0": 0, "1": 1, "2": 2, "k": k, "k+1": k + 1, "near": MAX_NEW - rng.randrange(3)}[edge]
        temperature = 0.0 if i % 2 == 0 else rng.choice(TEMPERATURES)
        r = Request(d, k, _prompt(rng), _params(rng, temperature, rng.choice(PENALTIES)), _seed(rng, i), max_new)
        tokens = emitted(r)
        eos = rng.sample(tokens, min(len(set(tokens)), rng.randint(1, 3))) if tokens else []
        eos = list(dict.fromkeys(eos)) + ([rng.choice((VOCAB, 2**32 - 1))] if rng.randrange(2) else [])
        rng.shuffle(eos)
        out.append(replace(r, eos=tuple(eos)))
    return out


def stream_requests(grading_seed: int) -> list[Request]:
    """Every draft kind, greedy and sampled with penalties, streamed to a listener that says stop at a drawn token, or
    never (one request of three)."""
    rng = random.Random(f"{grading_seed}:generate_stream_hands_over_each_token_and_stops_when_told")
    out = []
    for i, (d, sampled) in enumerate((d, s) for d in DRAFTS for s in (False, True)):
        max_new = rng.randint(2, LONGEST)
        temperature = rng.choice(TEMPERATURES) if sampled else 0.0
        stop_at = None if rng.randrange(3) == 0 else rng.randint(1, max_new)
        out.append(Request(d, rng.choice(K_EDGES + K_OTHERS), _prompt(rng), _params(rng, temperature, rng.choice(PENALTIES)),
                           _seed(rng, i), max_new, stop_at=stop_at, stream=True))
    return out


def _oracle(r: Request) -> str:
    """The reference's generate where no earlier part of the chapter can change the answer (no draft), else the
    implementation's own propose and verify_draft composed: the drawn requests judge the loop alone, so a slip of a
    draft or of the verifier costs its own test, not these (the fixed requests of the loop's tests hold greedy
    speculation to plain greedy)."""
    return "reference" if r.draft == "none" else "own parts"


def _differs(impl, ref, r: Request, where: str, hint: str) -> str | None:
    try:
        check_generation(impl, ref, where, _oracle(r), {"draft": r.draft, "k": r.k}, list(r.prompt),
                         dict(r.params), r.seed, r.max_new, list(r.eos), stop_at=r.stop_at, stream=r.stream, hint=hint,
                         parts_judged_elsewhere=True)
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
