//! KVM pause-loop exiting: invariants under every fix (also with paravirtual
//! spinlocks), vendor rules, fairness with (b), the current kernels' yield rules (EEVDF
//! 6.19, the 2024 `last_boosted_vcpu` bug) and their key errors.

use vcpulab_core::api::{run, RunOptions};
use vcpulab_core::time::SimDuration;
use vcpulab_core::Scenario;

fn checked() -> RunOptions {
    RunOptions {
        check_invariants: true,
        ..Default::default()
    }
}

/// Overcommit with PLE: a `noise` VM (2 vCPUs, swaptions) and a `bench` VM (3 vCPUs)
/// running the workload `bench` on 3 pCPUs.
fn ple_scenario(sched: &str, bench: &str, features: &str, extra_kvm: &str) -> Scenario {
    let bench_vm = format!("[[vm.workload]]\nkind = \"{bench}\"");
    ple_scenario_with(sched, &bench_vm, features, extra_kvm)
}

/// `ple_scenario` with the rest of the `bench` VM's table (its keys, then its workloads)
/// written out.
fn ple_scenario_with(sched: &str, bench_vm: &str, features: &str, extra_kvm: &str) -> Scenario {
    let text = format!(
        r#"
duration = "1s"
seed = 3
[host]
cores_per_socket = 3
[scheduler]
name = "{sched}"
group_per_vm = true
[kvm]
version = "4.15"
ple_window = 32768
ple_window_grow = 1
{extra_kvm}
[kvm.features]
{features}
[[vm]]
name = "noise"
vcpus = 2
start_jitter = "5ms"
[[vm.workload]]
kind = "swaptions"
[[vm]]
name = "bench"
vcpus = 3
start_jitter = "5ms"
{bench_vm}
"#
    );
    Scenario::from_toml_str(&text, "ple.toml").unwrap_or_else(|e| panic!("{e}"))
}

const ALL_FIXES: [&str; 8] = [
    "",
    "boost_user_mode_candidates = true",
    "boost_ignores_vcpu_fairness = true",
    "migrate_boosted_to_spinner = true",
    "boost_user_mode_candidates = true\nboost_ignores_vcpu_fairness = true",
    "boost_ignores_vcpu_fairness = true\nmigrate_boosted_to_spinner = true",
    "boost_user_mode_candidates = true\nmigrate_boosted_to_spinner = true",
    "boost_user_mode_candidates = true\nboost_ignores_vcpu_fairness = true\nmigrate_boosted_to_spinner = true",
];

/// A boosted vCPU that is not runnable is never picked, no vCPU runs twice, CPU time is
/// conserved: the engine checks this after every event, with PLE exits and directed
/// yields under every combination of fixes, both host schedulers, and several seeds.
#[test]
fn invariants_hold_under_every_fix_combination() {
    for sched in ["cfs", "eevdf"] {
        for bench in ["ebizzy", "hackbench", "dbench", "vips"] {
            for fixes in ALL_FIXES {
                let sc = ple_scenario(sched, bench, fixes, "");
                for seed in 1..=2 {
                    let s = run(&sc, Some(seed), &checked())
                        .unwrap_or_else(|e| panic!("{sched}/{bench}/[{fixes}]: {e}"));
                    let ple = s.vms[1].ple.as_ref().unwrap();
                    assert!(ple.yield_successes <= ple.yield_attempts);
                    let total: f64 = s.vms.iter().map(|v| v.cpu_time_s).sum();
                    assert!(total <= 3.0 + 1e-9);
                }
            }
        }
    }
}

/// Intel ignores PAUSE loops at CPL > 0: a user-mode spinlock never PLE-exits on Intel,
/// and does on AMD; kernel-mode spins exit on both.
#[test]
fn no_ple_exits_in_user_mode_on_intel() {
    let program = |mode: &str| {
        format!(
            r#"
duration = "1s"
[host]
cores_per_socket = 1
[scheduler]
name = "cfs"
[kvm]
vendor = "VENDOR"
[[vm]]
name = "u"
vcpus = 2
[[vm.workload]]
kind = "program"
threads = 2
ops = [ {{ op = "lock", lock = "l", hold = "3ms", mode = "{mode}" }}, {{ op = "compute", duration = "10us" }} ]
"#
        )
    };
    let exits = |vendor: &str, mode: &str| {
        let sc =
            Scenario::from_toml_str(&program(mode).replace("VENDOR", vendor), "u.toml").unwrap();
        run(&sc, None, &checked()).unwrap().vms[0]
            .ple
            .as_ref()
            .unwrap()
            .exits
    };
    assert_eq!(exits("intel", "user"), 0);
    assert!(exits("amd", "user") > 0);
    assert!(exits("intel", "kernel") > 0);
}

