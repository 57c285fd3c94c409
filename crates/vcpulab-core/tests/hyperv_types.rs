//! The Hyper-V classic and core schedulers: gang isolation (and that its check can fail),
//! the fallback to classic without SMT and its report, fairness, and the relations of the
//! `hyperv-types` reproduction.

use std::cell::Cell;
use std::rc::Rc;
use vcpulab_core::api::{run, summary_json};
use vcpulab_core::engine::Sim;
use vcpulab_core::model::Model;
use vcpulab_core::repro;
use vcpulab_core::sched::hyperv_core::check_gangs;
use vcpulab_core::sched::{
    with_scheduler, CpuId, RunState, SchedCtx, SchedView, Scheduler, TaskId, TaskInfo,
    WithScheduler,
};
use vcpulab_core::summary::Summary;
use vcpulab_core::time::SimDuration;
use vcpulab_core::topology::{CpuSet, Topology};
use vcpulab_core::Scenario;

mod common;
use common::{checked, counter, scenario};

/// A busy SMT host: hogs, a partly idle VM, a request server with partial affinity and a
/// weighted VM, more VPs than LPs, on 2 sockets x 2 cores x `threads` threads.
fn busy(sched: &str, threads: u32) -> String {
    let smt = if threads > 1 { 1.25 } else { 1.0 };
    format!(
        r#"
name = "busy"
duration = "2s"
seed = 11
[host]
sockets = 2
cores_per_socket = 2
threads_per_core = {threads}
smt_throughput = {smt}
[scheduler]
name = "{sched}"
[[vm]]
name = "a"
vcpus = 3
[[vm.workload]]
kind = "stress-ng"
threads = 3
[[vm]]
name = "b"
vcpus = 3
weight = 512
[[vm.workload]]
kind = "sysbench-cpu"
threads = 3
[[vm]]
name = "c"
vcpus = 2
[[vm.workload]]
kind = "lookbusy"
threads = 2
utilization = 40
[[vm]]
name = "server"
vcpus = 2
affinity = "1-3"
[[vm.workload]]
kind = "program"
threads = 2
arrivals = {{ process = "poisson", rate = 3000 }}
ops = [ {{ op = "serve", service = "150us", mode = "kernel" }}, {{ op = "io", latency = "50us" }} ]
"#
    )
}

/// Builds the scenario's scheduler and runs it wrapped in `GangRule`.
struct Wrapped<F> {
    sc: Scenario,
    fail: bool,
    observe: F,
}

/// Delegates everything to the wrapped scheduler; `check` applies the gang rule and
/// either reports (observe-only) or fails.
struct GangRule<S> {
    inner: S,
    fail: bool,
    mixed_cores_seen: Rc<Cell<u64>>,
}

impl<S: Scheduler> Scheduler for GangRule<S> {
    fn init(&mut self, ctx: &mut SchedCtx) {
        self.inner.init(ctx)
    }
    fn wake(&mut self, ctx: &mut SchedCtx, t: TaskId) {
        self.inner.wake(ctx, t)
    }
    fn block(&mut self, ctx: &mut SchedCtx, cpu: CpuId, t: TaskId) {
        self.inner.block(ctx, cpu, t)
    }
    fn pick_next(
        &mut self,
        ctx: &mut SchedCtx,
        cpu: CpuId,
        prev: Option<TaskId>,
    ) -> Option<TaskId> {
        self.inner.pick_next(ctx, cpu, prev)
    }
    fn timer(&mut self, ctx: &mut SchedCtx, cpu: CpuId) {
        self.inner.timer(ctx, cpu)
    }
    fn global_timer(&mut self, ctx: &mut SchedCtx) {
        self.inner.global_timer(ctx)
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.inner.counters()
    }
    fn starvation_bound(&self, view: &SchedView) -> Option<SimDuration> {
        self.inner.starvation_bound(view)
    }
    fn check(&self, view: &SchedView) -> Result<(), String> {
        self.inner.check(view)?;
        match check_gangs(view) {
            Ok(()) => Ok(()),
            Err(m) if self.fail => Err(m),
            Err(_) => {
                self.mixed_cores_seen.set(self.mixed_cores_seen.get() + 1);
                Ok(())
            }
        }
    }
}

