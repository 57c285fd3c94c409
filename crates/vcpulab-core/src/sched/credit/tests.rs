//! Unit tests of Credit: the pCPU-pick walk against Xen's literal loop, wake-up tickling,
//! the cap check, the accounting split and NUMA placement.

use super::accounting::{acct_shares, DomIn, DomShare};
use super::placement::{cycle, numa_place, pick_walk};
use super::*;
use crate::rng::Rng;
use crate::sched::{SchedOut, TaskInfo};
use crate::time::SimTime;
use crate::topology::Topology;

/// The walk of `_csched_cpu_pick` as Xen writes it: visit every candidate in cycle
/// order, comparing idle counts of cores (same socket) or sockets (factor 2).
fn xen_loop(
    topo: &Topology,
    idlers: &CpuSet,
    mut cpus: CpuSet,
    mut cpu: usize,
    idle_bias: &[usize],
) -> (usize, Option<usize>) {
    let mut biased = None;
    while let Some(nxt) = cycle(&cpus, cpu) {
        let same_socket = topo.cpus[cpu].socket == topo.cpus[nxt].socket;
        let group = |c: usize| {
            if same_socket {
                topo.core_cpus(topo.cpus[c].core)
            } else {
                topo.socket_cpus(topo.cpus[c].socket)
            }
        };
        let factor = if same_socket { 1 } else { 2 };
        let idle_mine = group(cpu).filter(|&c| idlers.contains(c)).count();
        let theirs: Vec<usize> = group(nxt).filter(|&c| idlers.contains(c)).collect();
        if idle_mine * factor < theirs.len() {
            let mut cand = CpuSet::empty(topo.ncpus());
            for &c in theirs.iter().filter(|&&c| cpus.contains(c)) {
                cand.insert(c);
            }
            biased = Some(nxt);
            cpu = cycle(&cand, idle_bias[nxt]).unwrap();
            for c in topo.core_cpus(topo.cpus[cpu].core) {
                cpus.remove(c);
            }
        } else {
            for c in theirs {
                cpus.remove(c);
            }
        }
    }
    (cpu, biased)
}

#[test]
fn pick_walk_matches_xen_loop() {
    let mut rng = Rng::from_state(0x9E37_79B9_7F4A_7C15);
    // (sockets, cores per socket, threads per core): SMT 1, 2 and 4, one to four
    // sockets, and a host past one 64-bit word.
    let shapes = [
        (1, 8, 2),
        (2, 4, 2),
        (2, 3, 1),
        (2, 2, 4),
        (4, 2, 2),
        (2, 40, 2),
        (3, 5, 3),
    ];
    let mut moved = 0;
    for &(s, c, t) in &shapes {
        let topo = Topology::new(s, c, t, 1);
        let n = topo.ncpus();
        for _ in 0..3000 {
            // Sparse, half and dense idle sets.
            let density = [4, 2, 1][rng.below(3) as usize];
            let mut idlers = CpuSet::empty(n);
            let mut aff = CpuSet::empty(n);
            for cpu in 0..n {
                if rng.below(4) < 4 / density {
                    idlers.insert(cpu);
                }
                if rng.below(5) != 0 {
                    aff.insert(cpu);
                }
            }
            let cpu = rng.below(n as u64) as usize;
            let mut cpus = aff.intersect(&idlers);
            cpus.remove(cpu);
            let bias: Vec<usize> = (0..n).map(|_| rng.below(n as u64) as usize).collect();
            let want = xen_loop(&topo, &idlers, cpus.clone(), cpu, &bias);
            let got = pick_walk(&topo, &idlers, cpus, cpu, &bias);
            assert_eq!(got, want, "shape {s}x{c}x{t}, idlers {idlers}, cpu {cpu}");
            moved += (want.1.is_some()) as u32;
        }
    }
    assert!(moved > 1000, "the random states rarely move: {moved}");
}

