//! Robustness: every claim of an experiment judged again under plausible perturbations of
//! its setup (`vcpulab robustness EXPERIMENT`).
//!
//! A verdict on the shipped setup says what the simulator gives there; whether the paper's
//! claim is a property of the mechanism or of one host size, one seed block or one noise
//! workload needs the neighbours of that setup. The family, applied to every case's
//! scenario after the case's (and the metric's) own edits:
//!
//! | id | what changes |
//! |---|---|
//! | `seeds+1000`, `seeds+2000` | the seeds: another block of consecutive seeds |
//! | `host-1`, `host+1` | `host.cores_per_socket` one down, one up |
//! | `vm+1` | one VM more: a copy of the experiment's noise VM (default: the last VM) |
//! | `smt` | SMT toggled: `threads_per_core` 1 becomes 2, more than 1 becomes 1 |
//! | `noise-swap` | the noise workload replaced by the experiment's stated alternative |
//! | `vendor` | `[kvm] vendor` toggled between intel and amd (KVM scenarios only) |
//! | `jitter-0`, `jitter-0.5ms`, `jitter-1ms` | every VM's `start_jitter` set to 0, 0.5 ms, 1 ms |
//!
//! The three jitter perturbations are issue 27's stability check: with host noise on by
//! default a verdict should not depend on when the vCPUs start; one that does names the
//! start as its mechanism (lockstep, or a regime the first milliseconds decide).
//!
//! **Premises.** A perturbation counts for a claim only if it keeps the claim's premise.
//! Other seeds keep every premise. A claim of the paper's own figures (`within`) or one
//! whose line is computed from the setup's sizes (`setup_bound = "why"` on the claim, e.g.
//! an equal share of 4 LPs) is about that setup: only other seeds apply to it. Otherwise,
//! what the engine can check without reading the premise's words: whether each case the
//! claim reads stays overcommitted (more vCPUs than logical CPUs) or not, and can run at
//! all; a perturbation that flips the one or breaks the other for any of the claim's cases
//! is "not applicable" to it. What it cannot
//! check, an experiment states in its `[robustness]` table: `exclude = { <id> = "why" }`
//! drops a perturbation for all its claims, with the reason shown. `noise` names the
//! noise workload by key path and `noise_swap` its replacement (which keeps the noise's
//! `threads`); `extra_vm` the VM that `vm+1` copies. A case without that workload or VM
//! (its neighbour removed) runs unchanged under those two.
//!
//! **Verdicts.** Each applicable perturbation runs every case with `seeds` consecutive
//! seeds (at least [`super::run::MIN_VERDICT_SEEDS`]; no adaptive seeds, so every
//! perturbation costs the same) and judges each claim exactly as `vcpulab reproduce` does.
//! A claim's share is the fraction of its applicable perturbations in which it holds (an
//! undecided verdict does not count as holding). Its worst counterexample is the failing
//! perturbation whose value lies furthest on the wrong side of the threshold, relative to
//! the threshold's size (an undecided one when none fails); its cases' scenarios are given
//! as runnable files.
//!
//! The runs are planned here and run by the caller (the Python sweep engine: a local
//! process pool or Ray), which hands their summaries back to [`report`].

use std::collections::BTreeMap;

use serde::Serialize;

use super::claims::{Claim, Verdict};
use super::run::{self, MIN_VERDICT_SEEDS};
use super::{extract, metric_document, Experiment};
use crate::error::Error;
use crate::reader::{Res, Table};
use crate::scenario::Scenario;

/// What an experiment says about its own perturbations (`[robustness]`).
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// Key path of the noise workload, e.g. `vm[0].workload[0]`.
    pub noise: Option<String>,
    /// The workload table that replaces it in `noise-swap`.
    pub noise_swap: Option<toml::Value>,
    /// Key path of the VM `vm+1` copies, e.g. `vm[0]` (default: the last VM).
    pub extra_vm: Option<String>,
    /// Perturbations the experiment's premises rule out, with why.
    pub exclude: Vec<(String, String)>,
}

/// The perturbation ids, in the order they are run and reported.
pub const FAMILY: &[&str] = &[
    "seeds+1000",
    "seeds+2000",
    "host-1",
    "host+1",
    "vm+1",
    "smt",
    "noise-swap",
    "vendor",
    "jitter-0",
    "jitter-0.5ms",
    "jitter-1ms",
];

