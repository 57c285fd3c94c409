//! The claims a reproduction's paper makes, as data, and their verdicts.
//!
//! A claim lives in its experiment's file (`[[claim]]` in
//! `scenarios/reproductions/<id>/experiment.toml`), so the CLI, the report, the tests and
//! docs/models.md all read the same list. Each has an id, the paper's words, where they
//! are (seed file and section), a premise (what the setup must have for the claim to
//! apply) and one evaluation over the experiment's figures:
//!
//! | kind | keys | the claim's value | holds when |
//! |---|---|---|---|
//! | `threshold` | metric, case, op, value | the case's figure | value `op` threshold |
//! | `ratio` | metric, case, over, op, value | figure(case) / figure(over) | value `op` threshold |
//! | `within` | metric, cases, tolerance | the largest abs(figure / paper - 1) over the cases | value <= tolerance |
//! | `order` | metric, cases, direction | the smallest relative step along the cases, in the direction | value > 0 |
//! | `best` | metric, cases, direction, op, value | the lowest (`direction = "lowest"`) or highest figure over the cases | value `op` threshold |
//!
//! `best` is for a figure stated as "up to" over a set the paper does not name (the
//! ple-kvm README's "reduces PLE events by up to 87.6%"): it reads the best case, and
//! which case that is may differ from one resample to the next.
//!
//! Optional on every claim: `group` and `tested_in` (for readers), and `setup_bound =
//! "why"` when the claim's line is computed from the setup's sizes (an equal share of 4
//! LPs among 7 threads): `vcpulab robustness` then applies only other seeds to it
//! ([`super::robustness`]).
//!
//! A figure is a case's metric as `vcpulab reproduce` reports it: the mean over the
//! experiment's seeds, divided by the reference case's mean for a normalised metric.
//!
//! **Verdicts.** Every claim's value gets a 95 % bootstrap interval over the seeds
//! ([`super::stats`]). The claim `holds` when the whole interval satisfies its test,
//! `fails` when the whole interval violates it, and is `undecided` when the interval
//! straddles the line: one sample's side of a line never decides a verdict.

use std::collections::BTreeMap;

use serde::Serialize;

use super::stats::{mean_at, Estimate, Resamples};
use super::Experiment;
use crate::reader::{Res, Table};

/// A comparison of a claim's value with its threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Op {
    #[serde(rename = "<")]
    Lt,
    #[serde(rename = "<=")]
    Le,
    #[serde(rename = ">")]
    Gt,
    #[serde(rename = ">=")]
    Ge,
}

impl Op {
    fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "<" => Op::Lt,
            "<=" => Op::Le,
            ">" => Op::Gt,
            ">=" => Op::Ge,
            _ => return None,
        })
    }
    pub fn symbol(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }
    fn test(self, x: f64, t: f64) -> bool {
        match self {
            Op::Lt => x < t,
            Op::Le => x <= t,
            Op::Gt => x > t,
            Op::Ge => x >= t,
        }
    }
}

/// How a claim is evaluated over the experiment's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Evaluation {
    Threshold {
        metric: String,
        case: String,
        op: Op,
        value: f64,
    },
    Ratio {
        metric: String,
        case: String,
        over: String,
        op: Op,
        value: f64,
    },
    Within {
        metric: String,
        cases: Vec<String>,
        tolerance: f64,
    },
    Order {
        metric: String,
        cases: Vec<String>,
        increasing: bool,
    },
    Best {
        metric: String,
        cases: Vec<String>,
        lowest: bool,
        op: Op,
        value: f64,
    },
}

impl Evaluation {
    pub fn metric(&self) -> &str {
        match self {
            Evaluation::Threshold { metric, .. }
            | Evaluation::Ratio { metric, .. }
            | Evaluation::Within { metric, .. }
            | Evaluation::Order { metric, .. }
            | Evaluation::Best { metric, .. } => metric,
        }
    }

