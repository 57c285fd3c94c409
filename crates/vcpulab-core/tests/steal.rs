//! Steal time as the guest sees it (`vms[].steal_pct`) on hand-built cases whose steal is
//! known: two always-busy vCPUs sharing one pCPU, one vCPU alone, a mostly halted vCPU
//! beside a hog; and its agreement with `wait_time_s`.

use vcpulab_core::api::run;
use vcpulab_core::summary::{Summary, VmSummary};

mod common;
use common::{checked, quiet, scenario};

/// A host of `pcpus` pCPUs under `sched`, running the `[[vm]]` tables in `vms`.
fn run_case(sched: &str, pcpus: u32, duration: &str, warmup: &str, vms: &str) -> Summary {
    let text = format!(
        r#"
name = "steal"
duration = "{duration}"
warmup = "{warmup}"
seed = 3
[host]
cores_per_socket = {pcpus}
[scheduler]
name = "{sched}"
{vms}
"#
    );
    // No host noise: steal is checked to the nanosecond against the other VMs' run time.
    run(&scenario(&quiet(&text)), None, &checked()).unwrap_or_else(|e| panic!("{e}"))
}

fn vm<'s>(s: &'s Summary, name: &str) -> &'s VmSummary {
    s.vms.iter().find(|v| v.name == name).unwrap()
}

const HOG: &str = r#"
[[vm]]
name = "hog"
vcpus = 1
[[vm.workload]]
kind = "stress-ng"
threads = 1
"#;

/// Two vCPUs that never halt on one pCPU: at every instant one runs and the other waits,
/// so each window's steal is exactly half of the VM's vCPU time, whatever the slices.
#[test]
fn two_busy_vcpus_on_one_pcpu_see_half_their_time_stolen() {
    let s = run_case(
        "rr",
        1,
        "2500ms",
        "200ms",
        r#"
[[vm]]
name = "pair"
vcpus = 2
[[vm.workload]]
kind = "stress-ng"
threads = 2
"#,
    );
    let st = &vm(&s, "pair").steal_pct;
    // 2.3 s measured: two whole windows and one of 300 ms.
    assert_eq!(st.windows.len(), 3, "{st:?}");
    assert_eq!(st.window_s, 1.0);
    for w in &st.windows {
        assert!((w - 50.0).abs() < 1e-9, "{st:?}");
    }
    assert!((st.mean - 50.0).abs() < 1e-9, "{st:?}");
    assert!((st.p95 - 50.0).abs() < 1e-9, "{st:?}");
}

/// A vCPU alone on its pCPU is never kept waiting.
#[test]
fn a_vcpu_alone_sees_no_steal() {
    let s = run_case("rr", 1, "2s", "0s", HOG);
    let st = &vm(&s, "hog").steal_pct;
    assert_eq!(st.windows, vec![0.0, 0.0]);
    assert_eq!((st.mean, st.p95), (0.0, 0.0));
}

/// A vCPU that halts most of the time accrues no steal while halted: beside a hog on one
/// pCPU (overcommitted 2:1) under CFS, which runs it at once when it wakes, its steal stays
/// near zero, while the hog is kept waiting for exactly the time the sleeper runs.
#[test]
fn a_mostly_halted_vcpu_sees_little_steal_even_overcommitted() {
    let sleeper = r#"
[[vm]]
name = "sleeper"
vcpus = 1
[[vm.workload]]
kind = "program"
threads = 1
ops = [ { op = "compute", duration = "100us" }, { op = "sleep", duration = "10ms" } ]
"#;
    let s = run_case("cfs", 1, "3s", "0s", &format!("{HOG}{sleeper}"));
    let sl = vm(&s, "sleeper");
    let hog = vm(&s, "hog");
    assert!(
        sl.halted_time_s > 2.5,
        "the sleeper must halt most of the time: {sl:?}"
    );
    assert!(sl.steal_pct.mean < 1.0, "{:?}", sl.steal_pct);
    assert!(sl.steal_pct.p95 < 1.0, "{:?}", sl.steal_pct);
    // The hog never halts: its steal is the pCPU time the sleeper held.
    let want = 100.0 * sl.cpu_time_s / 3.0;
    assert!(want > 0.5, "the sleeper must take some pCPU time: {sl:?}");
    assert!(
        (hog.steal_pct.mean - want).abs() < 1e-6,
        "{:?} vs {want}",
        hog.steal_pct
    );
}

/// The mean is `wait_time_s` over (vCPUs x measured time), and the p95 lies within the
/// windows, on a run with halts, wake-ups and migrations.
#[test]
fn steal_agrees_with_wait_time_and_its_windows() {
    let s = run_case(
        "cfs",
        2,
        "3300ms",
        "300ms",
        r#"
[[vm]]
name = "web"
vcpus = 2
[[vm.workload]]
kind = "program"
threads = 2
arrivals = { process = "poisson", rate = 3000 }
ops = [ { op = "serve", service = { dist = "exp", mean = "200us" }, mode = "kernel" } ]
[[vm]]
name = "hogs"
vcpus = 3
[[vm.workload]]
kind = "stress-ng"
threads = 3
"#,
    );
    for v in &s.vms {
        let st = &v.steal_pct;
        assert_eq!(st.windows.len(), 3, "{}: {st:?}", v.name);
        let want = 100.0 * v.wait_time_s / (v.vcpu_count as f64 * 3.0);
        assert!(
            (st.mean - want).abs() < 1e-6,
            "{}: {st:?} vs {want}",
            v.name
        );
        let lo = st.windows.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = st.windows.iter().copied().fold(0.0, f64::max);
        assert!(lo <= st.mean && st.mean <= hi, "{}: {st:?}", v.name);
        assert_eq!(
            st.p95, hi,
            "{}: fewer than 20 windows: p95 is the largest",
            v.name
        );
        // Only that steal is not trivially zero: with the tick on its grid (2026-11-27)
        // the web VM's mean is 0.98%, below the 1% this bound had before.
        assert!(
            st.mean > 0.5,
            "{}: overcommitted 5:2, some steal: {st:?}",
            v.name
        );
    }
}
