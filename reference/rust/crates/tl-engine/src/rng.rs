//! PCG32 (O'Neill's XSH-RR 64/32), normative in spec/pcg32.md; the port of `tinyllm/rng.py`.
//!
//! Every request's generator is `Pcg32::from_seed(seed)` (or `stream(seed)`); one uniform in
//! [0, 1) costs exactly two u32 draws, so "how many uniforms were drawn" can be read off the next
//! u32. All arithmetic is on u64 modulo 2^64 (wrapping), as the spec says.

/// The PCG reference multiplier for 64-bit state.
pub const MULTIPLIER: u64 = 6364136223846793005;
/// `from_seed`'s stream selector: the PCG reference default increment 1442695040888963407 is
/// `(DEFAULT_INITSEQ << 1) | 1`, so every request uses the reference stream.
pub const DEFAULT_INITSEQ: u64 = 0x0a02_bdbf_7bb3_c0a7;

/// A PCG32 generator: 64 bits of state and an odd increment that selects the stream.
#[derive(Debug, Clone)]
pub struct Pcg32 {
    state: u64,
    inc: u64,
}

impl Pcg32 {
    /// Seeded exactly as the PCG reference `pcg32_srandom_r` (spec/pcg32.md section 3). Every u64
    /// is a valid argument: the top bit of `initseq` is lost in the shift, as in the reference.
    pub fn new(initstate: u64, initseq: u64) -> Pcg32 {
        let mut g = Pcg32 { state: 0, inc: (initseq << 1) | 1 };
        g.step(); // output discarded
        g.state = g.state.wrapping_add(initstate);
        g.step(); // output discarded
        g
    }

    /// The request generator for a 64-bit seed: `new(seed, DEFAULT_INITSEQ)`.
    pub fn from_seed(seed: u64) -> Pcg32 {
        Pcg32::new(seed, DEFAULT_INITSEQ)
    }

    /// Advance the LCG and return the OLD state (the output is computed from it).
    fn step(&mut self) -> u64 {
        let old = self.state;
        self.state = old.wrapping_mul(MULTIPLIER).wrapping_add(self.inc);
        old
    }

    /// The next 32 random bits: xorshift the old state high, then rotate by its top 5 bits.
    pub fn next_u32(&mut self) -> u32 {
        let old = self.step();
        let xorshifted = (((old >> 18) ^ old) >> 27) as u32; // keep the low 32 bits
        let rot = (old >> 59) as u32; // 0..31
        xorshifted.rotate_right(rot) // (x >> rot) | (x << ((32 - rot) & 31)), rot 0 included
    }

    /// A uniform in [0, 1) with 53 random bits, from two u32 draws: `a` first, then `b`.
    pub fn next_f64(&mut self) -> f64 {
        let a = self.next_u32() >> 5; // top 27 bits, drawn first
        let b = self.next_u32() >> 6; // top 26 bits, drawn second
        (a as f64 * 67108864.0 + b as f64) / 9007199254740992.0 // (a * 2^26 + b) / 2^53, exact
    }
}

/// The generator of one request: `Pcg32::from_seed(seed)`.
pub fn stream(seed: u64) -> Pcg32 {
    Pcg32::from_seed(seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_vectors_of_the_demo_seeding() {
        let mut g = Pcg32::new(42, 54);
        let got: Vec<u32> = (0..6).map(|_| g.next_u32()).collect();
        assert_eq!(got, [0xa15c02b7, 0x7b47f409, 0xba1d3330, 0x83d2f293, 0xbfa4784b, 0xcbed606e]);
    }

    #[test]
    fn published_vectors_of_from_seed() {
        let mut g = Pcg32::from_seed(42);
        let got: Vec<u32> = (0..6).map(|_| g.next_u32()).collect();
        assert_eq!(got, [0xc2f57bd6, 0x6b07c4a9, 0x72b7b29b, 0x44215383, 0xf5af5ead, 0x68beb632]);
        let mut s = stream(42);
        assert_eq!(s.next_u32(), 0xc2f57bd6, "stream(seed) is from_seed(seed)");
    }

    #[test]
    fn first_uniform_of_from_seed_42() {
        let mut g = Pcg32::from_seed(42);
        let u = g.next_f64();
        assert_eq!(u, 6859507194666770.0 / 9007199254740992.0);
        assert_eq!(u, 0.7615582825100964);
        assert_eq!(g.next_u32(), 0x72b7b29b, "one uniform is two u32: the next is the third of the stream");
    }

    #[test]
    fn edge_seeds_are_valid() {
        for seed in [0u64, 1 << 63, u64::MAX] {
            let mut g = Pcg32::from_seed(seed);
            let u = g.next_f64();
            assert!((0.0..1.0).contains(&u));
        }
        // the top bit of initseq is lost in the shift: both select the same stream
        let (mut a, mut b) = (Pcg32::new(7, 54), Pcg32::new(7, 54 | (1 << 63)));
        assert_eq!(a.next_u32(), b.next_u32());
    }

    #[test]
    fn hand_seed_first_u32() {
        // the chapter's greedy hand example leaves the generator untouched: its next u32 is this
        assert_eq!(Pcg32::from_seed(12345).next_u32(), 1411482639);
    }
}
