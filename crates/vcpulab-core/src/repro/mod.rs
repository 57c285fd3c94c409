//! Built-in reproductions: each is a scenario file plus an experiment file listing cases
//! (edits of the scenario by key path), the paper's figure for each case, and where the
//! simulated figure comes from in the summary. Both files live in
//! `scenarios/reproductions/<id>/` and are compiled in, so `vcpulab reproduce` works from
//! an installed package.

use crate::api::{run, RunOptions};
use crate::error::{Error, ScenarioError};
use crate::reader::{parse_toml, Res, Table};
use crate::scenario::Scenario;
use serde::Serialize;

/// (id, experiment file, scenario file). One line per reproduction.
const EMBEDDED: &[(&str, &str, &str)] = &[(
    "hyperv-root",
    include_str!("../../../../scenarios/reproductions/hyperv-root/experiment.toml"),
    include_str!("../../../../scenarios/reproductions/hyperv-root/scenario.toml"),
)];

#[derive(Clone, Debug, Serialize)]
pub struct Experiment {
    pub id: String,
    pub title: String,
    pub source: String,
    pub notes: String,
    pub metric: String,
    pub unit: String,
    /// Where the simulated figure comes from: `vm.<name>.<field>` or a dotted path into
    /// the summary JSON.
    pub value: String,
    /// The relative distance to the paper the issue expects, if any.
    pub tolerance: Option<f64>,
    pub cases: Vec<Case>,
    #[serde(skip)]
    pub scenario_text: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Case {
    pub id: String,
    pub paper: Option<f64>,
    pub note: String,
    #[serde(skip)]
    pub set: Vec<(String, toml::Value)>,
    #[serde(skip)]
    pub remove: Vec<String>,
}

/// One line of `vcpulab reproduce --json`.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub experiment: String,
    pub case: String,
    pub metric: String,
    pub unit: String,
    pub paper: Option<f64>,
    pub sim: Option<f64>,
    /// sim / paper.
    pub ratio: Option<f64>,
}

fn parse_experiment(id: &str, text: &str, scenario_text: &str) -> Res<Experiment> {
    let origin = format!("scenarios/reproductions/{id}/experiment.toml");
    let v = parse_toml(&origin, text)?;
    let t = Table::root(&origin, &v)?;
    let mut cases = Vec::new();
    for c in t.req("case")?.array()? {
        let ct = c.table()?;
        let set = match ct.get("set") {
            Some(s) => {
                let st = s.table()?;
                st.keys().map(|k| (k.clone(), st.get(k).unwrap().v.clone())).collect()
            }
            None => vec![],
        };
        let remove = match ct.get("remove") {
            Some(r) => r.array()?.iter().map(|x| x.str().map(str::to_string)).collect::<Res<_>>()?,
            None => vec![],
        };
        cases.push(Case {
            id: ct.req("id")?.str()?.to_string(),
            paper: ct.opt_f64("paper", f64::MIN, f64::MAX)?,
            note: ct.opt_str("note")?.unwrap_or("").to_string(),
            set,
            remove,
        });
        ct.finish(&["id", "paper", "note", "set", "remove"])?;
    }
    let e = Experiment {
        id: t.req("id")?.str()?.to_string(),
        title: t.req("title")?.str()?.to_string(),
        source: t.req("source")?.str()?.to_string(),
        notes: t.opt_str("notes")?.unwrap_or("").to_string(),
        metric: t.req("metric")?.str()?.to_string(),
        unit: t.req("unit")?.str()?.to_string(),
        value: t.req("value")?.str()?.to_string(),
        tolerance: t.opt_f64("tolerance", 0.0, 10.0)?,
        cases,
        scenario_text: scenario_text.to_string(),
    };
    t.finish(&["id", "title", "source", "notes", "metric", "unit", "value", "tolerance", "case", "scenario"])?;
    Ok(e)
}

/// All built-in experiments, in registry order.
pub fn experiments() -> Vec<Experiment> {
    EMBEDDED
        .iter()
        .map(|(id, e, s)| parse_experiment(id, e, s).unwrap_or_else(|err| panic!("built-in experiment {id} is invalid: {err}")))
        .collect()
}

pub fn find(id: &str) -> Result<Experiment, Error> {
    experiments().into_iter().find(|e| e.id == id).ok_or_else(|| {
        let ids: Vec<String> = experiments().into_iter().map(|e| e.id).collect();
        Error::NotFound(format!("unknown experiment {id:?}; available: {}", ids.join(", ")))
    })
}

/// The scenario of one case: the experiment's scenario with the case's edits applied.
pub fn case_scenario(e: &Experiment, case: &Case) -> Result<Scenario, Error> {
    let origin = format!("scenarios/reproductions/{}/scenario.toml (case {})", e.id, case.id);
    let mut doc = parse_toml(&origin, &e.scenario_text)?;
    for r in &case.remove {
        crate::overrides::remove(&mut doc, r).map_err(|m| ScenarioError::new(&origin, r.clone(), m))?;
    }
    for (path, value) in &case.set {
        crate::overrides::set(&mut doc, path, value.clone()).map_err(|m| ScenarioError::new(&origin, path.clone(), m))?;
    }
    Ok(Scenario::from_value(&doc, &origin)?)
}

/// Looks up a figure in a summary: `vm.<name>.<field>` or a dotted JSON path.
pub fn extract(summary: &serde_json::Value, path: &str) -> Option<f64> {
    let mut parts = path.split('.');
    let mut cur = summary;
    if path.starts_with("vm.") {
        parts.next();
        let name = parts.next()?;
        cur = summary["vms"].as_array()?.iter().find(|v| v["name"] == name)?;
    }
    for p in parts {
        cur = match cur {
            serde_json::Value::Array(a) => a.get(p.parse::<usize>().ok()?)?,
            other => other.get(p)?,
        };
    }
    cur.as_f64()
}

pub fn run_case(exp: &Experiment, case_id: &str, seed: Option<u64>) -> Result<Row, Error> {
    let case = exp.cases.iter().find(|c| c.id == case_id).ok_or_else(|| {
        let ids: Vec<&str> = exp.cases.iter().map(|c| c.id.as_str()).collect();
        Error::NotFound(format!("experiment {} has no case {case_id:?}; cases: {}", exp.id, ids.join(", ")))
    })?;
    let sc = case_scenario(exp, case)?;
    let summary = run(&sc, seed, &RunOptions::default())?;
    let json = serde_json::to_value(&summary).expect("summary serialises");
    let sim = extract(&json, &exp.value);
    Ok(Row {
        experiment: exp.id.clone(),
        case: case.id.clone(),
        metric: exp.metric.clone(),
        unit: exp.unit.clone(),
        paper: case.paper,
        sim,
        ratio: match (sim, case.paper) {
            (Some(s), Some(p)) if p != 0.0 => Some(s / p),
            _ => None,
        },
    })
}
