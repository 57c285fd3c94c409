//! Simulated time: integer nanoseconds.
//!
//! `SimTime` is an instant since the start of the run, `SimDuration` a span. Both are
//! `u64` nanoseconds, so a run of 584 years fits and no floating-point rounding can make
//! two events swap places.

use std::fmt;
use std::ops::{Add, AddAssign, Div, Mul, MulAssign, Rem, Sub};

/// An instant, in nanoseconds since the start of the simulated run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimTime(pub u64);

/// A span of simulated time, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimDuration(pub u64);

pub const NS_PER_US: u64 = 1_000;
pub const NS_PER_MS: u64 = 1_000_000;
pub const NS_PER_S: u64 = 1_000_000_000;

impl SimTime {
    pub const ZERO: SimTime = SimTime(0);
    pub const MAX: SimTime = SimTime(u64::MAX);
    #[inline]
    pub fn ns(self) -> u64 {
        self.0
    }
    #[inline]
    pub fn since(self, earlier: SimTime) -> SimDuration {
        SimDuration(self.0.saturating_sub(earlier.0))
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / NS_PER_S as f64
    }
    /// The first whole multiple of `period` strictly after this instant: the next tick of
    /// a grid of `period` that starts at time 0.
    #[inline]
    pub fn first_multiple_after(self, period: SimDuration) -> SimTime {
        SimTime((self.0 / period.0 + 1) * period.0)
    }
}

impl SimDuration {
    pub const ZERO: SimDuration = SimDuration(0);
    #[inline]
    pub const fn from_ns(ns: u64) -> Self {
        SimDuration(ns)
    }
    #[inline]
    pub const fn from_us(us: u64) -> Self {
        SimDuration(us * NS_PER_US)
    }
    #[inline]
    pub const fn from_ms(ms: u64) -> Self {
        SimDuration(ms * NS_PER_MS)
    }
    #[inline]
    pub const fn from_secs(s: u64) -> Self {
        SimDuration(s * NS_PER_S)
    }
    /// The nearest whole nanoseconds to `ns`, halves away from zero (`ns.round() as
    /// u64`: negative and NaN give 0, too large saturates), without libm's `round` (see
    /// `ceil_ns`): every sampled sleep and disk latency goes through it.
    #[inline]
    pub fn round_ns(ns: f64) -> Self {
        if ns.is_nan() || ns < 0.0 {
            return SimDuration(0); // negative rounds to <= -0, which casts to 0
        }
        if ns >= 4_503_599_627_370_496.0 {
            return SimDuration(ns as u64); // 2^52 and up: already whole (or saturating)
        }
        // The floor, exact below 2^52. Through i64: on the x86-64 baseline a signed
        // conversion each way is one instruction, an unsigned one a sequence of 6-14, and
        // in this range both give the same value.
        let whole = ns as i64 as u64;
        SimDuration(if ns - whole as i64 as f64 >= 0.5 {
            whole + 1
        } else {
            whole
        })
    }
    /// The whole nanoseconds at or after `ns` (`ns.ceil() as u64`: negative and NaN give
    /// 0, too large saturates). Written out because `f64::ceil` is a libm call on the x86-64
    /// baseline (no SSE4.1 `roundsd`), and guest deadlines take it on every dispatch.
    #[inline]
    pub fn ceil_ns(ns: f64) -> Self {
        // 0 <= ns < 2^63 (every deadline): the same steps through i64, whose conversions
        // are one instruction each on the x86-64 baseline (u64's take 6-14), and which
        // give the same values there. NaN fails the test and takes the general path.
        if (0.0..9_223_372_036_854_775_808.0).contains(&ns) {
            let whole = ns as i64;
            return SimDuration(if (whole as f64) < ns {
                whole as u64 + 1
            } else {
                whole as u64
            });
        }
        // `as` truncates toward zero and saturates, so for ns >= 0 `whole` is the floor.
        let whole = ns as u64;
        SimDuration(if (whole as f64) < ns {
            whole.saturating_add(1)
        } else {
            whole
        })
    }
    #[inline]
    pub fn ns(self) -> u64 {
        self.0
    }
    /// `k` times this span, held at the longest span instead of overflowing.
    #[inline]
    pub fn saturating_mul(self, k: u64) -> SimDuration {
        SimDuration(self.0.saturating_mul(k))
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / NS_PER_S as f64
    }
    pub fn as_ms_f64(self) -> f64 {
        self.0 as f64 / NS_PER_MS as f64
    }
}

