//! `[host.costs] cacheline_transfer` and host profiles (`[host] profile`): what a measured
//! cost does to a lock handoff and an IPI round trip, and that a profile's values arrive.

use vcpulab_core::api::{run, RunOptions};
use vcpulab_core::scenario::NoiseSpec;

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

/// One busy vCPU on one pCPU (10 us compute ops) for 1 s, with `noise` as `[host.noise]`
/// and no housekeeping thread (`housekeeping_rate = 0`) unless `noise` names one.
fn busy_with_noise(noise: &str, seed: u64) -> String {
    let housekeeping = if noise.contains("housekeeping") {
        ""
    } else {
        "housekeeping_rate = 0"
    };
    format!(
        r#"
duration = "1s"
seed = {seed}
[host]
cores_per_socket = 1
[host.noise]
{housekeeping}
{noise}
[scheduler]
name = "eevdf"
[[vm]]
name = "guest"
vcpus = 1
[[vm.workload]]
kind = "program"
threads = 1
ops = [{{ op = "compute", duration = "10us" }}]
"#
    )
}

#[test]
fn noise_interrupts_a_running_vcpu_at_its_rate_for_its_duration() {
    let text = busy_with_noise("interrupt_rate = 2000\ninterrupt_duration = \"20us\"", 1);
    let s = run(&scenario(&text), None, &checked()).unwrap();
    let n = s.host.noise.as_ref().expect("noise summary");
    // Poisson at 2000/s over 1 s: 2000 +- 3 sd (sd ~45).
    assert!((1860..=2140).contains(&n.interruptions), "{n:?}");
    assert!((n.lost_time_s - n.interruptions as f64 * 20e-6).abs() < 1e-9);
    // 4% of the pCPU is lost: the guest completes 4% fewer 10 us ops.
    let ops = s.vms[0].throughput.unwrap();
    let expect = 1e5 * (1.0 - n.lost_time_s);
    assert!((ops - expect).abs() / expect < 0.002, "{ops} vs {expect}");
    // The host's overhead is the noise plus the vCPU's one dispatch (2 us).
    let other = s.host.overhead_time_s - n.lost_time_s;
    assert!((0.0..1e-5).contains(&other), "{other}");
}

#[test]
fn noise_is_its_own_seeded_stream_and_disabled_noise_is_no_noise() {
    let noisy = busy_with_noise(
        "interrupt_rate = 500\ninterrupt_duration = { dist = \"lognormal\", median = \"10us\", sigma = 1.0 }",
        3,
    );
    let a = vcpulab_core::api::summary_json(&run(&scenario(&noisy), None, &checked()).unwrap());
    let b = vcpulab_core::api::summary_json(&run(&scenario(&noisy), None, &checked()).unwrap());
    assert_eq!(a, b);
    let other = busy_with_noise(
        "interrupt_rate = 500\ninterrupt_duration = { dist = \"lognormal\", median = \"10us\", sigma = 1.0 }",
        4,
    );
    let c = vcpulab_core::api::summary_json(&run(&scenario(&other), None, &checked()).unwrap());
    assert_ne!(a, c);
    let off = busy_with_noise(
        "enabled = false\ninterrupt_rate = 500\ninterrupt_duration = \"5us\"",
        3,
    );
    let off = vcpulab_core::api::summary_json(&run(&scenario(&off), None, &checked()).unwrap());
    assert!(!off.contains("\"noise\""));
    // Without the table a host has the default noise (interruptions and, on this Linux
    // host, housekeeping threads); `enabled = false` alone removes both.
    let default = busy_with_noise("", 3).replace("[host.noise]\nhousekeeping_rate = 0\n", "");
    let sc = scenario(&default);
    assert_eq!(sc.host.noise, Some(NoiseSpec::host_default()));
    assert_eq!(sc.host_threads.len(), 1);
    let default = vcpulab_core::api::summary_json(&run(&sc, None, &checked()).unwrap());
    assert!(default.contains("\"noise\""));
    let off_alone = busy_with_noise("enabled = false", 3);
    let off_alone =
        vcpulab_core::api::summary_json(&run(&scenario(&off_alone), None, &checked()).unwrap());
    assert_eq!(off, off_alone);
}

