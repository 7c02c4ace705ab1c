"""Draft cases: prompt lookup (150) and n-gram drafting (40), each built to exercise its kind, replayed
through the reference, and tagged, with the draft pitfalls s01, s02 (prompt lookup) and s03 (n-gram);
a case's `pitfalls` holds each pitfall's draft where it differs from the reference's. pl_variant and
ng_variant are also the drafts of the generation loop's variants (generate_cases)."""

from __future__ import annotations

from harness.pack import Rand

from .common import (N_NGRAM, N_PROMPT_LOOKUP, NGRAM_BUGS, NGRAM_TAGS, PROMPT_LOOKUP_BUGS, PROMPT_LOOKUP_TAGS, RefLib,
                     order_tags)


# ---- prompt lookup ------------------------------------------------------------------------------

def pl_variant(ctx: list[int], k: int, max_ngram: int, min_ngram: int, bug: str | None) -> tuple[list[int], int | None, int | None]:
    """prompt_lookup, optionally with s01 (first occurrence) or s02 (stop at the suffix start).

    Returns (draft, winning n, start i) so the oracle can tag what the case exercises.
    """
    t = len(ctx)
    for n in range(max_ngram, min_ngram - 1, -1):
        suffix = ctx[t - n:]
        starts = range(0, t - n) if bug == "s01" else range(t - n - 1, -1, -1)
        for i in starts:
            if ctx[i:i + n] == suffix:
                end = min(i + n + k, t - n) if bug == "s02" else min(i + n + k, t)
                return ctx[i + n:end], n, i
    return [], None, None


def prompt_lookup_plan() -> list[str]:
    """The kind of each of the 150 positions, in file order."""
    kinds = (["hand"] + ["periodic"] * 25 + ["random_repeats"] * 38 + ["no_match"] * 10 + ["recent_wins"] * 20
             + ["backoff"] * 15 + ["long_ctx"] * 8 + ["single_n"] * 10 + ["ngram_ge_ctx"] * 8 + ["into_suffix"] * 15)
    assert len(kinds) == N_PROMPT_LOOKUP, len(kinds)
    return kinds


def prompt_lookup_case(lib: RefLib, master_seed: int, index: int, kind: str) -> dict:
    """Case `index` (of `kind`): a context that exercises the kind, the reference's draft, the tags."""
    r = lib.rand(master_seed, "prompt_lookup", index)
    k = 3 if kind == "hand" else 1 + index % 16
    for _attempt in range(100):
        ctx, mx, mn = _pl_context(r, kind, k, first=index == prompt_lookup_plan().index(kind))
        draft, n_win, i_win = pl_variant(ctx, k, mx, mn, None)
        ref = lib.spec.prompt_lookup(ctx, k, mx, mn)
        assert draft == ref, (index, kind)
        pitfalls = {b: d for b in PROMPT_LOOKUP_BUGS if (d := pl_variant(ctx, k, mx, mn, b)[0]) != ref}
        ok = {"recent_wins": "s01" in pitfalls, "into_suffix": "s02" in pitfalls,
              "backoff": n_win is not None and n_win < mx, "no_match": ref == [],
              "long_ctx": ref != []}.get(kind, True)
        if ok:
            break
    else:
        raise RuntimeError(f"prompt_lookup case {index} ({kind}) could not be constructed")
    t = len(ctx)
    tags = {kind} if kind in PROMPT_LOOKUP_TAGS else set()
    if kind == "hand":
        tags.add("hand_example")
    if mn == mx:
        tags.add("single_n")
    if mx >= t:
        tags.add("ngram_ge_ctx")
    if t == 0:
        tags.add("empty_ctx")
    if n_win is not None and n_win < mx:
        tags.add("backoff")
    if not ref:
        tags.add("empty_draft")
    else:
        if i_win + n_win + len(ref) > t - n_win:
            tags.add("into_suffix")
        tags.add("full_k" if len(ref) == k else "end_truncated")
    tags |= {f"shows:{b}" for b in pitfalls}
    return {"ctx": ctx, "k": k, "max_ngram": mx, "min_ngram": mn, "expect": ref,
            "tags": order_tags(tags, PROMPT_LOOKUP_TAGS), "pitfalls": pitfalls}


