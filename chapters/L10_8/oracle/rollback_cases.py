"""Rollback cases: `rollback(pool, table, keep)` on the reference's KvPool, with pitfall s13.

A case is a sequence's block table on a fresh pool: one block allocated per entry of `fills` (every
block full but the last, as a sequence's table is), then `rollback` to `keep` positions, anywhere
from 0 to the cached positions sum(fills). What a position *is* (its kind) is fixed by the plan; the
seed draws the block size, the table and keep within the kind. Variant s13 releases the partial last
block: it keeps only the floor(keep / B) blocks the kept positions fill, and sets no fill (they are
full, as a student who makes this mistake believes). So s13 shows exactly when keep is not a multiple
of B; the plan puts that on at least 7 positions, for any seed.
"""

from __future__ import annotations

from harness.pack import Rand

from chapters.L10_8.cases import filled_table

from .common import N_ROLLBACK, REFUSED, ROLLBACK_BUGS, ROLLBACK_TAGS, RefLib, order_tags

B_MIN, B_MAX = 2, 8  # block sizes drawn: 2 is the least with a partial block, 8 keeps tables short
BLOCKS_MAX = 6  # the most blocks in a table: a few rounds' worth, every release count from 0 to 6
SPARE_MAX = 3  # free blocks the pool has beyond the table's (rollback must not depend on them)
HAND = {"num_blocks": 4, "block_tokens": 4, "fills": [4, 4, 2], "keep": 5}  # the chapter's section 3 example


def rollback_plan() -> list[str]:
    """The kind of each of the 12 positions, in file order (the first seven show s13 for any seed)."""
    kinds = (["hand"] + ["mid_partial"] * 3 + ["first_partial"] * 2 + ["keep_all_partial"]
             + ["keep_zero"] + ["aligned"] * 2 + ["keep_all_full"] + ["single_block"])
    assert len(kinds) == N_ROLLBACK, len(kinds)
    return kinds


def _table(r: Rand, B: int, blocks: int, last_full: bool | None) -> list[int]:
    """Fills of a table of `blocks` blocks of B: all full but the last, which is full, partial or either (None)."""
    last = B if last_full else r.int_in(1, B - 1) if last_full is False else r.int_in(1, B)
    return [B] * (blocks - 1) + [last]


def _inputs(r: Rand, kind: str) -> dict:
    """The case's pool size, block size, table fills and keep, drawn within its kind."""
    if kind == "hand":
        return dict(HAND)
    B = r.int_in(B_MIN, B_MAX)
    lo = 2 if kind in ("mid_partial", "aligned") else 1  # a keep past the first block needs two blocks
    blocks = 1 if kind == "single_block" else r.int_in(lo, BLOCKS_MAX)
    last_full = {"keep_all_partial": False, "keep_all_full": True}.get(kind)
    fills = _table(r, B, blocks, last_full)
    cached = sum(fills)
    if kind == "mid_partial":  # past the first block, not on a block boundary
        keep = r.choice([x for x in range(B + 1, cached + 1) if x % B])
    elif kind == "first_partial":  # inside the first block
        keep = r.int_in(1, min(B - 1, cached))
    elif kind in ("keep_all_partial", "keep_all_full"):
        keep = cached
    elif kind == "keep_zero":
        keep = 0
    elif kind == "aligned":  # on a block boundary the table reaches
        keep = B * r.int_in(1, cached // B)
    else:
        keep = r.int_in(0, cached)
    return {"num_blocks": blocks + r.int_in(0, SPARE_MAX), "block_tokens": B, "fills": fills, "keep": keep}


def _filled(lib: RefLib, case: dict):
    """A fresh reference pool and the case's table on it (one block per fill)."""
    pool = lib.kv.KvPool(case["num_blocks"], case["block_tokens"])
    return pool, filled_table(pool, case["fills"])


def run_reference(lib: RefLib, case: dict) -> dict:
    """The reference's rollback on the case: {"released", "fills" of the blocks left in the table}."""
    pool, table = _filled(lib, case)
    released = lib.spec.rollback(pool, table, case["keep"])
    return {"released": int(released), "fills": [pool.fill(b) for b in table]}


def run_variant(lib: RefLib, case: dict, bug: str | None) -> dict | str:
    """A local copy of rollback, with s13 (keep floor(keep / B) blocks) or none; REFUSED when the pool refuses."""
    pool, table = _filled(lib, case)
    B, keep = case["block_tokens"], case["keep"]
    need = keep // B if bug == "s13" else -(-keep // B)  # the blocks kept: floor, or the correct ceil
    released = 0
    try:
        while len(table) > need:
            pool.release(table.pop())
            released += 1
        if need and bug != "s13":  # s13 believes every kept block is full
            pool.set_fill(table[-1], keep - (need - 1) * B)
    except lib.kv.KvError:
        return REFUSED
    return {"released": released, "fills": [pool.fill(b) for b in table]}


def rollback_case(lib: RefLib, master_seed: int, index: int, kind: str) -> dict:
    """Case `index` (of `kind`): the table, the reference's answer, s13's where it differs, the tags."""
    case = _inputs(lib.rand(master_seed, "rollback", index), kind)
    expect = run_reference(lib, case)
    if run_variant(lib, case, None) != expect:
        raise AssertionError(f"rollback case {index}: the local copy of rollback disagrees with the reference")
    pitfalls = {b: a for b in ROLLBACK_BUGS if (a := run_variant(lib, case, b)) != expect}
    B, keep, fills = case["block_tokens"], case["keep"], case["fills"]
    tags = {f"shows:{b}" for b in pitfalls}
    tags |= {t for t, on in (("hand_example", kind == "hand"), ("keep_zero", keep == 0), ("keep_all", keep == sum(fills)),
                             ("aligned", keep % B == 0), ("partial_last", keep % B != 0),
                             ("single_block", len(fills) == 1)) if on}
    released = expect["released"]
    tags.add("release_none" if released == 0 else "release_all" if released == len(fills) else "release_some")
    return {**case, "tags": order_tags(tags, ROLLBACK_TAGS), "expect": expect, "pitfalls": pitfalls}


def rollback_cases(lib: RefLib, master_seed: int) -> list[dict]:
    """The whole section, ids r000.. in plan order."""
    return [{"id": f"r{i:03d}", **rollback_case(lib, master_seed, i, k)} for i, k in enumerate(rollback_plan())]