    /// The cases whose figures the claim reads.
    pub fn cases(&self) -> Vec<&str> {
        match self {
            Evaluation::Threshold { case, .. } => vec![case],
            Evaluation::Ratio { case, over, .. } => vec![case, over],
            Evaluation::Within { cases, .. }
            | Evaluation::Order { cases, .. }
            | Evaluation::Best { cases, .. } => cases.iter().map(String::as_str).collect(),
        }
    }

    /// The value's threshold and the comparison that makes the claim hold.
    pub fn test(&self) -> (Op, f64) {
        match self {
            Evaluation::Threshold { op, value, .. }
            | Evaluation::Ratio { op, value, .. }
            | Evaluation::Best { op, value, .. } => (*op, *value),
            Evaluation::Within { tolerance, .. } => (Op::Le, *tolerance),
            Evaluation::Order { .. } => (Op::Gt, 0.0),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Claim {
    pub id: String,
    pub text: String,
    pub source: String,
    pub premise: String,
    pub evaluation: Evaluation,
    /// Why this threshold, or what the claim leaves out.
    pub note: String,
    /// The stated relation this claim is one part of (e.g. one side of a band).
    pub group: String,
    /// Why the claim's line is computed from the setup's sizes (then only other seeds keep
    /// its premise under `vcpulab robustness`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub setup_bound: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Holds,
    Fails,
    Undecided,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Holds => "holds",
            Verdict::Fails => "fails",
            Verdict::Undecided => "undecided",
        }
    }
}

/// A claim's verdict with the figures behind it.
#[derive(Clone, Debug, Serialize)]
pub struct ClaimResult {
    pub verdict: Verdict,
    /// The claim's value on all seeds and its interval (None: a figure is missing).
    pub estimate: Option<Estimate>,
    pub threshold: f64,
    pub op: Op,
    pub seeds: usize,
    /// What decided it, in words ("ratio 1.91 [1.62, 2.20] > 1.5").
    pub detail: String,
}

/// One value per seed of each (case, metric), as run; the raw figures before any
/// normalisation. Every series of an experiment has the same number of seeds, so the
/// seeds of two cases pair.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    pub seeds: usize,
    pub values: BTreeMap<(String, String), Vec<Option<f64>>>,
}

impl Samples {
    pub fn series(&self, case: &str, metric: &str) -> Option<&[Option<f64>]> {
        self.values
            .get(&(case.to_string(), metric.to_string()))
            .map(Vec::as_slice)
    }

    /// A case's figure over the seeds `idx`: the mean, divided by the reference case's
    /// mean over the same seeds for a normalised metric.
    pub fn figure(&self, exp: &Experiment, case: &str, metric: &str, idx: &[usize]) -> Option<f64> {
        let raw = mean_at(self.series(case, metric)?, idx)?;
        // An unknown metric has no figure (reference_case alone would read it as "not
        // normalised").
        exp.metrics.iter().find(|m| m.name == metric)?;
        match super::reference_case(exp, case, metric) {
            None => Some(raw),
            Some(reference) => {
                let base = mean_at(self.series(&reference, metric)?, idx)?;
                (base != 0.0).then(|| raw / base)
            }
        }
    }
}

/// The claim's value on the seeds `idx`.
fn value(exp: &Experiment, s: &Samples, e: &Evaluation, idx: &[usize]) -> Option<f64> {
    let fig = |case: &str| s.figure(exp, case, e.metric(), idx);
    match e {
        Evaluation::Threshold { case, .. } => fig(case),
        Evaluation::Ratio { case, over, .. } => {
            let b = fig(over)?;
            (b != 0.0).then_some(fig(case)? / b)
        }
        Evaluation::Within { cases, metric, .. } => {
            let mut worst: f64 = 0.0;
            for c in cases {
                let paper = exp
                    .cases
                    .iter()
                    .find(|x| &x.id == c)?
                    .paper
                    .iter()
                    .find(|(m, _)| m == metric)?
                    .1;
                worst = worst.max((fig(c)? / paper - 1.0).abs());
            }
            Some(worst)
        }
        Evaluation::Order {
            cases, increasing, ..
        } => {
            let figs: Vec<f64> = cases.iter().map(|c| fig(c)).collect::<Option<_>>()?;
            let mut smallest = f64::INFINITY;
            for w in figs.windows(2) {
                let step = if *increasing {
                    w[1] - w[0]
                } else {
                    w[0] - w[1]
                };
                let scale = w[0].abs().max(w[1].abs());
                smallest = smallest.min(if scale > 0.0 { step / scale } else { 0.0 });
            }
            Some(smallest)
        }
        Evaluation::Best { cases, lowest, .. } => {
            let figs: Vec<f64> = cases.iter().map(|c| fig(c)).collect::<Option<_>>()?;
            let pick = if *lowest { f64::min } else { f64::max };
            figs.into_iter().reduce(pick)
        }
    }
}