def _pl_context(r: Rand, kind: str, k: int, first: bool) -> tuple[list[int], int, int]:
    def ngrams(lo=1, hi=4):
        mx = r.int_in(lo, hi)
        return mx, r.int_in(1, mx)

    if kind == "hand":
        return [5, 6, 7, 8, 5, 6], 3, 1
    if kind in ("periodic", "single_n") and (kind == "periodic" or r.chance(0.5)):
        period = r.int_in(1, 6)
        base = r.int_in(0, 1000)
        pattern = [base + x for x in (r.distinct(0, 50, period) if r.chance(0.7) else [r.below(4) for _ in range(period)])]
        length = r.int_in(2 * period, 2 * period + 40)
        ctx = [pattern[i % period] for i in range(length)]
        if r.chance(0.3):  # a noisy prefix before the periodic part
            ctx = [base + 60 + r.below(20) for _ in range(r.int_in(1, 10))] + ctx
        mx, mn = ngrams()
        if kind == "single_n":
            mn = mx
        return ctx, mx, mn
    if kind in ("random_repeats", "single_n"):
        alpha = r.int_in(2, 8)
        base = r.int_in(0, 30000)
        ctx = [base + r.below(alpha) for _ in range(r.int_in(5, 200))]
        mx, mn = ngrams(1, 5)
        if kind == "single_n":
            mn = mx
        return ctx, mx, mn
    if kind == "no_match":
        length = r.int_in(1, 60)
        if r.chance(0.5):
            ctx = r.distinct(0, 3000, length)  # no token repeats at all
        else:  # repeats inside, but the last token is new: no suffix of any length recurs
            ctx = [r.below(5) for _ in range(length)] + [100 + r.below(100)]
        mx, mn = ngrams(1, 5)
        return ctx, mx, mn
    if kind == "recent_wins":
        n = r.int_in(1, 4)
        suffix = r.distinct(100, 200, n)
        uniq = r.distinct(300, 400, 6)
        occ = r.int_in(2, 4)
        ctx: list[int] = [r.below(100) for _ in range(r.int_in(0, 6))]
        firsts = r.distinct(200, 300, occ)  # every occurrence is followed by a different first token
        for c in range(occ):
            ctx += [uniq[c]] + suffix + [firsts[c]] + [200 + r.below(100) for _ in range(r.int_in(0, k + 2))]
            ctx += [r.below(100) for _ in range(r.int_in(0, 5))]
        ctx += [uniq[occ]] + suffix
        mx = r.int_in(n, n + 2)
        return ctx, mx, r.int_in(1, n)
    if kind == "backoff":
        mx = r.int_in(3, 6)
        s = r.int_in(1, mx - 1)
        suffix = r.distinct(100, 200, s)
        x, y = r.distinct(300, 400, 2)
        ctx = [r.below(100) for _ in range(r.int_in(0, 20))] + [x] + suffix
        ctx += [200 + r.below(100) for _ in range(r.int_in(0, 20))] + [y] + suffix
        return ctx, mx, r.int_in(1, s)
    if kind == "long_ctx":
        alpha = r.int_in(20, 300)
        length = r.int_in(1000, 5000)
        ctx = [r.below(alpha) for _ in range(length)]
        for _ in range(r.int_in(5, 20)):  # copied spans, as in code edits and quoting answers
            span = r.int_in(5, 60)
            src = r.below(len(ctx) - span)
            dst = r.int_in(src + span, len(ctx) - span) if src + span < len(ctx) - span else src
            ctx[dst:dst + span] = ctx[src:src + span]
        span = r.int_in(4, 30)  # end on a copy, so the suffix recurs
        src = r.below(len(ctx) - span)
        ctx += ctx[src:src + span]
        return ctx, r.int_in(2, 5), 1
    if kind == "ngram_ge_ctx":
        length = 0 if first else r.int_in(1, 5)
        ctx = [r.below(3) for _ in range(length)]
        mx = max(1, length + r.int_in(0, 3))
        return ctx, mx, r.int_in(1, mx)
    if kind == "into_suffix":
        n = r.int_in(1, 3)
        suffix = r.distinct(100, 200, n)
        x, y = r.distinct(300, 400, 2)
        gap = [200 + r.below(100) for _ in range(r.int_in(0, k - 1))]  # shorter than k: runs into the suffix
        ctx = [r.below(100) for _ in range(r.int_in(0, 8))] + [x] + suffix + gap
        if gap:
            ctx[-1] = y  # a token seen once: the (n+1)-suffix never recurs
        ctx += suffix
        mx = r.int_in(n, n + 2) if gap else n
        return ctx, mx, r.int_in(1, n)
    raise AssertionError(kind)


# ---- n-gram drafts ------------------------------------------------------------------------------