/// The default noise is the measured one (scenario.rs, DEFAULT_INTERRUPT_*): on a busy
/// pCPU, its rate and about 0.3 % of the time (rate x mean, the mean of a log-normal being
/// median x exp(sigma^2 / 2)); on an idle host, no interruption and no event at all.
#[test]
fn default_noise_interrupts_busy_pcpus_only() {
    let busy = scenario(&busy_with_noise("", 5));
    let s = run(&busy, None, &checked()).unwrap();
    let n = s.host.noise.as_ref().expect("noise summary");
    // Poisson at 285/s over 1 s: 285 +- 3 sd (sd ~17).
    assert!((235..=335).contains(&n.interruptions), "{n:?}");
    let mean = 9.21e-6 * (0.55f64 * 0.55 / 2.0).exp();
    let expect = n.interruptions as f64 * mean;
    assert!(
        (n.lost_time_s - expect).abs() / expect < 0.25,
        "{n:?} vs {expect}"
    );
    let idle = scenario(
        "duration = \"100s\"\n[host]\ncores_per_socket = 4\n[host.noise]\nhousekeeping_rate = 0\n\
         [scheduler]\nname = \"eevdf\"\n[[vm]]\nname = \"idle\"\nvcpus = 4\n",
    );
    assert!(idle.host.noise.is_some());
    let s = run(&idle, None, &checked()).unwrap();
    assert_eq!(s.host.noise.as_ref().unwrap().interruptions, 0);
    assert!(s.events < 100, "{} events for an idle host", s.events);
}

#[test]
fn bad_noise_names_the_key() {
    // One key alone keeps the default of the other.
    let sc = scenario(&busy_with_noise("interrupt_rate = 500", 1));
    let n = sc.host.noise.unwrap();
    assert_eq!(n.rate_hz, 500.0);
    assert_eq!(n.duration, NoiseSpec::host_default().duration);
    let e = scenario_err(&busy_with_noise("interrupt_rate = -1", 1));
    assert!(e.contains("host.noise.interrupt_rate"), "{e}");
    let e = scenario_err(&busy_with_noise(
        "interrupt_rate = 500\ninterrupt_duration = \"1us\"\nrate = 3",
        1,
    ));
    assert!(
        e.contains("host.noise.rate") && e.contains("interrupt_rate"),
        "{e}"
    );
}

#[test]
fn housekeeping_is_a_pinned_kernel_thread_per_pcpu_at_its_rate() {
    let text = r#"
duration = "2s"
[host]
cores_per_socket = 2
[host.noise]
housekeeping_rate = 50
housekeeping_run = "100us"
[scheduler]
name = "eevdf"
[[vm]]
name = "guest"
vcpus = 2
[[vm.workload]]
kind = "program"
threads = 2
ops = [{ op = "compute", duration = "10us" }]
"#;
    let sc = scenario(text);
    assert_eq!(
        sc.host.noise,
        Some(NoiseSpec::host_default()),
        "housekeeping keeps the default interruptions"
    );
    let names: Vec<&str> = sc.host_threads.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["kthread-0", "kthread-1"]);
    let s = run(&sc, None, &checked()).unwrap();
    for (cpu, h) in s.host_threads.iter().enumerate() {
        // 50 runs/s of 100 us for 2 s: 10 ms of CPU, +- 3 sd of a Poisson count (~30 runs).
        assert!(
            (0.0065..0.0135).contains(&h.cpu_time_s),
            "kthread-{cpu}: {h:?}"
        );
        assert_eq!(h.migrations.total, 0, "pinned");
    }
    // Disabled: no threads.
    let off = text.replace("[host.noise]\n", "[host.noise]\nenabled = false\n");
    assert!(scenario(&off).host_threads.is_empty());
    // Half a pair is named.
    let e = scenario_err(&text.replace("housekeeping_run = \"100us\"\n", ""));
    assert!(e.contains("host.noise.housekeeping_run"), "{e}");
}

