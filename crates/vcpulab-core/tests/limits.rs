//! Up-front limits: scenarios estimated to run for hours are refused before running,
//! with the estimate, the limit, the dominant part and the override; normal ones are not.

mod common;

use vcpulab_core::api::{estimate_events, estimate_parts, run, RunOptions, MAX_ESTIMATED_EVENTS};
use vcpulab_core::{Error, Scenario};

fn scenario(duration: &str, slice: &str) -> Scenario {
    let text = format!(
        r#"
duration = "{duration}"
[host]
cores_per_socket = 2
[scheduler]
name = "rr"
slice = "{slice}"
[[vm]]
name = "a"
vcpus = 2
[[vm.workload]]
kind = "stress-ng"
"#
    );
    Scenario::from_toml_str(&text, "limits.toml").unwrap()
}

#[test]
fn a_1ns_slice_over_a_year_is_refused_with_the_override_named() {
    let sc = scenario("8760h", "1ns");
    let err = run(&sc, None, &RunOptions::default()).unwrap_err();
    let Error::Scenario(e) = &err else {
        panic!("expected a ScenarioError, got {err:?}")
    };
    let msg = e.to_string();
    assert!(msg.contains("--force"), "{msg}");
    assert!(msg.contains("force=True"), "{msg}");
    assert!(msg.contains("5e10"), "{msg}");
    assert!(msg.contains("scheduler ticks/slices"), "{msg}");
    assert!(msg.starts_with("limits.toml: "), "{msg}");
    assert!(estimate_parts(&sc).scheduler > 1e16);
}

#[test]
fn force_skips_the_check() {
    // Idle VMs: the estimate counts scheduler slices on every pCPU, but idle pCPUs
    // take none, so the forced run is quick.
    let text = r#"
duration = "8760h"
[host]
cores_per_socket = 2
[scheduler]
name = "rr"
slice = "1ns"
[[vm]]
name = "idle"
vcpus = 2
"#;
    let sc = Scenario::from_toml_str(text, "idle.toml").unwrap();
    assert!(estimate_events(&sc) > MAX_ESTIMATED_EVENTS);
    assert!(run(&sc, None, &RunOptions::default()).is_err());
    run(
        &sc,
        None,
        &RunOptions {
            force: true,
            ..Default::default()
        },
    )
    .unwrap();
}

#[test]
fn normal_scenarios_are_far_below_the_limit() {
    let sc = scenario("10s", "1ms");
    let est = estimate_events(&sc);
    assert!(est > 1e3 && est < 1e8, "{est}");
    run(&sc, None, &RunOptions::default()).unwrap();
}

#[test]
fn shipped_scenarios_and_experiments_are_under_the_limit() {
    let mut n = 0;
    for f in common::shipped_toml_files(false) {
        if common::is_sweep_file(&std::fs::read_to_string(&f).unwrap()) {
            continue;
        }
        let sc = Scenario::from_file(f.to_str().unwrap()).unwrap();
        let est = estimate_events(&sc);
        assert!(
            est < MAX_ESTIMATED_EVENTS / 10.0,
            "{}: {est:.2e}",
            f.display()
        );
        n += 1;
    }
    assert!(n >= 3);
    for e in vcpulab_core::repro::experiments() {
        let sc = Scenario::from_toml_str(&e.scenario_text, &e.id).unwrap();
        let est = estimate_events(&sc);
        assert!(est < MAX_ESTIMATED_EVENTS / 10.0, "{}: {est:.2e}", e.id);
    }
}

/// The refusal of `scenario(duration, slice)` (issue 30, defect 5: the message used to
/// describe the limit, not the run).
fn refusal(duration: &str, slice: &str) -> String {
    vcpulab_core::api::check_size(&scenario(duration, slice))
        .unwrap_err()
        .to_string()
}

#[test]
fn d5_the_size_refusal_states_this_runs_time_beside_the_limits() {
    let msg = refusal("8000h", "10us");
    // This run: days, not the limit's hours.
    assert!(msg.contains(" days at 5-10 M events/s"), "{msg}");
    assert!(
        msg.contains("the limit is 5e10 events, about 1.4-2.8 hours"),
        "{msg}"
    );
    // The run's figure comes before the limit's.
    assert!(
        msg.find("days").unwrap() < msg.find("the limit is").unwrap(),
        "{msg}"
    );
    assert!(!msg.contains("about 1-3 hours at"), "{msg}");
}

#[test]
fn d5_the_runs_time_is_in_sensible_units() {
    let msg = refusal("5000h", "1ms");
    assert!(msg.contains("hours at 5-10 M events/s (the limit"), "{msg}");
    let msg = refusal("8760h", "10us");
    assert!(msg.contains("days at 5-10 M events/s"), "{msg}");
    let msg = refusal("8760h", "1ns");
    assert!(msg.contains("years at 5-10 M events/s"), "{msg}");
}