impl<F: Fn(u64)> WithScheduler for Wrapped<F> {
    type Output = Result<Summary, String>;
    fn call<S: Scheduler>(self, sched: S) -> Self::Output {
        let seen = Rc::new(Cell::new(0));
        let wrapped = GangRule {
            inner: sched,
            fail: self.fail,
            mixed_cores_seen: seen.clone(),
        };
        // Invariant checking on, so that the engine calls `check` after every event.
        let r = Sim::new(&Model::compile(&self.sc), wrapped, self.sc.seed, checked())
            .run()
            .map_err(|e| e.message);
        (self.observe)(seen.get());
        r
    }
}

/// Runs `sc` with the gang rule checked after every event. `fail`: a violation fails the
/// run; otherwise violating events are counted and the count returned.
fn run_with_gang_rule(sc: &Scenario, fail: bool) -> (Result<Summary, String>, u64) {
    let seen = Rc::new(Cell::new(0));
    let s2 = seen.clone();
    let r = with_scheduler(
        &sc.scheduler.name,
        &sc.scheduler.params,
        Wrapped {
            sc: sc.clone(),
            fail,
            observe: move |n| s2.set(n),
        },
    );
    (r, seen.get())
}

/// The core scheduler never runs VPs of two VMs on one core: its own `check` (the gang
/// rule and core ownership) holds after every event on a busy SMT host, and the counters
/// show the rule was under pressure (siblings left idle while another VM's VP waited).
#[test]
fn core_scheduler_never_coschedules_two_vms_on_a_core() {
    let sc = scenario(&busy("hyperv-core", 2));
    let sum = run(&sc, None, &checked()).unwrap_or_else(|e| panic!("{e}"));
    assert!(counter(&sum, "core_pick_sibling_idle_gang") > 0);
    assert!(counter(&sum, "core_rotate_other_vm") > 100);
    assert!(counter(&sum, "core_wake_preempt") > 0);
    // And the rule as seen from outside the scheduler, counted rather than failed.
    let (r, mixed) = run_with_gang_rule(&sc, false);
    r.unwrap();
    assert_eq!(mixed, 0);
}

/// The gang check can fail: on a hand-built view with two VMs on the siblings of a core,
/// and on the classic scheduler's placement (which lets two VMs share a core).
#[test]
fn the_gang_check_catches_two_vms_on_one_core() {
    let topo = Topology::new(1, 2, 2, 1);
    let task = |vm, index| TaskInfo {
        vm,
        index,
        affinity: CpuSet::full(4),
        weight: 256,
        cap: 0,
        class: None,
        latency_vcpu: false,
        host_thread: false,
        rt: Default::default(),
    };
    let mut view = SchedView {
        topo,
        tasks: vec![task(0, 0), task(0, 1), task(1, 0)],
        state: vec![
            RunState::Running(0),
            RunState::Running(1),
            RunState::Running(2),
        ],
        cpu_curr: vec![Some(0), Some(1), Some(2), None],
        nvms: 2,
    };
    assert_eq!(check_gangs(&view), Ok(())); // VM 0 on core 0, VM 1 alone on core 1
    view.cpu_curr = vec![Some(0), Some(2), Some(1), None];
    view.state = vec![
        RunState::Running(0),
        RunState::Running(2),
        RunState::Running(1),
    ];
    let err = check_gangs(&view).unwrap_err();
    assert!(err.contains("core 0 runs VMs 0 and 1"), "{err}");

    let sc = scenario(&busy("hyperv-classic", 2));
    let (r, _) = run_with_gang_rule(&sc, true);
    let err = r.unwrap_err();
    assert!(err.contains("runs VMs"), "{err}");
}

