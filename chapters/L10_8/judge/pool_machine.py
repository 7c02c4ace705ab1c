"""The pool and `rollback` as a stateful differential check (issue 37, item 3): seeded sequences of operations on a
real pool (start a sequence, write positions, share a sequence's full blocks with a new one, roll back to a drawn
keep, reserve a block ahead of the positions as a round does for its draft and then roll back, end a sequence), with
blocks of 4 positions and then one sequence for each other category of the block size's type (B_EDGES), run on the implementation's pool and on the judge's reference's side by side, the rollback's
answer and the pool's whole state (every block's reference count and fill, the free count, each sequence's table)
compared after every step. On a difference the sequence is shrunk (an operation left out while the difference
stays) and the message lists the smallest sequence found, step by step, with the two states where they part.

Operations are symbolic, resolved against the state when they run (which sequence, how many positions, which keep),
so every subsequence of a drawn sequence is itself valid: that is what lets the shrinker drop any step. A write that
would need more blocks than are free is skipped, so a pool is never exhausted.

Each test judges its own row (rules.toml): `blocks_conserved_across_rollbacks` (R-RB-09) draws sequences without
sharing and keeps of every kind (a cut draft, any keep, keep 0, the whole capacity, a keep above the cached
positions); `rollback_drops_one_reference_only` (R-RB-05, R-RB-13) draws sequences that share blocks, with keeps on
block boundaries at or below the cached positions, so only the references dropped decide.
"""

from dataclasses import dataclass, field
from functools import lru_cache
import random
from typing import Any, Callable

from harness.pack import Bare, InProcess, Raised, brief, pristine

from .. import ops
from ..client import Client
from ..spelling import Spelling, spelling

KEEPS_ANY = ("cut", "any", "zero", "whole", "above")  # a keep's kinds (cut: a rejected draft, the common case)
KEEPS_SHARED = ("aligned",)  # block boundaries at or below the cached positions
MAX_REPLAYS = 120  # replays the shrinker may spend (each a fresh pair of pools)
# the pool's block size B, a usize: the drawn sequences use 4; one sequence more for each other category of its type:
# the bound 1, a value a u32 truncates to 0, and the limits where len(table) * B overflows (a table of two blocks)
B_EDGES = (1, 2**32, 2**63, 2**64 - 1)
KEEP_MAX = 2**64 - 1  # keep is a usize in the Rust contract: a capacity past it is saturated there (spec/rust.md), so
# the keeps drawn stay within it, where both languages' rollback take the same keep (2 blocks of 2**63: keep 2**64 - 1);
# so do the positions a write reaches (the rest of a sequence after a keep of 2**64 - 1 writes nothing more)


class _Logged(Client):
    """A client whose calls are kept while `log` is a list."""

    log: list[tuple[str, dict]] | None = None

    def call(self, op: str, args: dict, callbacks=None, deadline_s: float | None = None):
        if self.log is not None:
            self.log.append((op, args))
        return super().call(op, args, callbacks, deadline_s)


@lru_cache(maxsize=1)
def judge_reference() -> _Logged:
    """The judge's pristine reference behind the chapter's client, in this process: the expected pools."""
    return _Logged(InProcess(pristine("L10.8").alias, ops), "the judge's reference")


@dataclass(frozen=True)
class Op:
    kind: str  # start, write, fork, rollback, end, reserve (a block allocated ahead of the positions: room for a draft)
    seq: int = 0  # which live sequence (modulo how many are live)
    n: int = 0  # write/start: positions; fork: which full-block prefix; rollback: the keep's draw
    keep: str = ""  # rollback: the keep's kind


@dataclass
class Side:
    """One implementation's pool and its live sequences: (table, cached positions) each."""
    pool: Any  # the Impl's pool handle (client.Client's), or the judge's reference's
    seqs: list = field(default_factory=list)


@dataclass
class Step:
    text: str  # what the step did, resolved (on the reference's side)
    want: dict  # the state after the step: the rollback's answer, the tables, refcounts, fills, free
    got: dict