pub(super) fn parse_settings(t: &Table, e: &Experiment) -> Res<Settings> {
    let Some(r) = t.get("robustness") else {
        return Ok(Settings::default());
    };
    let rt = r.table()?;
    let mut s = Settings {
        noise: rt.opt_str("noise")?.map(str::to_string),
        noise_swap: rt.get("noise_swap").map(|v| v.v.clone()),
        extra_vm: rt.opt_str("extra_vm")?.map(str::to_string),
        exclude: vec![],
    };
    if s.noise.is_some() != s.noise_swap.is_some() {
        return rt.err(
            "noise",
            "noise (the noise workload's key path) and noise_swap (its replacement) go together",
        );
    }
    if let Some(x) = rt.get("exclude") {
        let xt = x.table()?;
        for k in xt.keys() {
            if !FAMILY.contains(&k.as_str()) {
                return xt.err(
                    k,
                    format!("no perturbation {k:?}; allowed: {}", FAMILY.join(", ")),
                );
            }
            s.exclude.push((k.clone(), xt.req(k)?.str()?.to_string()));
        }
    }
    rt.finish(&["noise", "noise_swap", "extra_vm", "exclude"])?;
    // The paths must fit the experiment's scenario; checked once here, not per run.
    let origin = format!("scenarios/reproductions/{}/experiment.toml", e.id);
    let doc = crate::reader::parse_toml(&origin, &e.scenario_text)?;
    for (key, path) in [("noise", &s.noise), ("extra_vm", &s.extra_vm)] {
        if let Some(p) = path {
            if lookup(&doc, p).is_none() {
                return rt.err(key, format!("{p:?} is not in the experiment's scenario"));
            }
        }
    }
    Ok(s)
}

/// The value at a key path of the form `a.b[1].c`, if there.
fn lookup<'a>(doc: &'a toml::Value, path: &str) -> Option<&'a toml::Value> {
    let mut cur = doc;
    for part in path.split('.') {
        let (key, rest) = part.split_at(part.find('[').unwrap_or(part.len()));
        cur = cur.get(key)?;
        for idx in rest.split(']').filter(|s| !s.is_empty()) {
            cur = cur.get(idx.strip_prefix('[')?.parse::<usize>().ok()?)?;
        }
    }
    Some(cur)
}

fn int(doc: &toml::Value, table: &str, key: &str, default: i64) -> i64 {
    doc.get(table)
        .and_then(|t| t.get(key))
        .and_then(toml::Value::as_integer)
        .unwrap_or(default)
}

/// Total vCPUs and logical CPUs of a scenario document.
fn load_of(doc: &toml::Value) -> (i64, i64) {
    let cpus = int(doc, "host", "sockets", 1)
        * int(doc, "host", "cores_per_socket", 0)
        * int(doc, "host", "threads_per_core", 1);
    let vcpus = doc
        .get("vm")
        .and_then(toml::Value::as_array)
        .map(|vms| {
            vms.iter()
                .map(|v| {
                    v.get("vcpus")
                        .and_then(toml::Value::as_integer)
                        .unwrap_or(1)
                })
                .sum()
        })
        .unwrap_or(0);
    (vcpus, cpus)
}

fn overcommitted(doc: &toml::Value) -> bool {
    let (vcpus, cpus) = load_of(doc);
    vcpus > cpus
}

fn set(doc: &mut toml::Value, path: &str, v: toml::Value) -> Result<(), String> {
    crate::overrides::set(doc, path, v)
}