/// The host of scenarios/examples/lockstep.toml: its own, or another `[host]` table.
#[derive(Clone, Copy)]
enum LockstepHost {
    /// As shipped: the default noise.
    Default,
    /// `[host.noise] enabled = false`: no noise at all.
    Quiet,
    /// The shipped profile of this machine (its measured, heavier noise).
    Profile,
}

/// scenarios/examples/lockstep.toml with both VMs' `start_jitter` on `host`, at the
/// file's seed or `seed`: (app throughput, the app's successful directed yields).
fn lockstep(jitter: &str, host: LockstepHost) -> (f64, u64) {
    lockstep_seed(jitter, host, None)
}

fn lockstep_seed(jitter: &str, host: LockstepHost, seed: Option<u64>) -> (f64, u64) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/examples/lockstep.toml"
    );
    let mut text = std::fs::read_to_string(path).unwrap();
    let extra = match host {
        LockstepHost::Default => "",
        LockstepHost::Quiet => "[host.noise]\nenabled = false\n",
        LockstepHost::Profile => "profile = \"pvm-xeon-2cpu\"\n",
    };
    text = text.replace(
        "[host]\ncores_per_socket = 8\n",
        &format!("[host]\ncores_per_socket = 8\n{extra}"),
    );
    for vm in ["app", "hog"] {
        text = text.replace(
            &format!("name = \"{vm}\"\nvcpus = 8\n"),
            &format!("name = \"{vm}\"\nvcpus = 8\nstart_jitter = \"{jitter}\"\n"),
        );
    }
    let s = run(&scenario(&text), seed, &RunOptions::default()).unwrap();
    let app = &s.vms[0];
    let yields = app.vcpus.iter().map(|v| v.yield_successes).sum();
    (app.throughput.unwrap(), yields)
}

/// Seeds 1-10 (the file's own is 1) of the lockstep scenario on `host` at start jitter 0 s
/// and 1 ms: directed yields at every seed and start, and the two mean throughputs within
/// 15% of each other.
fn one_regime_at_both_starts(host: LockstepHost) {
    let at = |jitter: &str| {
        let runs: Vec<(f64, u64)> = (1..=10)
            .map(|seed| lockstep_seed(jitter, host, Some(seed)))
            .collect();
        let fewest_yields = runs.iter().map(|r| r.1).min().unwrap();
        assert!(fewest_yields > 10_000, "{jitter}: {fewest_yields} yields");
        runs.iter().map(|r| r.0).sum::<f64>() / runs.len() as f64
    };
    let (mean_0, mean_1ms) = (at("0s"), at("1ms"));
    assert!(
        (mean_0 / mean_1ms - 1.0).abs() < 0.15,
        "{mean_0} vs {mean_1ms}"
    );
}

#[test]
fn with_host_noise_the_lockstep_scenario_no_longer_depends_on_its_start() {
    // Issue 27's "lockstep by accident": without noise the vCPU pairs switch in step and
    // the app's vCPUs run as a gang (no directed yield) unless the start is jittered.
    let (quiet_0, yields_0) = lockstep("0s", LockstepHost::Quiet);
    let (quiet_1ms, yields_1ms) = lockstep("1ms", LockstepHost::Quiet);
    assert_eq!(yields_0, 0);
    assert!(yields_1ms > 10_000, "{yields_1ms}");
    assert!(quiet_0 > 1.1 * quiet_1ms, "{quiet_0} vs {quiet_1ms}");
    // With the default noise the kernel threads shift the pairs' phases: directed yields in
    // both starts (the gang regime is gone), and over the file's 2 s the mean throughput of
    // seeds 1-10 within 15% (41.4k at 0 s, 48.2k at 1 ms, 2026-11-28, with DELAY_DEQUEUE;
    // 41.5k and 47.3k without it; per seed it ranges 31-54k at either start: fix (c)
    // sometimes packs the app's vCPUs onto two or three pCPUs until the balancer spreads
    // them; docs/models.md, "Noise and lockstep").
    one_regime_at_both_starts(LockstepHost::Default);
    // With the shipped profile's heavier measured noise: the same, the means 22.9k against
    // 26.2k (2026-11-28; 26.3k without DELAY_DEQUEUE).
    one_regime_at_both_starts(LockstepHost::Profile);
}
