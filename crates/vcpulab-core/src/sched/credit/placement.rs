//! Where Credit puts a vCPU: xl's automatic NUMA placement of domains (`numa_place`),
//! the choice of a pCPU for a vCPU (`_csched_cpu_pick`: idle cores before idle SMT
//! siblings, idle sockets before busy ones, the node affinity first), and stealing from a
//! busy peer's queue (`csched_load_balance`). See **Placement**, **Scheduling** and the
//! NUMA deviation in the header of `credit.rs`.

use super::{
    Credit, CreditPolicy, PICK_NODE_STEP, STEAL_NODE_STEP, STEAL_OTHER_NODE, STEAL_OTHER_SOCKET,
    STEAL_SMT, STEAL_SOCKET,
};
use crate::sched::{CpuId, SchedCtx, SchedView, TaskId};
use crate::topology::{CpuSet, Distance, Topology};

/// xl's automatic NUMA placement (libxl 4.3/4.4, on by default): each domain, in creation
/// (VM) order, whose vCPUs are all unpinned and fit on one node, gets the node holding the
/// fewest vCPUs counted so far as its node affinity (a domain without one counts on every
/// node; ties: the lower node, as free memory, which xl compares next, is not modelled).
/// The others get none. Only on hosts with more than one node.
pub(super) fn numa_place(view: &SchedView, ndoms: usize) -> Vec<Option<CpuSet>> {
    let topo = &view.topo;
    let nnodes = topo.numa_nodes as usize;
    let mut aff = vec![None; ndoms];
    if nnodes < 2 {
        return aff;
    }
    let n = topo.ncpus();
    let mut node_cpus = vec![CpuSet::empty(n); nnodes];
    for c in 0..n {
        node_cpus[topo.cpus[c].node as usize].insert(c);
    }
    // Per domain, in one pass over the tasks: its vCPU count and whether all are unpinned.
    let mut vcpus = vec![0usize; ndoms];
    let mut unpinned = vec![true; ndoms];
    for t in &view.tasks {
        vcpus[t.vm as usize] += 1;
        unpinned[t.vm as usize] &= t.affinity.len() == n;
    }
    let smallest_node = node_cpus.iter().map(|c| c.len()).min().unwrap_or(0);
    let mut counted = vec![0usize; nnodes];
    for (d, slot) in aff.iter_mut().enumerate() {
        if vcpus[d] == 0 {
            continue;
        }
        if unpinned[d] && vcpus[d] <= smallest_node {
            let best = (0..nnodes).min_by_key(|&k| (counted[k], k)).expect("nodes");
            counted[best] += vcpus[d];
            *slot = Some(node_cpus[best].clone());
        } else {
            for c in counted.iter_mut() {
                *c += vcpus[d];
            }
        }
    }
    aff
}

/// What one balance step of the placement chose.
struct Pick {
    cpu: usize,
    /// The chosen pCPU is idle (or the vCPU's own, with nothing waiting there).
    idle: bool,
    /// The group whose `idle_bias` the choice advances, if it moved into one.
    biased: Option<usize>,
}

/// The next member of `set` after `after`, wrapping around (`cpumask_cycle`).
pub(super) fn cycle(set: &CpuSet, after: usize) -> Option<usize> {
    set.next_after(after).or_else(|| set.first())
}

/// The walk over idle pCPUs of `_csched_cpu_pick`, from `cpu` over the candidates `cpus`
/// (idle pCPUs of the affinity, `cpu` excluded): Xen visits every candidate in cycle
/// order and moves to the next one's core (same socket) or socket (other socket) when
/// that has more idlers than the current one's (twice as many across sockets), choosing
/// inside it from that group's `idle_bias`; a candidate that does not win is dropped
/// with its group. Returns the choice and the candidate whose group it moved into last.
///
/// Instead of visiting the losers one by one (a walk linear in the idle pCPUs, run on
/// every wake and every tick), this jumps to the next candidate that would win from the
/// current choice (`winners`). Same answer: idle counts do not change during the walk and
/// a move only raises the current core's or socket's count, so a candidate that loses
/// once loses against every later choice too, and dropping it or not changes nothing
/// (`tests::pick_walk_matches_xen_loop` checks this against the literal loop).
pub(super) fn pick_walk(
    topo: &Topology,
    idlers: &CpuSet,
    mut cpus: CpuSet,
    mut cpu: usize,
    idle_bias: &[usize],
) -> (usize, Option<usize>) {
    let mut biased = None;
    loop {
        let w = winners(topo, idlers, &cpus, cpu);
        let Some(nxt) = cycle(&w, cpu) else {
            return (cpu, biased);
        };
        let group = if topo.cpus[nxt].socket == topo.cpus[cpu].socket {
            topo.core_cpus(topo.cpus[nxt].core)
        } else {
            topo.socket_cpus(topo.cpus[nxt].socket)
        };
        let cand = cpus.within(group);
        biased = Some(nxt);
        cpu = cycle(&cand, idle_bias[nxt]).expect("nxt is a candidate");
        cpus.remove_range(topo.core_cpus(topo.cpus[cpu].core));
    }
}

