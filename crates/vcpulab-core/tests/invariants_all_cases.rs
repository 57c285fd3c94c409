//! Every case of every built-in reproduction runs a short stretch with the engine's
//! invariants checked after each event: the cases cover configurations (SMT, turbo,
//! host threads, split I/O, FT helpers) that the unit tests reach only one at a time. Each
//! run's summary must also account for all of its time.

mod common;

use vcpulab_core::api::{run, RunOptions};
use vcpulab_core::repro;
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
                common::time_adds_up(&sum, &format!("{}/{} ({})", e.id, case.id, metric.name));
                runs += 1;
            }
        }
    }
    assert!(runs > 100, "only {runs} runs");
}