def ng_variant(ctx: list[int], k: int, n: int, bug: str | None) -> tuple[list[int], set[str]]:
    """ngram_draft, with s03 (ties to the highest id) or "frozen" (drafted tokens are not appended
    to the context, so every draft token is predicted from the original context); also returns
    what the drafting exercised: tie, backoff.

    (A variant that appends drafted tokens but counts followers only inside the original context
    was tried first: it agreed with the reference on 20000 random contexts, so it is not used.)
    """
    ext = list(ctx)
    draft: list[int] = []
    seen: set[str] = set()
    while len(draft) < k:
        nxt = None
        top_m = min(n - 1, len(ext) - 1)
        for m in range(top_m, 0, -1):
            suffix = ext[len(ext) - m:]
            counts: dict[int, int] = {}
            for i in range(len(ext) - m):
                if ext[i:i + m] == suffix:
                    counts[ext[i + m]] = counts.get(ext[i + m], 0) + 1
            if counts:
                best = max(counts.values())
                winners = sorted(tok for tok, c in counts.items() if c == best)
                if len(winners) > 1:
                    seen.add("tie")
                if m < top_m:
                    seen.add("backoff")
                nxt = winners[-1] if bug == "s03" else winners[0]
                break
        if nxt is None:
            break
        draft.append(nxt)
        if bug != "frozen":
            ext.append(nxt)
    return draft, seen


def ngram_plan() -> list[str]:
    """The kind of each of the 40 positions, in file order."""
    kinds = ["n_one"] * 2 + ["tie"] * 8 + ["backoff"] * 8 + ["stop"] * 6 + ["random"] * 10 + ["periodic"] * 6
    assert len(kinds) == N_NGRAM
    return kinds


def ngram_case(lib: RefLib, master_seed: int, index: int, kind: str) -> dict:
    """Case `index` (of `kind`): a context that exercises the kind, the reference's draft, the tags."""
    r = lib.rand(master_seed, "ngram", index)
    k = 1 + index % 8
    for _attempt in range(100):
        ctx, n = _ng_context(r, kind)
        draft, seen = ng_variant(ctx, k, n, None)
        ref = lib.spec.ngram_draft(ctx, k, n)
        assert draft == ref, (index, kind)
        pitfalls = {b: d for b in NGRAM_BUGS if (d := ng_variant(ctx, k, n, b)[0]) != ref}
        ok = {"tie": "s03" in pitfalls, "backoff": "backoff" in seen, "stop": len(ref) < k}.get(kind, True)
        if ok:
            break
    else:
        raise RuntimeError(f"ngram case {index} ({kind}) could not be constructed")
    tags = {kind} | seen
    if n == 1:
        tags.add("n_one")
    if len(ref) < k:
        tags.add("stop")
    if not ref:
        tags.add("empty_draft")
    if ng_variant(ctx, k, n, "frozen")[0] != ref:
        tags.add("counts_drafted")
    tags |= {f"shows:{b}" for b in pitfalls}
    return {"ctx": ctx, "k": k, "n": n, "expect": ref, "tags": order_tags(tags, NGRAM_TAGS), "pitfalls": pitfalls}


def _ng_context(r: Rand, kind: str) -> tuple[list[int], int]:
    if kind == "n_one":
        return [r.below(4) for _ in range(r.int_in(3, 20))], 1
    if kind == "tie":
        n = r.int_in(2, 4)
        ctxt = r.distinct(100, 200, n - 1)  # the (n-1)-token context, fresh tokens
        a, b = sorted(r.distinct(200, 300, 2))
        cnt = r.int_in(1, 3)
        segs = [ctxt + [a] for _ in range(cnt)] + [ctxt + [b] for _ in range(cnt)]
        r.shuffle(segs)
        if segs[0][-1] == a:  # put the higher id first sometimes: "first seen" is not the rule
            segs.reverse()
        ctx: list[int] = []
        for s in segs:
            ctx += [r.below(100) for _ in range(r.int_in(1, 4))] + s
        ctx += [r.below(100) for _ in range(r.int_in(1, 4))] + ctxt
        return ctx, n
    if kind == "backoff":
        n = r.int_in(3, 5)
        alpha = r.int_in(2, 5)
        ctx = [r.below(alpha) for _ in range(r.int_in(8, 60))]
        ctx += [100 + r.below(50), r.below(alpha)]  # a fresh token, then a known one: only m = 1 matches
        return ctx, n
    if kind == "stop":
        if r.chance(0.3):
            return [r.below(5) for _ in range(r.int_in(0, 1))], r.int_in(2, 4)
        return [r.below(6) for _ in range(r.int_in(2, 30))] + [50 + r.below(50)], r.int_in(2, 5)
    if kind == "random":
        alpha = r.int_in(2, 6)
        return [r.below(alpha) for _ in range(r.int_in(4, 300 if r.chance(0.2) else 60))], r.int_in(2, 5)
    if kind == "periodic":
        period = r.int_in(1, 5)
        pat = r.distinct(0, 20, period)
        ctx = [pat[i % period] for i in range(r.int_in(period + 1, 40))]
        if r.chance(0.5):
            pos = r.below(len(ctx))
            ctx[pos] = 20 + r.below(5)  # one glitch: the counts are no longer unanimous
        return ctx, r.int_in(2, 5)
    raise AssertionError(kind)