/// Evaluates `claim` on the samples.
pub fn evaluate(exp: &Experiment, s: &Samples, r: &Resamples, claim: &Claim) -> ClaimResult {
    let (op, threshold) = claim.evaluation.test();
    let estimate = r.estimate(|idx| value(exp, s, &claim.evaluation, idx));
    let (verdict, detail) = match estimate {
        None => (
            Verdict::Undecided,
            "a figure it needs is missing (no value on any seed)".to_string(),
        ),
        Some(e) => {
            let lo_ok = op.test(e.ci_low, threshold);
            let hi_ok = op.test(e.ci_high, threshold);
            let verdict = match (lo_ok, hi_ok) {
                (true, true) => Verdict::Holds,
                (false, false) => Verdict::Fails,
                _ => Verdict::Undecided,
            };
            let what = match &claim.evaluation {
                Evaluation::Threshold { case, .. } => case.to_string(),
                Evaluation::Ratio { case, over, .. } => format!("{case} / {over}"),
                Evaluation::Within { .. } => "largest |sim/paper - 1|".to_string(),
                Evaluation::Best { lowest, .. } => {
                    format!("{} figure", if *lowest { "lowest" } else { "highest" })
                }
                Evaluation::Order { increasing, .. } => format!(
                    "smallest relative step ({})",
                    if *increasing {
                        "increasing"
                    } else {
                        "decreasing"
                    }
                ),
            };
            (
                verdict,
                format!(
                    "{what}: {} [{}, {}] {} {}",
                    fmt(e.value),
                    fmt(e.ci_low),
                    fmt(e.ci_high),
                    op.symbol(),
                    fmt(threshold)
                ),
            )
        }
    };
    ClaimResult {
        verdict,
        estimate,
        threshold,
        op,
        seeds: s.seeds,
        detail,
    }
}

fn fmt(x: f64) -> String {
    let a = x.abs();
    if a != 0.0 && !(0.001..1e6).contains(&a) {
        format!("{x:.3e}")
    } else {
        let s = format!("{x:.4}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        if s.is_empty() || s == "-" {
            "0".into()
        } else {
            s.to_string()
        }
    }
}

