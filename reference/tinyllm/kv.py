"""The refcounted KV block pool of L10.1, with a prefix index.

A block holds up to `block_tokens` positions of K/V. A sequence owns a *block table* (a list of
block ids); blocks can be shared between sequences through the prefix index, so every owner holds
one reference and a block returns to the free list only when its last reference is released.
"""

import heapq

import numpy as np


class KvError(RuntimeError):
    """Misuse of the pool (exhausted, double release, bad fill); the message says which block and why."""


class KvPool:
    """`num_blocks` blocks of `block_tokens` positions. `alloc` hands out the lowest free id.

    With `kv_shape = (layers, kv_heads, head_dim)` the pool also owns the K/V storage the model
    writes: `k[block, layer, slot, kv_head, :]` and likewise `v`.
    """

    def __init__(self, num_blocks: int, block_tokens: int, kv_shape: tuple[int, int, int] | None = None) -> None:
        if num_blocks < 1 or block_tokens < 1:
            raise KvError(f"a pool needs num_blocks >= 1 and block_tokens >= 1, got {num_blocks}, {block_tokens}")
        self.num_blocks = num_blocks
        self.block_tokens = block_tokens
        self._free = list(range(num_blocks))  # a min-heap of free ids
        self._refs = [0] * num_blocks
        self._fill = [0] * num_blocks
        self._index: dict = {}  # prefix key -> block
        self._key_of: dict[int, object] = {}  # block -> its prefix key
        self.k = self.v = None
        if kv_shape is not None:
            layers, kv_heads, head_dim = kv_shape
            shape = (num_blocks, layers, block_tokens, kv_heads, head_dim)
            self.k = np.zeros(shape, dtype=np.float32)
            self.v = np.zeros(shape, dtype=np.float32)

    def _owned(self, block: int, op: str) -> None:
        if not (isinstance(block, int) and 0 <= block < self.num_blocks):
            raise KvError(f"{op}: block {block!r} does not exist (the pool has blocks 0..{self.num_blocks - 1})")
        if self._refs[block] == 0:
            raise KvError(f"{op}: block {block} is free; only an allocated block can be used")

    def alloc(self) -> int:
        if not self._free:
            raise KvError(f"the pool is exhausted: all {self.num_blocks} blocks are in use")
        block = heapq.heappop(self._free)
        self._refs[block] = 1
        self._fill[block] = 0
        return block

    def retain(self, block: int) -> None:
        self._owned(block, "retain")
        self._refs[block] += 1

    def release(self, block: int) -> bool:
        """Drop one reference; True when that was the last and the block is free again."""
        self._owned(block, "release")
        self._refs[block] -= 1
        if self._refs[block] > 0:
            return False
        self._fill[block] = 0
        key = self._key_of.pop(block, None)
        if key is not None:
            del self._index[key]
        heapq.heappush(self._free, block)
        return True

    def fill(self, block: int) -> int:
        self._owned(block, "fill")
        return self._fill[block]

    def set_fill(self, block: int, n: int) -> None:
        self._owned(block, "set_fill")
        if not 0 <= n <= self.block_tokens:
            raise KvError(f"set_fill: {n} positions do not fit a block of {self.block_tokens}")
        self._fill[block] = n

    def refcount(self, block: int) -> int:
        if not 0 <= block < self.num_blocks:
            raise KvError(f"refcount: block {block} does not exist")
        return self._refs[block]

    def free_blocks(self) -> int:
        return len(self._free)

    def register(self, key, block: int) -> None:
        """Enter a full block in the prefix index under `key` (a hashable summary of its prefix)."""
        self._owned(block, "register")
        if self._fill[block] != self.block_tokens:
            raise KvError(f"register: block {block} holds {self._fill[block]} of {self.block_tokens} positions; only full blocks are indexed")
        if key in self._index and self._index[key] != block:
            raise KvError(f"register: key already names block {self._index[key]}")
        if block in self._key_of and self._key_of[block] != key:
            raise KvError(f"register: block {block} is already indexed under another key; a block holds one prefix")
        self._index[key] = block
        self._key_of[block] = key

    def lookup(self, key) -> int | None:
        """The block registered under `key`, or None. The caller retains it if it keeps it."""
        return self._index.get(key)

    def is_registered(self, block: int) -> bool:
        return block in self._key_of