/// A scheduler on `ncpus` pCPUs of one socket with tasks (vm, weight, cap, affinity).
fn setup(ncpus: usize, tasks: &[(u32, u32, u32, &str)]) -> (SchedView, Credit) {
    let view = SchedView {
        topo: Topology::new(1, ncpus as u32, 1, 1),
        tasks: tasks
            .iter()
            .enumerate()
            .map(|(i, &(vm, weight, cap, aff))| TaskInfo {
                vm,
                index: i as u32,
                affinity: CpuSet::parse(aff).unwrap(),
                weight,
                cap,
                class: None,
                latency_vcpu: false,
                host_thread: false,
                rt: Default::default(),
            })
            .collect(),
        state: vec![RunState::Halted; tasks.len()],
        cpu_curr: vec![None; ncpus],
        nvms: tasks.iter().map(|t| t.0 + 1).max().unwrap(),
    };
    let sched = started(&view, &toml::Table::new(), PARAMS, |_| Plain);
    (view, sched)
}

fn out_for(ncpus: usize) -> SchedOut {
    SchedOut {
        resched_pending: vec![false; ncpus],
        ..Default::default()
    }
}

/// Puts `t` on `cpu` as the engine would after `pick_next` chose it.
fn running(view: &mut SchedView, sched: &mut Credit, t: TaskId, cpu: usize, pri: i8) {
    view.state[t as usize] = RunState::Running(cpu as CpuId);
    view.cpu_curr[cpu] = Some(t);
    sched.curr[cpu] = Some(t);
    sched.processor[t as usize] = cpu as CpuId;
    sched.idlers.remove(cpu);
    sched.pri[t as usize] = pri;
}

/// Wakes `t` (last on pCPU 0) with priority `pri`; returns the pCPUs asked to
/// reschedule.
fn wake(view: &mut SchedView, sched: &mut Credit, t: TaskId, pri: i8) -> Vec<CpuId> {
    view.state[t as usize] = RunState::Runnable;
    sched.pri[t as usize] = pri;
    sched.processor[t as usize] = 0;
    let mut out = out_for(view.cpu_curr.len());
    sched.wake(
        &mut SchedCtx {
            now: SimTime(5_000_000),
            view,
            out: &mut out,
        },
        t,
    );
    out.resched
}

/// A waking vCPU is boosted only from UNDER, and tickles (preempts) the pCPU it last
/// ran on only if it then outranks the running vCPU.
#[test]
fn a_wake_up_preempts_only_lower_priorities() {
    let cases = [
        // (running, waking before, waking after, preempts)
        (PRI_UNDER, PRI_UNDER, PRI_BOOST, true),
        (PRI_OVER, PRI_UNDER, PRI_BOOST, true),
        (PRI_BOOST, PRI_UNDER, PRI_BOOST, false),
        (PRI_UNDER, PRI_OVER, PRI_OVER, false),
        (PRI_OVER, PRI_OVER, PRI_OVER, false),
    ];
    for (cur, before, after, preempts) in cases {
        let (mut view, mut sched) = setup(1, &[(0, 256, 0, "0"), (1, 256, 0, "0")]);
        running(&mut view, &mut sched, 0, 0, cur);
        let asked = wake(&mut view, &mut sched, 1, before);
        assert_eq!(sched.pri[1], after, "{cur} {before}");
        assert_eq!(asked == vec![0], preempts, "{cur} {before}: {asked:?}");
        assert_eq!(sched.runq[0], [1]);
    }
}

/// With an idle pCPU the waker may use, that idler is tickled and the running vCPU
/// is left alone; with idlers it may not use, a lower-priority running vCPU is kicked
/// away (marked for migration) and the pCPU reschedules.
#[test]
fn a_wake_up_tickles_an_idler_or_kicks_the_running_vcpu_away() {
    let (mut view, mut sched) = setup(2, &[(0, 256, 0, "0-1"), (1, 256, 0, "0-1")]);
    running(&mut view, &mut sched, 0, 0, PRI_UNDER);
    assert_eq!(wake(&mut view, &mut sched, 1, PRI_UNDER), vec![1]);
    assert!(!sched.migrating[0]);
    let (mut view, mut sched) = setup(2, &[(0, 256, 0, "0-1"), (1, 256, 0, "0")]);
    running(&mut view, &mut sched, 0, 0, PRI_UNDER);
    assert_eq!(wake(&mut view, &mut sched, 1, PRI_UNDER), vec![0]);
    assert!(sched.migrating[0]);
    assert_eq!(sched.counters.values[TICKLE_KICK_AWAY], 1);
}

