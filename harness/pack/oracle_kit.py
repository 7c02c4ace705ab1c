"""What every chapter's oracle (golden-fixture generator) shares; it knows no chapter and no reference.

    splitmix64, Rand   seeded randomness: one generator per (master seed, section, case index)
    f32                a number rounded to float32, held exactly as a float64
    exact_logprob      x[t] - logsumexp(x), correctly rounded: the same bits on every CPU
    enc                the compact canonical JSON encoding of one value
    Layout, dumps      a canonical document: fixed key order, one case per line, a trailing newline
    first_diff         the path of the first difference between two JSON values
    describe_difference  which case and field of a file differ first from a fresh build
    recorded_seed      the master seed a golden file says it was built from

A chapter's oracle supplies its generator class (the reference's PCG, passed to Rand) and its
Layout (which top-level keys are sections of cases, and the key order of everything).
"""

from __future__ import annotations

import decimal
import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

MASK64 = (1 << 64) - 1  # seeds and generator states are unsigned 64-bit integers


# ---- seeded randomness ---------------------------------------------------------------------------

def splitmix64(x: int) -> int:
    """One step of splitmix64 (Steele, Lea and Flood): a 64-bit mix in which every input bit moves every output bit."""
    x = (x + 0x9E3779B97F4A7C15) & MASK64  # the algorithm's increment, 2^64 / golden ratio
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64  # the algorithm's two published multipliers
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


STREAM_TWEAK = 0x5EED  # xored into a case's state seed to derive its stream selector, so the two differ


def case_seed(master_seed: int, section_code: int, index: int) -> int:
    """The state seed of case `index` of a section: a splitmix64 chain over the three numbers."""
    return splitmix64(splitmix64(splitmix64(master_seed) ^ section_code) ^ index)


