"""PCG32 (O'Neill's XSH-RR 64/32), normative in spec/pcg32.md.

Every request's generator is `Pcg32.from_seed(seed)` (or `stream(seed)`); one uniform in [0, 1)
costs exactly two u32 draws, so "how many uniforms were drawn" can be read off the next u32.
"""

import operator

MASK64 = (1 << 64) - 1
MULTIPLIER = 6364136223846793005  # the PCG reference multiplier for 64-bit state
# from_seed's stream selector: the PCG reference default increment 1442695040888963407 is
# (0xa02bdbf7bb3c0a7 << 1) | 1, so every request uses the reference stream.
DEFAULT_INITSEQ = 0xA02BDBF7BB3C0A7


class Pcg32:
    """A PCG32 generator; `state` and `inc` are 64-bit unsigned integers."""

    __slots__ = ("state", "inc")

    def __init__(self, initstate: int, initseq: int) -> None:
        try:  # any integer type (numpy's too) as a Python int; floats and strings are refused
            ok = all(0 <= operator.index(s) <= MASK64 for s in (initstate, initseq))
        except TypeError:
            ok = False
        if not ok:
            raise ValueError(f"Pcg32 seeds must be 64-bit unsigned integers, got {initstate!r}, {initseq!r}")
        initstate, initseq = operator.index(initstate), operator.index(initseq)
        self.state = 0
        self.inc = ((initseq << 1) | 1) & MASK64
        self._step()
        self.state = (self.state + initstate) & MASK64
        self._step()

    @classmethod
    def from_seed(cls, seed: int) -> "Pcg32":
        """The request generator for a 64-bit seed (the reference stream)."""
        return cls(seed, DEFAULT_INITSEQ)

    def _step(self) -> int:
        old = self.state
        self.state = (old * MULTIPLIER + self.inc) & MASK64
        return old

    def next_u32(self) -> int:
        old = self._step()
        xorshifted = (((old >> 18) ^ old) >> 27) & 0xFFFFFFFF
        rot = old >> 59
        return ((xorshifted >> rot) | (xorshifted << ((-rot) & 31))) & 0xFFFFFFFF

    def next_f64(self) -> float:
        """A uniform in [0, 1) with 53 random bits, from two u32 draws a then b."""
        a = self.next_u32() >> 5  # 27 bits
        b = self.next_u32() >> 6  # 26 bits
        return (a * 67108864.0 + b) / 9007199254740992.0  # (a * 2^26 + b) / 2^53


def stream(seed: int) -> Pcg32:
    """The generator of one request: `Pcg32.from_seed(seed)`."""
    return Pcg32.from_seed(seed)