/// Applies perturbation `id` to one case's document; `Err` says why it cannot apply.
/// Returns the perturbation's description for this document.
fn apply(id: &str, s: &Settings, doc: &mut toml::Value) -> Result<String, String> {
    match id {
        // The seed itself is set per run by the planner.
        "seeds+1000" | "seeds+2000" => Ok(format!("seeds shifted by {}", seed_shift(id))),
        "host-1" | "host+1" => {
            let cores = int(doc, "host", "cores_per_socket", 0);
            let to = if id == "host-1" { cores - 1 } else { cores + 1 };
            if to < 1 {
                return Err(format!("the host has {cores} core per socket"));
            }
            set(doc, "host.cores_per_socket", toml::Value::Integer(to))?;
            Ok(format!("cores per socket {cores} -> {to}"))
        }
        "vm+1" => {
            let n = doc
                .get("vm")
                .and_then(toml::Value::as_array)
                .map_or(0, Vec::len);
            let path = s
                .extra_vm
                .clone()
                .unwrap_or_else(|| format!("vm[{}]", n.saturating_sub(1)));
            // A case without that VM (e.g. the VM alone, its neighbour removed) is left
            // as it is: there is no noise VM to add one more of.
            let Some(vm) = lookup(doc, &path) else {
                return Ok(format!("{path} absent: unchanged"));
            };
            let mut copy = vm.clone();
            let name = copy
                .get("name")
                .and_then(toml::Value::as_str)
                .unwrap_or("vm")
                .to_string();
            let extra = format!("{name}-extra");
            set(&mut copy, "name", toml::Value::String(extra.clone()))?;
            set(doc, &format!("vm[{n}]"), copy)?;
            Ok(format!("one VM more: {extra}, a copy of {name}"))
        }
        "smt" => {
            let threads = int(doc, "host", "threads_per_core", 1);
            let to = if threads > 1 { 1 } else { 2 };
            set(doc, "host.threads_per_core", toml::Value::Integer(to))?;
            Ok(format!("threads per core {threads} -> {to}"))
        }
        "noise-swap" => {
            let (Some(path), Some(swap)) = (&s.noise, &s.noise_swap) else {
                return Err("the experiment names no noise workload ([robustness] noise)".into());
            };
            let Some(old) = lookup(doc, path) else {
                return Ok(format!("{path} absent: unchanged"));
            };
            let kind = |w: &toml::Value| {
                w.get("kind")
                    .and_then(toml::Value::as_str)
                    .unwrap_or("?")
                    .to_string()
            };
            let was = kind(old);
            // The replacement keeps the noise's thread count (a case may set it).
            let mut new = swap.clone();
            if let (Some(t), None) = (old.get("threads"), new.get("threads")) {
                set(&mut new, "threads", t.clone())?;
            }
            let now = kind(&new);
            set(doc, path, new)?;
            Ok(format!("noise workload {path}: {was} -> {now}"))
        }
        "vendor" => {
            let Some(kvm) = doc.get("kvm") else {
                return Err("not a KVM scenario (no [kvm] table)".into());
            };
            let vendor = kvm
                .get("vendor")
                .and_then(toml::Value::as_str)
                .unwrap_or("intel")
                .to_string();
            let to = if vendor == "amd" { "intel" } else { "amd" };
            set(doc, "kvm.vendor", toml::Value::String(to.into()))?;
            Ok(format!("KVM vendor {vendor} -> {to}"))
        }
        "jitter-0" | "jitter-0.5ms" | "jitter-1ms" => {
            let to = id.strip_prefix("jitter-").unwrap_or("0");
            let to = if to == "0" { "0s" } else { to };
            let n = doc
                .get("vm")
                .and_then(toml::Value::as_array)
                .map_or(0, Vec::len);
            for i in 0..n {
                set(
                    doc,
                    &format!("vm[{i}].start_jitter"),
                    toml::Value::String(to.into()),
                )?;
            }
            Ok(format!("every VM's start_jitter -> {to}"))
        }
        other => Err(format!("no perturbation {other:?}")),
    }
}

fn seed_shift(id: &str) -> u64 {
    match id {
        "seeds+1000" => 1000,
        "seeds+2000" => 2000,
        _ => 0,
    }
}

/// One simulation of a robustness check.
#[derive(Clone, Debug, Serialize)]
pub struct PlannedRun {
    /// Unique within the experiment and safe as a file name.
    pub run_id: String,
    pub perturbation: String,
    pub case: String,
    pub seed: u64,
    /// The scenario, as JSON (what the sweep engine runs), with its seed.
    pub scenario: String,
    /// The same scenario as TOML, for a counterexample file.
    #[serde(skip)]
    toml: String,
    #[serde(skip)]
    case_index: usize,
    #[serde(skip)]
    group: usize,
}

/// One perturbation of an experiment, planned.
#[derive(Clone, Debug, Serialize)]
pub struct PlannedPerturbation {
    pub id: String,
    pub text: String,
    /// Why it does not apply to this experiment at all (then it has no runs).
    pub skipped: Option<String>,
    /// Cases whose overcommitment it flips (claims reading them are not judged).
    pub flips_overcommit: Vec<String>,
    /// Cases that cannot run under it, with why (claims reading them are not judged).
    pub invalid_cases: Vec<(String, String)>,
    pub runs: Vec<PlannedRun>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    pub experiment: String,
    pub seeds: u64,
    pub perturbations: Vec<PlannedPerturbation>,
}

