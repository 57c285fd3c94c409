//! Running a reproduction: its cases over seeds (in parallel when asked), its rows with
//! their intervals and regimes, and its claims' verdicts, adding seeds where a verdict is
//! undecided.
//!
//! **Seeds.** Every case first runs the experiment's `seeds` consecutive seeds (from the
//! scenario's seed, or `--seed`). A claim needs at least [`MIN_VERDICT_SEEDS`] seeds for
//! a verdict; while a claim is undecided (its interval straddles its line, or it has too
//! few seeds), the cases it reads get [`SEED_BLOCK`]-sized blocks of further seeds (at
//! least the experiment's own count), up to [`max_seeds`]; what is still undecided there is
//! reported undecided. Which seeds a case runs depends only on the experiment and the
//! verdicts, never on timing, so the output is the same with any number of workers.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;

use super::claims::{self, Claim, ClaimResult, Samples, Verdict};
use super::stats::{self, Resamples};
use super::{extract, metric_scenario, Case, Experiment, RegimeSplit, Row};
use crate::api::{run, RunOptions};
use crate::error::Error;

/// Fewest seeds a claim's verdict rests on.
pub const MIN_VERDICT_SEEDS: u64 = 5;
/// Seeds added to an undecided claim's cases at a time (or the experiment's count, if larger).
pub const SEED_BLOCK: u64 = 5;

/// The most seeds a case runs while its claims are undecided: three times the
/// experiment's count, and at least 15.
pub fn max_seeds(exp: &Experiment) -> u64 {
    (3 * exp.seeds).max(15)
}

/// One experiment reproduced: its finished rows and its claims' verdicts.
#[derive(Clone, Debug, Serialize)]
pub struct Reproduction {
    pub rows: Vec<Row>,
    pub claims: Vec<ClaimReport>,
}

/// One line of `vcpulab reproduce --claims --json`.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct ClaimReport {
    pub experiment: String,
    pub claim: String,
    pub text: String,
    pub source: String,
    pub premise: String,
    pub verdict: String,
    pub value: Option<f64>,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    pub threshold: f64,
    pub seeds: u64,
    pub detail: String,
}

fn find_case<'a>(exp: &'a Experiment, case_id: &str) -> Result<&'a Case, Error> {
    exp.cases.iter().find(|c| c.id == case_id).ok_or_else(|| {
        let ids: Vec<&str> = exp.cases.iter().map(|c| c.id.as_str()).collect();
        Error::NotFound(format!(
            "experiment {} has no case {case_id:?}; cases: {}",
            exp.id,
            ids.join(", ")
        ))
    })
}

/// The metrics measured in one series of runs: metrics with the same edits share runs.
/// Returns, per group, the index of the metric whose edits the group runs with and the
/// indices of its metrics, in metric order.
pub(super) fn metric_groups(exp: &Experiment) -> Vec<(usize, Vec<usize>)> {
    let edits: Vec<String> = exp
        .metrics
        .iter()
        .map(|m| format!("{:?} {:?}", m.set, m.remove))
        .collect();
    let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
    for i in 0..exp.metrics.len() {
        match groups.iter_mut().find(|(g, _)| edits[*g] == edits[i]) {
            Some((_, members)) => members.push(i),
            None => groups.push((i, vec![i])),
        }
    }
    groups
}

/// One simulation of a reproduction: a case's metric group at one seed.
struct Job {
    case: usize,
    group: usize,
    /// Seed offset from the group scenario's first seed.
    offset: u64,
}

