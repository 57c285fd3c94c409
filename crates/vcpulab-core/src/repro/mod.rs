//! Built-in reproductions: each is a scenario file plus an experiment file listing cases
//! (edits of the scenario by key path), the paper's figure for each case, and where the
//! simulated figure comes from in the summary. Both files live in
//! `scenarios/reproductions/<id>/` and are compiled in, so `vcpulab reproduce` works from
//! an installed package.

pub mod claims;
pub mod robustness;
mod run;
pub mod stats;

use crate::error::{Error, ScenarioError};
use crate::reader::{parse_toml, Res, Table};
use crate::scenario::Scenario;
use serde::Serialize;

/// (id, experiment file, scenario file). One line per reproduction.
const EMBEDDED: &[(&str, &str, &str)] = &[
    (
        "hyperv-root",
        include_str!("../../../../scenarios/reproductions/hyperv-root/experiment.toml"),
        include_str!("../../../../scenarios/reproductions/hyperv-root/scenario.toml"),
    ),
    (
        "hyperv-types",
        include_str!("../../../../scenarios/reproductions/hyperv-types/experiment.toml"),
        include_str!("../../../../scenarios/reproductions/hyperv-types/scenario.toml"),
    ),
    (
        "kvm-ple",
        include_str!("../../../../scenarios/reproductions/kvm-ple/experiment.toml"),
        include_str!("../../../../scenarios/reproductions/kvm-ple/scenario.toml"),
    ),
    (
        "kvm-ple-short",
        include_str!("../../../../scenarios/reproductions/kvm-ple-short/experiment.toml"),
        include_str!("../../../../scenarios/reproductions/kvm-ple-short/scenario.toml"),
    ),
    (
        "kvm-ple-eevdf",
        include_str!("../../../../scenarios/reproductions/kvm-ple-eevdf/experiment.toml"),
        include_str!("../../../../scenarios/reproductions/kvm-ple/scenario.toml"),
    ),
    (
        "kvm-ple-short-eevdf",
        include_str!("../../../../scenarios/reproductions/kvm-ple-short-eevdf/experiment.toml"),
        include_str!("../../../../scenarios/reproductions/kvm-ple-short/scenario.toml"),
    ),
    (
        "kvm-ple-artifact",
        include_str!("../../../../scenarios/reproductions/kvm-ple-artifact/experiment.toml"),
        include_str!("../../../../scenarios/reproductions/kvm-ple-artifact/scenario.toml"),
    ),
    (
        "flms-balance",
        include_str!("../../../../scenarios/reproductions/flms-balance/experiment.toml"),
        include_str!("../../../../scenarios/reproductions/flms-balance/scenario.toml"),
    ),
    (
        "flms-compute",
        include_str!("../../../../scenarios/reproductions/flms-compute/experiment.toml"),
        include_str!("../../../../scenarios/reproductions/flms-compute/scenario.toml"),
    ),
    (
        "flms-fairness",
        include_str!("../../../../scenarios/reproductions/flms-fairness/experiment.toml"),
        include_str!("../../../../scenarios/reproductions/flms-fairness/scenario.toml"),
    ),
    (
        "flms-iozone",
        include_str!("../../../../scenarios/reproductions/flms-iozone/experiment.toml"),
        include_str!("../../../../scenarios/reproductions/flms-iozone/scenario.toml"),
    ),
    (
        "flms-webbench",
        include_str!("../../../../scenarios/reproductions/flms-webbench/experiment.toml"),
        include_str!("../../../../scenarios/reproductions/flms-webbench/scenario.toml"),
    ),
    (
        "flms-io",
        include_str!("../../../../scenarios/reproductions/flms-io/experiment.toml"),
        include_str!("../../../../scenarios/reproductions/flms-io/scenario.toml"),
    ),
    (
        "software-ft",
        include_str!("../../../../scenarios/reproductions/software-ft/experiment.toml"),
        include_str!("../../../../scenarios/reproductions/software-ft/scenario.toml"),
    ),
    (
        "xen-credit2",
        include_str!("../../../../scenarios/reproductions/xen-credit2/experiment.toml"),
        include_str!("../../../../scenarios/reproductions/xen-credit2/scenario.toml"),
    ),
    (
        "xen-rtds-ft",
        include_str!("../../../../scenarios/reproductions/xen-rtds-ft/experiment.toml"),
        include_str!("../../../../scenarios/reproductions/software-ft/scenario.toml"),
    ),
    (
        "xen-pvcc",
        include_str!("../../../../scenarios/reproductions/xen-pvcc/experiment.toml"),
        include_str!("../../../../scenarios/reproductions/xen-pvcc/scenario.toml"),
    ),
    (
        "core-sched",
        include_str!("../../../../scenarios/reproductions/core-sched/experiment.toml"),
        include_str!("../../../../scenarios/reproductions/core-sched/scenario.toml"),
    ),
    (
        "halt-poll",
        include_str!("../../../../scenarios/reproductions/halt-poll/experiment.toml"),
        include_str!("../../../../scenarios/reproductions/halt-poll/scenario.toml"),
    ),
    (
        "kvm-yield-series",
        include_str!("../../../../scenarios/reproductions/kvm-yield-series/experiment.toml"),
        include_str!("../../../../scenarios/reproductions/kvm-yield-series/scenario.toml"),
    ),
];

