//! Seeded random streams.
//!
//! Every component that draws random numbers owns a `Rng` derived from the run seed and a
//! label path naming the component (for example `["vm", "web", "workload", "0", "thread",
//! "3"]`). Streams are therefore independent of each other and of the order in which
//! components are created: adding a VM does not change the draws of another VM.
//!
//! The generator is SplitMix64 (Steele, Lea and Flood, 2014), the same generator as the
//! reference programs in `shared/bench/rr-overcommit`: 64 bits of state, one add and a
//! mixing function per draw, and well-distributed outputs for simulation use.

#[derive(Clone, Debug)]
pub struct Rng(u64);

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a over bytes: a stable hash for labels (std's hasher is randomised per process).
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl Rng {
    /// A raw stream starting from `state` (as the reference programs seed their streams).
    pub fn from_state(state: u64) -> Rng {
        Rng(state)
    }

    /// The stream of the component named by `labels` in a run seeded with `seed`.
    pub fn derive(seed: u64, labels: &[&str]) -> Rng {
        let mut state = mix(seed.wrapping_add(GOLDEN));
        for label in labels {
            state = mix(state ^ fnv1a(label.as_bytes()).wrapping_add(GOLDEN));
        }
        Rng(state)
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        mix(self.0)
    }

    /// Uniform in (0, 1]: never 0, so `ln` is always finite.
    #[inline]
    pub fn uniform_open0(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 * (1.0 / 9_007_199_254_740_992.0)
    }

    /// Uniform in [0, n).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        // Lemire's multiply-shift; the tiny bias is irrelevant for simulation choices.
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Exponential with the given mean.
    #[inline]
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * self.uniform_open0().ln()
    }

    /// Standard normal (Box-Muller; one of the pair is discarded to keep the stream simple).
    pub fn std_normal(&mut self) -> f64 {
        let u1 = self.uniform_open0();
        let u2 = self.uniform_open0();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_streams_depend_only_on_their_labels() {
        let a1 = Rng::derive(7, &["vm", "a"]).next_u64();
        let _other = Rng::derive(7, &["vm", "b"]).next_u64();
        let a2 = Rng::derive(7, &["vm", "a"]).next_u64();
        assert_eq!(a1, a2);
        assert_ne!(a1, Rng::derive(8, &["vm", "a"]).next_u64());
        assert_ne!(a1, Rng::derive(7, &["vm", "b"]).next_u64());
        // Label boundaries matter: ["ab"] and ["a", "b"] are different components.
        assert_ne!(
            Rng::derive(7, &["ab"]).next_u64(),
            Rng::derive(7, &["a", "b"]).next_u64()
        );
    }

    #[test]
    fn exponential_mean_is_close() {
        let mut r = Rng::derive(1, &["t"]);
        let n = 200_000;
        let mean: f64 = (0..n).map(|_| r.exp(2.0)).sum::<f64>() / n as f64;
        assert!((mean - 2.0).abs() < 0.03, "mean {mean}");
    }

    #[test]
    fn matches_reference_splitmix() {
        // First output of SplitMix64 seeded with 0 (published test vector).
        assert_eq!(Rng::from_state(0).next_u64(), 0xE220_A839_7B1D_CDAF);
    }
}