/// Plans the robustness check of `exp`: every perturbation of [`FAMILY`] (or those `only`
/// names, when it names any), each with its runs (every case and metric group, `seeds`
/// seeds from the scenario's, or `first_seed`).
pub fn plan(
    exp: &Experiment,
    seeds: u64,
    first_seed: Option<u64>,
    only: &[String],
) -> Result<Plan, Error> {
    if let Some(bad) = only.iter().find(|o| !FAMILY.contains(&o.as_str())) {
        return Err(Error::NotFound(format!(
            "robustness: unknown perturbation {bad:?}; available: {}",
            FAMILY.join(", ")
        )));
    }
    let seeds = seeds.max(MIN_VERDICT_SEEDS);
    let groups = run::metric_groups(exp);
    let mut out = Vec::new();
    for id in FAMILY {
        if !only.is_empty() && !only.iter().any(|o| o == id) {
            continue;
        }
        let mut p = PlannedPerturbation {
            id: id.to_string(),
            text: String::new(),
            skipped: None,
            flips_overcommit: vec![],
            invalid_cases: vec![],
            runs: vec![],
        };
        if let Some((_, why)) = exp.robustness.exclude.iter().find(|(x, _)| x == id) {
            p.skipped = Some(format!("excluded by the experiment: {why}"));
            out.push(p);
            continue;
        }
        let mut texts: Vec<String> = Vec::new();
        'cases: for (ci, case) in exp.cases.iter().enumerate() {
            for (gi, (lead, _)) in groups.iter().enumerate() {
                let (origin, base) = metric_document(exp, case, &exp.metrics[*lead])?;
                let mut doc = base.clone();
                let text = match apply(id, &exp.robustness, &mut doc) {
                    Ok(t) => t,
                    Err(why) => {
                        p.skipped = Some(why);
                        break 'cases;
                    }
                };
                if !texts.contains(&text) {
                    texts.push(text);
                }
                if gi == 0 && overcommitted(&base) != overcommitted(&doc) {
                    p.flips_overcommit.push(case.id.clone());
                }
                let origin = format!("{origin}, perturbation {id}");
                let sc = match Scenario::from_value(&doc, &origin) {
                    Ok(sc) => sc,
                    Err(e) => {
                        // Its other cases still run: claims not reading this one count.
                        p.invalid_cases.push((case.id.clone(), e.to_string()));
                        continue 'cases;
                    }
                };
                for offset in 0..seeds {
                    let seed = first_seed.unwrap_or(sc.seed) + seed_shift(id) + offset;
                    let mut d = doc.clone();
                    set(&mut d, "seed", toml::Value::Integer(seed as i64))
                        .map_err(|m| Error::NotFound(format!("{origin}: {m}")))?;
                    p.runs.push(PlannedRun {
                        run_id: format!("{id}--c{ci:02}--m{gi}--s{offset:02}"),
                        perturbation: id.to_string(),
                        case: case.id.clone(),
                        seed,
                        scenario: serde_json::to_string(&d).expect("a parsed document serialises"),
                        toml: toml::to_string(&d).expect("a parsed document serialises"),
                        case_index: ci,
                        group: gi,
                    });
                }
            }
        }
        if p.skipped.is_none() && p.invalid_cases.len() == exp.cases.len() {
            p.skipped = Some(format!(
                "no case can run under it; the first: {}",
                p.invalid_cases[0].1
            ));
        }
        if p.skipped.is_some() {
            p.runs.clear();
            p.flips_overcommit.clear();
            p.invalid_cases.clear();
        }
        p.text = texts.join("; ");
        out.push(p);
    }
    Ok(Plan {
        experiment: exp.id.clone(),
        seeds,
        perturbations: out,
    })
}

/// One claim's outcome under one perturbation.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    pub perturbation: String,
    /// holds, fails, undecided, or "not applicable".
    pub verdict: String,
    pub value: Option<f64>,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    pub detail: String,
}

impl Outcome {
    fn not_applicable(perturbation: &str, why: String) -> Outcome {
        Outcome {
            perturbation: perturbation.to_string(),
            verdict: "not applicable".into(),
            value: None,
            ci_low: None,
            ci_high: None,
            detail: why,
        }
    }
}

