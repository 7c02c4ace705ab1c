"""The judge's side of `runner_target_scores_every_fed_position`: the implementation's RunnerTarget
over the shipped tiny llama, against fresh runs of the reference model (held here, in the judge).
"""

from functools import lru_cache

import numpy as np

from harness.pack import SubmissionFailure

BLOCK_TOKENS = 4  # small, so every chunk crosses block boundaries
NUM_BLOCKS = 64
RTOL = ATOL = 1e-4  # float32 logits of a few units; a paged forward sums in another order than a full one
CHUNKS = (5, 1, 3, 6, 2, 7)  # prompt, then rounds of pending + draft of various lengths
MAX_NEW = 24


@lru_cache(maxsize=None)
def reference_model(ref, model_dir):
    """The judge's pristine model (loaded once per process): the fresh runs to compare with."""
    return ref.module("model").load_llama(model_dir)


@lru_cache(maxsize=None)
def _greedy_plain(model, prompt: tuple[int, ...], max_new: int) -> tuple[int, ...]:
    ctx = list(prompt)
    for _ in range(max_new):
        ctx.append(int(np.argmax(model.forward_full(ctx)[-1])))
    return tuple(ctx[len(prompt):])


def greedy_plain(model, prompt: list[int], max_new: int) -> list[int]:
    """Plain greedy on the reference model: one fresh full forward per token (cached per process)."""
    return list(_greedy_plain(model, tuple(prompt), max_new))


class ModelTarget:
    """The judge's exact target over the reference model: each extend a fresh full forward run of everything cached
    (no KV cache to get wrong), the rows of the ids fed."""

    def __init__(self, model) -> None:
        self.model = model
        self.ids: list[int] = []

    def cached(self) -> int:
        return len(self.ids)

    def extend(self, ids) -> list:
        ids, before = [int(i) for i in ids], len(self.ids)
        if not ids or not all(0 <= i < self.model.cfg.vocab_size for i in ids):
            raise ValueError(f"extend({ids}): feed one id or more, each in [0, {self.model.cfg.vocab_size})")
        self.ids += ids
        return [row.tolist() for row in self.model.forward_full(self.ids)[before:]]

    def truncate(self, length: int) -> None:
        if not 0 <= int(length) <= len(self.ids):
            raise ValueError(f"truncate({length}) on a target holding {len(self.ids)} positions: it can only shrink")
        del self.ids[int(length):]


def _blocks_for(n: int) -> int:
    return -(-n // BLOCK_TOKENS)


def check_runner_target(impl, ref, model_dir, seed: int) -> None:
    """model_dir: the tiny llama the chapter names (chapter.data["model"]); ref: the judge's reference; seed: the
    grading seed, which draws the fed ids and the prompt."""
    model = reference_model(ref, model_dir)
    vocab = model.cfg.vocab_size
    rng = np.random.default_rng(seed)  # the ids and the prompt: the grading seed's
    ids = [int(x) for x in rng.integers(0, vocab, size=sum(CHUNKS))]
    rt = impl.runner_target(model_dir, NUM_BLOCKS, BLOCK_TOKENS)
    fed = 0
    for n in CHUNKS:
        rows = rt.extend(ids[fed:fed + n])
        assert len(rows) == n, f"extend fed {n} ids and returned {len(rows)} rows: one row per fed id"
        fresh = model.forward_full(ids[:fed + n])[fed:]  # [n, V] row i scores the position after ids[fed + i]
        got = np.asarray(rows, dtype=np.float32)
        bad = [i for i in range(n) if not np.allclose(got[i], fresh[i], rtol=RTOL, atol=ATOL)]
        assert not bad, (f"after {fed} cached positions, extend({ids[fed:fed + n]}): row {bad[0]} (position {fed + bad[0]}) "
                         f"differs from a fresh run of its prefix by up to {np.abs(got[bad[0]] - fresh[bad[0]]).max():.3g} "
                         f"(tolerance {ATOL} + {RTOL}*|x|)")
        fed += n
        assert rt.cached() == fed, f"after feeding {fed} ids the target says it holds {rt.cached()}"
        assert len(rt.blocks()) == _blocks_for(fed), f"{fed} positions need {_blocks_for(fed)} blocks of {BLOCK_TOKENS}; the table holds {len(rt.blocks())}"
    keep = fed - 5  # a rejected draft: cut, then feed other ids over the same positions
    rt.truncate(keep)
    other = [(i * 7 + 3) % vocab for i in range(4)]
    rows = rt.extend(other)
    fresh = model.forward_full(ids[:keep] + other)[keep:]
    assert np.allclose(np.asarray(rows, dtype=np.float32), fresh, rtol=RTOL, atol=ATOL), (
        "after truncate and re-extend, rows differ from a fresh run: the KV of the cut positions was not replaced")
    rt.close()
    assert rt.pool_free() == NUM_BLOCKS, f"after close the pool has {rt.pool_free()} of {NUM_BLOCKS} blocks free: blocks leaked"

    prompt = [int(x) for x in rng.integers(0, vocab, size=6)] * 3  # repetitive, so prompt lookup drafts
    cfg, exact = {"draft": "prompt_lookup", "k": 4}, ModelTarget(model)
    try:  # your generate through the judge's exact target of the same model: what your RunnerTarget must match
        want = impl.generate(exact, cfg, prompt, {"temperature": 0.0}, 1, MAX_NEW, [])["tokens"]
    except SubmissionFailure:  # your loop fails on its own: the loop's tests judge that, the same on every seed
        return
    rt = impl.runner_target(model_dir, NUM_BLOCKS, BLOCK_TOKENS)
    g = impl.generate(rt, cfg, prompt, {"temperature": 0.0}, 1, MAX_NEW, [])
    plain = " (plain greedy's tokens, your loop being right)" if want == greedy_plain(model, prompt, MAX_NEW) else ""
    assert g["tokens"] == want, (f"prompt lookup through your RunnerTarget must emit what your generate emits through an "
                                 f"exact target of the same model (a fresh forward run per call){plain}:\n  expected "
                                 f"{want}\n  got      {g['tokens']}")
    cached = exact.cached()
    assert rt.cached() == cached, (f"after generation your RunnerTarget holds {rt.cached()} positions; the same generation "
                                   f"left {cached} in an exact target")
    assert len(rt.blocks()) == _blocks_for(cached), f"{cached} positions need {_blocks_for(cached)} blocks; the table holds {len(rt.blocks())}"
    rt.close()
    assert rt.pool_free() == NUM_BLOCKS, "after the request ends the pool must be whole again"