/// The in-scheduler cap check fails when a capped vCPU paid for more run time
/// between two accounting passes than was possible (a period plus a tick, or a tick if
/// the first pass parked it), and passes otherwise.
#[test]
fn the_cap_check_can_fail() {
    for (paid, parked, fails) in [
        (250, false, false),
        (450, false, true),
        (100, true, false),
        (250, true, true),
    ] {
        let (mut view, mut sched) = setup(2, &[(0, 256, 50, "0-1")]);
        running(&mut view, &mut sched, 0, 0, PRI_UNDER);
        sched.acct_start(0);
        if parked {
            sched.credit_of[0] = -1000;
        }
        let mut out = out_for(2);
        let mut ctx = SchedCtx {
            now: SimTime(35_000_000),
            view: &view,
            out: &mut out,
        };
        // Cap 50: 150 credits per period; -1000 + 150 is below -150: parked, clipped.
        sched.global_timer(&mut ctx);
        assert_eq!(sched.parked[0], parked);
        let after = if parked { -300 } else { 150 };
        assert_eq!(sched.cap_mark[0], Some((after, parked)));
        if parked {
            assert_eq!(out.resched, vec![0]);
            // The engine takes the parked vCPU off its pCPU: runnable, queued nowhere.
            let mut out = out_for(2);
            let next = sched.pick_next(
                &mut SchedCtx {
                    now: SimTime(35_000_000),
                    view: &view,
                    out: &mut out,
                },
                0,
                Some(0),
            );
            assert_eq!(next, None);
            view.state[0] = RunState::Runnable;
            view.cpu_curr[0] = None;
        }
        assert!(sched.check(&view).is_ok());
        sched.credit_of[0] = after - paid;
        let mut out = out_for(2);
        sched.global_timer(&mut SchedCtx {
            now: SimTime(65_000_000),
            view: &view,
            out: &mut out,
        });
        let checked = sched.check(&view);
        assert_eq!(checked.is_err(), fails, "{paid} {parked}: {checked:?}");
        if fails {
            assert!(checked.unwrap_err().contains("capped"));
        }
    }
}

fn dom(weight: u64, cap: u64, active: u64) -> DomIn {
    DomIn {
        weight,
        cap,
        active,
    }
}

fn handed_out(shares: &[DomShare], doms: &[DomIn]) -> i64 {
    shares
        .iter()
        .zip(doms)
        .map(|(s, d)| s.per_vcpu * d.active as i64)
        .sum()
}

/// With no domain at its peak, a period hands out exactly its credit (300 per pCPU),
/// split by weight x active vCPUs.
#[test]
fn accounting_hands_out_the_periods_credit_split_by_weight() {
    // 2 pCPUs: 600 credits. Weights 256 and 512, two active vCPUs each.
    let doms = [dom(256, 0, 2), dom(512, 0, 2)];
    let (s, moved) = acct_shares(600, 300, 0, &doms);
    assert_eq!(handed_out(&s, &doms), 600);
    assert_eq!(s[0].per_vcpu * 2, s[1].per_vcpu);
    assert!(moved.is_empty());
    // 8 pCPUs, uneven weights: the rounding (up, once per domain and once per vCPU)
    // adds at most a credit per domain and per active vCPU.
    let doms = [
        dom(100, 0, 3),
        dom(300, 0, 5),
        dom(1000, 0, 7),
        dom(256, 0, 9),
    ];
    let (s, _) = acct_shares(2400, 300, 0, &doms);
    let total = handed_out(&s, &doms);
    let slack: i64 = doms.iter().map(|d| 1 + d.active as i64).sum();
    assert!((2400..=2400 + slack).contains(&total), "{total}");
    let w_total: u64 = doms.iter().map(|d| d.weight * d.active).sum();
    for (sh, d) in s.iter().zip(&doms) {
        let exact = 2400.0 * (d.weight * d.active) as f64 / w_total as f64;
        let got = (sh.per_vcpu * d.active as i64) as f64;
        assert!(
            (got - exact).abs() <= 1.0 + d.active as f64,
            "{got} vs {exact}"
        );
    }
}

