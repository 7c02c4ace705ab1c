"""RunnerTarget: the production `Target` of spec.py, one request over a paged runner and its pool.

The runner returns one logits row per sequence, so `extend(ids)` feeds every id as its own one-token
sequence over the request's block table, at its own position, in ONE forward. `truncate(length)`
is spec.rollback. The prefix index only ever sees verified tokens: a full block is registered when
`truncate` (or `commit`) confirms that all its positions are kept, never at `extend` time, so a
block that a rejected draft filled is never registered.
"""

import numpy as np

from ..kv import KvError, KvPool
from .spec import SpecError, blocks_for, rollback


class RunnerTarget:
    """One request's cache: `tokens` (what position i holds) and `table` (its blocks, in order)."""

    def __init__(self, runner, pool: KvPool) -> None:
        self.runner = runner
        self.pool = pool
        self.tokens: list[int] = []
        self.table: list[int] = []
        self._checked = 0  # leading full blocks already registered (or found indexed under another block)

    def cached(self) -> int:
        return len(self.tokens)

    def blocks_held(self) -> int:
        return len(self.table)

    def extend(self, ids) -> list[np.ndarray]:
        """Logits rows (float32 [V]), one per id, row i scoring the position after ids[i]."""
        ids = [int(t) for t in ids]
        if not ids:
            return []
        b = self.pool.block_tokens
        start, end = len(self.tokens), len(self.tokens) + len(ids)
        fresh: list[int] = []
        try:
            while len(self.table) < blocks_for(end, b):
                fresh.append(self.pool.alloc())
                self.table.append(fresh[-1])
        except KvError as e:
            del self.table[len(self.table) - len(fresh):]  # leave the request as it was
            for blk in fresh:
                self.pool.release(blk)
            raise SpecError(f"extend: the KV pool cannot hold {end} positions: {e}") from e
        if start % b:
            self._own_block(start // b)  # the partial last block is about to be written
        table = list(self.table)
        logits = self.runner.forward([(t, start + i, table) for i, t in enumerate(ids)])  # [N, V]
        for i in range(start // b, blocks_for(end, b)):
            self.pool.set_fill(self.table[i], min(b, end - i * b))
        self.tokens.extend(ids)
        return list(logits)

    def truncate(self, length: int) -> None:
        """Keep positions 0..length-1; they are confirmed, so their full blocks enter the prefix index."""
        if not isinstance(length, int) or not 0 <= length <= len(self.tokens):
            raise SpecError(f"truncate({length!r}): the target holds {len(self.tokens)} positions; "
                            f"allowed 0 <= length <= {len(self.tokens)}")
        b = self.pool.block_tokens
        if length % b and length < len(self.tokens) and length // b < len(self.table):
            self._own_block(length // b)  # cutting into a shared or indexed block: keep the original whole
        rollback(self.pool, self.table, length)
        del self.tokens[length:]
        self._checked = min(self._checked, length // b)
        self.commit()

    def commit(self) -> None:
        """Every cached position is verified: register the full blocks not yet in the index, under
        the key of all token ids up to the block's end. A block whose key already names another
        block (the same prefix computed by another request) stays private."""
        b = self.pool.block_tokens
        for i in range(self._checked, len(self.tokens) // b):
            key = tuple(self.tokens[:(i + 1) * b])
            if self.pool.lookup(key) is None and not self.pool.is_registered(self.table[i]):
                self.pool.register(key, self.table[i])
            self._checked = i + 1

    def _own_block(self, i: int) -> None:
        """Copy on write: before positions of block i are written or cut, a block that is shared
        (a prefix-cache hit held by another request too) or indexed becomes a private copy."""
        old = self.table[i]
        if self.pool.refcount(old) == 1 and not self.pool.is_registered(old):
            return
        try:
            new = self.pool.alloc()
        except KvError as e:
            raise SpecError(f"copy on write of block {old}: {e}") from e
        if self.pool.k is not None:
            self.pool.k[new] = self.pool.k[old]
            self.pool.v[new] = self.pool.v[old]
        self.pool.set_fill(new, self.pool.fill(old))
        self.pool.release(old)
        self.table[i] = new

    def release_all(self) -> None:
        """Give every block back (one reference each) and forget the cache."""
        while self.table:
            self.pool.release(self.table.pop())
        self.tokens.clear()
        self._checked = 0

    close = release_all