/// Classic lets two VMs share a core: a 1-VP VM beside a 4-VP VM on 4 cores x 2 threads
/// (5 busy VPs on 8 LPs) runs on a core next to one of the 4-VP VM's VPs, for the whole
/// run; the core scheduler keeps it alone on its core.
#[test]
fn classic_lets_two_vms_share_a_core_and_core_does_not() {
    let text = |s: &str| {
        format!(
            "duration = \"1s\"\n[host]\ncores_per_socket = 4\nthreads_per_core = 2\n[scheduler]\nname = \"{s}\"\n\
             [[vm]]\nname = \"four\"\nvcpus = 4\n[[vm.workload]]\nkind = \"stress-ng\"\nthreads = 4\n\
             [[vm]]\nname = \"one\"\nvcpus = 1\n[[vm.workload]]\nkind = \"stress-ng\"\n"
        )
    };
    let (r, mixed) = run_with_gang_rule(&scenario(&text("hyperv-classic")), false);
    let sum = r.unwrap();
    assert!(mixed > 0, "classic never put two VMs on one core");
    // 3 of four's VPs alone on a core (1000 bogo-ops/s each) and the fourth sharing one
    // with `one` (0.625 x each, the default SMT throughput 1.25 split in two).
    let (four, one) = (
        sum.vms[0].throughput.unwrap(),
        sum.vms[1].throughput.unwrap(),
    );
    assert!((four / 3625.0 - 1.0).abs() < 0.01, "{four}");
    assert!((one / 625.0 - 1.0).abs() < 0.01, "{one}");
    let (r, mixed) = run_with_gang_rule(&scenario(&text("hyperv-core")), false);
    let sum = r.unwrap();
    assert_eq!(mixed, 0);
    // `one` owns a core alone after the first slice; `four` packs two VPs on a core.
    let (four, one) = (
        sum.vms[0].throughput.unwrap(),
        sum.vms[1].throughput.unwrap(),
    );
    assert!(one > 950.0 && four < 3300.0, "{four} {one}");
}

/// The boot event's scheduler type: classic reports 2 with SMT and 1 without; core
/// reports 3 with SMT, and without SMT falls back to classic and reports 1 and the fallback.
#[test]
fn scheduler_type_and_fallback_are_reported() {
    for (sched, threads, ty, fell_back) in [
        ("hyperv-classic", 2, 2, None),
        ("hyperv-classic", 1, 1, None),
        ("hyperv-core", 2, 3, Some(0)),
        ("hyperv-core", 1, 1, Some(1)),
    ] {
        let sum = run(&scenario(&busy(sched, threads)), None, &checked()).unwrap();
        assert_eq!(
            counter(&sum, "hypervisor_scheduler_type"),
            ty,
            "{sched} {threads}"
        );
        match fell_back {
            Some(f) => {
                assert_eq!(
                    counter(&sum, "fell_back_to_classic"),
                    f,
                    "{sched} {threads}"
                );
                // Only the mode in use counts decisions.
                let classic_decisions = counter(&sum, "slice_end_switch");
                let core_decisions = counter(&sum, "core_rotate_other_vm");
                if f == 1 {
                    assert!(classic_decisions > 0 && core_decisions == 0);
                } else {
                    assert!(classic_decisions == 0 && core_decisions > 0);
                }
            }
            None => assert!(sum
                .scheduler_counters
                .iter()
                .all(|(n, _)| n != "fell_back_to_classic")),
        }
    }
}

/// Without SMT the core scheduler is the classic one: identical summaries apart from the
/// scheduler's name and its counter list (which holds classic's counters, equal, plus the
/// fallback report and zero core-mode counters).
#[test]
fn without_smt_core_and_classic_give_identical_results() {
    let strip = |sum: &Summary| {
        let mut v: serde_json::Value = serde_json::from_str(&summary_json(sum)).unwrap();
        let o = v.as_object_mut().unwrap();
        o.remove("scheduler");
        o.remove("scheduler_counters");
        v
    };
    for seed in [1, 2] {
        let classic = run(
            &scenario(&busy("hyperv-classic", 1)),
            Some(seed),
            &checked(),
        )
        .unwrap();
        let core = run(&scenario(&busy("hyperv-core", 1)), Some(seed), &checked()).unwrap();
        assert_eq!(strip(&classic), strip(&core));
        for (name, value) in &classic.scheduler_counters {
            assert_eq!(counter(&core, name), *value, "{name}");
        }
        for (name, value) in &core.scheduler_counters {
            if name.starts_with("core_") {
                assert_eq!(*value, 0, "{name}");
            }
        }
    }
}