#[derive(Clone, Debug, Serialize)]
pub struct Experiment {
    pub id: String,
    pub title: String,
    pub source: String,
    pub notes: String,
    /// The first metric's name and unit (kept for single-metric tables).
    pub metric: String,
    pub unit: String,
    /// Where the first metric comes from.
    pub value: String,
    /// The relative distance to the paper the issue expects, if any.
    pub tolerance: Option<f64>,
    /// Each case runs with this many consecutive seeds; figures are their means.
    pub seeds: u64,
    pub metrics: Vec<Metric>,
    pub cases: Vec<Case>,
    /// The paper's claims about these figures, with how each is evaluated.
    pub claims: Vec<claims::Claim>,
    /// What its `[robustness]` table says about perturbing it.
    #[serde(skip)]
    pub robustness: robustness::Settings,
    #[serde(skip)]
    pub scenario_text: String,
}

/// One figure reported per case.
#[derive(Clone, Debug, Serialize)]
pub struct Metric {
    pub name: String,
    pub unit: String,
    /// `vm.<name>.<field...>` or a dotted path into the summary JSON.
    pub value: String,
    /// Divide by the same figure of the reference case: the case whose `axis` takes
    /// `value` (e.g. variant = baseline), other axes equal.
    pub normalize: Option<(String, String)>,
    /// Edits applied after the case's for this metric's run: a metric measured in a
    /// different run of the case (the paper ran another test on the same setup). Metrics
    /// with the same edits share their runs.
    #[serde(skip)]
    pub set: Vec<(String, toml::Value)>,
    #[serde(skip)]
    pub remove: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Case {
    pub id: String,
    /// Paper figures of this case, by metric name.
    pub paper: Vec<(String, f64)>,
    pub note: String,
    /// Axis values of a matrix case, e.g. [("benchmark", "ebizzy"), ("variant", "ab")].
    pub axes: Vec<(String, String)>,
    #[serde(skip)]
    pub set: Vec<(String, toml::Value)>,
    #[serde(skip)]
    pub remove: Vec<String>,
}

/// One line of `vcpulab reproduce --json`.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct Row {
    pub experiment: String,
    pub case: String,
    pub metric: String,
    pub unit: String,
    pub paper: Option<f64>,
    pub sim: Option<f64>,
    /// sim / paper.
    pub ratio: Option<f64>,
    /// How many seeds `sim` is the mean of (0 in a raw row before it is finished).
    #[serde(default)]
    pub seeds: u64,
    /// The 95 % bootstrap interval of `sim` over its seeds ([`stats`]).
    #[serde(default)]
    pub ci_low: Option<f64>,
    #[serde(default)]
    pub ci_high: Option<f64>,
    /// Two regimes among the seeds' raw values, if the test of [`stats::regimes`] finds them.
    #[serde(default)]
    pub regimes: Option<RegimeSplit>,
    /// The raw figure of each seed, in seed order (raw rows only; finished rows drop it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<Option<f64>>,
}

/// A row's seeds split into two regimes, with the split in words.
#[derive(Clone, Debug, Serialize, serde::Deserialize, PartialEq)]
pub struct RegimeSplit {
    pub low_seeds: usize,
    pub low_mean: f64,
    pub high_seeds: usize,
    pub high_mean: f64,
    /// Ashman's D of the split.
    pub d: f64,
    pub text: String,
}