impl Add<SimDuration> for SimTime {
    type Output = SimTime;
    #[inline]
    fn add(self, d: SimDuration) -> SimTime {
        SimTime(self.0.saturating_add(d.0))
    }
}
impl AddAssign<SimDuration> for SimTime {
    #[inline]
    fn add_assign(&mut self, d: SimDuration) {
        self.0 = self.0.saturating_add(d.0);
    }
}
impl Add for SimDuration {
    type Output = SimDuration;
    #[inline]
    fn add(self, d: SimDuration) -> SimDuration {
        SimDuration(self.0.saturating_add(d.0))
    }
}
impl AddAssign for SimDuration {
    #[inline]
    fn add_assign(&mut self, d: SimDuration) {
        self.0 = self.0.saturating_add(d.0);
    }
}
impl Sub for SimDuration {
    type Output = SimDuration;
    #[inline]
    fn sub(self, d: SimDuration) -> SimDuration {
        SimDuration(self.0.saturating_sub(d.0))
    }
}

// Plain sums and differences, for the schedulers' hot paths, which did their arithmetic
// in `u64` before they used these types: the same single instruction as `u64`'s `+` and
// `-` (an overflow panics in debug builds), where the operators saturate. No time in a run
// comes near 2^64 ns, so the two agree; these keep the schedulers' arithmetic exactly what
// it was, and a little shorter.
impl SimTime {
    /// `self + d`, unsaturated.
    #[inline]
    pub fn plus(self, d: SimDuration) -> SimTime {
        SimTime(self.0 + d.0)
    }
    /// The span from `earlier` (at most `self`) to `self`, unsaturated.
    #[inline]
    pub fn minus(self, earlier: SimTime) -> SimDuration {
        SimDuration(self.0 - earlier.0)
    }
}
impl SimDuration {
    /// `self + d`, unsaturated.
    #[inline]
    pub fn plus(self, d: SimDuration) -> SimDuration {
        SimDuration(self.0 + d.0)
    }
    /// `self - d` for `d` at most `self`, unsaturated.
    #[inline]
    pub fn minus(self, d: SimDuration) -> SimDuration {
        SimDuration(self.0 - d.0)
    }
}

// Scaling and dividing spans. Unlike `+` and `-` above, which saturate, these are the plain
// integer operations: no span in a run comes near 2^64 ns, and an overflow would be a bug
// (a panic in debug builds), not a value to clamp.
impl Mul<u64> for SimDuration {
    type Output = SimDuration;
    #[inline]
    fn mul(self, k: u64) -> SimDuration {
        SimDuration(self.0 * k)
    }
}
impl MulAssign<u64> for SimDuration {
    #[inline]
    fn mul_assign(&mut self, k: u64) {
        self.0 *= k;
    }
}
/// A span cut into `k` equal parts (rounded down).
impl Div<u64> for SimDuration {
    type Output = SimDuration;
    #[inline]
    fn div(self, k: u64) -> SimDuration {
        SimDuration(self.0 / k)
    }
}
/// How many whole `d` fit in this span.
impl Div for SimDuration {
    type Output = u64;
    #[inline]
    fn div(self, d: SimDuration) -> u64 {
        self.0 / d.0
    }
}
/// What is left of this span after taking out as many whole `d` as fit.
impl Rem for SimDuration {
    type Output = SimDuration;
    #[inline]
    fn rem(self, d: SimDuration) -> SimDuration {
        SimDuration(self.0 % d.0)
    }
}

