"""PCG32 against the published vectors of spec/pcg32.md and an independent port of the spec."""
import numpy as np
import pytest

from tinyllm.rng import DEFAULT_INITSEQ, Pcg32, stream

M64 = 2**64


class SpecPcg:
    """Written from spec/pcg32.md, not from rng.py: rotation as a 32-bit string slice."""

    def __init__(self, initstate, initseq):
        self.inc = (2 * initseq + 1) % M64
        self.state = 0
        self.u32()
        self.state = (self.state + initstate) % M64
        self.u32()

    def u32(self):
        old = self.state
        self.state = (old * 6364136223846793005 + self.inc) % M64
        x = ((old // 2**18 ^ old) // 2**27) % 2**32
        bits = format(x, "032b")
        r = old // 2**59
        return int(bits[32 - r:] + bits[:32 - r], 2)


def draws(g, n):
    return [g.next_u32() for _ in range(n)]


def test_published_vector_42_54():
    assert draws(Pcg32(42, 54), 6) == [0xA15C02B7, 0x7B47F409, 0xBA1D3330, 0x83D2F293, 0xBFA4784B, 0xCBED606E]


def test_published_vector_from_seed_42():
    want = [0xC2F57BD6, 0x6B07C4A9, 0x72B7B29B, 0x44215383, 0xF5AF5EAD, 0x68BEB632]
    assert draws(Pcg32.from_seed(42), 6) == want
    assert draws(stream(42), 6) == want


def test_from_seed_uses_the_reference_increment():
    assert (DEFAULT_INITSEQ << 1) | 1 == 1442695040888963407
    assert draws(Pcg32.from_seed(42), 4) == draws(Pcg32(42, DEFAULT_INITSEQ), 4)


def test_next_f64_is_two_u32_a_then_b():
    a, b = 0xC2F57BD6, 0x6B07C4A9  # the first two u32 of from_seed(42)
    want = ((a >> 5) * 2**26 + (b >> 6)) / 2**53  # exact: the numerator is below 2^53
    g = Pcg32.from_seed(42)
    assert g.next_f64() == want == 6859507194666770 / 9007199254740992
    assert g.next_u32() == 0x72B7B29B  # one uniform consumed exactly two u32


def test_n_uniforms_consume_2n_u32():
    ref = draws(Pcg32.from_seed(7), 21)
    for n in range(10):
        g = Pcg32.from_seed(7)
        for _ in range(n):
            u = g.next_f64()
            assert 0.0 <= u < 1.0
        assert g.next_u32() == ref[2 * n]


def test_uniform_extremes():
    class Fixed(Pcg32):
        __slots__ = ("vals",)

        def next_u32(self):
            return self.vals.pop(0)

    g = Fixed(0, 0)
    g.vals = [0xFFFFFFFF, 0xFFFFFFFF, 0, 0]
    assert g.next_f64() == 1 - 2**-53
    assert g.next_f64() == 0.0


@pytest.mark.parametrize("seed", [0, 1, 42, 2**32, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 2, 2**64 - 1])
def test_from_seed_matches_independent_port(seed):
    ind = SpecPcg(seed, 0xA02BDBF7BB3C0A7)
    assert draws(Pcg32.from_seed(seed), 8) == [ind.u32() for _ in range(8)]


def test_independent_port_reproduces_published_vectors():
    ind = SpecPcg(42, 54)
    assert [ind.u32() for _ in range(6)] == [0xA15C02B7, 0x7B47F409, 0xBA1D3330, 0x83D2F293, 0xBFA4784B, 0xCBED606E]


def test_initseq_top_bit_is_dropped():
    # inc = (initseq << 1) | 1 mod 2^64: initseq and initseq + 2^63 select the same stream
    assert draws(Pcg32(5, 3), 4) == draws(Pcg32(5, 3 + 2**63), 4)


def test_high_seeds_differ_from_their_low_halves():
    assert draws(Pcg32.from_seed(2**63), 4) != draws(Pcg32.from_seed(0), 4)
    assert draws(Pcg32.from_seed(2**64 - 1), 4) != draws(Pcg32.from_seed(2**63 - 1), 4)


def test_numpy_integer_seeds_are_python_ints():
    g = Pcg32(np.uint64(42), np.uint64(54))
    assert draws(g, 2) == [0xA15C02B7, 0x7B47F409]
    assert type(g.state) is int


@pytest.mark.parametrize("seed", [-1, 2**64, 2**70, 1.5, 42.0, "42", None])
def test_bad_seeds_refused(seed):
    with pytest.raises(ValueError, match="64-bit unsigned"):
        Pcg32.from_seed(seed)


@pytest.mark.parametrize("initseq", [-1, 2**64])
def test_bad_initseq_refused(initseq):
    with pytest.raises(ValueError):
        Pcg32(1, initseq)