/// A runnable scenario of a counterexample: one case the claim reads, perturbed.
#[derive(Clone, Debug, Serialize)]
pub struct CounterexampleFile {
    pub case: String,
    /// A file name for it (the case id with `/` as `_`).
    pub name: String,
    pub text: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Counterexample {
    pub perturbation: String,
    pub verdict: String,
    pub detail: String,
    pub files: Vec<CounterexampleFile>,
}

/// One claim across the family.
#[derive(Clone, Debug, Serialize)]
pub struct ClaimRobustness {
    pub experiment: String,
    pub claim: String,
    pub text: String,
    pub premise: String,
    pub applicable: usize,
    pub holds: usize,
    pub fails: usize,
    pub undecided: usize,
    /// holds / applicable (None: no perturbation applies).
    pub share: Option<f64>,
    pub outcomes: Vec<Outcome>,
    pub worst: Option<Counterexample>,
}

#[derive(Clone, Debug, Serialize)]
pub struct PerturbationStatus {
    pub id: String,
    pub text: String,
    /// ran, skipped or failed.
    pub status: String,
    pub reason: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub experiment: String,
    pub seeds: u64,
    pub perturbations: Vec<PerturbationStatus>,
    pub claims: Vec<ClaimRobustness>,
}

/// How far a verdict's value lies on the wrong side of its threshold (larger: a clearer
/// counterexample). Only values of one claim are compared, so no scale is needed.
fn violation(claim: &Claim, value: Option<f64>) -> f64 {
    let Some(v) = value else {
        return f64::NEG_INFINITY;
    };
    let (op, t) = claim.evaluation.test();
    match op {
        super::claims::Op::Gt | super::claims::Op::Ge => t - v,
        super::claims::Op::Lt | super::claims::Op::Le => v - t,
    }
}

/// Why perturbation `p` does not keep `claim`'s premise, if it does not.
fn premise_broken(exp: &Experiment, p: &PlannedPerturbation, claim: &Claim) -> Option<String> {
    if seed_shift(&p.id) > 0 {
        // Other seeds change no premise.
        return None;
    }
    if matches!(claim.evaluation, super::claims::Evaluation::Within { .. }) {
        return Some(
            "a claim of the paper's own figures holds for the paper's setup: only other seeds keep its premise"
                .into(),
        );
    }
    if let Some(why) = &claim.setup_bound {
        return Some(format!(
            "the claim's line comes from the setup's sizes ({why}): only other seeds keep its premise"
        ));
    }
    let metric = claim.evaluation.metric();
    let cases: Vec<String> = claim
        .evaluation
        .cases()
        .iter()
        .flat_map(|c| run::figure_cases(exp, c, metric))
        .collect();
    if let Some((c, why)) = p.invalid_cases.iter().find(|(c, _)| cases.contains(c)) {
        return Some(format!("case {c} cannot run under it: {why}"));
    }
    if let Some(c) = p.flips_overcommit.iter().find(|c| cases.contains(c)) {
        return Some(format!(
            "it changes whether case {c} is overcommitted (more vCPUs than logical CPUs)"
        ));
    }
    None
}

/// Judges every claim under every perturbation from the runs' summaries (by run id; a
/// missing run or an `Err` makes its perturbation "failed").
pub fn report(
    exp: &Experiment,
    plan: &Plan,
    results: &BTreeMap<String, Result<serde_json::Value, String>>,
) -> Report {
    let groups = run::metric_groups(exp);
    let mut statuses = Vec::new();
    // Per perturbation: per claim, its outcome.
    let mut judged: Vec<Vec<Outcome>> = Vec::new();
    for p in &plan.perturbations {
        let mut status = PerturbationStatus {
            id: p.id.clone(),
            text: p.text.clone(),
            status: "ran".into(),
            reason: None,
        };
        let na = |why: String| -> Vec<Outcome> {
            exp.claims
                .iter()
                .map(|_| Outcome::not_applicable(&p.id, why.clone()))
                .collect()
        };
        if let Some(why) = &p.skipped {
            status.status = "skipped".into();
            status.reason = Some(why.clone());
            judged.push(na(why.clone()));
            statuses.push(status);
            continue;
        }
        let mut values: Vec<Vec<Vec<Option<f64>>>> =
            vec![vec![Vec::new(); exp.metrics.len()]; exp.cases.len()];
        let mut failure = None;
        for r in &p.runs {
            match results.get(&r.run_id) {
                Some(Ok(summary)) => {
                    for &m in &groups[r.group].1 {
                        values[r.case_index][m].push(extract(summary, &exp.metrics[m].value));
                    }
                }
                Some(Err(e)) => {
                    failure.get_or_insert(format!("run {} failed: {e}", r.run_id));
                }
                None => {
                    failure.get_or_insert(format!("run {} has no result", r.run_id));
                }
            }
        }
        if let Some(why) = failure {
            status.status = "failed".into();
            status.reason = Some(why.clone());
            judged.push(na(why));
            statuses.push(status);
            continue;
        }
        let raw: Vec<_> = exp
            .cases
            .iter()
            .enumerate()
            .flat_map(|(i, c)| run::raw_rows(exp, c, &values[i]))
            .collect();
        let all = run::samples(&raw);
        judged.push(
            exp.claims
                .iter()
                .map(|claim| {
                    if let Some(why) = premise_broken(exp, p, claim) {
                        return Outcome::not_applicable(&p.id, why);
                    }
                    let r = run::judge(exp, &all, claim);
                    Outcome {
                        perturbation: p.id.clone(),
                        verdict: r.verdict.name().into(),
                        value: r.estimate.map(|e| e.value),
                        ci_low: r.estimate.map(|e| e.ci_low),
                        ci_high: r.estimate.map(|e| e.ci_high),
                        detail: r.detail,
                    }
                })
                .collect(),
        );
        statuses.push(status);
    }
    let claims = exp
        .claims
        .iter()
        .enumerate()
        .map(|(k, claim)| {
            let outcomes: Vec<Outcome> = judged.iter().map(|o| o[k].clone()).collect();
            let count = |v: Verdict| outcomes.iter().filter(|o| o.verdict == v.name()).count();
            let (holds, fails, undecided) = (
                count(Verdict::Holds),
                count(Verdict::Fails),
                count(Verdict::Undecided),
            );
            let applicable = holds + fails + undecided;
            let worst = [Verdict::Fails, Verdict::Undecided].iter().find_map(|v| {
                let mut best: Option<(usize, f64)> = None;
                for (i, o) in outcomes.iter().enumerate() {
                    if o.verdict != v.name() {
                        continue;
                    }
                    let x = violation(claim, o.value);
                    if best.is_none_or(|(_, b)| x > b) {
                        best = Some((i, x));
                    }
                }
                best.map(|(i, _)| i)
            });
            let worst = worst.map(|i| counterexample(exp, plan, claim, &outcomes[i]));
            ClaimRobustness {
                experiment: exp.id.clone(),
                claim: claim.id.clone(),
                text: claim.text.clone(),
                premise: claim.premise.clone(),
                applicable,
                holds,
                fails,
                undecided,
                share: (applicable > 0).then(|| holds as f64 / applicable as f64),
                outcomes,
                worst,
            }
        })
        .collect();
    Report {
        experiment: exp.id.clone(),
        seeds: plan.seeds,
        perturbations: statuses,
        claims,
    }
}

fn counterexample(exp: &Experiment, plan: &Plan, claim: &Claim, o: &Outcome) -> Counterexample {
    let p = plan
        .perturbations
        .iter()
        .find(|p| p.id == o.perturbation)
        .expect("an outcome's perturbation is planned");
    let metric = claim.evaluation.metric();
    let mut cases: Vec<String> = Vec::new();
    for c in claim.evaluation.cases() {
        for id in run::figure_cases(exp, c, metric) {
            if !cases.contains(&id) {
                cases.push(id);
            }
        }
    }
    let files = cases
        .iter()
        .filter_map(|case| {
            // The case's first run of the metric's group: its first seed.
            let gi = run::metric_groups(exp)
                .iter()
                .position(|(_, members)| {
                    members
                        .iter()
                        .any(|&m| exp.metrics[m].name == metric)
                })?;
            let r = p.runs.iter().find(|r| &r.case == case && r.group == gi)?;
            Some(CounterexampleFile {
                case: case.clone(),
                name: format!("{}.toml", case.replace('/', "_")),
                text: format!(
                    "# Counterexample to claim {} of experiment {} ({}):\n#   {}\n# under perturbation {} ({}); case {}, metric {}, first of {} seeds.\n# Verdict there: {} — {}\n# Run it: vcpulab run <this file>\n{}",
                    claim.id,
                    exp.id,
                    claim.source,
                    claim.text,
                    p.id,
                    p.text,
                    case,
                    metric,
                    plan.seeds,
                    o.verdict,
                    o.detail,
                    r.toml
                ),
            })
        })
        .collect();
    Counterexample {
        perturbation: o.perturbation.clone(),
        verdict: o.verdict.clone(),
        detail: o.detail.clone(),
        files,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two cases (base, fix) of a 4-vCPU VM beside a 2-vCPU noise VM on 4 cores
    /// (overcommitted), one claim: fix / base > 1.
    const SCENARIO: &str = r#"
name = "t"
duration = "10ms"
seed = 7
[host]
cores_per_socket = 4
[scheduler]
name = "rr"
[[vm]]
name = "bench"
vcpus = 4
[[vm.workload]]
kind = "dhrystone"
[[vm]]
name = "noise"
vcpus = 2
[[vm.workload]]
kind = "stress-ng"
threads = 2
"#;

    fn experiment(robustness: &str) -> Experiment {
        let text = format!(
            r#"
id = "t"
title = "t"
source = "t"
seeds = 5
metric = "m"
unit = "u"
value = "vm.bench.x"
[[case]]
id = "base"
[[case]]
id = "fix"
{robustness}
[[claim]]
id = "fix-helps"
text = "fix helps"
source = "s"
premise = "overcommitted"
kind = "ratio"
metric = "m"
case = "fix"
over = "base"
op = ">"
value = 1.0
"#
        );
        super::super::parse_experiment("t", &text, SCENARIO).unwrap()
    }

    const NOISE: &str =
        "[robustness]\nnoise = \"vm[1].workload[0]\"\nnoise_swap = { kind = \"dhrystone\" }\nexclude = { vendor = \"no KVM here\" }";

    #[test]
    fn the_family_is_planned_with_its_edits_and_exclusions() {
        let e = experiment(NOISE);
        let plan = plan(&e, 3, None, &[]).unwrap();
        assert_eq!(
            plan.seeds, MIN_VERDICT_SEEDS,
            "fewer seeds than a verdict needs are raised"
        );
        let ids: Vec<&str> = plan.perturbations.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, FAMILY);
        let by = |id: &str| plan.perturbations.iter().find(|p| p.id == id).unwrap();
        let seeds: Vec<u64> = by("seeds+1000").runs.iter().map(|r| r.seed).collect();
        assert_eq!(&seeds[..5], &[1007, 1008, 1009, 1010, 1011]);
        assert!(by("host-1").runs[0]
            .scenario
            .contains("\"cores_per_socket\":3"));
        assert!(by("host+1").runs[0]
            .scenario
            .contains("\"cores_per_socket\":5"));
        assert!(by("vm+1").runs[0].scenario.contains("noise-extra"));
        assert!(by("smt").runs[0]
            .scenario
            .contains("\"threads_per_core\":2"));
        // SMT doubles the logical CPUs: 6 vCPUs on 8 is no longer overcommitted.
        assert_eq!(by("smt").flips_overcommit, vec!["base", "fix"]);
        assert!(
            by("host+1").flips_overcommit.is_empty(),
            "6 vCPUs on 5 CPUs stay overcommitted"
        );
        assert!(by("noise-swap").runs[0]
            .scenario
            .contains("\"kind\":\"dhrystone\",\"threads\":2"));
        assert_eq!(
            by("vendor").skipped.as_deref(),
            Some("excluded by the experiment: no KVM here")
        );
        // Without a [robustness] table: no noise to swap, no [kvm] to toggle.
        let bare = plan_of(&experiment(""));
        let skipped = |id: &str| {
            bare.perturbations
                .iter()
                .find(|p| p.id == id)
                .unwrap()
                .skipped
                .clone()
        };
        assert!(skipped("noise-swap")
            .unwrap()
            .contains("names no noise workload"));
        assert!(skipped("vendor").unwrap().contains("no [kvm] table"));
    }

    fn plan_of(e: &Experiment) -> Plan {
        plan(e, 5, None, &[]).unwrap()
    }

    /// Fabricated summaries: fix beats base by `gain` under every perturbation but the
    /// ones in `reverse`, where base beats fix by as much.
    fn results(
        plan: &Plan,
        reverse: &[(&str, f64)],
    ) -> BTreeMap<String, Result<serde_json::Value, String>> {
        let mut out = BTreeMap::new();
        for p in &plan.perturbations {
            for (k, r) in p.runs.iter().enumerate() {
                let gain = reverse
                    .iter()
                    .find(|(id, _)| *id == p.id)
                    .map_or(1.5, |g| g.1);
                let wobble = 1.0 + 0.01 * (k % 5) as f64;
                let x = if r.case == "fix" { 100.0 * gain } else { 100.0 } * wobble;
                out.insert(
                    r.run_id.clone(),
                    Ok(serde_json::json!({"vms": [{"name": "bench", "x": x}]})),
                );
            }
        }
        out
    }

    #[test]
    fn shares_count_holding_perturbations_and_name_the_worst_counterexample() {
        let e = experiment(NOISE);
        let plan = plan_of(&e);
        let rep = report(
            &e,
            &plan,
            &results(&plan, &[("host-1", 0.9), ("vm+1", 0.5)]),
        );
        let c = &rep.claims[0];
        // 11 perturbations: vendor excluded, smt flips overcommitment: 9 apply.
        assert_eq!((c.applicable, c.holds, c.fails, c.undecided), (9, 7, 2, 0));
        assert_eq!(c.share, Some(7.0 / 9.0));
        let w = c.worst.as_ref().unwrap();
        assert_eq!(w.perturbation, "vm+1", "0.5 is further below 1 than 0.9");
        assert_eq!(w.verdict, "fails");
        let names: Vec<&str> = w.files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["fix.toml", "base.toml"]);
        assert!(w.files[0].text.contains("noise-extra"));
        // A counterexample file is a scenario that validates.
        let body: String = w.files[0]
            .text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        crate::scenario::Scenario::from_toml_str(&body, "counterexample").unwrap();
        let smt = c.outcomes.iter().find(|o| o.perturbation == "smt").unwrap();
        assert_eq!(smt.verdict, "not applicable");
        assert!(smt.detail.contains("overcommitted"), "{}", smt.detail);
    }