/// With fix (b) a boost never runs a vCPU of the spinning VM ahead of fairness between
/// VMs: the other VM keeps its share (within 10% of the baseline's).
#[test]
fn fix_b_keeps_fairness_between_vms() {
    for sched in ["cfs", "eevdf"] {
        let base = run(&ple_scenario(sched, "hackbench", "", ""), None, &checked()).unwrap();
        let b = run(
            &ple_scenario(sched, "hackbench", "boost_ignores_vcpu_fairness = true", ""),
            None,
            &checked(),
        )
        .unwrap();
        let (n0, n1) = (base.vms[0].cpu_time_s, b.vms[0].cpu_time_s);
        assert!(
            n1 >= 0.9 * n0,
            "{sched}: noise VM got {n1} with (b), {n0} without"
        );
    }
}

/// Streaks and boost-to-run are kept per vCPU; the VM's figures are their union: streak
/// counts add up, the VM's longest streak is the longest of its vCPUs', and the VM's
/// boost-to-run maximum is the largest vCPU maximum.
#[test]
fn per_vcpu_streaks_and_boost_to_run_make_up_the_vms() {
    let sc = ple_scenario("cfs", "hackbench", "boost_ignores_vcpu_fairness = true", "");
    let s = run(&sc, None, &checked()).unwrap();
    let vm = &s.vms[1];
    let ple = vm.ple.as_ref().unwrap();
    assert!(ple.streaks.count > 0 && ple.yield_successes > 0);
    let count: u64 = vm.vcpus.iter().map(|v| v.ple_streaks).sum();
    assert_eq!(count, ple.streaks.count);
    let max = vm.vcpus.iter().map(|v| v.ple_streak_max).max().unwrap();
    assert_eq!(max, ple.streaks.max);
    let boost_max = vm
        .vcpus
        .iter()
        .filter_map(|v| v.boost_to_run_max_ms)
        .fold(0.0, f64::max);
    assert_eq!(Some(boost_max), ple.boost_to_run_ms.as_ref().map(|b| b.max));
    for v in &vm.vcpus {
        assert!(v.ple_streak_median <= v.ple_streak_max);
        assert_eq!(v.ple_streaks == 0, v.ple_streak_max == 0);
    }
}

