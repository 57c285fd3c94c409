//! Helpers shared by the integration tests.
#![allow(dead_code)] // each test crate uses a subset

use std::path::{Path, PathBuf};

/// The TOML files shipped under `scenarios/` and `benches/`, sorted. `scenarios/kvm` holds
/// real-KVM harness scenarios (`vcpulab kvm run`), tested with the harness, so it is left
/// out; experiment files are included only if asked for.
pub fn shipped_toml_files(with_experiments: bool) -> Vec<PathBuf> {
    fn walk(dir: &Path, with_experiments: bool, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                if p.file_name().unwrap() != "kvm" {
                    walk(&p, with_experiments, out);
                }
            } else if p.extension().is_some_and(|e| e == "toml")
                && (with_experiments || p.file_name().unwrap() != "experiment.toml")
            {
                out.push(p);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for d in ["scenarios", "benches"] {
        walk(&root.join(d), with_experiments, &mut files);
    }
    files.sort();
    files
}

/// Sweep files (a `base` scenario plus axes) are checked by the sweep tests.
pub fn is_sweep_file(text: &str) -> bool {
    text.parse::<toml::Table>()
        .is_ok_and(|t| t.contains_key("base"))
}

/// Run options with the engine's invariant checks on.
pub fn checked() -> vcpulab_core::api::RunOptions {
    vcpulab_core::api::RunOptions {
        check_invariants: true,
        ..Default::default()
    }
}

/// Parses a scenario (origin `test.toml`), panicking with the error.
pub fn scenario(text: &str) -> vcpulab_core::Scenario {
    vcpulab_core::Scenario::from_toml_str(text, "test.toml").unwrap_or_else(|e| panic!("{e}"))
}

/// `text` without host noise (`[host.noise] enabled = false`): for a test whose answer
/// follows exactly from the rules, which an interruption or a kernel thread would blur.
pub fn quiet(text: &str) -> String {
    format!("{text}\n[host.noise]\nenabled = false\n")
}

/// The error a scenario (origin `test.toml`) is refused with.
pub fn scenario_err(text: &str) -> String {
    vcpulab_core::Scenario::from_toml_str(text, "test.toml")
        .unwrap_err()
        .to_string()
}

/// Every registered scheduler's name, in the registry's order.
pub fn scheduler_names() -> impl Iterator<Item = &'static str> {
    vcpulab_core::sched::REGISTRY.iter().map(|e| e.name)
}

/// The registered schedulers whose properties pass `keep`, in the registry's order: tests
/// that need a kind of scheduler choose by property, never by name.
pub fn schedulers_where(
    keep: impl Fn(&vcpulab_core::sched::Properties) -> bool,
) -> impl Iterator<Item = &'static str> {
    vcpulab_core::sched::REGISTRY
        .iter()
        .filter(move |e| keep(&e.properties))
        .map(|e| e.name)
}

/// The properties the registered scheduler `name` declares.
pub fn properties(name: &str) -> vcpulab_core::sched::Properties {
    vcpulab_core::sched::find(name)
        .unwrap_or_else(|| panic!("no scheduler {name}"))
        .properties
}

/// Parses and runs a scenario with invariant checks, panicking on any error.
pub fn run_checked(text: &str) -> vcpulab_core::summary::Summary {
    vcpulab_core::api::run(&scenario(text), None, &checked()).unwrap_or_else(|e| panic!("{e}"))
}

/// A scheduler counter of a summary by name.
pub fn counter(sum: &vcpulab_core::summary::Summary, name: &str) -> u64 {
    sum.scheduler_counters
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no counter {name}: {:?}", sum.scheduler_counters))
        .1
}

/// A 12 s run (2 s warm-up) under `scheduler` of hog VMs on `host` (`[host]` keys), each
/// (vCPUs, weight) busy vCPUs; `extra` is added to every VM's table.
pub fn hogs(scheduler: &str, host: &str, vms: &[(u32, u32)], extra: &str) -> String {
    let mut t = format!(
        "duration = \"12s\"\nwarmup = \"2s\"\n[host]\n{host}\n[scheduler]\nname = \"{scheduler}\"\n"
    );
    for (i, (vcpus, weight)) in vms.iter().enumerate() {
        t += &format!(
            "[[vm]]\nname = \"v{i}\"\nvcpus = {vcpus}\nweight = {weight}\n{extra}[[vm.workload]]\nkind = \"stress-ng\"\nthreads = {vcpus}\n"
        );
    }
    t
}

/// The same scenario and seed give byte-identical summaries, another seed a different
/// one, and checking invariants observes a run without changing it.
pub fn assert_deterministic(sc: &vcpulab_core::Scenario) {
    use vcpulab_core::api::{run, summary_json, RunOptions};
    let a = summary_json(&run(sc, None, &RunOptions::default()).unwrap());
    let b = summary_json(&run(sc, None, &RunOptions::default()).unwrap());
    assert_eq!(a, b);
    let c = summary_json(&run(sc, Some(99), &RunOptions::default()).unwrap());
    assert_ne!(a, c);
    assert_eq!(a, summary_json(&run(sc, None, &checked()).unwrap()));
}

/// The summary's time accounts close: every pCPU is busy or idle, every vCPU runs, waits
/// or is halted, for the whole measured interval, and what the tasks ran is what the
/// pCPUs were busy with.
pub fn time_adds_up(sum: &vcpulab_core::Summary, what: &str) {
    let measured = sum.duration_s - sum.warmup_s;
    let capacity = sum.host.pcpus as f64 * measured;
    let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
    assert!(
        close(sum.host.busy_time_s + sum.host.idle_time_s, capacity),
        "{what}: busy {} + idle {} != {capacity}",
        sum.host.busy_time_s,
        sum.host.idle_time_s
    );
    let mut ran = 0.0;
    for vm in &sum.vms {
        for v in &vm.vcpus {
            let accounted = v.cpu_time_s + v.wait_time_s + v.halted_time_s;
            assert!(
                close(accounted, measured),
                "{what}: {}/vcpu{}: run {} + wait {} + halted {} != {measured}",
                vm.name,
                v.index,
                v.cpu_time_s,
                v.wait_time_s,
                v.halted_time_s
            );
            assert!(
                v.spin_time_s <= v.cpu_time_s + 1e-9,
                "{what}: {}/vcpu{}",
                vm.name,
                v.index
            );
            ran += v.cpu_time_s;
        }
    }
    ran += sum.host_threads.iter().map(|h| h.cpu_time_s).sum::<f64>();
    assert!(
        close(ran, sum.host.busy_time_s),
        "{what}: tasks ran {ran} s, pCPUs were busy {} s",
        sum.host.busy_time_s
    );
}