/// Runs `jobs` on `workers` threads (the calling thread is one of them; only it calls the
/// caller's `stop`, which may need to be on the main thread) and returns each job's
/// figures (per metric of its group), in job order. On failure, the error of the first
/// failed job in job order.
fn run_jobs(
    exp: &Experiment,
    seed: Option<u64>,
    jobs: &[Job],
    workers: usize,
    opts: &RunOptions,
    progress: &(dyn Fn() + Sync),
) -> Result<Vec<Vec<Option<f64>>>, Error> {
    let groups = metric_groups(exp);
    let next = AtomicUsize::new(0);
    let stopped = Arc::new(AtomicBool::new(false));
    // Each job's figures (per metric of its group), or its error; None: not run.
    type Slot = Option<Result<Vec<Option<f64>>, Error>>;
    let results: Mutex<Vec<Slot>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    let work = |is_caller: bool| {
        let mut o = opts.clone();
        let user_stop = opts.stop.clone();
        let flag = stopped.clone();
        o.stop = Some(Arc::new(move || {
            if flag.load(Ordering::Relaxed) {
                return true;
            }
            let yes = is_caller && user_stop.as_ref().is_some_and(|s| s());
            if yes {
                flag.store(true, Ordering::Relaxed);
            }
            yes
        }));
        loop {
            if stopped.load(Ordering::Relaxed) {
                break;
            }
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(job) = jobs.get(i) else { break };
            let (lead, members) = &groups[job.group];
            let r = (|| {
                let case = &exp.cases[job.case];
                let sc = metric_scenario(exp, case, &exp.metrics[*lead])?;
                let s = seed.unwrap_or(sc.seed) + job.offset;
                let summary = run(&sc, Some(s), &o)?;
                let json = serde_json::to_value(&summary).expect("summary serialises");
                Ok(members
                    .iter()
                    .map(|&m| extract(&json, &exp.metrics[m].value))
                    .collect())
            })();
            if r.is_err() {
                stopped.store(true, Ordering::Relaxed);
            }
            results.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(r);
            progress();
        }
    };
    let workers = workers.clamp(1, jobs.len().max(1));
    std::thread::scope(|scope| {
        for _ in 1..workers {
            scope.spawn(|| work(false));
        }
        work(true);
    });
    let results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut out = Vec::with_capacity(jobs.len());
    let mut first_error = None;
    for r in results {
        match r {
            Some(Ok(v)) => out.push(v),
            Some(Err(e)) => {
                first_error.get_or_insert(e);
            }
            None => {
                first_error.get_or_insert(Error::Interrupted);
            }
        }
    }
    // A stop asked by the caller wins over the failures it caused in other workers.
    if let Some(e) = first_error {
        let interrupted = opts.stop.as_ref().is_some() && stopped.load(Ordering::Relaxed);
        return Err(match e {
            Error::Interrupted => Error::Interrupted,
            other if interrupted && matches!(other, Error::Interrupted) => Error::Interrupted,
            other => other,
        });
    }
    Ok(out)
}

/// Per-seed raw figures of cases: `values[case][metric]`, one value per seed run.
type CaseValues = Vec<Vec<Vec<Option<f64>>>>;

/// Runs seeds `from..to` (offsets) of the cases `cases` and appends their figures.
#[allow(clippy::too_many_arguments)]
fn extend(
    exp: &Experiment,
    seed: Option<u64>,
    values: &mut CaseValues,
    cases: &[(usize, u64, u64)],
    workers: usize,
    opts: &RunOptions,
    progress: &(dyn Fn() + Sync),
) -> Result<(), Error> {
    let groups = metric_groups(exp);
    let mut jobs = Vec::new();
    for &(case, from, to) in cases {
        for group in 0..groups.len() {
            for offset in from..to {
                jobs.push(Job {
                    case,
                    group,
                    offset,
                });
            }
        }
    }
    let figures = run_jobs(exp, seed, &jobs, workers, opts, progress)?;
    for (job, figs) in jobs.iter().zip(figures) {
        for (k, &m) in groups[job.group].1.iter().enumerate() {
            values[job.case][m].push(figs[k]);
        }
    }
    Ok(())
}

/// A row per metric of `case`, raw (not yet normalised), from its per-seed figures.
pub(super) fn raw_rows(exp: &Experiment, case: &Case, values: &[Vec<Option<f64>>]) -> Vec<Row> {
    exp.metrics
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let all: Vec<usize> = (0..values[i].len()).collect();
            Row {
                experiment: exp.id.clone(),
                case: case.id.clone(),
                metric: m.name.clone(),
                unit: m.unit.clone(),
                paper: case.paper.iter().find(|(n, _)| *n == m.name).map(|p| p.1),
                sim: stats::mean_at(&values[i], &all),
                ratio: None,
                seeds: values[i].len() as u64,
                ci_low: None,
                ci_high: None,
                regimes: None,
                values: values[i].clone(),
            }
        })
        .collect()
}

/// Runs one case with the experiment's seeds; returns one row per metric with the raw
/// (not yet normalised) figure and each seed's value.
pub fn run_case(exp: &Experiment, case_id: &str, seed: Option<u64>) -> Result<Vec<Row>, Error> {
    run_case_with(exp, case_id, seed, &RunOptions::default())
}

/// `run_case` with the runs' options (a caller's `stop`, for Ctrl-C).
pub fn run_case_with(
    exp: &Experiment,
    case_id: &str,
    seed: Option<u64>,
    opts: &RunOptions,
) -> Result<Vec<Row>, Error> {
    let case = find_case(exp, case_id)?;
    let ci = exp.cases.iter().position(|c| c.id == case.id).unwrap();
    let mut values: CaseValues = vec![vec![Vec::new(); exp.metrics.len()]; exp.cases.len()];
    extend(
        exp,
        seed,
        &mut values,
        &[(ci, 0, exp.seeds)],
        1,
        opts,
        &|| {},
    )?;
    Ok(raw_rows(exp, case, &values[ci]))
}

