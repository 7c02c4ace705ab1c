"""The paged runner: the llama of llama.py with its K/V in the blocks of a KvPool.

`forward(batch)` runs a batch of one-token sequences, each with its own token, position and block
table, in one vectorized pass: every token writes its K/V at (table[pos // B], pos % B) of every
layer, then attends over positions 0..pos of its own table, which include what earlier tokens of the
same batch just wrote for the same request. One logits row per sequence comes back.
"""

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..kv import KvPool
from .llama import Llama, ModelError


@dataclass(frozen=True)
class Seq:
    """One token of a batch: its id, its position, and the block table of its request."""
    token: int
    pos: int
    table: Sequence[int]


def make_pool(model: Llama, num_blocks: int, block_tokens: int) -> KvPool:
    """A pool whose blocks hold this model's K/V: kv_shape = (layers, kv_heads, head_dim)."""
    c = model.cfg
    return KvPool(num_blocks, block_tokens, kv_shape=(c.num_hidden_layers, c.num_key_value_heads, c.head_dim))


class PagedRunner:
    def __init__(self, model: Llama, pool: KvPool) -> None:
        c = model.cfg
        want = (pool.num_blocks, c.num_hidden_layers, pool.block_tokens, c.num_key_value_heads, c.head_dim)
        if pool.k is None or pool.k.shape != want:
            got = None if pool.k is None else pool.k.shape
            raise ModelError(f"the pool's K/V storage has shape {got}, this model needs {want}; remedy: make the pool "
                             f"with kv_shape=({c.num_hidden_layers}, {c.num_key_value_heads}, {c.head_dim}) (see make_pool)")
        self.model = model
        self.pool = pool

    def _check(self, batch: list[Seq]) -> None:
        c, bt = self.model.cfg, self.pool.block_tokens
        for s in batch:
            if not 0 <= s.token < c.vocab_size:
                raise ModelError(f"forward: token {s.token} is outside the vocabulary [0, {c.vocab_size})")
            if not 0 <= s.pos < min(c.max_position_embeddings, len(s.table) * bt):
                raise ModelError(f"forward: position {s.pos} is outside its table of {len(s.table)} blocks of {bt} "
                                 f"(and max_position_embeddings {c.max_position_embeddings}); remedy: allocate blocks first")

    def forward(self, batch: Sequence[Seq]) -> np.ndarray:
        """Logits [N, V] for a batch of N one-token sequences (tuples (token, pos, table) work too)."""
        batch = [s if isinstance(s, Seq) else Seq(*s) for s in batch]
        if not batch:
            raise ModelError("forward: an empty batch")
        self._check(batch)
        bt = self.pool.block_tokens
        tokens = np.array([s.token for s in batch])  # [N]
        pos = np.array([s.pos for s in batch])  # [N]
        # The distinct tables of the batch (usually one: a request's draft), padded to the longest
        # needed; padding points at a real block and is masked out.
        n_blocks = max(s.pos // bt + 1 for s in batch)
        keys = [tuple(s.table[:n_blocks]) for s in batch]
        distinct = list(dict.fromkeys(keys))
        which = np.array([distinct.index(k) for k in keys])  # [N] row of `tables` for each token
        tables = np.array([list(t) + [t[0]] * (n_blocks - len(t)) for t in distinct])  # [U, n_blocks]
        block = tables[which, pos // bt]  # [N] where each token's K/V goes
        for b in set(block.tolist()):
            if self.pool.refcount(b) != 1 or self.pool.is_registered(b):
                raise ModelError(f"forward: block {b} is free, shared ({self.pool.refcount(b)} references) or in the "
                                 "prefix index, so writing into it would corrupt another owner; remedy: give the "
                                 "sequence a private copy first (copy on write)")
        slot = pos % bt  # [N]
        mask = np.arange(n_blocks * bt)[None, :] <= pos[:, None]  # [N, T] key position <= own position
        pk, pv = self.pool.k, self.pool.v

        def kv(layer: int, k: np.ndarray, v: np.ndarray):
            pk[block, layer, slot] = k  # k [N, KVH, hd] into its blocks
            pv[block, layer, slot] = v
            keys_ = pk[tables, layer]  # [U, n_blocks, B, KVH, hd]
            vals = pv[tables, layer]
            shape = (len(distinct), n_blocks * bt) + keys_.shape[3:]
            keys_, vals = keys_.reshape(shape), vals.reshape(shape)  # [U, T, KVH, hd]
            if len(distinct) > 1:
                keys_, vals = keys_[which], vals[which]  # [N, T, KVH, hd]
            return keys_, vals, mask

        return self.model.forward(tokens, pos, kv)  # [N, V]