/// The PLE window, read off a trace: within one stint on a pCPU each exit doubles the
/// window (4096, 8192, ... cycles, capped at 65536; the clock is 1 GHz so a cycle is a
/// ns) and the next exit comes one window plus the 1 us exit cost later; when the vCPU is
/// scheduled in again the window is back at its base, so the first exit of every stint
/// comes 4096 ns after the spin (re)started. (No host noise: an interruption restarts
/// the pause-loop count too, and the gaps are checked to the nanosecond.)
#[test]
fn ple_window_grows_per_exit_and_resets_at_sched_in() {
    let text = r#"
duration = "0.2s"
seed = 1
[host]
cores_per_socket = 2
base_ghz = 1.0
[host.noise]
enabled = false
[host.costs]
context_switch = "0us"
[scheduler]
name = "cfs"
[kvm]
version = "6.6"
vendor = "intel"
ple_window = 4096
ple_window_grow = 2
ple_window_max = 65536
[[vm]]
name = "a"
vcpus = 2
affinity = ["0", "1"]
start_jitter = "7ms"
[[vm.workload]]
kind = "program"
vcpus = [0]
ops = [
  { op = "compute", duration = "50us" },
  { op = "ipi", targets = [1] },
]
[[vm.workload]]
kind = "program"
vcpus = [1]
ops = [ { op = "compute", duration = "1ms" } ]
[[vm]]
name = "hog"
vcpus = 2
affinity = ["0", "1"]
start_jitter = "7ms"
[[vm.workload]]
kind = "swaptions"
"#;
    let sc = Scenario::from_toml_str(text, "window.toml").unwrap();
    let opts = RunOptions {
        trace_window: Some((0, u64::MAX)),
        ..checked()
    };
    let out = vcpulab_core::api::run_full(&sc, None, &opts).unwrap();
    let trace: serde_json::Value = serde_json::from_str(&out.trace_json.unwrap()).unwrap();
    let ns = |e: &serde_json::Value| (e["ts"].as_f64().unwrap() * 1000.0).round() as i64;
    let (mut stints, mut exits, mut ipis) = (Vec::new(), Vec::new(), Vec::new());
    for e in trace["traceEvents"].as_array().unwrap() {
        match e["ph"].as_str() {
            Some("X") if e["args"]["task"] == 0 => stints.push(ns(e)),
            Some("i") if e["tid"] == 0 && e["name"] == "ple_exit" => exits.push(ns(e)),
            Some("i") if e["tid"] == 0 && e["name"] == "ipi" => ipis.push(ns(e)),
            _ => {}
        }
    }
    stints.sort();
    assert!(exits.len() > 20, "{} exits", exits.len());
    let (mut checked_gaps, mut longest) = (0, 0);
    for (k, &start) in stints.iter().enumerate() {
        let end = stints.get(k + 1).copied().unwrap_or(i64::MAX);
        let mine: Vec<i64> = exits
            .iter()
            .copied()
            .filter(|&x| x >= start && x < end)
            .collect();
        let Some(&first) = mine.first() else { continue };
        let spin_from = ipis
            .iter()
            .copied()
            .filter(|&i| i <= first)
            .max()
            .unwrap()
            .max(start);
        assert_eq!(
            first - spin_from,
            4096,
            "stint at {start} ns: first exit not one base window in"
        );
        for (j, w) in mine.windows(2).enumerate() {
            let window = (4096i64 << (j + 1)).min(65536);
            assert_eq!(
                w[1] - w[0],
                window + 1000,
                "stint at {start} ns, exit {}",
                j + 2
            );
            checked_gaps += 1;
        }
        longest = longest.max(mine.len());
    }
    assert!(
        longest >= 6 && checked_gaps >= 10,
        "longest stint {longest} exits, {checked_gaps} gaps"
    );
}

/// Paravirtual spinlocks under overcommit with PLE and the papers' fixes: the engine's
/// invariants hold after every event (a halted waiter is never run, CPU time is
/// conserved), waiters do give up and halt, and they spin less than without pv.
#[test]
fn pv_spinlocks_under_overcommit_keep_the_invariants() {
    let sc = |pv: &str, features: &str| {
        let bench_vm = format!(
            r#"{pv}
[[vm.workload]]
kind = "program"
threads = 3
ops = [
  {{ op = "compute", duration = {{ dist = "exp", mean = "100us" }} }},
  {{ op = "lock", lock = "l", hold = "200us" }},
]"#
        );
        let mut sc = ple_scenario_with("cfs", &bench_vm, features, "");
        sc.duration = SimDuration::from_ms(500);
        sc
    };
    for features in [
        "",
        "boost_user_mode_candidates = true\nboost_ignores_vcpu_fairness = true",
    ] {
        let plain = run(&sc("", features), Some(9), &checked()).unwrap();
        let pv = run(&sc("pv_spinlock = true", features), Some(9), &checked()).unwrap();
        let waits: u64 = pv.vms[1].vcpus.iter().map(|v| v.pv_waits).sum();
        assert!(waits > 0, "{features:?}: no pv_wait");
        assert!(
            pv.vms[1].spin_time_s < plain.vms[1].spin_time_s,
            "{features:?}: pv spin {} vs plain {}",
            pv.vms[1].spin_time_s,
            plain.vms[1].spin_time_s
        );
    }
}

/// The bench VM of `ple_scenario` on a current host: EEVDF under `buddy_rule`, KVM 6.6
/// rules with `last_boosted_rule`.
fn current_host(buddy_rule: &str, last_boosted_rule: &str) -> String {
    format!(
        r#"
duration = "1s"
seed = 3
[host]
cores_per_socket = 3
[scheduler]
name = "eevdf"
group_per_vm = true
buddy_rule = "{buddy_rule}"
[kvm]
version = "6.6"
last_boosted_rule = "{last_boosted_rule}"
[[vm]]
name = "noise"
vcpus = 2
start_jitter = "5ms"
[[vm.workload]]
kind = "swaptions"
[[vm]]
name = "bench"
vcpus = 3
start_jitter = "5ms"
[[vm.workload]]
kind = "ebizzy"
"#
    )
}

