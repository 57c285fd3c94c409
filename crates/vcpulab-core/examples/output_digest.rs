//! Writes the output of every shipped scenario and every reproduction case, at two seeds
//! each, into a directory, one file per run, so that `sha256sum DIR/*` before and after a
//! change proves that the change moved no output (the redesign's rule: a refactor changes
//! no output).
//!
//!     cargo run --release -p vcpulab-core --example output_digest -- OUT_DIR [--rows]
//!
//! Covered: every `*.toml` scenario under `scenarios/examples` and the golden tests (a file
//! that is not a scenario, such as a sweep file, is skipped and named on stderr), the bench
//! shapes under `benches/` shortened to 200 ms, and every metric scenario of every case of
//! every built-in reproduction, each at seeds 1 and 2. `--rows` also writes each
//! experiment's finished rows with its own seeds (what `vcpulab reproduce --json` prints;
//! about 3.5 minutes more on one core). `--noise-off` turns the default host noise off
//! (`[host.noise] enabled = false`) in every scenario that does not set `[host.noise]` or a
//! host profile itself: the outputs from before the noise was on by default.

use std::path::{Path, PathBuf};

use vcpulab_core::api::{self, RunOptions};
use vcpulab_core::repro;
use vcpulab_core::Scenario;

const SEEDS: [u64; 2] = [1, 2];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(out) = args.first().map(PathBuf::from) else {
        eprintln!("usage: output_digest OUT_DIR [--rows] [--noise-off]");
        std::process::exit(2);
    };
    let rows = args.iter().any(|a| a == "--rows");
    let noise_off = args.iter().any(|a| a == "--noise-off");
    std::fs::create_dir_all(&out).expect("create the output directory");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let opts = RunOptions {
        force: true,
        ..RunOptions::default()
    };

    let mut files = Vec::new();
    for dir in ["scenarios/examples", "crates/vcpulab-core/tests/golden"] {
        files.extend(toml_files(&root.join(dir)).into_iter().map(|f| (f, None)));
    }
    for dir in ["benches/rr-overcommit", "benches/ple", "benches/xen"] {
        files.extend(
            toml_files(&root.join(dir))
                .into_iter()
                .map(|f| (f, Some("200ms"))),
        );
    }
    for (file, duration) in files {
        let name = file
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('/', "__");
        let text = std::fs::read_to_string(&file).expect("read a scenario");
        let mut doc: toml::Value = match text.parse() {
            Ok(v) => v,
            Err(_) => continue,
        };
        if let Some(d) = duration {
            doc["duration"] = toml::Value::String(d.into());
        }
        if noise_off {
            turn_default_noise_off(&mut doc);
        }
        let sc = match Scenario::from_value(&doc, &file.to_string_lossy()) {
            Ok(sc) => sc,
            Err(e) => {
                eprintln!("skipped (not a scenario): {}: {e}", file.display());
                continue;
            }
        };
        for seed in SEEDS {
            write_run(&out, &format!("{name}.seed{seed}"), &sc, seed, &opts);
        }
    }

    for exp in repro::experiments() {
        for case in &exp.cases {
            let mut seen = Vec::new();
            for m in &exp.metrics {
                let edits = format!("{:?} {:?}", m.set, m.remove);
                if seen.contains(&edits) {
                    continue;
                }
                seen.push(edits);
                let sc = if noise_off {
                    let text = repro::case_scenario_toml(&exp, &case.id, Some(&m.name))
                        .expect("a built-in case");
                    let mut doc: toml::Value = text.parse().expect("a case's scenario parses");
                    turn_default_noise_off(&mut doc);
                    Scenario::from_value(&doc, &exp.id).expect("a built-in case")
                } else {
                    repro::metric_scenario(&exp, case, m).expect("a built-in case")
                };
                for seed in SEEDS {
                    let name = format!(
                        "repro__{}__{}__{}.seed{seed}",
                        exp.id,
                        case.id.replace('/', "_"),
                        m.name
                    );
                    write_run(&out, &name, &sc, seed, &opts);
                }
            }
        }
        if rows {
            let rows = repro::run_experiment(&exp, None).expect("a built-in experiment");
            let text = serde_json::to_string_pretty(&rows).expect("rows serialise");
            std::fs::write(out.join(format!("rows__{}.json", exp.id)), text).unwrap();
        }
    }
}

/// `[host.noise] enabled = false` in a scenario that leaves its noise to the default.
fn turn_default_noise_off(doc: &mut toml::Value) {
    let Some(host) = doc.get_mut("host").and_then(|h| h.as_table_mut()) else {
        return;
    };
    if host.contains_key("noise") || host.contains_key("profile") {
        return;
    }
    let mut t = toml::Table::new();
    t.insert("enabled".into(), toml::Value::Boolean(false));
    host.insert("noise".into(), toml::Value::Table(t));
}

fn toml_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "toml"));
    v.sort();
    v
}

fn write_run(out: &Path, name: &str, sc: &Scenario, seed: u64, opts: &RunOptions) {
    let text = match api::run(sc, Some(seed), opts) {
        Ok(s) => api::summary_json(&s),
        Err(e) => format!("error: {e}\n"),
    };
    std::fs::write(out.join(format!("{name}.json")), text).expect("write an output");
}