/// Edits to a scenario: keys to set (with their values) and keys to remove.
type Edits = (Vec<(String, toml::Value)>, Vec<String>);

fn parse_edits(t: &Table) -> Res<Edits> {
    let set = match t.get("set") {
        Some(s) => {
            let st = s.table()?;
            st.keys()
                .map(|k| (k.clone(), st.get(k).unwrap().v.clone()))
                .collect()
        }
        None => vec![],
    };
    let remove = match t.get("remove") {
        Some(r) => r
            .array()?
            .iter()
            .map(|x| x.str().map(str::to_string))
            .collect::<Res<_>>()?,
        None => vec![],
    };
    Ok((set, remove))
}

fn parse_experiment(id: &str, text: &str, scenario_text: &str) -> Res<Experiment> {
    let origin = format!("scenarios/reproductions/{id}/experiment.toml");
    let v = parse_toml(&origin, text)?;
    let t = Table::root(&origin, &v)?;
    // Metrics: a [[metric]] list, or the single-metric keys at the top.
    let mut metrics = Vec::new();
    if let Some(ms) = t.get("metric").filter(|m| m.v.is_array()) {
        for m in ms.array()? {
            let mt = m.table()?;
            let normalize = match mt.get("normalize") {
                None => None,
                Some(n) => {
                    let nt = n.table()?;
                    let r = (
                        nt.req("axis")?.str()?.to_string(),
                        nt.req("value")?.str()?.to_string(),
                    );
                    nt.finish(&["axis", "value"])?;
                    Some(r)
                }
            };
            let (set, remove) = parse_edits(&mt)?;
            metrics.push(Metric {
                name: mt.req("name")?.str()?.to_string(),
                unit: mt.req("unit")?.str()?.to_string(),
                value: mt.req("value")?.str()?.to_string(),
                normalize,
                set,
                remove,
            });
            mt.finish(&["name", "unit", "value", "normalize", "set", "remove"])?;
        }
    } else {
        metrics.push(Metric {
            name: t.req("metric")?.str()?.to_string(),
            unit: t.req("unit")?.str()?.to_string(),
            value: t.req("value")?.str()?.to_string(),
            normalize: None,
            set: vec![],
            remove: vec![],
        });
    }
    let first = metrics[0].name.clone();
    // Edits applied to every case before its own (e.g. another host scheduler).
    let (base_set, base_remove) = parse_edits(&t)?;
    let mut cases = Vec::new();
    // Explicit cases.
    if let Some(cs) = t.get("case") {
        for c in cs.array()? {
            let ct = c.table()?;
            let (set, remove) = parse_edits(&ct)?;
            let paper = ct
                .opt_f64("paper", f64::MIN, f64::MAX)?
                .map(|p| vec![(first.clone(), p)])
                .unwrap_or_default();
            cases.push(Case {
                id: ct.req("id")?.str()?.to_string(),
                paper,
                note: ct.opt_str("note")?.unwrap_or("").to_string(),
                axes: vec![],
                set,
                remove,
            });
            ct.finish(&["id", "paper", "note", "set", "remove"])?;
        }
    }
    // A matrix: the product of [[axis]] values; case id = values joined by '/'.
    if let Some(axes) = t.get("axis") {
        let mut grid: Vec<Case> = vec![Case {
            id: String::new(),
            paper: vec![],
            note: String::new(),
            axes: vec![],
            set: vec![],
            remove: vec![],
        }];
        for a in axes.array()? {
            let at = a.table()?;
            let name = at.req("name")?.str()?.to_string();
            let mut next = Vec::new();
            let values = at.req("value")?.array()?;
            let mut parsed = Vec::new();
            for val in &values {
                let vt = val.table()?;
                let (set, remove) = parse_edits(&vt)?;
                parsed.push((
                    vt.req("id")?.str()?.to_string(),
                    vt.opt_str("note")?.unwrap_or("").to_string(),
                    set,
                    remove,
                ));
                vt.finish(&["id", "note", "set", "remove"])?;
            }
            at.finish(&["name", "value"])?;
            for g in &grid {
                for (vid, note, set, remove) in &parsed {
                    let mut c = g.clone();
                    c.id = if c.id.is_empty() {
                        vid.clone()
                    } else {
                        format!("{}/{}", c.id, vid)
                    };
                    c.axes.push((name.clone(), vid.clone()));
                    c.set.extend(set.iter().cloned());
                    c.remove.extend(remove.iter().cloned());
                    if !note.is_empty() {
                        c.note = if c.note.is_empty() {
                            note.clone()
                        } else {
                            format!("{}; {}", c.note, note)
                        };
                    }
                    next.push(c);
                }
            }
            grid = next;
        }
        cases.extend(grid);
    }
    for c in &mut cases {
        let mut set = base_set.clone();
        set.append(&mut c.set);
        c.set = set;
        let mut remove = base_remove.clone();
        remove.append(&mut c.remove);
        c.remove = remove;
    }
    // Paper figures by (case, metric).
    if let Some(ps) = t.get("paper") {
        for p in ps.array()? {
            let pt = p.table()?;
            let case = pt.req("case")?.str()?;
            let metric = pt.opt_str("metric")?.unwrap_or(&first).to_string();
            let value = pt.req("value")?.f64_in(f64::MIN, f64::MAX)?;
            let Some(c) = cases.iter_mut().find(|c| c.id == case) else {
                return pt.err("case", format!("no case {case:?} in this experiment"));
            };
            if !metrics.iter().any(|m| m.name == metric) {
                return pt.err("metric", format!("no metric {metric:?} in this experiment"));
            }
            c.paper.push((metric, value));
            pt.finish(&["case", "metric", "value"])?;
        }
    }
    let e = Experiment {
        id: t.req("id")?.str()?.to_string(),
        title: t.req("title")?.str()?.to_string(),
        source: t.req("source")?.str()?.to_string(),
        notes: t.opt_str("notes")?.unwrap_or("").to_string(),
        metric: metrics[0].name.clone(),
        unit: metrics[0].unit.clone(),
        value: metrics[0].value.clone(),
        tolerance: t.opt_f64("tolerance", 0.0, 10.0)?,
        seeds: t.opt_u64("seeds", 1, 1000)?.unwrap_or(1),
        metrics,
        cases,
        claims: vec![],
        robustness: robustness::Settings::default(),
        scenario_text: scenario_text.to_string(),
    };
    let mut e = e;
    e.claims = claims::parse_claims(&t, &e)?;
    e.robustness = robustness::parse_settings(&t, &e)?;
    t.finish(&[
        "id",
        "title",
        "source",
        "notes",
        "metric",
        "unit",
        "value",
        "tolerance",
        "seeds",
        "claim",
        "case",
        "axis",
        "paper",
        "scenario",
        "set",
        "remove",
        "robustness",
    ])?;
    Ok(e)
}