def draw_sequences(seed_text: str, count: int, length: int, shared: bool, every_keep: bool = False) -> list[list[Op]]:
    """`count` sequences of `length` operations, drawn from `seed_text` (the grading seed and the test's name).
    `every_keep`: each sequence opens with one segment per keep kind, on every run whatever the draws: a new sequence,
    rolled back to its whole capacity (its cached positions at the block size's scale), a block reserved and a rollback
    to that kind of keep, its end (so a block size at its type's limits meets every kind of keep there)."""
    rng = random.Random(seed_text)
    keeps = KEEPS_SHARED if shared else KEEPS_ANY
    out = []
    for i in range(count):
        seq = [op for keep in (keeps if every_keep else ()) for op in (
            Op("start", 0, rng.randint(1, 9)), Op("rollback", 0, rng.randrange(1000), "whole" if "whole" in keeps else keep),
            Op("reserve", 0, rng.randrange(1000), keep), Op("end"))]
        seq += [Op("start", 0, rng.randint(1, 9))]
        for _ in range(length - 1):
            kinds = ["write"] * 3 + ["rollback"] * 4 + ["start", "end", "reserve"] + (["fork"] * 2 if shared else [])
            kind = rng.choice(kinds)
            seq.append(Op(kind, rng.randrange(4), rng.randrange(1000) if kind in ("rollback", "fork", "reserve") else rng.randint(1, 9),
                          keeps[(i + len(seq)) % len(keeps)] if kind in ("rollback", "reserve") else ""))
        out.append(seq)
    return out