/// A domain held to its peak (one slice per vCPU) or its cap leaves the rest to the
/// domains after it; met after an unlimited one, it moves to the head of the list, and
/// the next period hands out the whole credit again.
#[test]
fn credit_a_limited_domain_cannot_take_goes_to_the_others() {
    // 2 pCPUs. A capped domain (cap 50: 150 credits) of weight 2048 first.
    let doms = [dom(2048, 50, 1), dom(256, 0, 1), dom(256, 0, 1)];
    let (s, moved) = acct_shares(600, 300, 0, &doms);
    assert_eq!(s[0].per_vcpu, 150);
    assert_eq!(s[0].cap_per_vcpu, 150);
    assert_eq!(s[1], s[2]);
    assert_eq!(handed_out(&s, &doms), 600);
    assert!(moved.is_empty());
    // The same domain last: its leftover is lost this period and it moves to the head.
    let doms = [dom(256, 0, 1), dom(256, 0, 1), dom(2048, 50, 1)];
    let (s, moved) = acct_shares(600, 300, 0, &doms);
    assert_eq!(s[2].per_vcpu, 150);
    assert!(handed_out(&s, &doms) < 600);
    assert_eq!(moved, vec![2]);
    let doms = [doms[2], doms[0], doms[1]];
    let (s, _) = acct_shares(600, 300, 0, &doms);
    assert_eq!(handed_out(&s, &doms), 600);
    // A cap split over active vCPUs, rounded up.
    let (s, _) = acct_shares(1200, 300, 0, &[dom(256, 150, 2)]);
    assert_eq!(s[0].cap_per_vcpu, 225);
    assert_eq!(s[0].per_vcpu, 225);
}

/// A negative balance last period raises the total (and the peaks) by the shortfall.
#[test]
fn a_negative_balance_is_paid_back_next_period() {
    let doms = [dom(256, 0, 2), dom(256, 0, 2)];
    let (s, _) = acct_shares(600, 300, -200, &doms);
    assert_eq!(handed_out(&s, &doms), 800);
    let (s, _) = acct_shares(600, 300, 200, &doms);
    assert_eq!(handed_out(&s, &doms), 600);
}

/// xl's placement: equal unpinned domains alternate between the nodes; a pinned domain
/// and one larger than a node get no node affinity and count on every node.
#[test]
fn numa_placement_alternates_and_skips_pinned_or_large_domains() {
    let info = |vm: u32, aff: &str| TaskInfo {
        vm,
        index: 0,
        affinity: CpuSet::parse(aff).unwrap(),
        weight: 256,
        cap: 0,
        class: None,
        latency_vcpu: false,
        host_thread: false,
        rt: Default::default(),
    };
    // 2 sockets x 4 cores, one node each: node 0 = pCPUs 0-3, node 1 = 4-7.
    let mut tasks = vec![];
    for vm in 0..3 {
        tasks.extend([info(vm, "0-7"), info(vm, "0-7")]);
    }
    tasks.extend([info(3, "0-1"), info(3, "0-1")]); // pinned
    tasks.extend((0..5).map(|_| info(4, "0-7"))); // 5 vCPUs > 4 pCPUs per node
    tasks.push(info(5, "0-7"));
    let view = SchedView {
        topo: Topology::new(2, 4, 1, 2),
        state: vec![RunState::Halted; tasks.len()],
        tasks,
        cpu_curr: vec![None; 8],
        nvms: 6,
    };
    let nodes: Vec<Option<String>> = numa_place(&view, 6)
        .into_iter()
        .map(|a| a.map(|c| format!("{:?}", c.iter().collect::<Vec<_>>())))
        .collect();
    let n0 = Some(format!("{:?}", (0..4).collect::<Vec<usize>>()));
    let n1 = Some(format!("{:?}", (4..8).collect::<Vec<usize>>()));
    // vm0 -> node 0, vm1 -> node 1, vm2 -> node 0 (tie, lower node); vm3, vm4: none
    // (each adds its vCPUs to both nodes); vm5 -> node 1 (2 + 7 against 4 + 7).
    assert_eq!(nodes, vec![n0.clone(), n1.clone(), n0, None, None, n1]);
    // One node: no placement.
    let flat = SchedView {
        topo: Topology::new(2, 4, 1, 1),
        ..view
    };
    assert!(numa_place(&flat, 6).iter().all(Option::is_none));
}

#[test]
fn cycle_wraps() {
    let mut s = CpuSet::empty(8);
    s.insert(2);
    s.insert(5);
    assert_eq!(cycle(&s, 2), Some(5));
    assert_eq!(cycle(&s, 5), Some(2));
    assert_eq!(cycle(&s, 7), Some(2));
    assert_eq!(cycle(&CpuSet::empty(8), 0), None);
}
