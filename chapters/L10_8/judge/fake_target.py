"""The fake target the generation tests decode against: documented, deterministic, strict.

Its logits for the position after a context depend only on the context's last two tokens
(a, b), a = -1 when there is only one:
    noise[v] = 2 * (u32_v >> 8) / 2^24  for v = 0..V-1, u32_v the v-th next_u32 of
               Pcg32.from_seed(1_000_003 * (a + 1) + b)  (values in [0, 2), exact in float32)
    row      = noise, plus 3.0 at the favourite f = (7 b + 3 (a + 1) + 1) mod V
so greedy decoding walks a deterministic cycle over token pairs: repetitive text, on which
prompt lookup gets real acceptances, while sampling at temperature 1 spreads real mass over
every token (the statistical test needs that).

It counts forward passes, reports its cached positions, and refuses misuse with
FakeTargetError: extending with out-of-vocabulary ids, extending past its position budget
(a request's KV never needs more than len(prompt) + max_new - 1 positions), truncating to more
than it holds. Every refusal is also kept in `misuse`, so a test can say what went wrong even
when the code under test swallowed the exception.
"""

from functools import lru_cache

import numpy as np

FAVOURITE_BOOST = 3.0  # large enough that greedy follows f, small enough that p(f) < 1 at T = 1
NOISE_SCALE = 2.0  # the spread of the other logits: every token keeps p > 1e-3 at T = 1 for V <= 64


class FakeTargetError(ValueError):
    """The code under test misused the target; the message says how and what the rule is."""


@lru_cache(maxsize=None)
def fake_row(Pcg32, a: int, b: int, vocab: int) -> np.ndarray:
    """The row after a context ending (a, b); Pcg32 is the judge's pristine generator class."""
    rng = Pcg32.from_seed(1_000_003 * (a + 1) + b)
    noise = np.array([(rng.next_u32() >> 8) for _ in range(vocab)], dtype=np.float64) / 2**24 * NOISE_SCALE
    noise[(7 * b + 3 * (a + 1) + 1) % vocab] += FAVOURITE_BOOST
    row = noise.astype(np.float32)  # [V]
    row.flags.writeable = False
    return row


class FakeTarget:
    def __init__(self, ref, vocab: int = 16, budget: int | None = None) -> None:
        self.Pcg32 = ref.module("rng").Pcg32  # ref: the judge's pristine reference
        self.vocab = vocab
        self.budget = budget  # most positions it may ever hold; None = unbounded
        self.ids: list[int] = []
        self.calls = 0  # extend calls = forward passes
        self.misuse: list[str] = []
        self.refused: list[list[int]] = []  # the ids of each extend it refused

    def _refuse(self, message: str, ids: list[int] | None = None) -> None:
        self.misuse.append(message)
        if ids is not None:
            self.refused.append(ids)
        raise FakeTargetError(message)

    def cached(self) -> int:
        return len(self.ids)

    def row_after(self, ctx: list[int]) -> np.ndarray:
        return fake_row(self.Pcg32, ctx[-2] if len(ctx) >= 2 else -1, ctx[-1], self.vocab)

    def extend(self, ids) -> list[np.ndarray]:
        ids = [int(i) for i in ids]
        if not ids:
            self._refuse("extend([]) fed no ids: every round feeds the pending token plus the draft", ids)
        bad = [i for i in ids if not 0 <= i < self.vocab]
        if bad:
            self._refuse(f"extend fed token id {bad[0]}, outside the vocabulary [0, {self.vocab})", ids)
        if self.budget is not None and len(self.ids) + len(ids) > self.budget:
            self._refuse(f"extend would hold {len(self.ids) + len(ids)} positions, past the request's budget of "
                         f"{self.budget} (len(prompt) + max_new - 1): shorten drafts to max_new - emitted - 1", ids)
        self.calls += 1
        rows = []
        for i in ids:
            self.ids.append(i)
            rows.append(self.row_after(self.ids))
        return rows

    def truncate(self, length: int) -> None:
        if not 0 <= int(length) <= len(self.ids):
            self._refuse(f"truncate({length}) on a target holding {len(self.ids)} positions: it can only shrink")
        del self.ids[int(length):]


def greedy_reference(ref, prompt: list[int], max_new: int, vocab: int) -> list[int]:
    """Plain greedy decoding on the fake target, one token per pass, without the sampler's
    penalties: the ground truth that greedy speculation must reproduce."""
    ctx = list(prompt)
    t = FakeTarget(ref, vocab)
    for _ in range(max_new):
        ctx.append(int(np.argmax(t.row_after(ctx))))
    return ctx[len(prompt):]
