//! Seedable pseudo-random numbers shared by parameter init, dropout masks and loaders.
//!
//! A small, deterministic generator (SplitMix64 seeding a xoshiro256** state) so that a
//! seed gives the same numbers natively and in wasm, with no OS entropy needed.

/// Deterministic random number generator.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator whose whole sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        let mut z = seed;
        let mut next = || {
            z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut x = z;
            x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            x ^ (x >> 31)
        };
        Rng { s: [next(), next(), next(), next()] }
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 * (1.0 / (1u64 << 24) as f32)
    }

    /// Uniform in [lo, hi).
    pub fn uniform_range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.uniform()
    }

    /// Uniform integer in [0, n). `n` must be positive.
    pub fn below(&mut self, n: usize) -> usize {
        assert!(n > 0, "Rng::below needs n > 0");
        (((self.next_u64() >> 11) as u128 * n as u128) >> 53) as usize
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f32 {
        let u1 = ((self.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        let u2 = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
    }

    /// Fills `out` with uniform draws in [lo, hi), in order (as many [`Rng::uniform_range`]
    /// calls). The caller allocates `out` (fallibly, for sizes a user chose), so nothing is
    /// allocated while a shared generator is borrowed.
    pub fn fill_uniform(&mut self, out: &mut [f32], lo: f32, hi: f32) {
        for x in out {
            *x = self.uniform_range(lo, hi);
        }
    }

    /// Fills `out` with standard normal draws, in order (as many [`Rng::normal`] calls).
    pub fn fill_normal(&mut self, out: &mut [f32]) {
        for x in out {
            *x = self.normal();
        }
    }

    /// True with probability `p`.
    pub fn bernoulli(&mut self, p: f32) -> bool {
        self.uniform() < p
    }

    /// `n` draws true with probability `p` each (a dropout mask): two 24-bit uniforms per
    /// 64-bit output (its top and its low-middle 24 bits; xoshiro256**'s bits are all
    /// usable), so half the generator steps of `n` calls to [`Rng::bernoulli`].
    pub fn bernoulli_mask(&mut self, n: usize, p: f32) -> Vec<bool> {
        // k / 2^24 < p  ⇔  k < p · 2^24, with both sides exact in f32
        let threshold = p * (1u32 << 24) as f32;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n / 2 {
            let x = self.next_u64();
            out.push(((x >> 40) as f32) < threshold);
            out.push((((x >> 8) & 0xFF_FFFF) as f32) < threshold);
        }
        if n % 2 == 1 {
            out.push(((self.next_u64() >> 40) as f32) < threshold);
        }
        out
    }

    /// Fisher-Yates shuffle in place.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }

    /// A random permutation of 0..n.
    pub fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut p: Vec<usize> = (0..n).collect();
        self.shuffle(&mut p);
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
    }

    #[test]
    fn uniform_mean_and_range() {
        let mut r = Rng::new(3);
        let n = 100_000;
        let mut sum = 0.0f64;
        for _ in 0..n {
            let u = r.uniform();
            assert!((0.0..1.0).contains(&u));
            sum += u as f64;
        }
        assert!((sum / n as f64 - 0.5).abs() < 0.01);
    }

    #[test]
    fn bernoulli_mask_has_the_rate_and_no_pattern_between_its_halves() {
        let mut r = Rng::new(5);
        for p in [0.0, 0.1, 0.5, 0.9, 1.0] {
            let m = r.bernoulli_mask(100_001, p);
            assert_eq!(m.len(), 100_001);
            let rate = m.iter().filter(|&&b| b).count() as f64 / m.len() as f64;
            assert!((rate - p as f64).abs() < 0.006, "p {p}: rate {rate}");
            // the two draws taken from one generator output are independent
            let (mut both, mut first) = (0usize, 0usize);
            for pair in m.chunks_exact(2) {
                first += pair[0] as usize;
                both += (pair[0] && pair[1]) as usize;
            }
            if first > 0 {
                let cond = both as f64 / first as f64;
                assert!((cond - p as f64).abs() < 0.012, "p {p}: P(second | first) = {cond}");
            }
        }
    }

    #[test]
    fn fills_draw_the_same_sequence_as_single_calls() {
        let (mut a, mut b) = (Rng::new(9), Rng::new(9));
        let mut u = [0f32; 5];
        a.fill_uniform(&mut u, -2.0, 3.0);
        let single: Vec<f32> = (0..5).map(|_| b.uniform_range(-2.0, 3.0)).collect();
        assert_eq!(u.to_vec(), single);
        let mut n = [0f32; 4];
        a.fill_normal(&mut n);
        let single: Vec<f32> = (0..4).map(|_| b.normal()).collect();
        assert_eq!(n.to_vec(), single);
        assert_eq!(a.next_u64(), b.next_u64());
    }

    #[test]
    fn permutation_is_a_permutation() {
        let mut r = Rng::new(11);
        let mut p = r.permutation(1000);
        assert_ne!(p, (0..1000).collect::<Vec<_>>());
        p.sort_unstable();
        assert_eq!(p, (0..1000).collect::<Vec<_>>());
        let mut counts = [0usize; 4];
        for _ in 0..40_000 {
            counts[r.below(4)] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
    }
}
