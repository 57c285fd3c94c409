//! Core engine throughput (events/s) at growing sizes, for the cost curve of issue 6.
//!
//!   cargo bench -p vcpulab-core --bench engine              # all groups
//!   cargo bench -p vcpulab-core --bench engine -- rr         # one group (filter)
//!
//! Criterion reports "thrpt" in elements/s = simulator events/s (the summary's `events`,
//! counted once before timing; runs are deterministic so every iteration has the same count).
//! Each iteration is a whole `api::run`: scenario already parsed, host/VM setup included.
//!
//! - `rr-overcommit`: the benches/rr-overcommit model (rr scheduler, 1 ms slice, home
//!   pCPUs, Exp(1 ms) idle / Exp(2 ms) burst) at V = 16, 128, 1024, 8192 with P = V/8.
//! - `eevdf-ple`: the shape of scenarios/reproductions/kvm-ple (two cgroup VMs, KVM PLE,
//!   here with the eevdf scheduler and Linux 6.6 PLE defaults): a "noise" VM of exponential
//!   compute/sleep and a "bench" VM running a ticket-lock program, each with 2P/3 vCPUs on
//!   P pCPUs (8 vCPUs on 6 pCPUs at the smallest, like the reproduction).
//! - `credit-io`, `flms-io`: the shape of scenarios/reproductions/flms-io scaled up: P
//!   pCPUs (P/2 cores x 2 SMT threads), 3P/4 VMs of 4 vCPUs with lookbusy at 50% (a third
//!   each LSVM, NLSVM, MixVM), every LSVM answering a 100 ms ping over SR-IOV; under Xen
//!   Credit and under FLMS.
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::time::Duration;
use vcpulab_core::api::{self, RunOptions};
use vcpulab_core::Scenario;

fn rr_scenario(p: u32, v: u32, secs: f64) -> String {
    format!(
        r#"name = "rr-overcommit P={p} V={v}"
duration = "{secs}s"
seed = 42
[host]
cores_per_socket = {p}
[host.costs]
context_switch = "0us"
[scheduler]
name = "rr"
slice = "1ms"
[[vm]]
name = "guests"
vcpus = {v}
[[vm.workload]]
kind = "program"
threads = {v}
ops = [
  {{ op = "sleep", duration = {{ dist = "exp", mean = "1ms" }} }},
  {{ op = "compute", duration = {{ dist = "exp", mean = "2ms" }} }},
]
"#
    )
}

fn ple_scenario(p: u32, n: u32, secs: f64) -> String {
    format!(
        r#"name = "eevdf-ple P={p} 2x{n} vCPUs"
duration = "{secs}s"
seed = 1
[host]
cores_per_socket = {p}
base_ghz = 2.67
[scheduler]
name = "eevdf"
group_per_vm = true
[kvm]
vendor = "intel"
version = "6.6"
ple_window = 4096
ple_window_grow = 2
[[vm]]
name = "noise"
start_jitter = "1ms"
vcpus = {n}
[[vm.workload]]
kind = "program"
threads = {n}
ops = [
  {{ op = "compute", duration = {{ dist = "exp", mean = "1ms" }} }},
  {{ op = "sleep", duration = {{ dist = "exp", mean = "200us" }} }},
]
[[vm]]
name = "bench"
start_jitter = "1ms"
vcpus = {n}
[[vm.workload]]
kind = "program"
threads = {n}
ops = [
  {{ op = "compute", duration = "30ns" }},
  {{ op = "lock", lock = "l", kind = "ticket", hold = "12ns" }},
]
"#
    )
}

fn xen_io_scenario(sched: &str, p: u32, secs: f64) -> String {
    let mut s = format!(
        r#"name = "{sched}-io P={p}"
duration = "{secs}s"
seed = 1
[host]
cores_per_socket = {}
threads_per_core = 2
io_path = "direct"
[scheduler]
name = "{sched}"
"#,
        p / 2
    );
    for i in 0..3 * p / 4 {
        let class = ["lsvm", "nlsvm", "mixvm"][i as usize % 3];
        s += &format!(
            "[[vm]]\nname = \"vm{i}\"\nvcpus = 4\nstart_jitter = \"10ms\"\nclass = \"{class}\"\n"
        );
        match class {
            "lsvm" => s += "[[vm.workload]]\nkind = \"ping\"\ninterval = \"100ms\"\n[[vm.workload]]\nkind = \"lookbusy\"\nutilization = 50\nthreads = 4\n",
            "nlsvm" => s += "[[vm.workload]]\nkind = \"lookbusy\"\nutilization = 50\nthreads = 4\n",
            _ => s += "[[vm.workload]]\nkind = \"ping\"\ninterval = \"1s\"\nvcpus = [0]\n[[vm.workload]]\nkind = \"lookbusy\"\nutilization = 50\nthreads = 3\nvcpus = [1, 2, 3]\n",
        }
    }
    s
}

fn bench_cases(c: &mut Criterion, group: &str, cases: Vec<(String, String)>) {
    let opts = RunOptions::default();
    let mut g = c.benchmark_group(group);
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for (id, text) in cases {
        let sc = Scenario::from_toml_str(&text, &id).expect("bench scenario is valid");
        let events = api::run(&sc, None, &opts)
            .expect("bench scenario runs")
            .events;
        g.throughput(Throughput::Elements(events));
        g.bench_with_input(BenchmarkId::from_parameter(&id), &sc, |b, sc| {
            b.iter(|| {
                api::run(sc, None, &opts)
                    .expect("bench scenario runs")
                    .events
            })
        });
    }
    g.finish();
}

fn rr_overcommit(c: &mut Criterion) {
    // Simulated durations chosen for roughly 60k..180k events per run.
    let sizes: [(u32, u32, f64); 4] = [
        (2, 16, 10.0),
        (16, 128, 1.0),
        (128, 1024, 0.2),
        (1024, 8192, 0.2),
    ];
    let cases = sizes
        .iter()
        .map(|&(p, v, t)| (format!("P{p}-V{v}-{t}s"), rr_scenario(p, v, t)))
        .collect();
    bench_cases(c, "rr-overcommit", cases);
}

fn eevdf_ple(c: &mut Criterion) {
    let sizes: [(u32, u32, f64); 3] = [(6, 4, 0.005), (24, 16, 0.005), (64, 43, 0.01)];
    let cases = sizes
        .iter()
        .map(|&(p, n, t)| (format!("P{p}-V{}-{t}s", 2 * n), ple_scenario(p, n, t)))
        .collect();
    bench_cases(c, "eevdf-ple", cases);
}

fn xen_io(c: &mut Criterion) {
    for sched in ["credit", "flms"] {
        let sizes: [(u32, f64); 3] = [(8, 1.0), (32, 0.25), (64, 0.125)];
        let cases = sizes
            .iter()
            .map(|&(p, t)| {
                (
                    format!("P{p}-V{}-{t}s", 3 * p),
                    xen_io_scenario(sched, p, t),
                )
            })
            .collect();
        bench_cases(c, &format!("{sched}-io"), cases);
    }
}

criterion_group!(benches, rr_overcommit, eevdf_ple, xen_io);
criterion_main!(benches);