/// All built-in experiments, in registry order.
pub fn experiments() -> Vec<Experiment> {
    EMBEDDED
        .iter()
        .map(|(id, e, s)| {
            parse_experiment(id, e, s)
                .unwrap_or_else(|err| panic!("built-in experiment {id} is invalid: {err}"))
        })
        .collect()
}

pub fn find(id: &str) -> Result<Experiment, Error> {
    experiments()
        .into_iter()
        .find(|e| e.id == id)
        .ok_or_else(|| {
            let ids: Vec<String> = experiments().into_iter().map(|e| e.id).collect();
            Error::NotFound(format!(
                "unknown experiment {id:?}; available: {}",
                ids.join(", ")
            ))
        })
}

/// The scenario of one case: the experiment's scenario with the case's edits applied.
pub fn case_scenario(e: &Experiment, case: &Case) -> Result<Scenario, Error> {
    metric_scenario(e, case, &e.metrics[0])
}

/// The scenario one metric of a case is measured in: the case's edits, then the metric's.
pub fn metric_scenario(e: &Experiment, case: &Case, metric: &Metric) -> Result<Scenario, Error> {
    let (origin, doc) = metric_document(e, case, metric)?;
    Ok(Scenario::from_value(&doc, &origin)?)
}

/// The scenario file (TOML) of a case as it runs for `metric` (the first by default), for
/// users to read or run by hand.
pub fn case_scenario_toml(
    e: &Experiment,
    case_id: &str,
    metric: Option<&str>,
) -> Result<String, Error> {
    let case = e.cases.iter().find(|c| c.id == case_id).ok_or_else(|| {
        let ids: Vec<&str> = e.cases.iter().map(|c| c.id.as_str()).collect();
        Error::NotFound(format!(
            "experiment {} has no case {case_id:?}; cases: {}",
            e.id,
            ids.join(", ")
        ))
    })?;
    let m = match metric {
        None => &e.metrics[0],
        Some(name) => e.metrics.iter().find(|m| m.name == name).ok_or_else(|| {
            Error::NotFound(format!("experiment {} has no metric {name:?}", e.id))
        })?,
    };
    let (_, doc) = metric_document(e, case, m)?;
    Ok(format!(
        "# vcpulab reproduce {}: case {} (metric {}), the experiment's scenario with the case's edits\n{}",
        e.id,
        case.id,
        m.name,
        toml::to_string(&doc).expect("a parsed document serialises")
    ))
}