    #[test]
    fn claims_about_the_setup_itself_take_other_seeds_only() {
        let mut e = experiment(NOISE);
        e.claims[0].setup_bound = Some("an equal share of 4 cores".into());
        let plan = plan_of(&e);
        let rep = report(&e, &plan, &results(&plan, &[("host-1", 0.5)]));
        let c = &rep.claims[0];
        assert_eq!(
            (c.applicable, c.holds),
            (2, 2),
            "seeds+1000 and seeds+2000 only"
        );
        let host = c
            .outcomes
            .iter()
            .find(|o| o.perturbation == "host-1")
            .unwrap();
        assert_eq!(host.verdict, "not applicable");
        assert!(
            host.detail.contains("an equal share of 4 cores"),
            "{}",
            host.detail
        );
    }

    #[test]
    fn a_failed_run_fails_its_perturbation_not_the_report() {
        let e = experiment(NOISE);
        let plan = plan_of(&e);
        let mut res = results(&plan, &[]);
        let id = plan.perturbations[2].runs[0].run_id.clone();
        res.insert(id.clone(), Err("SimulationError: boom".into()));
        let rep = report(&e, &plan, &res);
        assert_eq!(rep.perturbations[2].status, "failed");
        assert!(rep.perturbations[2]
            .reason
            .as_ref()
            .unwrap()
            .contains("boom"));
        let c = &rep.claims[0];
        // 11 less vendor, smt and the failed one.
        assert_eq!((c.applicable, c.holds), (8, 8));
        assert_eq!(c.share, Some(1.0));
        assert!(c.worst.is_none());
    }