/// The candidates that would win against `cpu` in the walk above: in `cpu`'s socket,
/// those whose core has more idlers than `cpu`'s core; elsewhere, those in a socket with
/// more than twice the idlers of `cpu`'s socket.
fn winners(topo: &Topology, idlers: &CpuSet, cpus: &CpuSet, cpu: usize) -> CpuSet {
    let my_socket = topo.cpus[cpu].socket;
    let socket_idle = idlers.count_in(topo.socket_cpus(my_socket));
    let mut w = CpuSet::empty(topo.ncpus());
    for s in (0..topo.sockets).filter(|&s| s != my_socket) {
        let r = topo.socket_cpus(s);
        if idlers.count_in(r.clone()) > 2 * socket_idle {
            w.union_with(&cpus.within(r));
        }
    }
    let tpc = topo.threads_per_core as usize;
    let core_idle = idlers.count_in(topo.core_cpus(topo.cpus[cpu].core));
    let mine = cpus.within(topo.socket_cpus(my_socket));
    if core_idle == 0 {
        // Every candidate's core has at least the candidate idle.
        w.union_with(&mine);
    } else if tpc == 2 && core_idle == 1 {
        w.union_with(&mine.intersect(&idlers.whole_pairs()));
    } else if core_idle < tpc {
        let first_core = my_socket * topo.cores_per_socket;
        for core in first_core..first_core + topo.cores_per_socket {
            let r = topo.core_cpus(core);
            if mine.count_in(r.clone()) > 0 && idlers.count_in(r.clone()) > core_idle {
                w.union_with(&mine.within(r));
            }
        }
    }
    w
}

impl<P: CreditPolicy> Credit<P> {
    /// `_csched_cpu_pick`: where `t` would best run (see the header). `commit` records the
    /// choice in the chosen group's `idle_bias`.
    pub(super) fn cpu_pick(&mut self, view: &SchedView, t: TaskId, commit: bool) -> usize {
        // Node-affinity step first: settle there only on an idle pCPU.
        let near = self
            .node_step_mask(t)
            .map(|near| self.pick_within(view, t, &near))
            .filter(|pick| pick.idle);
        let pick = match near {
            Some(pick) => {
                self.counters.bump(PICK_NODE_STEP);
                pick
            }
            None => self.pick_within(view, t, &self.pool[t as usize]),
        };
        if commit {
            if let Some(b) = pick.biased {
                self.idle_bias[b] = pick.cpu;
            }
        }
        pick.cpu
    }

    /// The pCPUs of `t`'s pool in its domain's node affinity, if that narrows the pool
    /// (the node-affinity balance step applies), else None.
    pub(super) fn node_step_mask(&self, t: TaskId) -> Option<CpuSet> {
        let near = self.node_aff[self.dom[t as usize] as usize].as_ref()?;
        let mask = self.pool[t as usize].intersect(near);
        (!mask.is_empty() && mask != self.pool[t as usize]).then_some(mask)
    }

    /// One balance step of `_csched_cpu_pick` within `aff`.
    fn pick_within(&self, view: &SchedView, t: TaskId, aff: &CpuSet) -> Pick {
        let topo = &view.topo;
        let proc = self.processor[t as usize] as usize;
        let mut cpu = if aff.contains(proc) {
            proc
        } else {
            cycle(aff, proc).expect("affinity is never empty")
        };
        let mut idlers = self.idlers.clone();
        if proc == cpu && self.runq[cpu].is_empty() {
            idlers.insert(cpu);
        }
        let mut cpus = aff.intersect(&idlers);
        if !cpus.contains(cpu) {
            if let Some(c) = cycle(&cpus, cpu) {
                cpu = c;
            }
        }
        cpus.remove(cpu);
        let (cpu, biased) = pick_walk(topo, &idlers, cpus, cpu, &self.idle_bias);
        Pick {
            cpu,
            idle: idlers.contains(cpu),
            biased,
        }
    }

    /// `csched_load_balance`: the first queued vCPU of priority above `pri` on a busy
    /// peer, own NUMA node first; it now lives on `cpu`.
    pub(super) fn steal(&mut self, ctx: &SchedCtx, cpu: usize, pri: i8) -> Option<TaskId> {
        let topo = &ctx.view.topo;
        let nnodes = self.node_cpus.len();
        let node = topo.cpus[cpu].node as usize;
        // Balance steps: vCPUs whose node affinity holds `cpu` first (only when some domain
        // has one), then any vCPU whose pool holds it; each step walks every peer.
        let steps: &[bool] = if self.any_node_aff {
            &[true, false]
        } else {
            &[false]
        };
        for &node_step in steps {
            for k in 0..nnodes {
                let n = (node + k) % nnodes;
                for &peer in &self.node_cpus[n] {
                    if peer == cpu || self.idlers.contains(peer) || self.curr[peer].is_none() {
                        continue;
                    }
                    let mut found = None;
                    for (i, &t) in self.runq[peer].iter().enumerate() {
                        if self.pri[t as usize] <= pri {
                            break;
                        }
                        let fits = if node_step {
                            self.node_step_mask(t).is_some_and(|m| m.contains(cpu))
                        } else {
                            self.pool[t as usize].contains(cpu)
                        };
                        if fits {
                            found = Some((i, t));
                            break;
                        }
                    }
                    if let Some((i, t)) = found {
                        if node_step {
                            self.counters.bump(STEAL_NODE_STEP);
                        }
                        self.runq[peer].remove(i);
                        if self.runq[peer].is_empty() {
                            self.maybe_queued.remove(peer);
                        }
                        self.on_runq[t as usize] = false;
                        self.processor[t as usize] = cpu as CpuId;
                        self.counters.bump(match topo.distance(peer, cpu) {
                            Distance::SmtSibling => STEAL_SMT,
                            Distance::SameSocket | Distance::SameCpu => STEAL_SOCKET,
                            Distance::OtherSocket => STEAL_OTHER_SOCKET,
                            Distance::OtherNuma => STEAL_OTHER_NODE,
                        });
                        return Some(t);
                    }
                }
            }
        }
        None
    }
}
