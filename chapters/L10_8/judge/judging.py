"""Helpers the chapter tests use to judge plain data and to word their failures for a student."""

from contextlib import contextmanager

from harness.pack import Raised, expected_got

from ..spelling import Spelling


def short(xs, n: int = 12) -> str:
    xs = list(xs)
    body = " ".join(str(x) for x in xs[:n])
    return f"[{body}{' ...' if len(xs) > n else ''}] ({len(xs)} items)" if len(xs) > n else f"[{body}]"


def tokens_differ(want, got, heard=None) -> str:
    """Two token streams on two lines (`short`, 40 shown), saying where they differ when they print alike, and
    what the listener heard (`heard`) when that is not `want`: never "expected X, got X"."""
    also = {"heard   ": heard} if heard is not None else None
    return "\n  " + expected_got(want, got, lambda xs: short(xs, 40), sep="\n  got      ", also=also, also_sep="\n  ")


def uniforms_drawn(ref, seed: int, next_u32: int, limit: int = 256) -> str:
    """How many uniforms (two u32 each) were drawn before `next_u32` came out of Pcg32.from_seed(seed)."""
    rng = ref.module("rng").Pcg32.from_seed(seed)
    for n in range(limit):
        if rng.next_u32() == next_u32:
            return f"{n // 2} uniforms" if n % 2 == 0 else f"{n / 2} uniforms (an odd number of u32 draws)"
    return f"not within {limit // 2} uniforms"


@contextmanager
def case(label: str):
    """Name the case in any exception the implementation raises inside the block."""
    try:
        yield
    except Raised as e:
        if not e.not_implemented:  # "not implemented: f" is one line, whichever case reached it
            e.args = (f"{label}: {e.args[0]}",)
        raise


def must_refuse(fn, what: str, spell: Spelling = Spelling()) -> str | None:
    """None when fn raised the module's SpecError; otherwise what went wrong, in words (what it returned as `spell`,
    the student's language, writes it)."""
    try:
        got = fn()
    except Raised as e:
        if e.spec_error:
            return None
        if e.not_implemented or e.import_failed:
            raise
        return f"{what}: raised {e.type} ({e.message}) instead of SpecError"
    return f"{what}: accepted it and returned {repr(spell.value(got))[:120]} instead of raising SpecError"