/// The samples claims and intervals read, from raw rows.
pub(super) fn samples(raw: &[Row]) -> Samples {
    let mut s = Samples::default();
    for r in raw {
        s.values
            .insert((r.case.clone(), r.metric.clone()), r.values.clone());
    }
    s.seeds = raw.iter().map(|r| r.values.len()).min().unwrap_or(0);
    s
}

/// The cases a figure of `case` reads: itself, and its normalisation reference.
pub(super) fn figure_cases(exp: &Experiment, case: &str, metric: &str) -> Vec<String> {
    let mut v = vec![case.to_string()];
    v.extend(super::reference_case(exp, case, metric));
    v
}

/// The samples restricted to the first `n` seeds of every series.
fn prefix(s: &Samples, n: usize) -> Samples {
    Samples {
        seeds: n,
        values: s
            .values
            .iter()
            .map(|(k, v)| (k.clone(), v[..n.min(v.len())].to_vec()))
            .collect(),
    }
}

/// Normalises raw rows (metrics with `normalize` are divided by the reference case's
/// raw figure), computes sim / paper, and, where the raw rows carry their seeds' values,
/// each row's interval and regimes.
///
/// A normalised row with its seeds' values is the figure over the seeds it shares with its
/// reference, as its interval and the claims pair them: adaptive seeding may run the
/// reference further than the case (8 seeds against 3), and a case's mean over its seeds
/// divided by the reference's over more seeds could fall outside its own interval (it did
/// in 2 of 1,123 rows until 2026-12-05). `seeds` is then the number of shared seeds, and
/// the regimes are looked for among those seeds.
pub fn finish_rows(exp: &Experiment, raw: &[Row]) -> Vec<Row> {
    let raw_value = |case: &str, metric: &str| {
        raw.iter()
            .find(|r| r.case == case && r.metric == metric)
            .and_then(|r| r.sim)
    };
    let all = samples(raw);
    raw.iter()
        .map(|r| {
            let mut row = r.clone();
            // The seeds this row's figure pairs with its reference's (all of its own when
            // it is not normalised), and the samples cut to them.
            let shared = (!r.values.is_empty()).then(|| {
                let n = figure_cases(exp, &r.case, &r.metric)
                    .iter()
                    .filter_map(|c| all.series(c, &r.metric).map(<[_]>::len))
                    .min()
                    .unwrap_or(0);
                (n, prefix(&all, n))
            });
            if let Some(reference) = super::reference_case(exp, &r.case, &r.metric) {
                row.sim = match &shared {
                    Some((n, s)) if *n > 0 => {
                        row.seeds = *n as u64;
                        s.figure(exp, &r.case, &r.metric, &(0..*n).collect::<Vec<_>>())
                    }
                    // without seeds in common (a hand-built reference row without its
                    // values), the two means as they are
                    _ => match (r.sim, raw_value(&reference, &r.metric)) {
                        (Some(s), Some(b)) if b != 0.0 => Some(s / b),
                        _ => None,
                    },
                };
            }
            row.ratio = match (row.sim, row.paper) {
                (Some(s), Some(p)) if p != 0.0 => Some(s / p),
                _ => None,
            };
            if let Some((n, s)) = shared {
                // The interval of the figure as reported, over the same seeds.
                let res = Resamples::new(n, &format!("{}/{}/{}", exp.id, r.case, r.metric));
                if let Some(e) = res.estimate(|idx| s.figure(exp, &r.case, &r.metric, idx)) {
                    row.ci_low = Some(e.ci_low);
                    row.ci_high = Some(e.ci_high);
                }
                row.regimes =
                    stats::regimes(&r.values[..n.min(r.values.len())]).map(|g| RegimeSplit {
                        text: g.describe(),
                        low_seeds: g.low_seeds,
                        low_mean: g.low_mean,
                        high_seeds: g.high_seeds,
                        high_mean: g.high_mean,
                        d: g.d,
                    });
                row.values.clear();
            }
            row
        })
        .collect()
}

/// A claim's verdict on the seeds its cases share (fewer than `MIN_VERDICT_SEEDS`:
/// undecided, whatever the interval says).
pub(super) fn judge(exp: &Experiment, all: &Samples, claim: &Claim) -> ClaimResult {
    let metric = claim.evaluation.metric();
    let n = claim
        .evaluation
        .cases()
        .iter()
        .flat_map(|c| figure_cases(exp, c, metric))
        .filter_map(|c| all.series(&c, metric).map(<[_]>::len))
        .min()
        .unwrap_or(0);
    let s = prefix(all, n);
    let res = Resamples::new(n, &format!("{}/{}", exp.id, claim.id));
    let mut r = claims::evaluate(exp, &s, &res, claim);
    if (n as u64) < MIN_VERDICT_SEEDS && r.verdict != Verdict::Undecided {
        r.detail = format!(
            "{} (only {n} seeds; a verdict needs {MIN_VERDICT_SEEDS})",
            r.detail
        );
        r.verdict = Verdict::Undecided;
    }
    r
}

