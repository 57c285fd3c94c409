//! `[host.costs] cacheline_transfer` and host profiles (`[host] profile`): what a measured
//! cost does to a lock handoff and an IPI round trip, and that a profile's values arrive.

use vcpulab_core::api::{run, RunOptions};

mod common;
use common::{checked, scenario, scenario_err};

/// Two threads on a ticket lock (30 ns of work, 12 ns held), the `vcpulab kvm compare`
/// ticket-N2 case, on `host` with `costs`.
fn ticket_pair(host: &str, costs: &str) -> String {
    format!(
        r#"
duration = "20ms"
[host]
{host}
[host.costs]
{costs}
[scheduler]
name = "eevdf"
tick = "4ms"
[[vm]]
name = "guest"
vcpus = 2
[[vm.workload]]
kind = "program"
threads = 2
ops = [{{ op = "compute", duration = "30ns" }}, {{ op = "lock", lock = "l", kind = "ticket", hold = "12ns" }}]
"#
    )
}

fn ns_per_op(text: &str) -> (f64, u64) {
    let s = run(&scenario(text), None, &checked()).unwrap();
    (
        1e9 / s.vms[0].throughput.unwrap(),
        s.event_counts.cacheline_transfers,
    )
}

#[test]
fn a_lock_taken_last_on_another_core_pays_the_transfer_and_an_smt_sibling_does_not() {
    let two_cores = "cores_per_socket = 2";
    let (free, n0) = ns_per_op(&ticket_pair(two_cores, ""));
    assert_eq!(n0, 0);
    assert!((free - 21.0).abs() < 0.5, "{free}");
    // Every acquisition alternates between the cores and holds the lock while its line
    // arrives: the handoffs serialise at 12 + 100 ns each (the 30 ns of work overlap).
    let (paid, n) = ns_per_op(&ticket_pair(two_cores, "cacheline_transfer = \"100ns\""));
    assert!((paid - 112.0).abs() < 1.0, "{paid}");
    assert!(n > 100_000, "{n}");
    // One core with two SMT threads shares its L1/L2: nothing to transfer. (Each thread
    // runs at smt_throughput / 2 of a core, so only the counter is compared.)
    let (_, n_smt) = ns_per_op(&ticket_pair(
        "cores_per_socket = 1\nthreads_per_core = 2",
        "cacheline_transfer = \"100ns\"",
    ));
    assert_eq!(n_smt, 0);
}

#[test]
fn an_acknowledged_ipi_costs_its_sender_two_transfers() {
    let barrier = |costs: &str| {
        format!(
            r#"
duration = "20ms"
[host]
cores_per_socket = 2
[host.costs]
{costs}
[scheduler]
name = "eevdf"
[[vm]]
name = "guest"
vcpus = 2
[[vm.workload]]
kind = "program"
threads = 2
ops = [{{ op = "compute", duration = "30ns" }}, {{ op = "ipi", targets = [0, 1] }}]
"#
        )
    };
    // A round: 30 ns of work, then the other vCPU's acknowledgement; loops/s counts both
    // threads' loops, so ns per round is 2 / throughput.
    let round = |costs: &str| 2.0 * ns_per_op(&barrier(costs)).0;
    let free = round("");
    assert!((free - 30.0).abs() < 0.5, "{free}");
    let paid = round("cacheline_transfer = \"84ns\"");
    assert!((paid - 198.0).abs() < 2.0, "{paid}");
}

#[test]
fn a_profile_fills_only_what_the_scenario_leaves_unset() {
    let dir = std::env::temp_dir().join(format!("vcpulab-host-costs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("p.toml"),
        "[profile]\nmeasured = \"today\"\n[host.costs]\ncacheline_transfer = \"100ns\"\n",
    )
    .unwrap();
    let text = ticket_pair("cores_per_socket = 2\nprofile = \"p.toml\"", "");
    // A relative profile is found beside the scenario file.
    let path = dir.join("s.toml");
    std::fs::write(&path, &text).unwrap();
    let sc = vcpulab_core::Scenario::from_file(path.to_str().unwrap()).unwrap();
    let s = run(&sc, None, &RunOptions::default()).unwrap();
    let ns: f64 = 1e9 / s.vms[0].throughput.unwrap();
    assert!((ns - 112.0).abs() < 1.0, "{ns}");
    // The scenario's own key wins.
    let text = ticket_pair(
        "cores_per_socket = 2\nprofile = \"p.toml\"",
        "cacheline_transfer = \"0ns\"",
    );
    std::fs::write(&path, &text).unwrap();
    let sc = vcpulab_core::Scenario::from_file(path.to_str().unwrap()).unwrap();
    let s = run(&sc, None, &RunOptions::default()).unwrap();
    assert_eq!(s.event_counts.cacheline_transfers, 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_missing_profile_names_the_key_and_the_shipped_profiles() {
    let e = scenario_err(&ticket_pair(
        "cores_per_socket = 2\nprofile = \"no-such-profile.toml\"",
        "",
    ));
    assert!(e.contains("host.profile"), "{e}");
    assert!(e.contains("pvm-xeon-2cpu"), "{e}");
}