impl fmt::Display for SimDuration {
    /// Prints the largest unit that keeps the value exact: `30ms`, `1500us`, `7ns`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        if ns == 0 {
            return write!(f, "0s");
        }
        for (unit, per) in [("s", NS_PER_S), ("ms", NS_PER_MS), ("us", NS_PER_US)] {
            if ns.is_multiple_of(per) {
                return write!(f, "{}{}", ns / per, unit);
            }
        }
        write!(f, "{}ns", ns)
    }
}

/// Parses a duration string such as `"250us"`, `"1.5ms"`, `"10s"`, `"2min"`, `"100ns"`.
/// Returns a message saying what is wrong, for the caller to wrap with file and key path.
pub fn parse_duration(text: &str) -> Result<SimDuration, String> {
    let s = text.trim();
    let split = s
        .find(|c: char| {
            !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E')
        })
        .unwrap_or(s.len());
    // 'e' may be the start of a unit only in principle; none of our units start with e.
    let (num, unit) = s.split_at(split);
    let unit = unit.trim();
    if num.is_empty() {
        return Err(format!(
            "expected a duration like \"250us\", \"1.5ms\" or \"10s\", got {:?}",
            text
        ));
    }
    let value: f64 = num.parse().map_err(|_| {
        format!(
            "{:?} is not a number followed by a unit (ns, us, ms, s, min, h)",
            text
        )
    })?;
    if !value.is_finite() {
        return Err(format!("{:?} is not a finite duration", text));
    }
    if value < 0.0 {
        return Err(format!(
            "duration {:?} is negative; durations must be >= 0",
            text
        ));
    }
    let per: f64 = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "min" => 60e9,
        "h" => 3600e9,
        "" => {
            return Err(format!(
                "duration {:?} has no unit; write e.g. \"{}ms\" (units: ns, us, ms, s, min, h)",
                text, num
            ))
        }
        other => {
            return Err(format!(
                "unknown time unit {:?} in {:?}; allowed units: ns, us, ms, s, min, h",
                other, text
            ))
        }
    };
    let ns = value * per;
    if ns > u64::MAX as f64 / 2.0 {
        return Err(format!("duration {:?} is too large", text));
    }
    let rounded = ns.round();
    if (rounded - ns).abs() > 1e-6 * ns.max(1.0) && value.fract() != 0.0 && per == 1.0 {
        return Err(format!("duration {:?} is finer than 1 ns", text));
    }
    Ok(SimDuration(rounded as u64))
}

/// `x as f64`, through i64 when it fits: one instruction on the x86-64 baseline, against
/// a sequence of six for u64, and the same value (both round to nearest). Guest progress
/// converts elapsed nanoseconds on every settle.
#[inline(always)]
pub fn u64_as_f64(x: u64) -> f64 {
    if x <= i64::MAX as u64 {
        x as i64 as f64
    } else {
        x as f64
    }
}

#[cfg(test)]
mod tests {

    /// Edge cases of an f64 -> whole-nanoseconds conversion (signs, halves, the 2^52 and
    /// 2^53 boundaries, saturation, NaN) and 40,000 random values around them.
    fn conversion_cases() -> Vec<f64> {
        let mut rng = crate::rng::Rng::from_state(7);
        let mut cases = vec![
            0.0,
            -0.0,
            -0.4,
            -0.5,
            -1.5,
            0.25,
            0.49999999999999994,
            0.5,
            1.0,
            1.0 + f64::EPSILON,
            1.5,
            2.5,
            4_503_599_627_370_495.5,
            4_503_599_627_370_496.0,
            9_007_199_254_740_993.0,
            // 2^63 and the double below it: where `ceil_ns` leaves its i64 fast path.
            9_223_372_036_854_774_784.0,
            9_223_372_036_854_775_808.0,
            1.8e19,
            1.9e19,
            f64::MAX,
            f64::INFINITY,
            f64::NAN,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
        ];
        for _ in 0..10_000 {
            let x = (rng.next_u64() >> 11) as f64 / (1u64 << 20) as f64;
            cases.extend([x, x.floor(), x.floor() + 0.5, x * 1e6, -x]);
        }
        cases
    }

