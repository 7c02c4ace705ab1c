"""Feedback wording shared by every chapter (issue 26, item 4): a call shown with its input, literally and
abbreviated, and a comparison that never reads "expected X, got X".

- `shown(value)`: a value as repr() writes it (strings quoted and escaped as repr escapes them), each
  sequence longer than `items` cut to its head and tail with the count left out named in the middle:
  `[5, 6, 7, 8, ... 92 more ..., 4, 5, 6, 7]`; nested sequences are cut the same way at each level (a sequence
  type with `brackets`, e.g. ("vec![", "]"), is written between them: a language's spelling of a list).
- `call_text(name, args)`: `lookup([5, 6, 7, 8, 5, 6], k=3, n=3)`: the first
  argument positional, the rest by keyword, each value `shown` in about WIDTH characters (`brief`).
- `where_differ(want, got)`: where two values differ in words ("yours has 38 items, 2 fewer than 40", "item 3 is
  4.0 (float), not 4 (int)"), "" when they are the same value of the same type.
- `expected_got(want, got)`: "expected W, got G", and, when W and G print alike, where they differ; other
  views of the answer (what a listener heard) that differ from W are named after it.
"""

from collections.abc import Callable, Mapping

ITEMS = 12  # a sequence longer than this is shown as its first and last ITEMS // 2 items
DEPTH = 4  # nesting shown before `...`
WIDTH = 160  # characters an argument of a call takes, about: longer ones are cut to fewer items


class Bare(str):
    """A text shown as is (no quotes): a handle's or an object's name standing for a value."""

    def __repr__(self) -> str:
        return str(self)


def shown(value, items: int = ITEMS, depth: int = DEPTH) -> str:
    """`value` as repr() writes it, long sequences cut at each level (naming how many items were left out)."""
    if isinstance(value, (list, tuple)):
        if depth <= 0:
            return "[...]" if isinstance(value, list) else "(...)"
        open_, close = getattr(value, "brackets", None) or (("[", "]") if isinstance(value, list) else ("(", ")"))
        inner = max(2, items // 2)  # a row of rows: fewer items each
        cut = len(value) > items + 1  # leaving out one item would save nothing
        each = [shown(v, inner, depth - 1) for v in (value if not cut else
                                                     (*value[:items // 2], *value[len(value) - items // 2:]))]
        if cut:
            half = items // 2
            each = [*each[:half], f"... {len(value) - 2 * half} more ...", *each[half:]]
        if isinstance(value, tuple) and len(value) == 1:
            each[0] += ","
        return open_ + ", ".join(each) + close
    if isinstance(value, Mapping):
        if depth <= 0:
            return "{...}"
        pairs = list(value.items())
        body = [f"{shown(k, items, depth - 1)}: {shown(v, max(2, items // 2), depth - 1)}" for k, v in pairs[:items]]
        if len(pairs) > items:
            body.append(f"... {len(pairs) - items} more")
        return "{" + ", ".join(body) + "}"
    return repr(value)


def brief(value, width: int = WIDTH, items: int = ITEMS) -> str:
    """`value` shown in about `width` characters: sequences cut to fewer items until it fits (2 at least)."""
    text = shown(value, items)
    while len(text) > width and items > 2:
        items = max(2, items // 2)
        text = shown(value, items)
    return text


def call_text(name: str, args: Mapping, width: int = WIDTH) -> str:
    """`name(first, key=value, ...)`: how the call looked, each value `brief` (an integer key: positional)."""
    parts = [brief(v, width) if i == 0 or isinstance(k, int) else f"{k}={brief(v, width)}"
             for i, (k, v) in enumerate(args.items())]
    return f"{name}({', '.join(parts)})"


def _kind(value) -> str:
    t = type(value)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _same(a, b) -> bool:
    """The same value of the same type, item by item (NaN the same as NaN: it prints alike and is no difference)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    try:
        return bool(a == b) or (a != a and b != b)
    except (TypeError, ValueError):  # an array: == is elementwise
        return False


def where_differ(want, got, items: int = ITEMS, whose: str = "yours") -> str:
    """Where `got` differs from `want`, in words ("" when it is the same value of the same type): the type,
    the length (and the first item that differs), the first key or item that differs, or the exact values."""
    if _same(want, got):
        return ""
    if type(want) is not type(got):
        if isinstance(want, (list, tuple)) and isinstance(got, (list, tuple)) and list(want) == list(got):
            return f"{whose} is a {_kind(got)}, not a {_kind(want)}"
        if not (isinstance(want, (list, tuple, Mapping)) and isinstance(got, (list, tuple, Mapping))):
            return f"{whose} is {got!r} ({_kind(got)}), not {want!r} ({_kind(want)})"
    if isinstance(want, (list, tuple)) and isinstance(got, (list, tuple)):
        first = next((i for i, (a, b) in enumerate(zip(want, got)) if not _same(a, b)), None)
        at = f"item {first}: {where_differ(want[first], got[first], items, whose)}" if first is not None else ""
        if len(want) != len(got):
            fewer = f"{len(want) - len(got)} fewer" if len(got) < len(want) else f"{len(got) - len(want)} more"
            tail = f"; first difference at {at}" if at else (
                f"; the first {min(len(want), len(got))} are the same" if min(len(want), len(got)) else "")
            return f"{whose} has {len(got)} items, {fewer} than {len(want)}{tail}"
        return at
    if isinstance(want, Mapping) and isinstance(got, Mapping):
        if set(want) != set(got):
            missing, extra = [k for k in want if k not in got], [k for k in got if k not in want]
            return "; ".join(s for s in (f"{whose} lacks {shown(missing, items)}" if missing else "",
                                         f"{whose} has {shown(extra, items)} too" if extra else "") if s)
        key = next(k for k in want if not _same(want[k], got[k]))
        return f"at {key!r}: {where_differ(want[key], got[key], items, whose)}"
    return f"{whose} is {got!r}, not {want!r}"


def expected_got(want, got, show: Callable = shown, sep: str = ", got ", also: Mapping | None = None,
                 also_sep: str = "; ") -> str:
    """`expected W, got G` (sep: what joins them, e.g. "\\n  got      "), with where they differ when W and G
    print alike; each of `also` (a label such as "the listener heard" -> a value) that differs from `want` is
    named after it (also_sep before it) with where it differs."""
    w, g = show(want), show(got)
    text = f"expected {w}{sep}{g}"
    if w == g and not _same(want, got):
        text += f" (they print alike; {where_differ(want, got)})"
    for label, value in (also or {}).items():
        if not _same(want, value):
            text += f"{also_sep}{label} {show(value)} ({where_differ(want, value, whose='that')})"
    return text