/// Two equal hog VMs get equal CPU within 3% under classic and core, with and without SMT,
/// overcommitted (6 VPs on 4 LPs) and not (2 VPs each on 8 LPs... and 3 each on 4 LPs).
#[test]
fn two_equal_hog_vms_get_equal_cpu() {
    for sched in ["hyperv-classic", "hyperv-core"] {
        for (cores, threads, vcpus) in [(2, 2, 3), (4, 1, 3), (2, 2, 4), (4, 2, 5), (3, 2, 3)] {
            let mut text = format!(
                "duration = \"10s\"\n[host]\ncores_per_socket = {cores}\nthreads_per_core = {threads}\n[scheduler]\nname = \"{sched}\"\n"
            );
            for i in 0..2 {
                text += &format!("[[vm]]\nname = \"v{i}\"\nvcpus = {vcpus}\n[[vm.workload]]\nkind = \"stress-ng\"\nthreads = {vcpus}\n");
            }
            let sum = run(&scenario(&text), None, &checked()).unwrap();
            let (a, b) = (sum.vms[0].cpu_time_s, sum.vms[1].cpu_time_s);
            assert!(
                (a / b - 1.0).abs() <= 0.03,
                "{sched} {cores}x{threads}, {vcpus} VPs each: {a} vs {b}"
            );
            // Throughput too (CPU time on a shared core is worth less).
            let (ta, tb) = (
                sum.vms[0].throughput.unwrap(),
                sum.vms[1].throughput.unwrap(),
            );
            assert!(
                (ta / tb - 1.0).abs() <= 0.03,
                "{sched} {cores}x{threads}, {vcpus} VPs each: throughput {ta} vs {tb}"
            );
        }
    }
}

/// Weights give proportional shares: a VM of weight 512 gets twice the CPU of one of
/// weight 256 when both have more busy VPs than their share of the LPs.
#[test]
fn weight_gives_proportional_share() {
    for sched in ["hyperv-classic", "hyperv-core"] {
        for threads in [1, 2] {
            let text = format!(
                "duration = \"10s\"\n[host]\ncores_per_socket = 2\nthreads_per_core = {threads}\n[scheduler]\nname = \"{sched}\"\n\
                 [[vm]]\nname = \"heavy\"\nvcpus = 2\nweight = 512\n[[vm.workload]]\nkind = \"stress-ng\"\nthreads = 2\n\
                 [[vm]]\nname = \"light\"\nvcpus = 2\n[[vm.workload]]\nkind = \"stress-ng\"\nthreads = 2\n\
                 [[vm]]\nname = \"light2\"\nvcpus = 2\n[[vm.workload]]\nkind = \"stress-ng\"\nthreads = 2\n"
            );
            let sum = run(&scenario(&text), None, &checked()).unwrap();
            let ratio = sum.vms[0].cpu_time_s / sum.vms[1].cpu_time_s;
            assert!(
                (ratio / 2.0 - 1.0).abs() <= 0.1,
                "{sched} threads={threads}: ratio {ratio}"
            );
        }
    }
}

