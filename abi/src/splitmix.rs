//! The one seeded generator of both sides.

/// SplitMix64 (Steele, Lea & Flood 2014): the one seeded generator of both sides. The guest
/// shuffles each round's blocks with it, the VMM replays that order and draws its bootstrap
/// resamples and synthetic test data from it: reproducibility from a seed, not secrecy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next value; the state advances by the golden-ratio increment.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// One step as a pure function of `z`: a well-mixed value from a counter.
    #[inline]
    pub fn mix(z: u64) -> u64 {
        SplitMix64(z).next_u64()
    }

    /// Uniform in [0, 1) (VMM side only: the guest has no floating point at CPL0).
    #[inline]
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..n` by multiply-high (no division).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::SplitMix64;

    #[test]
    fn splitmix64_matches_the_reference_sequence() {
        // The first outputs of Vigna's splitmix64.c from state 0.
        let mut g = SplitMix64(0);
        assert_eq!(g.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(g.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(SplitMix64::mix(0), 0xe220_a839_7b1d_cdaf);
        let mut g = SplitMix64(7);
        assert!((0..1000).all(|_| g.below(3) < 3 && (0.0..1.0).contains(&g.unit())));
    }
}
