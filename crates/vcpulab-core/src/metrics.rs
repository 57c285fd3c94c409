//! Counters-to-metrics helpers: a latency histogram and Jain's fairness index.

/// Log-linear histogram of nanosecond values: 128 linear sub-buckets per power of two,
/// so any percentile is within 1/128 (0.8%) of the true value. Count, sum and max are
/// exact. Fixed memory, deterministic, mergeable.
#[derive(Clone, Debug)]
pub struct Histogram {
    counts: Vec<u64>,
    pub count: u64,
    pub sum: u128,
    pub min: u64,
    pub max: u64,
}

const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: Vec::new(),
            count: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }
}

impl Histogram {
    #[inline]
    fn index(v: u64) -> usize {
        if v < SUB {
            v as usize
        } else {
            let exp = 63 - v.leading_zeros(); // >= SUB_BITS
            let shift = exp - SUB_BITS;
            let mant = (v >> shift) - SUB; // 0..SUB
            ((shift as u64 + 1) * SUB + mant) as usize
        }
    }
    /// Lower bound and width of a bucket.
    fn bucket_range(i: usize) -> (u64, u64) {
        let i = i as u64;
        if i < SUB {
            (i, 1)
        } else {
            let shift = i / SUB - 1;
            let mant = i % SUB;
            ((SUB + mant) << shift, 1 << shift)
        }
    }

    #[inline]
    pub fn record(&mut self, v: u64) {
        let i = Self::index(v);
        if i >= self.counts.len() {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += 1;
        self.count += 1;
        self.sum += v as u128;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    /// The value at quantile q (0..=1): the midpoint of the bucket holding it, clamped to
    /// the exact minimum and maximum.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        if rank == self.count {
            return self.max;
        }
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, w) = Self::bucket_range(i);
                return (lo + w / 2).clamp(self.min, self.max);
            }
        }
        self.max
    }

    pub fn clear(&mut self) {
        *self = Histogram::default();
    }

    /// Adds another histogram's values (same buckets, so exact).
    pub fn merge(&mut self, o: &Histogram) {
        if o.counts.len() > self.counts.len() {
            self.counts.resize(o.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
        self.count += o.count;
        self.sum += o.sum;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }
}

/// Jain's fairness index of the allocations: (sum x)^2 / (n * sum x^2), 1.0 = equal.
pub fn jain(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let s: f64 = xs.iter().sum();
    let s2: f64 = xs.iter().map(|x| x * x).sum();
    if s2 == 0.0 {
        return None;
    }
    Some(s * s / (xs.len() as f64 * s2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_within_one_percent() {
        let mut h = Histogram::default();
        for v in 1..=100_000u64 {
            h.record(v * 1000);
        }
        for q in [0.5, 0.9, 0.99] {
            let want = q * 100_000.0 * 1000.0;
            let got = h.quantile(q) as f64;
            assert!((got - want).abs() / want < 0.01, "q{q}: {got} vs {want}");
        }
        assert_eq!(h.max, 100_000_000);
        assert_eq!(h.quantile(1.0), 100_000_000);
    }

    #[test]
    fn percentiles_stay_within_min_and_max() {
        let mut h = Histogram::default();
        for _ in 0..10 {
            h.record(1_003_000);
        }
        assert_eq!(h.quantile(0.5), 1_003_000);
        assert_eq!(h.quantile(0.99), 1_003_000);
    }

    #[test]
    fn small_values_are_exact() {
        let mut h = Histogram::default();
        for v in [3, 3, 5, 100] {
            h.record(v);
        }
        assert_eq!(h.quantile(0.5), 3);
        assert_eq!(h.quantile(0.75), 5);
    }

    #[test]
    fn jain_index() {
        assert_eq!(jain(&[1.0, 1.0, 1.0]), Some(1.0));
        let j = jain(&[1.0, 0.0]).unwrap();
        assert!((j - 0.5).abs() < 1e-12);
        assert_eq!(jain(&[]), None);
    }
}