/// Both current-kernel rules reach the run: the 6.19 yield reports its two branches (and
/// the 6.14 summary has no such counters), and the 2024 `last_boosted_vcpu` bug changes
/// which vCPUs the handler boosts, so the run differs; invariants hold under all four.
#[test]
fn yield_6_19_and_the_last_boosted_bug_change_the_run_and_keep_the_invariants() {
    let summary = |b: &str, l: &str| {
        let sc = Scenario::from_toml_str(&current_host(b, l), "current.toml")
            .unwrap_or_else(|e| panic!("{e}"));
        run(&sc, None, &checked()).unwrap_or_else(|e| panic!("{b} {l}: {e}"))
    };
    let counter = |s: &vcpulab_core::Summary, name: &str| {
        s.scheduler_counters
            .iter()
            .find(|(n, _)| n == name)
            .map(|c| c.1)
    };
    let base = summary("6.14", "fixed");
    let forfeit = summary("6.19", "fixed");
    assert_eq!(counter(&base, "yield_forfeit"), None);
    assert!(counter(&forfeit, "yield_forfeit").unwrap() > 0);
    assert!(counter(&forfeit, "yield_ineligible_unchanged").is_some());
    let bug = summary("6.14", "2024-bug");
    let exits = |s: &vcpulab_core::Summary| s.vms[1].ple.as_ref().unwrap().exits;
    assert_ne!(
        (exits(&base), base.events),
        (exits(&bug), bug.events),
        "the bug's walk order changes the run"
    );
    summary("6.19", "2024-bug");
}

/// `yield_rule` sets the yield apart from the buddy: 6.14's buddy with the forfeit is the
/// 6.19 rule's run (the two rules' buddies are the same), 6.19 with 6.6's yield is 6.14's,
/// and "buddy_rule" is the default.
#[test]
fn yield_rule_sets_the_yield_apart_from_the_buddy() {
    let summary = |b: &str, y: Option<&str>| {
        let mut text = current_host(b, "fixed");
        if let Some(y) = y {
            text = text.replace(
                &format!("buddy_rule = \"{b}\"\n"),
                &format!("buddy_rule = \"{b}\"\nyield_rule = \"{y}\"\n"),
            );
            assert!(text.contains("yield_rule"));
        }
        let sc = Scenario::from_toml_str(&text, "current.toml").unwrap_or_else(|e| panic!("{e}"));
        run(&sc, None, &checked()).unwrap_or_else(|e| panic!("{b} {y:?}: {e}"))
    };
    let key = |s: &vcpulab_core::Summary| (s.events, s.vms[1].ple.as_ref().unwrap().exits);
    let forfeit = summary("6.19", None);
    let base = summary("6.14", None);
    assert_ne!(key(&forfeit), key(&base));
    assert_eq!(key(&summary("6.14", Some("forfeit"))), key(&forfeit));
    assert_eq!(key(&summary("6.19", Some("deadline"))), key(&base));
    assert_eq!(key(&summary("6.19", Some("buddy_rule"))), key(&forfeit));
    let no_buddy = summary("6.6", None);
    let no_buddy_forfeit = summary("6.6", Some("forfeit"));
    assert_ne!(key(&no_buddy), key(&no_buddy_forfeit));
    assert!(no_buddy_forfeit
        .scheduler_counters
        .iter()
        .any(|(n, c)| n == "yield_forfeit" && *c > 0));
}

/// Bad values of the new keys name the file, the key and what is allowed.
#[test]
fn bad_buddy_and_last_boosted_rules_name_file_key_and_allowed_values() {
    let err = |text: String| {
        Scenario::from_toml_str(&text, "current.toml")
            .map(|_| ())
            .expect_err("refused")
            .to_string()
    };
    let m = err(current_host("6.20", "fixed"));
    assert!(
        m.contains("current.toml")
            && m.contains("buddy_rule")
            && m.contains(r#"allowed: "6.14", "6.6", "6.19""#),
        "{m}"
    );
    let m = err(current_host("6.14", "buggy"));
    assert!(
        m.contains("current.toml")
            && m.contains("kvm.last_boosted_rule")
            && m.contains(r#"allowed: "fixed", "2024-bug""#),
        "{m}"
    );
    let old = current_host("6.14", "2024-bug").replace(r#"version = "6.6""#, r#"version = "4.15""#);
    let m = err(old);
    assert!(
        m.contains("kvm.last_boosted_rule") && m.contains(r#"cannot go with version "4.15""#),
        "{m}"
    );
}
