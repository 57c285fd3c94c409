//! Arbitrary bytes as a scenario; if it parses, run it briefly with the invariant checks
//! on. The only legitimate SimError is a program whose operations take no time (it cannot
//! make progress); any other (a caught panic, "internal error", a broken invariant, a
//! scheduler bug) is re-raised as a panic so libFuzzer records it as a crash.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::sync::Arc;
use vcpulab_core::api::{self, RunOptions};
use vcpulab_core::time::SimDuration;
use vcpulab_core::{Error, Scenario};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(mut sc) = Scenario::from_toml_str(text, "fuzz.toml") else { return };
    // Keep each run short: a few ms of simulated time on a small machine.
    if sc.host.ncpus() > 64 || sc.vms.iter().map(|v| v.vcpus as u64).sum::<u64>() > 256 {
        return;
    }
    if sc.vms.iter().flat_map(|v| &v.workloads).map(|w| w.threads as u64).sum::<u64>() > 1024 {
        return;
    }
    sc.duration = sc.duration.min(SimDuration::from_ms(5));
    sc.warmup = SimDuration::ZERO;
    if api::estimate_events(&sc) > 2e5 {
        return;
    }
    // The estimate floors every operation at 1 us, so programs of shorter operations run
    // far more events than it says (a mutated PLE bench ran 818,400 in its 5 ms, past
    // libFuzzer's 10 s timeout under instrumentation). The engine asks the stop hook every
    // 65,536 events; answering yes at the first ask bounds every input at that many. A
    // stopped run is `Error::Interrupted`, not a finding.
    let stop = Arc::new(|| true);
    let opts = RunOptions { check_invariants: true, stop: Some(stop), ..Default::default() };
    if let Err(Error::Sim(e)) = api::run(&sc, None, &opts) {
        if !e.message.contains("without time passing") {
            panic!("{e}\n--- scenario ---\n{text}");
        }
    }
});