def _keep(op: Op, table: list, cached: int, b: int) -> int:
    cap = min(len(table) * b, KEEP_MAX)
    if op.keep == "cut":  # a round's draft cut: keep between the last pending token and all that was cached
        lo = max(0, cached - 9)
        return lo + op.n % (cached - lo + 1)
    if op.keep == "any":
        return op.n % (cap + 1)
    if op.keep == "zero":
        return 0
    if op.keep == "whole":
        return cap
    if op.keep == "above":  # above the cached positions (strictly, where the capacity leaves room), within the capacity
        return cached + 1 + op.n % (cap - cached) if cap > cached else cached
    return b * (op.n % (cached // b + 1))  # aligned


def _answer(fn):
    try:
        return fn()
    except Raised as e:
        if e.not_implemented or e.import_failed:
            raise
        return "SpecError" if e.spec_error else f"{e.type} ({e.message})"


def _positions(n: int) -> str:
    return f"{n} position{'s' if n != 1 else ''}"


def _blocks_needed(cached: int, n: int, table: list, b: int) -> int:
    return max(0, -(-(cached + n) // b) - len(table))


def _run(op: Op, side: Side, b: int, free: int, spell: Spelling):
    """Apply `op` to one side; (text, answer) where the answer is the rollback's, or None. `free`: the reference's
    free count before the step (a write needing more is skipped on both sides); `spell`: the student's language,
    which the text's call is written in."""
    seqs, pool = side.seqs, side.pool
    if op.kind == "start" or not seqs:
        n = op.n if op.kind in ("start", "write") else 1
        if _blocks_needed(0, n, [], b) > free:
            return "skip", None
        seqs.append((pool.write([], 0, n, b), n))
        return f"a new sequence {len(seqs) - 1} writes {_positions(n)}", None
    s = op.seq % len(seqs)
    table, cached = seqs[s]
    if op.kind == "write":
        if _blocks_needed(cached, op.n, table, b) > free or cached + op.n > KEEP_MAX:  # positions are a usize too
            return "skip", None
        seqs[s] = (pool.write(table, cached, op.n, b), cached + op.n)
        return f"sequence {s} writes {_positions(op.n)} after its {cached}", None
    if op.kind == "fork":
        j = op.n % (cached // b + 1)
        for block in table[:j]:
            pool.retain(block)
        seqs.append((list(table[:j]), j * b))
        return f"a new sequence {len(seqs) - 1} shares the first {j} full blocks of sequence {s} ({table[:j]}, each retained)", None
    reserved = ""
    if op.kind == "reserve":  # a round reserved a block for its draft (a last block holding no position), then rolls back
        if free < 1:
            return "skip", None
        table = table + [pool.alloc()]
        reserved = f"reserves block {table[-1]} ahead of its {_positions(cached)}, then "
    keep = 0 if op.kind == "end" else _keep(op, table, cached, b)
    got = _answer(lambda: pool.impl.rollback(pool, table, keep))
    if op.kind == "end" or not isinstance(got, dict):
        seqs.pop(s)
    else:
        seqs[s] = (list(got["table"]), keep)
    what = "ends: " if op.kind == "end" else ""
    call = spell.words("rollback", {"pool": Bare("pool"), "table": table, "keep": keep})
    return f"sequence {s} {what}{reserved}{call} of {cached} cached positions", got


def ahead(impl, num_blocks: int, b: int, reference: Callable[[Any], Any], mine: Callable[[Any, Any], Any]):
    """`mine(pool, reference(ref_pool))`: `reference` run on a fresh pool of the judge's reference, then `mine` on a
    fresh pool of the implementation, its calls sent ahead in one batch (harness.transport.impl.Impl.batched) as the
    reference's calls predict them: while the implementation answers as the reference does, they are the same calls.
    When its calls part from those (an answer of its steered it elsewhere), `mine` runs again on a fresh pool, each
    call alone, as it would have run with no batch; what it raised stands only when its calls never parted."""
    ref = judge_reference()
    ref_pool = ref.new_pool(num_blocks, b)
    log: list[tuple[str, dict]] = []
    ref.log = log
    try:
        seen = reference(ref_pool)
    finally:
        ref.log = None
    pool = impl.new_pool(num_blocks, b)
    calls = [(name, {**args, "pool": pool.handle} if "pool" in args else args) for name, args in log]
    try:
        with impl.batched([lambda name=name, args=args: impl.call(name, args) for name, args in calls]):
            out = mine(pool, seen)
    except Exception:  # noqa: BLE001 -- a failure or a test's assertion: it stands unless the calls parted
        if not impl.batch_missed:
            raise
    if impl.batch_missed:
        out = mine(impl.new_pool(num_blocks, b), seen)
    return out


def replay(impl, sequence: list[Op], num_blocks: int, b: int) -> tuple[list[Step], int | None]:
    """Run `sequence` on a fresh pool of each side: the steps (resolved, with both answers and states) and the index
    of the first step where the implementation's answer or state parts from the reference's (None: never). The
    reference's side runs first; the implementation's calls go ahead of its side (`ahead`)."""
    spell = spelling(impl.language)

    def reference(pool) -> list:
        ref, free, wants = Side(pool), num_blocks, []  # a fresh pool: every block free
        for op in sequence:
            text, want = _run(op, ref, b, free, spell)
            if text != "skip":
                wants.append((op, free, text, {"answer": want, "tables": [t for t, _ in ref.seqs], **pool.state()}, len(ref.seqs)))
                free = wants[-1][3]["free"]
        return wants

    return ahead(impl, num_blocks, b, reference, lambda pool, wants: _mine(Side(pool), wants, b, spell))


def _mine(side: Side, wants: list, b: int, spell: Spelling) -> tuple[list[Step], int | None]:
    """The implementation's side of a replay: each of the reference's steps (op, the free count before it, its text,
    the state after it, its live sequences) run on `side` and its state compared."""
    steps: list[Step] = []
    for op, free, text, want_state, live in wants:
        _, got = _run(op, side, b, free, spell)
        steps.append(Step(text, want_state, {"answer": got, "tables": [t for t, _ in side.seqs], **side.pool.state()}))
        if want_state != steps[-1].got or live != len(side.seqs):
            return steps, len(steps) - 1
    return steps, None


def _shrunk(impl, sequence: list[Op], num_blocks: int, b: int) -> tuple[list[Op], list[Step], int | None]:
    """The sequence with every operation the difference does not need left out (one at a time, until none can go)."""
    steps, bad = replay(impl, sequence, num_blocks, b)
    replays, changed = 1, True
    while changed and replays < MAX_REPLAYS:
        changed = False
        for i in range(len(sequence) - 1, -1, -1):
            if replays >= MAX_REPLAYS:
                break
            trial = sequence[:i] + sequence[i + 1:]
            t_steps, t_bad = replay(impl, trial, num_blocks, b)
            replays += 1
            if t_bad is not None:
                sequence, steps, bad, changed = trial, t_steps, t_bad, True
                break
    return sequence, steps, bad


def _differences(want: dict, got: dict) -> str:
    parts = []
    for key in ("answer", "tables", "refcounts", "fills", "free"):
        if want.get(key) != got.get(key):
            parts.append(f"    {key}: expected {brief(want.get(key))}, got {brief(got.get(key))}")
    return "\n".join(parts)


def check(impl, seed_text: str, shared: bool, count: int = 10, length: int = 14, num_blocks: int = 12,
          b: int = 4) -> str | None:
    """None when the implementation's rollback keeps its pool as the reference's does on every drawn sequence; else
    the smallest sequence found, step by step, and what differs after its last step."""
    runs = [(sequence, b) for sequence in draw_sequences(seed_text, count, length, shared)]
    runs += list(zip(draw_sequences(f"{seed_text}:B", len(B_EDGES), length, shared, every_keep=True), B_EDGES))
    for i, (sequence, b) in enumerate(runs):
        steps, bad = replay(impl, sequence, num_blocks, b)
        if bad is None:
            continue
        sequence, steps, shrunk_bad = _shrunk(impl, sequence, num_blocks, b)
        bad = bad if shrunk_bad is None else shrunk_bad  # the shrink keeps only sequences that still part
        lines = "\n".join(f"  {j + 1}. {s.text}" for j, s in enumerate(steps[:bad + 1]))
        return (f"rollback, step by step on a pool of {num_blocks} blocks of {b} positions, against the reference's "
                f"rollback on the same steps (sequence {i} of {len(runs)} drawn from the grading seed, shrunk to "
                f"{bad + 1} steps):\n{lines}\n  after step {bad + 1} your pool parts from the reference's:\n"
                f"{_differences(steps[bad].want, steps[bad].got)}")
    return None