/// Parses an experiment's `[[claim]]` tables and checks them against its cases and metrics.
pub(super) fn parse_claims(t: &Table, exp: &Experiment) -> Res<Vec<Claim>> {
    let Some(list) = t.get("claim") else {
        return Ok(vec![]);
    };
    let mut claims: Vec<Claim> = Vec::new();
    for c in list.array()? {
        let ct = c.table()?;
        let id = ct.req("id")?.str()?.to_string();
        if claims.iter().any(|x| x.id == id) {
            return ct.err("id", format!("claim {id:?} is declared twice"));
        }
        let kind = ct.req("kind")?.str()?.to_string();
        let metric = match ct.opt_str("metric")? {
            Some(m) => m.to_string(),
            None => exp.metrics[0].name.clone(),
        };
        if !exp.metrics.iter().any(|m| m.name == metric) {
            return ct.err("metric", format!("no metric {metric:?} in this experiment"));
        }
        let case_ok = |key: &str, id: &str| -> Res<()> {
            if exp.cases.iter().any(|c| c.id == id) {
                Ok(())
            } else {
                ct.err(key, format!("no case {id:?} in this experiment"))
            }
        };
        let op = |ct: &Table| -> Res<Op> {
            let o = ct.req("op")?;
            let s = o.str()?;
            Op::parse(s).map_or_else(
                || {
                    o.err(format!(
                        "{s:?} is not allowed; allowed: \"<\", \"<=\", \">\", \">=\""
                    ))
                },
                Ok,
            )
        };
        let cases = |ct: &Table| -> Res<Vec<String>> {
            let v: Vec<String> = ct
                .req("cases")?
                .array()?
                .iter()
                .map(|x| x.str().map(str::to_string))
                .collect::<Res<_>>()?;
            for c in &v {
                case_ok("cases", c)?;
            }
            Ok(v)
        };
        // `group` names the stated relation a claim is one part of (a band's two sides, one
        // member of a "for all"); `tested_in` names a test that asserted it before claims
        // were data. Both are for readers.
        let common = [
            "id",
            "text",
            "source",
            "premise",
            "note",
            "kind",
            "metric",
            "group",
            "tested_in",
            "setup_bound",
        ];
        let (evaluation, extra): (Evaluation, &[&str]) = match kind.as_str() {
            "threshold" => {
                let case = ct.req("case")?.str()?.to_string();
                case_ok("case", &case)?;
                (
                    Evaluation::Threshold {
                        metric,
                        case,
                        op: op(&ct)?,
                        value: ct.req("value")?.f64_in(f64::MIN, f64::MAX)?,
                    },
                    &["case", "op", "value"],
                )
            }
            "ratio" => {
                let case = ct.req("case")?.str()?.to_string();
                case_ok("case", &case)?;
                let over = ct.req("over")?.str()?.to_string();
                case_ok("over", &over)?;
                (
                    Evaluation::Ratio {
                        metric,
                        case,
                        over,
                        op: op(&ct)?,
                        value: ct.req("value")?.f64_in(f64::MIN, f64::MAX)?,
                    },
                    &["case", "over", "op", "value"],
                )
            }
            "within" => {
                let cases = cases(&ct)?;
                for c in &cases {
                    let case = exp.cases.iter().find(|x| &x.id == c).unwrap();
                    if !case.paper.iter().any(|(m, _)| *m == metric) {
                        return ct.err(
                            "cases",
                            format!("case {c:?} has no paper figure for {metric:?}"),
                        );
                    }
                }
                (
                    Evaluation::Within {
                        metric,
                        cases,
                        tolerance: ct.req("tolerance")?.f64_in(0.0, 100.0)?,
                    },
                    &["cases", "tolerance"],
                )
            }
            "order" => {
                let cases = cases(&ct)?;
                if cases.len() < 2 {
                    return ct.err("cases", "an order needs at least two cases");
                }
                let d = ct.req("direction")?;
                let increasing = match d.str()? {
                    "increasing" => true,
                    "decreasing" => false,
                    other => {
                        return d.err(format!(
                            "{other:?} is not allowed; allowed: \"increasing\", \"decreasing\""
                        ))
                    }
                };
                (
                    Evaluation::Order {
                        metric,
                        cases,
                        increasing,
                    },
                    &["cases", "direction"],
                )
            }
            "best" => {
                let cases = cases(&ct)?;
                if cases.is_empty() {
                    return ct.err("cases", "the best of no cases: list at least one");
                }
                let d = ct.req("direction")?;
                let lowest = match d.str()? {
                    "lowest" => true,
                    "highest" => false,
                    other => {
                        return d.err(format!(
                            "{other:?} is not allowed; allowed: \"lowest\", \"highest\""
                        ))
                    }
                };
                (
                    Evaluation::Best {
                        metric,
                        cases,
                        lowest,
                        op: op(&ct)?,
                        value: ct.req("value")?.f64_in(f64::MIN, f64::MAX)?,
                    },
                    &["cases", "direction", "op", "value"],
                )
            }
            other => {
                return ct.err(
                    "kind",
                    format!(
                        "{other:?} is not allowed; allowed: \"threshold\", \"ratio\", \"within\", \"order\", \"best\""
                    ),
                )
            }
        };
        let mut allowed: Vec<&str> = common.to_vec();
        allowed.extend_from_slice(extra);
        claims.push(Claim {
            id,
            text: ct.req("text")?.str()?.to_string(),
            source: ct.req("source")?.str()?.to_string(),
            premise: ct.req("premise")?.str()?.to_string(),
            note: ct.opt_str("note")?.unwrap_or("").to_string(),
            group: ct.opt_str("group")?.unwrap_or("").to_string(),
            setup_bound: ct.opt_str("setup_bound")?.map(str::to_string),
            evaluation,
        });
        // Read so that `finish` accepts it; it is for readers only.
        ct.opt_str("tested_in")?;
        ct.finish(&allowed)?;
    }
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repro::{Case, Metric};

    fn exp(metric_normalized: bool) -> Experiment {
        let case = |id: &str, axes: &[(&str, &str)], paper: Option<f64>| Case {
            id: id.into(),
            paper: paper
                .map(|p| vec![("m".to_string(), p)])
                .unwrap_or_default(),
            note: String::new(),
            axes: axes
                .iter()
                .map(|(a, v)| (a.to_string(), v.to_string()))
                .collect(),
            set: vec![],
            remove: vec![],
        };
        Experiment {
            id: "synthetic".into(),
            title: String::new(),
            source: String::new(),
            notes: String::new(),
            metric: "m".into(),
            unit: "x".into(),
            value: "v".into(),
            tolerance: None,
            seeds: 10,
            metrics: vec![Metric {
                name: "m".into(),
                unit: "x".into(),
                value: "v".into(),
                normalize: metric_normalized.then(|| ("variant".into(), "base".into())),
                set: vec![],
                remove: vec![],
            }],
            cases: vec![
                case("base", &[("variant", "base")], Some(100.0)),
                case("fix", &[("variant", "fix")], Some(150.0)),
                case("other", &[("variant", "other")], None),
            ],
            claims: vec![],
            robustness: Default::default(),
            scenario_text: String::new(),
        }
    }

    /// Seeds of a case: `mean` plus a zero-mean wobble of `spread`, drawn from a stream
    /// named by the mean, so two cases' seeds are not correlated.
    fn series(mean: f64, spread: f64) -> Vec<Option<f64>> {
        let mut rng = crate::rng::Rng::derive(mean.to_bits(), &["series"]);
        let w: Vec<f64> = (0..10).map(|_| rng.std_normal()).collect();
        let m = w.iter().sum::<f64>() / 10.0;
        w.iter().map(|x| Some(mean + spread * (x - m))).collect()
    }

    fn samples(cases: &[(&str, Vec<Option<f64>>)]) -> Samples {
        let mut s = Samples {
            seeds: 10,
            ..Default::default()
        };
        for (c, v) in cases {
            s.values.insert((c.to_string(), "m".into()), v.clone());
        }
        s
    }

    /// A case run on fewer seeds than its normalisation reference (adaptive seeding ran
    /// the reference further): its figure pairs the seeds the two share, so it lies in its
    /// own interval. Divided by the reference's mean over all its seeds it would be 0.92,
    /// outside [1.4, 1.6].
    #[test]
    fn a_normalised_row_is_its_figure_over_the_seeds_it_shares_with_its_reference() {
        let e = exp(true);
        let row = |case: &str, values: Vec<Option<f64>>| {
            let all: Vec<usize> = (0..values.len()).collect();
            crate::repro::Row {
                experiment: e.id.clone(),
                case: case.into(),
                metric: "m".into(),
                unit: "x".into(),
                paper: None,
                sim: crate::repro::stats::mean_at(&values, &all),
                ratio: None,
                seeds: values.len() as u64,
                ci_low: None,
                ci_high: None,
                regimes: None,
                values,
            }
        };
        let base: Vec<Option<f64>> = [99.0, 100.0, 101.0, 200.0, 200.0, 200.0, 200.0, 200.0]
            .map(Some)
            .to_vec();
        let fix = [148.0, 150.0, 152.0].map(Some).to_vec();
        let rows = crate::repro::finish_rows(&e, &[row("base", base), row("fix", fix)]);
        let fix = rows.iter().find(|r| r.case == "fix").unwrap();
        assert!((fix.sim.unwrap() - 1.5).abs() < 1e-12, "{:?}", fix.sim);
        assert_eq!(fix.seeds, 3);
        assert!(
            fix.ci_low.unwrap() <= 1.5 && 1.5 <= fix.ci_high.unwrap(),
            "{fix:?}"
        );
        // The other way round (the case ran further than its reference): the figure and
        // its seed count are the three seeds the two share.
        let base = [99.0, 100.0, 101.0].map(Some).to_vec();
        let fix: Vec<Option<f64>> = [148.0, 150.0, 152.0, 300.0, 300.0, 300.0, 300.0, 300.0]
            .map(Some)
            .to_vec();
        let rows = crate::repro::finish_rows(&e, &[row("base", base), row("fix", fix)]);
        let fix = rows.iter().find(|r| r.case == "fix").unwrap();
        assert!((fix.sim.unwrap() - 1.5).abs() < 1e-12, "{:?}", fix.sim);
        assert_eq!(fix.seeds, 3);
    }

    fn claim(evaluation: Evaluation) -> Claim {
        Claim {
            id: "c".into(),
            text: String::new(),
            source: String::new(),
            premise: String::new(),
            evaluation,
            note: String::new(),
            group: String::new(),
            setup_bound: None,
        }
    }

    fn verdict(e: &Experiment, s: &Samples, ev: Evaluation) -> Verdict {
        let r = Resamples::new(s.seeds, "test");
        evaluate(e, s, &r, &claim(ev)).verdict
    }

    fn gain_over(value: f64) -> Evaluation {
        Evaluation::Ratio {
            metric: "m".into(),
            case: "fix".into(),
            over: "base".into(),
            op: Op::Gt,
            value,
        }
    }

    #[test]
    fn a_ratio_claim_holds_fails_or_is_undecided_by_its_interval() {
        let e = exp(false);
        let s = samples(&[("base", series(100.0, 5.0)), ("fix", series(150.0, 5.0))]);
        assert_eq!(verdict(&e, &s, gain_over(1.2)), Verdict::Holds);
        assert_eq!(verdict(&e, &s, gain_over(1.8)), Verdict::Fails);
        // 1.5 is the point estimate itself: the interval straddles it.
        assert_eq!(verdict(&e, &s, gain_over(1.5)), Verdict::Undecided);
    }

    /// `best` reads the lowest (or highest) figure of its cases, whichever case that is.
    #[test]
    fn a_best_claim_reads_the_extreme_case() {
        let e = exp(false);
        let s = samples(&[
            ("base", series(100.0, 1.0)),
            ("fix", series(150.0, 1.0)),
            ("other", series(40.0, 1.0)),
        ]);
        let best = |lowest, op, value| Evaluation::Best {
            metric: "m".into(),
            cases: vec!["base".into(), "fix".into(), "other".into()],
            lowest,
            op,
            value,
        };
        assert_eq!(verdict(&e, &s, best(true, Op::Le, 45.0)), Verdict::Holds);
        assert_eq!(verdict(&e, &s, best(true, Op::Le, 35.0)), Verdict::Fails);
        assert_eq!(verdict(&e, &s, best(false, Op::Ge, 140.0)), Verdict::Holds);
        assert_eq!(verdict(&e, &s, best(false, Op::Ge, 160.0)), Verdict::Fails);
    }

    #[test]
    fn one_sample_on_the_right_side_of_a_line_does_not_decide() {
        // The mean is above 1.0 but the seeds are wide: undecided, not holds.
        let e = exp(false);
        let s = samples(&[("base", series(100.0, 40.0)), ("fix", series(104.0, 40.0))]);
        assert_eq!(verdict(&e, &s, gain_over(1.0)), Verdict::Undecided);
    }

    #[test]
    fn a_threshold_claim_reads_the_normalised_figure() {
        let e = exp(true);
        let s = samples(&[("base", series(200.0, 1.0)), ("fix", series(300.0, 1.0))]);
        let thr = |op, value| Evaluation::Threshold {
            metric: "m".into(),
            case: "fix".into(),
            op,
            value,
        };
        assert_eq!(verdict(&e, &s, thr(Op::Ge, 1.4)), Verdict::Holds);
        assert_eq!(verdict(&e, &s, thr(Op::Lt, 1.4)), Verdict::Fails);
    }

    #[test]
    fn an_order_holds_only_when_every_step_is_clear() {
        let e = exp(false);
        let ord = |cases: &[&str]| Evaluation::Order {
            metric: "m".into(),
            cases: cases.iter().map(|c| c.to_string()).collect(),
            increasing: true,
        };
        let s = samples(&[
            ("base", series(100.0, 2.0)),
            ("fix", series(150.0, 2.0)),
            ("other", series(151.0, 2.0)),
        ]);
        assert_eq!(verdict(&e, &s, ord(&["base", "fix"])), Verdict::Holds);
        assert_eq!(verdict(&e, &s, ord(&["fix", "base"])), Verdict::Fails);
        // fix -> other is a 0.7 % step inside the noise.
        assert_eq!(
            verdict(&e, &s, ord(&["base", "fix", "other"])),
            Verdict::Undecided
        );
    }

    #[test]
    fn within_compares_each_case_with_its_paper_figure() {
        let e = exp(false);
        let within = |tolerance| Evaluation::Within {
            metric: "m".into(),
            cases: vec!["base".into(), "fix".into()],
            tolerance,
        };
        let s = samples(&[("base", series(101.0, 0.5)), ("fix", series(147.0, 0.5))]);
        assert_eq!(verdict(&e, &s, within(0.05)), Verdict::Holds);
        assert_eq!(verdict(&e, &s, within(0.01)), Verdict::Fails);
    }

    #[test]
    fn a_missing_figure_leaves_the_claim_undecided() {
        let e = exp(false);
        let s = samples(&[("base", vec![None; 10]), ("fix", series(150.0, 1.0))]);
        let r = Resamples::new(10, "t");
        let res = evaluate(&e, &s, &r, &claim(gain_over(1.2)));
        assert_eq!(res.verdict, Verdict::Undecided);
        assert!(res.detail.contains("missing"), "{}", res.detail);
    }

    fn parse(text: &str) -> Res<Vec<Claim>> {
        let v: toml::Value = text.parse().unwrap();
        let t = Table::root("x.toml", &v)?;
        parse_claims(&t, &exp(false))
    }

    #[test]
    fn claims_are_read_from_the_experiment_file() {
        let c = parse(
            r#"[[claim]]
id = "fix-helps"
kind = "ratio"
text = "the fix helps"
source = "seed 000 §6"
premise = "overcommitted host"
case = "fix"
over = "base"
op = ">"
value = 1.0
"#,
        )
        .unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].evaluation, gain_over(1.0));
    }

    #[test]
    fn a_claim_on_an_unknown_case_or_form_is_refused_with_its_key() {
        let base = "[[claim]]\nid = \"x\"\ntext = \"t\"\nsource = \"s\"\npremise = \"p\"\n";
        let e = parse(&format!(
            "{base}kind = \"threshold\"\ncase = \"nope\"\nop = \">\"\nvalue = 1\n"
        ))
        .unwrap_err();
        assert!(e.to_string().contains("no case \"nope\""), "{e}");
        let e = parse(&format!("{base}kind = \"between\"\n")).unwrap_err();
        assert!(e.to_string().contains("allowed: \"threshold\""), "{e}");
        let e = parse(&format!(
            "{base}kind = \"ratio\"\ncase = \"fix\"\nover = \"base\"\nop = \"=>\"\nvalue = 1\n"
        ))
        .unwrap_err();
        assert!(e.to_string().contains("\"=>\" is not allowed"), "{e}");
    }
}