fn metric_document(
    e: &Experiment,
    case: &Case,
    metric: &Metric,
) -> Result<(String, toml::Value), Error> {
    let origin = format!(
        "scenarios/reproductions/{}/scenario.toml (case {})",
        e.id, case.id
    );
    let mut doc = parse_toml(&origin, &e.scenario_text)?;
    for (removes, sets) in [(&case.remove, &case.set), (&metric.remove, &metric.set)] {
        for r in removes {
            crate::overrides::remove(&mut doc, r)
                .map_err(|m| ScenarioError::new(&origin, r.clone(), m))?;
        }
        for (path, value) in sets {
            crate::overrides::set(&mut doc, path, value.clone())
                .map_err(|m| ScenarioError::new(&origin, path.clone(), m))?;
        }
    }
    Ok((origin, doc))
}

/// The case a normalised `metric` of `case` is divided by: the case whose normalising
/// axis takes the reference value, other axes equal (None: the metric is not normalised,
/// or there is no such metric or case).
pub fn reference_case(exp: &Experiment, case: &str, metric: &str) -> Option<String> {
    let (axis, value) = exp
        .metrics
        .iter()
        .find(|m| m.name == metric)?
        .normalize
        .as_ref()?;
    let c = exp.cases.iter().find(|c| c.id == case)?;
    let ids: Vec<&str> = c
        .axes
        .iter()
        .map(|(a, v)| {
            if a == axis {
                value.as_str()
            } else {
                v.as_str()
            }
        })
        .collect();
    Some(ids.join("/"))
}

/// Looks up a figure in a summary: `vm.<name>.<field>`, `vm.*.<field>` (the sum over all
/// VMs, e.g. the host's total PLE exits; none if a VM lacks the field) or a dotted JSON
/// path.
pub fn extract(summary: &serde_json::Value, path: &str) -> Option<f64> {
    if let Some(field) = path.strip_prefix("vm.*.") {
        let vms = summary["vms"].as_array()?;
        let mut total = 0.0;
        for vm in vms {
            let name = vm["name"].as_str()?;
            total += extract(summary, &format!("vm.{name}.{field}"))?;
        }
        return Some(total);
    }
    let mut parts = path.split('.');
    let mut cur = summary;
    if path.starts_with("vm.") {
        parts.next();
        let name = parts.next()?;
        cur = summary["vms"]
            .as_array()?
            .iter()
            .find(|v| v["name"] == name)?;
    }
    for p in parts {
        cur = match cur {
            serde_json::Value::Array(a) => a.get(p.parse::<usize>().ok()?)?,
            other => other.get(p)?,
        };
    }
    cur.as_f64()
}

pub use run::{
    finish_rows, reproduce, run_case, run_case_with, run_experiment, ClaimReport, Reproduction,
};

#[cfg(test)]
mod tests {
    #[test]
    fn a_star_sums_a_field_over_the_vms() {
        let s = serde_json::json!({"vms": [
            {"name": "a", "ple": {"exits": 3}},
            {"name": "b", "ple": {"exits": 4}},
        ]});
        assert_eq!(super::extract(&s, "vm.*.ple.exits"), Some(7.0));
        assert_eq!(super::extract(&s, "vm.b.ple.exits"), Some(4.0));
        let missing = serde_json::json!({"vms": [
            {"name": "a", "ple": {"exits": 3}},
            {"name": "b", "ple": null},
        ]});
        assert_eq!(super::extract(&missing, "vm.*.ple.exits"), None);
    }

    #[test]
    fn every_built_in_experiment_states_its_claims() {
        for e in super::experiments() {
            assert!(!e.claims.is_empty(), "{} declares no claim", e.id);
        }
    }
}