    #[test]
    fn bad_robustness_tables_are_refused_with_the_key() {
        for (table, says) in [
            (
                "[robustness]\nexclude = { nope = \"x\" }",
                "allowed: seeds+1000",
            ),
            ("[robustness]\nnoise = \"vm[1].workload[0]\"", "go together"),
            (
                "[robustness]\nextra_vm = \"vm[9]\"",
                "not in the experiment's scenario",
            ),
            ("[robustness]\nbogus = 1", "bogus"),
        ] {
            let text = format!("id = \"t\"\ntitle = \"t\"\nsource = \"t\"\nmetric = \"m\"\nunit = \"u\"\nvalue = \"vm.bench.x\"\n[[case]]\nid = \"a\"\n{table}\n");
            let err = super::super::parse_experiment("t", &text, SCENARIO)
                .unwrap_err()
                .to_string();
            assert!(err.contains(says), "{table}: {err}");
        }
    }

    #[test]
    fn every_built_in_experiment_plans_its_family() {
        for e in super::super::experiments() {
            let p = plan(&e, 5, None, &[]).unwrap();
            let ran = p
                .perturbations
                .iter()
                .filter(|p| p.skipped.is_none())
                .count();
            assert!(
                ran >= 5,
                "{}: only {ran} perturbations apply: {:?}",
                e.id,
                p.perturbations
                    .iter()
                    .map(|p| (&p.id, &p.skipped))
                    .collect::<Vec<_>>()
            );
        }
    }
}