class Rand:
    """The case generator of one case: a `pcg32(state, stream)` seeded from (master seed, section, index).

    `pcg32` is the chapter reference's generator class (anything with next_u32 and next_f64), so
    the cases draw with the same generator the chapter teaches, and nothing else is random.
    """

    def __init__(self, pcg32: Callable[[int, int], Any], master_seed: int, section_code: int, index: int) -> None:
        s = case_seed(master_seed, section_code, index)
        self.g = pcg32(s, splitmix64(s ^ STREAM_TWEAK))

    def u32(self) -> int:
        return self.g.next_u32()

    def u64(self) -> int:
        return (self.u32() << 32) | self.u32()

    def below(self, n: int) -> int:
        """Uniform integer in [0, n), unbiased (draws past the last whole multiple of n are redrawn)."""
        assert 1 <= n <= 1 << 32
        limit = ((1 << 32) // n) * n
        while True:
            x = self.u32()
            if x < limit:
                return x % n

    def int_in(self, lo: int, hi: int) -> int:
        """Uniform integer in [lo, hi], both ends included."""
        return lo + self.below(hi - lo + 1)

    def uniform(self) -> float:
        return self.g.next_f64()

    def chance(self, p: float) -> bool:
        return self.uniform() < p

    def choice(self, seq: Sequence):
        return seq[self.below(len(seq))]

    def shuffle(self, xs: list) -> list:
        """Fisher-Yates, in place; returns xs."""
        for i in range(len(xs) - 1, 0, -1):
            j = self.below(i + 1)
            xs[i], xs[j] = xs[j], xs[i]
        return xs

    def distinct(self, lo: int, hi: int, k: int) -> list[int]:
        """k distinct integers from [lo, hi), in random order."""
        pool = list(range(lo, hi))
        self.shuffle(pool)
        return pool[:k]

    def gauss(self) -> float:
        """Irwin-Hall: four uniforms minus 2 (mean 0, variance 1/3, support [-2, 2]); plain float64 sums,
        so exact on every platform."""
        return self.uniform() + self.uniform() + self.uniform() + self.uniform() - 2.0

    def weighted(self, items: Sequence[int], weights: Sequence[float]) -> int:
        """One item with probability proportional to its weight (uniformly when no weight is positive)."""
        total = 0.0
        for w in weights:  # summed in order, not with sum(): the same float on every platform
            total += w
        if total <= 0.0:
            return self.choice(items)
        u = self.uniform() * total
        acc = 0.0
        for it, w in zip(items, weights):
            acc += w
            if acc > u:
                return it
        return items[-1]


def f32(x: float) -> float:
    """The float32 nearest x, as the float64 that holds it exactly."""
    return float(np.float32(x))


# exact_logprob works in decimal arithmetic (the standard library's libmpdec: integer arithmetic, the
# same digits on every machine) because numpy's and the C library's exp and log are chosen by the CPU
# and differ in the last bit between vector units: a golden file written with them is reproducible only
# on one kind of CPU.
_EXACT = decimal.Context(prec=50, rounding=decimal.ROUND_HALF_EVEN, Emin=-999999, Emax=999999)
_NEGLIGIBLE = -130  # exp(-130) < 4e-57: terms further below the maximum do not reach the 50th digit


def exact_logprob(x: Sequence[float], token: int) -> float:
    """x[token] - ln(sum_i exp(x[i])) over finite float64 logits (-inf terms are 0), computed to 50
    significant digits and rounded once to the nearest float64: the correctly rounded logprob (but in a
    case within 1e-50 of a rounding boundary), the same bits on every CPU."""
    xs = [float(v) for v in x]
    assert not any(math.isnan(v) or v == math.inf for v in xs) and xs[token] != -math.inf, "exact_logprob: finite logits"
    m = max(xs)
    dm = decimal.Decimal(m)
    total = decimal.Decimal(0)
    for v in xs:
        if v - m >= _NEGLIGIBLE:  # a float64 comparison of exact inputs: the same choice everywhere
            total = _EXACT.add(total, _EXACT.exp(_EXACT.subtract(decimal.Decimal(v), dm)))
    lp = _EXACT.subtract(_EXACT.subtract(decimal.Decimal(xs[token]), dm), _EXACT.ln(total))
    return float(lp)


# ---- canonical JSON --------------------------------------------------------------------------------

def enc(value: Any) -> str:
    """One value as compact canonical JSON: no spaces, ASCII only, no NaN or infinity."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def _as_is(section: str, key: str, value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Layout:
    """The key order of a golden document; a top-level key listed in `case_keys` is a section of cases.

    sub_keys[section][key] is the key order of an object-valued case field (written in that order);
    prepare(section, key, value) turns any other case field into its JSON value (e.g. -inf as a string).
    """

    top_keys: tuple[str, ...]
    case_keys: Mapping[str, tuple[str, ...]]
    sub_keys: Mapping[str, Mapping[str, tuple[str, ...]]] = field(default_factory=dict)
    prepare: Callable[[str, str, Any], Any] = _as_is

    def subs(self, section: str) -> Mapping[str, tuple[str, ...]]:
        return self.sub_keys.get(section, {})


def _field(layout: Layout, section: str, key: str, value: Any) -> str:
    order = layout.subs(section).get(key)
    if order is None:
        return enc(layout.prepare(section, key, value))
    assert set(value) == set(order), (key, sorted(value))
    return "{" + ",".join(f"{enc(k)}:{enc(value[k])}" for k in order) + "}"


def case_fields(layout: Layout, section: str, case: dict) -> list[tuple[str, str]]:
    """(key, encoded value) of every field of a case, in the layout's order."""
    keys = layout.case_keys[section]
    assert set(case) == set(keys), (section, sorted(case))
    return [(k, _field(layout, section, k, case[k])) for k in keys]


def case_line(layout: Layout, section: str, case: dict) -> str:
    return "{" + ",".join(f"{enc(k)}:{v}" for k, v in case_fields(layout, section, case)) + "}"


def dumps(layout: Layout, doc: dict) -> bytes:
    """Canonical bytes: the layout's key order, no spaces, one case per line, a trailing newline."""
    assert set(doc) == set(layout.top_keys), sorted(doc)
    lines = ["{"]
    for n, key in enumerate(layout.top_keys):
        comma = "" if n == len(layout.top_keys) - 1 else ","
        if key in layout.case_keys:
            cases = doc[key]
            lines.append(f"{enc(key)}:[")
            lines += [case_line(layout, key, c) + ("," if m < len(cases) - 1 else "") for m, c in enumerate(cases)]
            lines.append("]" + comma)
        else:
            lines.append(f"{enc(key)}:{enc(doc[key])}" + comma)
    lines.append("}")
    return ("\n".join(lines) + "\n").encode("ascii")


def recorded_seed(data: bytes, default: int) -> int:
    """The `master_seed` a golden file records, or `default` when it cannot be read as one."""
    try:
        seed = json.loads(data)["master_seed"]
    except Exception:  # noqa: BLE001  (an unreadable file is compared against the default seed)
        return default
    if isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed <= MASK64:
        return seed
    return default


# ---- comparison --------------------------------------------------------------------------------------

def first_diff(a: Any, b: Any, where: str = "") -> str | None:
    """The path (`.key`, `[n]`) of the first place two JSON values differ, or None when they are equal."""
    if type(a) is not type(b):
        return where
    if isinstance(a, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                return f"{where}.{k}"
            d = first_diff(a[k], b[k], f"{where}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        for n, (x, y) in enumerate(zip(a, b)):
            d = first_diff(x, y, f"{where}[{n}]")
            if d:
                return d
        return f"{where} (length {len(a)} != {len(b)})" if len(a) != len(b) else None
    return None if a == b else where


def _line_owners(layout: Layout, doc: dict) -> list[tuple[str | None, dict | None]]:
    """(section or top key, case or None) for every line of dumps(layout, doc), in order."""
    owners: list[tuple[str | None, dict | None]] = [(None, None)]  # the opening brace
    for key in layout.top_keys:
        if key in layout.case_keys:
            owners += [(key, None)] + [(key, c) for c in doc[key]] + [(key, None)]
        else:
            owners.append((key, None))
    return owners + [(None, None), (None, None)]  # the closing brace, the empty text after the last newline


def describe_difference(layout: Layout, doc: dict, have: bytes, label: str) -> str | None:
    """None when `have` is dumps(layout, doc) byte for byte; else which line, case and field differ first."""
    want = dumps(layout, doc)
    if have == want:
        return None
    hl, wl = have.split(b"\n"), want.split(b"\n")
    owners = _line_owners(layout, doc)
    for n, w in enumerate(wl):
        h = hl[n] if n < len(hl) else None
        if h == w:
            continue
        section, case = owners[n] if n < len(owners) else (None, None)
        if case is None or section is None:
            return f"{label}: line {n + 1} differs outside the cases (section or field {section!r}): " \
                   f"expected {w[:80]!r}, found {(h or b'')[:80]!r}"
        return f"{label}: case {case['id']} ({section}) differs first in field {differing_field(layout, section, case, h)}"
    return f"{label}: {len(hl)} lines, expected {len(wl)}"


def differing_field(layout: Layout, section: str, case: dict, have_line: bytes | None) -> str:
    """The first field (`key` or `key.sub`) in which a file's line differs from the case's canonical line."""
    if have_line is None:
        return "(line missing)"
    text = have_line.decode("utf-8", "replace").rstrip(",")
    line = case_line(layout, section, case)
    try:
        d = first_diff(json.loads(line), json.loads(text))
        if d:
            return d.lstrip(".")
    except ValueError:
        pass
    # not parseable (or equal as JSON but spelled differently): find the field holding the first differing byte
    pos = next((n for n, (x, y) in enumerate(zip(line, text)) if x != y), min(len(line), len(text)))
    return _field_at(layout, section, case, pos)


def _field_at(layout: Layout, section: str, case: dict, pos: int) -> str:
    """The field of case_line(layout, section, case) that holds character `pos`."""
    fields = case_fields(layout, section, case)
    off = 1  # past the opening brace
    for k, v in fields:
        start = off + len(enc(k)) + 1  # past `"key":`, where the value begins
        end = start + len(v)
        if pos < end:
            order = layout.subs(section).get(k)
            sub = _sub_key_at(order, case[k], start + 1, pos) if order is not None and pos > start else None
            return k if sub is None else f"{k}.{sub}"
        off = end + 1  # past the comma
    return fields[-1][0]


def _sub_key_at(order: tuple[str, ...], value: dict, off: int, pos: int) -> str | None:
    """The key of an object field (written from `off` on) holding character `pos`; None: its closing brace."""
    for sk in order:
        end = off + len(enc(sk)) + 1 + len(enc(value[sk]))
        if pos < end:
            return sk
        off = end + 1
    return None