/// The `hyperv-types` reproduction: every row has no paper figure (JSON `"paper": null`),
/// without SMT classic and core give identical figures, and with SMT core scheduling
/// costs VM1 throughput where a sibling must idle (VM2 with 1 or 3 busy VPs) and never
/// gains more than noise.
#[test]
fn hyperv_types_reproduction_relations() {
    let e = repro::find("hyperv-types").unwrap();
    assert_eq!(e.cases.len(), 48);
    let rows = repro::run_experiment(&e, None).unwrap();
    assert_eq!(rows.len(), 48);
    let mut table = String::new();
    for r in &rows {
        assert!(r.paper.is_none() && r.ratio.is_none());
        let j = serde_json::to_string(r).unwrap();
        assert!(j.contains("\"paper\":null"), "{j}");
        table += &format!("{:<22} {:>9.1}\n", r.case, r.sim.unwrap());
    }
    println!("{table}");
    let sim = |case: &str| {
        rows.iter()
            .find(|r| r.case == case)
            .unwrap_or_else(|| panic!("no case {case}"))
            .sim
            .unwrap()
    };
    for k in 1..=8 {
        assert_eq!(
            sim(&format!("classic/nosmt/busy{k}")),
            sim(&format!("core/nosmt/busy{k}")),
            "k={k}\n{table}"
        );
        let (classic, core) = (
            sim(&format!("classic/smt/busy{k}")),
            sim(&format!("core/smt/busy{k}")),
        );
        assert!(
            core <= classic * 1.01,
            "k={k}: core {core} > classic {classic}\n{table}"
        );
        // SMT helps every scheduler: the same 4 cores with SMT on give VM1 more.
        for s in ["root", "classic", "core"] {
            assert!(
                sim(&format!("{s}/smt/busy{k}")) >= sim(&format!("{s}/nosmt/busy{k}")),
                "{s} k={k}\n{table}"
            );
        }
    }
    for k in [1, 3] {
        let (classic, core) = (
            sim(&format!("classic/smt/busy{k}")),
            sim(&format!("core/smt/busy{k}")),
        );
        assert!(
            core < classic * 0.95,
            "k={k}: core {core} vs classic {classic}\n{table}"
        );
    }
}

/// Many small host and VM shapes (SMT or not, 1-2 sockets, partial affinity, extreme
/// weights, idle, bursty and request-driven VPs, short and long slices): the engine's
/// invariants, the starvation bound and the core scheduler's own check hold throughout.
#[test]
fn many_shapes_hold_every_invariant() {
    let mut rng = vcpulab_core::rng::Rng::derive(1, &["test", "hyperv-shapes"]);
    let mut next = |n: u64| rng.below(n);
    for i in 0..120 {
        let sched = ["hyperv-classic", "hyperv-core"][i % 2];
        let sockets = 1 + next(2);
        let cores = 1 + next(3);
        let threads = 1 + next(2);
        let ncpus = sockets * cores * threads;
        let slice = [500, 2000, 10_000, 20_000][next(4) as usize];
        let mut text = format!(
            "duration = \"{}ms\"\nseed = {i}\n[host]\nsockets = {sockets}\ncores_per_socket = {cores}\nthreads_per_core = {threads}\n\
             [scheduler]\nname = \"{sched}\"\ntimeslice = \"{slice}us\"\n",
            40 + next(300)
        );
        for v in 0..1 + next(3) {
            let vcpus = 1 + next(4);
            text += &format!(
                "[[vm]]\nname = \"v{v}\"\nvcpus = {vcpus}\nweight = {}\nstart_jitter = \"{}us\"\n",
                [1, 256, 1000][next(3) as usize],
                next(500)
            );
            if next(2) == 0 {
                text += &format!("affinity = \"0-{}\"\n", next(ncpus));
            }
            text += &match next(4) {
                0 => format!("[[vm.workload]]\nkind = \"stress-ng\"\nthreads = {}\n", 1 + next(4)),
                1 => format!(
                    "[[vm.workload]]\nkind = \"lookbusy\"\nthreads = {}\nutilization = {}\n",
                    1 + next(4),
                    next(101)
                ),
                2 => format!(
                    "[[vm.workload]]\nkind = \"program\"\nthreads = {}\narrivals = {{ process = \"poisson\", rate = {} }}\nops = [ {{ op = \"serve\", service = \"100us\" }}, {{ op = \"io\", latency = \"30us\" }} ]\n",
                    1 + next(3),
                    500 + next(5000)
                ),
                _ => String::new(), // an idle VM
            };
        }
        let sc = scenario(&text);
        run(&sc, None, &checked()).unwrap_or_else(|e| panic!("{e}\n{text}"));
    }
}