fn report(exp: &Experiment, claim: &Claim, r: &ClaimResult) -> ClaimReport {
    ClaimReport {
        experiment: exp.id.clone(),
        claim: claim.id.clone(),
        text: claim.text.clone(),
        source: claim.source.clone(),
        premise: claim.premise.clone(),
        verdict: r.verdict.name().to_string(),
        value: r.estimate.map(|e| e.value),
        ci_low: r.estimate.map(|e| e.ci_low),
        ci_high: r.estimate.map(|e| e.ci_high),
        threshold: r.threshold,
        seeds: r.seeds as u64,
        detail: r.detail.clone(),
    }
}

/// Verdicts of an experiment's claims on finished raw rows (rows carrying their values).
pub fn judge_claims(exp: &Experiment, raw: &[Row]) -> Vec<ClaimReport> {
    let all = samples(raw);
    exp.claims
        .iter()
        .map(|c| report(exp, c, &judge(exp, &all, c)))
        .collect()
}

/// Runs every case of an experiment (with the experiment's seeds) and returns its
/// finished rows.
pub fn run_experiment(exp: &Experiment, seed: Option<u64>) -> Result<Vec<Row>, Error> {
    let mut raw = Vec::new();
    for c in &exp.cases {
        raw.extend(run_case(exp, &c.id, seed)?);
    }
    Ok(finish_rows(exp, &raw))
}

/// Reproduces an experiment: every case with the experiment's seeds on `workers` threads,
/// then, while a claim is undecided and its cases are below [`max_seeds`], more seeds
/// for those cases (`adaptive`). `progress(done, total)` is called after each run, from
/// any worker thread; `total` grows when seeds are added.
pub fn reproduce(
    exp: &Experiment,
    seed: Option<u64>,
    workers: usize,
    adaptive: bool,
    opts: &RunOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Reproduction, Error> {
    let groups = metric_groups(exp).len();
    let done = AtomicUsize::new(0);
    let total = AtomicUsize::new(exp.cases.len() * groups * exp.seeds as usize);
    let tick = || {
        let d = done.fetch_add(1, Ordering::Relaxed) + 1;
        progress(d, total.load(Ordering::Relaxed));
    };
    let mut values: CaseValues = vec![vec![Vec::new(); exp.metrics.len()]; exp.cases.len()];
    let everything: Vec<(usize, u64, u64)> =
        (0..exp.cases.len()).map(|c| (c, 0, exp.seeds)).collect();
    extend(exp, seed, &mut values, &everything, workers, opts, &tick)?;
    let cap = if adaptive { max_seeds(exp) } else { 0 };
    loop {
        let raw: Vec<Row> = exp
            .cases
            .iter()
            .enumerate()
            .flat_map(|(i, c)| raw_rows(exp, c, &values[i]))
            .collect();
        let all = samples(&raw);
        // The cases of undecided claims, and their normalisation references.
        let mut wanted: Vec<usize> = Vec::new();
        for claim in &exp.claims {
            if judge(exp, &all, claim).verdict != Verdict::Undecided {
                continue;
            }
            let metric = claim.evaluation.metric();
            for c in claim.evaluation.cases() {
                for id in figure_cases(exp, c, metric) {
                    if let Some(i) = exp.cases.iter().position(|x| x.id == id) {
                        if !wanted.contains(&i) {
                            wanted.push(i);
                        }
                    }
                }
            }
        }
        wanted.sort_unstable();
        let block = SEED_BLOCK.max(exp.seeds);
        let more: Vec<(usize, u64, u64)> = wanted
            .into_iter()
            .filter_map(|i| {
                let have = values[i][0].len() as u64;
                let to = (have + block).min(cap);
                (to > have).then_some((i, have, to))
            })
            .collect();
        if more.is_empty() {
            let claims = judge_claims(exp, &raw);
            return Ok(Reproduction {
                rows: finish_rows(exp, &raw),
                claims,
            });
        }
        let added: u64 = more.iter().map(|(_, a, b)| b - a).sum();
        total.fetch_add(added as usize * groups, Ordering::Relaxed);
        extend(exp, seed, &mut values, &more, workers, opts, &tick)?;
    }
}