    #[test]
    fn u64_as_f64_is_the_cast() {
        let mut rng = crate::rng::Rng::from_state(11);
        let mut cases = vec![0, 1, (1 << 53) + 1, i64::MAX as u64, 1 << 63, u64::MAX];
        for _ in 0..10_000 {
            let x = rng.next_u64();
            cases.extend([x, x >> 1, x >> 11, x >> 40]);
        }
        for x in cases {
            assert_eq!(super::u64_as_f64(x).to_bits(), (x as f64).to_bits(), "{x}");
        }
    }

    #[test]
    fn ceil_ns_is_f64_ceil_cast() {
        for x in conversion_cases() {
            assert_eq!(SimDuration::ceil_ns(x).0, x.ceil() as u64, "{x:e}");
        }
    }

    #[test]
    fn round_ns_is_f64_round_cast() {
        for x in conversion_cases() {
            assert_eq!(SimDuration::round_ns(x).0, x.round() as u64, "{x:e}");
        }
    }

    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_duration("250us").unwrap(), SimDuration(250_000));
        assert_eq!(parse_duration("1.5ms").unwrap(), SimDuration(1_500_000));
        assert_eq!(parse_duration("10s").unwrap(), SimDuration(10 * NS_PER_S));
        assert_eq!(parse_duration("2min").unwrap(), SimDuration(120 * NS_PER_S));
        assert_eq!(parse_duration("7ns").unwrap(), SimDuration(7));
        assert_eq!(parse_duration("0s").unwrap(), SimDuration(0));
    }

    #[test]
    fn rejects_bad_durations_with_reasons() {
        assert!(parse_duration("-5ms").unwrap_err().contains("negative"));
        assert!(parse_duration("5").unwrap_err().contains("no unit"));
        assert!(parse_duration("5 parsecs")
            .unwrap_err()
            .contains("unknown time unit"));
        assert!(parse_duration("ms")
            .unwrap_err()
            .contains("expected a duration"));
    }

    #[test]
    fn span_arithmetic_is_the_integer_arithmetic() {
        let d = SimDuration::from_ms(30);
        assert_eq!(d * 3, SimDuration::from_ms(90));
        assert_eq!(d / 3, SimDuration::from_ms(10));
        assert_eq!(SimDuration(1_234_567) / SimDuration(100_000), 12);
        assert_eq!(
            SimDuration(1_234_567) % SimDuration(100_000),
            SimDuration(34_567)
        );
        assert_eq!(d.plus(d), d + d);
        assert_eq!(d.minus(d / 3), SimDuration::from_ms(20));
        assert_eq!(SimTime(5).plus(d), SimTime(30_000_005));
        assert_eq!(SimTime(30_000_005).minus(SimTime(5)), d);
        let mut m = d;
        m *= 4;
        assert_eq!(m, SimDuration::from_ms(120));
        assert_eq!(
            SimDuration(u64::MAX / 2).saturating_mul(3),
            SimDuration(u64::MAX)
        );
        // The grid of 10 ms ticks from time 0: strictly after, also from a tick itself.
        let tick = SimDuration::from_ms(10);
        assert_eq!(SimTime(0).first_multiple_after(tick), SimTime(10_000_000));
        assert_eq!(
            SimTime(9_999_999).first_multiple_after(tick),
            SimTime(10_000_000)
        );
        assert_eq!(
            SimTime(10_000_000).first_multiple_after(tick),
            SimTime(20_000_000)
        );
    }

    #[test]
    fn displays_exact_units() {
        assert_eq!(SimDuration::from_ms(30).to_string(), "30ms");
        assert_eq!(SimDuration(1_500_000).to_string(), "1500us");
        assert_eq!(SimDuration(7).to_string(), "7ns");
    }
}
