//! Every case of every built-in reproduction runs a short stretch with the engine's
//! invariants checked after each event: the cases cover configurations (SMT, turbo,
//! host threads, split I/O, FT helpers) that the unit tests reach only one at a time. Each
//! run's summary must also account for all of its time.

use vcpulab_core::api::{run, RunOptions};
use vcpulab_core::repro;
use vcpulab_core::summary::Summary;
use vcpulab_core::time::SimDuration;

#[test]
fn every_reproduction_case_keeps_the_invariants() {
    let opts = RunOptions {
        check_invariants: true,
        ..Default::default()
    };
    let mut runs = 0;
    for e in repro::experiments() {
        for case in &e.cases {
            // The case's run, and the runs of metrics measured with edits of their own.
            let own_runs = e
                .metrics
                .iter()
                .filter(|m| !m.set.is_empty() || !m.remove.is_empty());
            for metric in std::iter::once(&e.metrics[0]).chain(own_runs) {
                let mut sc = repro::metric_scenario(&e, case, metric)
                    .unwrap_or_else(|err| panic!("{}/{}: {err}", e.id, case.id));
                // Long enough for software-ft's first journal commit (5 s) and a
                // writeback; the full runs are what `vcpulab reproduce` does.
                sc.duration = SimDuration::from_ms(6_000).min(sc.duration);
                sc.warmup = SimDuration::ZERO;
                let sum = run(&sc, None, &opts)
                    .unwrap_or_else(|err| panic!("{}/{} ({}): {err}", e.id, case.id, metric.name));
                time_adds_up(&sum, &format!("{}/{} ({})", e.id, case.id, metric.name));
                runs += 1;
            }
        }
    }
    assert!(runs > 100, "only {runs} runs");
}

/// The summary's time accounts close: every pCPU is busy or idle, every vCPU runs, waits
/// or is halted, for the whole measured interval, and what the tasks ran is what the
/// pCPUs were busy with.
fn time_adds_up(sum: &Summary, what: &str) {
    let measured = sum.duration_s - sum.warmup_s;
    let capacity = sum.host.pcpus as f64 * measured;
    let close = |a: f64, b: f64| (a - b).abs() < 1e-6 * b.max(1.0);
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
