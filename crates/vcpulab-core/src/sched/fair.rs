//! Shared machinery of the Linux fair class, used by `cfs` (4.15) and `eevdf` (6.6+),
//! as both live in `kernel/sched/fair.c`: per-pCPU run queues of scheduling entities
//! ordered by virtual runtime, optional group scheduling (one cgroup per VM), buddies,
//! directed yield, wake-up placement, and load balancing over scheduling domains.
//! The policy differences (placement, picking, preemption, yield) branch on `Policy`.
//! The rules and their kernel sources are written down in `cfs.rs` and `eevdf.rs`.

use super::{CpuId, SchedCtx, Scheduler, TaskId, YieldRequest, YieldResult};
use crate::time::{SimDuration, SimTime};
use std::collections::BTreeSet;

pub const NICE_0_LOAD: u64 = 1024;
/// CFS `sched_nr_latency`: above this many tasks the period stretches.
const SCHED_NR_LATENCY: u64 = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Linux 4.15 CFS.
    Cfs,
    /// Linux 6.6+ EEVDF; `pick_buddy`: the 6.14+ rule (PICK_BUDDY: the next buddy is
    /// honoured if eligible). Without it (6.6-6.13) the buddy needs NEXT_BUDDY (off).
    Eevdf { pick_buddy: bool },
}

/// Tunables, already scaled by 1 + ilog2(min(ncpus, 8)).
#[derive(Clone, Debug)]
pub struct Tunables {
    pub latency: SimDuration,
    pub min_granularity: SimDuration,
    pub wakeup_granularity: SimDuration,
    pub base_slice: SimDuration,
    pub tick: SimDuration,
    pub migration_cost: SimDuration,
    pub group_per_vm: bool,
    /// Scale latency, granularities and base slice by 1 + ilog2(min(ncpus, 8)).
    pub tunable_scaling: bool,
    pub gentle_fair_sleepers: bool,
    pub start_debit: bool,
    pub wakeup_preemption: bool,
}

pub fn scale_factor(ncpus: usize) -> u64 {
    let n = ncpus.clamp(1, 8) as u64;
    1 + (63 - n.leading_zeros() as u64)
}

// Counter indices (one per decision branch).
super::counters::declare_counters! {
    pub(super)
    C_WAKE_PREV_IDLE => "wake_prev_cpu_idle",
    C_WAKE_IDLE_SIBLING => "wake_idle_sibling",
    C_WAKE_BUSY_PREV => "wake_prev_cpu_busy",
    C_WAKEUP_PREEMPT => "wakeup_preempt",
    C_WAKEUP_NO_PREEMPT => "wakeup_no_preempt",
    C_TICK_PREEMPT => "tick_preempt",
    C_PICK_NEXT_BUDDY => "pick_next_buddy",
    C_PICK_NEXT_BUDDY_REFUSED => "pick_next_buddy_refused",
    C_PICK_SKIP_AVOIDED => "pick_skip_buddy_avoided",
    C_PICK_LAST_BUDDY => "pick_last_buddy",
    C_YIELD_OK => "yield_to_ok",
    C_YIELD_ESRCH => "yield_to_esrch",
    C_YIELD_TARGET_RUNNING => "yield_to_target_running_or_blocked",
    C_YIELD_MIGRATED => "yield_to_migrated_target",
    C_BALANCE_PULL => "periodic_balance_pull",
    C_NEWIDLE_PULL => "newidle_balance_pull",
    C_NOHZ_KICK => "nohz_idle_kick",
    C_PICK_IDLE => "pick_went_idle",
    C_BALANCE_FAILED => "periodic_balance_failed",
    C_ACTIVE_PUSH => "active_balance_push",
}

#[derive(Clone, Debug, Default)]
struct Entity {
    vruntime: i64,
    deadline: i64,
    vlag: i64,
    weight: u64,
    on_rq: bool,
    /// The run queue this entity is queued on (valid when on_rq or last queued there).
    rq: u32,
    exec_start: SimTime,
    sum_exec: SimDuration,
    prev_sum_exec: SimDuration,
    /// Group entity: its own run queue.
    child: Option<u32>,
    /// EEVDF RUN_TO_PARITY: picked with this deadline; protected until it changes.
    protect: Option<i64>,
}

#[derive(Clone, Debug, Default)]
struct Rq {
    tree: BTreeSet<(i64, u32)>,
    curr: Option<u32>,
    nr_running: u64,
    load: u64,
    min_vruntime: i64,
    next: Option<u32>,
    /// The next buddy was set by a directed yield with fix (b): honour it unconditionally.
    next_forced: bool,
    last: Option<u32>,
    skip: Option<u32>,
}

pub struct Fair {
    pub policy: Policy,
    pub tun: Tunables,
    pub counters: super::Counters<NCOUNTERS>,
    ncpus: usize,
    ntasks: usize,
    nvms: usize,
    ents: Vec<Entity>,
    rqs: Vec<Rq>,
    // per pCPU
    running: Vec<Option<TaskId>>,
    /// Runnable tasks on this pCPU (queued + running), all levels.
    h_nr: Vec<u64>,
    /// Tasks queued or running on each pCPU.
    cpu_tasks: Vec<BTreeSet<TaskId>>,
    /// pCPUs with nothing queued or running.
    idle_cpus: BTreeSet<u32>,
    last_balance: Vec<[SimTime; 3]>,
    /// `rq->avg_idle`: EWMA (1/8) of idle period lengths, capped at 2 x migration_cost.
    avg_idle: Vec<SimDuration>,
    /// When the pCPU went idle, while it is idle.
    idle_since: Vec<Option<SimTime>>,
    nr_balance_failed: Vec<[u32; 3]>,
    /// Active balance: the running task of this pCPU is to move to that pCPU when it
    /// next reschedules.
    active_move: Vec<Option<(TaskId, u32)>>,
    // per task
    task_cpu: Vec<u32>,
    /// When the balancer last moved the task (hysteresis standing in for PELT smoothing).
    pulled_at: Vec<SimTime>,
    /// Not yet queued since the run started: its first wake is `wake_up_new_task`.
    never_queued: Vec<bool>,
    task_vm: Vec<u32>,
    /// Domains of each pCPU, innermost first: SMT siblings, socket, all.
    domains: Vec<[Vec<u32>; 3]>,
    vm_shares: Vec<u64>,
    /// Runnable vCPUs per VM (for group entity weights).
    vm_runnable: Vec<u64>,
}

impl Fair {
    pub fn new(policy: Policy, tun: Tunables) -> Fair {
        Fair {
            policy,
            tun,
            counters: super::Counters::new(COUNTER_NAMES),
            ncpus: 0,
            ntasks: 0,
            nvms: 0,
            ents: vec![],
            rqs: vec![],
            running: vec![],
            h_nr: vec![],
            cpu_tasks: vec![],
            idle_cpus: BTreeSet::new(),
            last_balance: vec![],
            avg_idle: vec![],
            idle_since: vec![],
            nr_balance_failed: vec![],
            active_move: vec![],
            task_cpu: vec![],
            pulled_at: vec![],
            never_queued: vec![],
            task_vm: vec![],
            domains: vec![],
            vm_shares: vec![],
            vm_runnable: vec![],
        }
    }

    pub fn init(&mut self, ctx: &mut SchedCtx) {
        if self.tun.tunable_scaling {
            let k = scale_factor(ctx.ncpus());
            let t = &mut self.tun;
            t.latency *= k;
            t.min_granularity *= k;
            t.wakeup_granularity *= k;
            t.base_slice *= k;
        }
        let v = ctx.view;
        self.ncpus = v.topo.ncpus();
        self.ntasks = v.tasks.len();
        self.nvms = v.nvms as usize;
        let ngroups = if self.tun.group_per_vm {
            self.nvms * self.ncpus
        } else {
            0
        };
        self.ents = vec![Entity::default(); self.ntasks + ngroups];
        self.rqs = vec![Rq::default(); self.ncpus + ngroups];
        let mut shares = vec![NICE_0_LOAD; self.nvms];
        for (t, info) in v.tasks.iter().enumerate() {
            // VM weight 256 (the default) is nice 0 / cpu.shares 1024.
            shares[info.vm as usize] = info.weight as u64 * NICE_0_LOAD / 256;
            self.ents[t].weight = if self.tun.group_per_vm {
                NICE_0_LOAD
            } else {
                shares[info.vm as usize]
            };
        }
        for g in 0..ngroups {
            let e = &mut self.ents[self.ntasks + g];
            e.child = Some((self.ncpus + g) as u32);
            e.weight = shares[g / self.ncpus];
        }
        self.vm_shares = shares;
        self.vm_runnable = vec![0; self.nvms];
        self.running = vec![None; self.ncpus];
        self.h_nr = vec![0; self.ncpus];
        self.cpu_tasks = vec![BTreeSet::new(); self.ncpus];
        self.idle_cpus = (0..self.ncpus as u32).collect();
        // Stagger balancing by one tick per pCPU, so two pCPUs never balance against each
        // other in the same instant (and undo each other's pull before the task runs).
        self.last_balance = (0..self.ncpus as u64)
            .map(|c| [SimTime::ZERO + self.tun.tick * c; 3])
            .collect();
        self.nr_balance_failed = vec![[0; 3]; self.ncpus];
        self.avg_idle = vec![self.tun.migration_cost * 2; self.ncpus];
        self.idle_since = vec![Some(SimTime::ZERO); self.ncpus];
        self.active_move = vec![None; self.ncpus];
        self.task_vm = v.tasks.iter().map(|t| t.vm).collect();
        self.pulled_at = vec![SimTime::ZERO; self.ntasks];
        self.never_queued = vec![true; self.ntasks];
        self.task_cpu = v
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| t.affinity.nth_wrapping(i).unwrap() as u32)
            .collect();
        let topo = &v.topo;
        self.domains = (0..self.ncpus)
            .map(|c| {
                let smt: Vec<u32> = topo
                    .core_cpus(topo.cpus[c].core)
                    .map(|x| x as u32)
                    .collect();
                let sock: Vec<u32> = (0..self.ncpus)
                    .filter(|&x| topo.cpus[x].socket == topo.cpus[c].socket)
                    .map(|x| x as u32)
                    .collect();
                let all: Vec<u32> = (0..self.ncpus as u32).collect();
                [smt, sock, all]
            })
            .collect();
    }

    // ------------------------------------------------------------- hierarchy helpers

    fn group_ent(&self, vm: u32, cpu: u32) -> u32 {
        (self.ntasks + vm as usize * self.ncpus + cpu as usize) as u32
    }
    fn leaf_rq(&self, t: TaskId, cpu: u32) -> u32 {
        if self.tun.group_per_vm {
            (self.ncpus + self.task_vm[t as usize] as usize * self.ncpus + cpu as usize) as u32
        } else {
            cpu
        }
    }
    /// The entities from the task up to the root (task, then its group entity).
    fn path(&self, t: TaskId, cpu: u32) -> ([u32; 2], usize) {
        if self.tun.group_per_vm {
            ([t, self.group_ent(self.task_vm[t as usize], cpu)], 2)
        } else {
            ([t, 0], 1)
        }
    }

    fn key(&self, e: u32) -> (i64, u32) {
        (self.ents[e as usize].vruntime, e)
    }

    fn calc_delta_fair(delta: SimDuration, weight: u64) -> i64 {
        (delta.ns() as u128 * NICE_0_LOAD as u128 / weight.max(1) as u128) as i64
    }

    /// Charges the running entity of `rq` for time since its last update.
    fn update_curr(&mut self, ctx: &mut SchedCtx, rq: u32, cpu: u32) {
        let now = ctx.now;
        let Some(c) = self.rqs[rq as usize].curr else {
            return;
        };
        let e = &mut self.ents[c as usize];
        let delta = now.since(e.exec_start);
        if delta > SimDuration::ZERO {
            e.exec_start = now;
            e.sum_exec += delta;
            e.vruntime += Self::calc_delta_fair(delta, e.weight);
        }
        if let Policy::Eevdf { .. } = self.policy {
            // update_deadline: a used-up slice gets a new deadline and a reschedule.
            let e = &mut self.ents[c as usize];
            if e.vruntime >= e.deadline {
                e.deadline = e.vruntime + Self::calc_delta_fair(self.tun.base_slice, e.weight);
                if self.rqs[rq as usize].nr_running > 1 {
                    self.counters.bump(C_TICK_PREEMPT);
                    ctx.resched(cpu);
                    self.clear_next(rq);
                }
            }
        }
        self.update_min_vruntime(rq);
    }

    fn update_min_vruntime(&mut self, rq: u32) {
        let r = &self.rqs[rq as usize];
        let mut v = r.min_vruntime;
        let curr = r
            .curr
            .filter(|c| self.ents[*c as usize].on_rq)
            .map(|c| self.ents[c as usize].vruntime);
        let left = r.tree.first().map(|k| k.0);
        let cand = match (curr, left) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(c) = cand {
            v = v.max(c);
        }
        self.rqs[rq as usize].min_vruntime = v;
    }

    /// Weighted average vruntime of the queue, curr included (EEVDF's V).
    fn avg_vruntime(&self, rq: u32) -> i64 {
        let r = &self.rqs[rq as usize];
        let mut sum: i128 = 0;
        let mut load: i128 = 0;
        let base = r.min_vruntime as i128;
        for &(v, e) in &r.tree {
            let w = self.ents[e as usize].weight as i128;
            sum += (v as i128 - base) * w;
            load += w;
        }
        if let Some(c) = r.curr.filter(|c| self.ents[*c as usize].on_rq) {
            let e = &self.ents[c as usize];
            sum += (e.vruntime as i128 - base) * e.weight as i128;
            load += e.weight as i128;
        }
        if load == 0 {
            return r.min_vruntime;
        }
        (base + sum.div_euclid(load)) as i64
    }

    fn eligible(&self, rq: u32, e: u32) -> bool {
        self.ents[e as usize].vruntime <= self.avg_vruntime(rq)
    }

    fn place_entity(&mut self, rq: u32, e: u32, initial: bool) {
        match self.policy {
            Policy::Cfs => {
                let r = &self.rqs[rq as usize];
                let mut v = r.min_vruntime;
                if initial && self.tun.start_debit {
                    v += Self::calc_delta_fair(
                        self.sched_slice(rq, e),
                        self.ents[e as usize].weight,
                    );
                } else if !initial {
                    let thresh = if self.tun.gentle_fair_sleepers {
                        self.tun.latency / 2
                    } else {
                        self.tun.latency
                    };
                    v -= thresh.ns() as i64;
                }
                let ent = &mut self.ents[e as usize];
                ent.vruntime = if initial { v } else { ent.vruntime.max(v) };
            }
            Policy::Eevdf { .. } => {
                let vavg = self.avg_vruntime(rq);
                let r = &self.rqs[rq as usize];
                let w = self.ents[e as usize].weight as i128;
                let mut lag = self.ents[e as usize].vlag as i128;
                if r.nr_running > 0 && r.load > 0 {
                    let big_w = r.load as i128;
                    lag = lag * (big_w + w) / big_w;
                }
                let ent = &mut self.ents[e as usize];
                ent.vruntime = vavg - lag as i64;
                let mut vslice = Self::calc_delta_fair(self.tun.base_slice, ent.weight);
                if initial {
                    vslice /= 2;
                }
                ent.deadline = ent.vruntime + vslice;
            }
        }
    }

    /// CFS `sched_slice`: the entity's share of the period, through the hierarchy.
    fn sched_slice(&self, rq: u32, e: u32) -> SimDuration {
        let r = &self.rqs[rq as usize];
        let on = self.ents[e as usize].on_rq;
        let nr = r.nr_running + u64::from(!on);
        let period = if nr > SCHED_NR_LATENCY {
            self.tun.min_granularity * nr
        } else {
            self.tun.latency
        };
        let load = r.load + if on { 0 } else { self.ents[e as usize].weight };
        let mut slice =
            period.ns() as u128 * self.ents[e as usize].weight as u128 / load.max(1) as u128;
        if rq as usize >= self.ncpus {
            // A group queue: scale by the group entity's share of the root.
            let ge = &self.ents[self.ntasks + rq as usize - self.ncpus];
            let root = &self.rqs[ge.rq as usize];
            slice = slice * ge.weight as u128 / root.load.max(ge.weight) as u128;
        }
        SimDuration(slice as u64)
    }

    fn enqueue_entity(
        &mut self,
        ctx: &mut SchedCtx,
        rq: u32,
        e: u32,
        cpu: u32,
        wakeup: bool,
        initial: bool,
    ) {
        self.update_curr(ctx, rq, cpu);
        if wakeup || initial {
            self.place_entity(rq, e, initial);
        }
        let ent = &mut self.ents[e as usize];
        ent.on_rq = true;
        ent.rq = rq;
        let (w, key) = (ent.weight, (ent.vruntime, e));
        let r = &mut self.rqs[rq as usize];
        if r.curr != Some(e) {
            r.tree.insert(key);
        }
        r.nr_running += 1;
        r.load += w;
    }

    fn dequeue_entity(&mut self, ctx: &mut SchedCtx, rq: u32, e: u32, cpu: u32) {
        self.update_curr(ctx, rq, cpu);
        if let Policy::Eevdf { .. } = self.policy {
            let v = self.avg_vruntime(rq);
            let ent = &self.ents[e as usize];
            let limit =
                Self::calc_delta_fair((self.tun.base_slice * 2).max(self.tun.tick), ent.weight);
            self.ents[e as usize].vlag = (v - ent.vruntime).clamp(-limit, limit);
        }
        self.clear_buddies(rq, e);
        let key = self.key(e);
        let ent = &mut self.ents[e as usize];
        ent.on_rq = false;
        let w = ent.weight;
        let r = &mut self.rqs[rq as usize];
        if r.curr != Some(e) {
            r.tree.remove(&key);
        }
        r.nr_running -= 1;
        r.load -= w;
        self.update_min_vruntime(rq);
    }

    fn clear_buddies(&mut self, rq: u32, e: u32) {
        let r = &mut self.rqs[rq as usize];
        if r.next == Some(e) {
            r.next = None;
            r.next_forced = false;
        }
        if r.last == Some(e) {
            r.last = None;
        }
        if r.skip == Some(e) {
            r.skip = None;
        }
    }

    fn clear_next(&mut self, rq: u32) {
        let r = &mut self.rqs[rq as usize];
        r.next = None;
        r.next_forced = false;
    }

    /// Re-weights a VM's group entity on `cpu`: shares x (runnable here / runnable total),
    /// the runnable-count form of `calc_group_shares`.
    fn update_group_weight(&mut self, vm: u32, cpu: u32) {
        if !self.tun.group_per_vm {
            return;
        }
        let g = self.group_ent(vm, cpu);
        let child = self.ents[g as usize].child.unwrap();
        let here = self.rqs[child as usize].nr_running;
        let total = self.vm_runnable[vm as usize].max(1);
        let w = (self.vm_shares[vm as usize] * here / total).max(2);
        let ent = &mut self.ents[g as usize];
        let old = ent.weight;
        ent.weight = w;
        if ent.on_rq {
            let r = &mut self.rqs[ent.rq as usize];
            r.load = r.load - old + w;
        }
    }

    fn refresh_vm_weights(&mut self, vm: u32) {
        if self.tun.group_per_vm {
            for c in 0..self.ncpus as u32 {
                if self.ents[self.group_ent(vm, c) as usize].on_rq {
                    self.update_group_weight(vm, c);
                }
            }
        }
    }

    /// Queues task `t` on `cpu` (and its group entity on the root queue if needed).
    fn enqueue_task(
        &mut self,
        ctx: &mut SchedCtx,
        t: TaskId,
        cpu: u32,
        wakeup: bool,
        initial: bool,
    ) {
        let vm = self.task_vm[t as usize];
        self.task_cpu[t as usize] = cpu;
        self.vm_runnable[vm as usize] += 1;
        let leaf = self.leaf_rq(t, cpu);
        self.enqueue_entity(ctx, leaf, t, cpu, wakeup, initial);
        if self.tun.group_per_vm {
            let g = self.group_ent(vm, cpu);
            if !self.ents[g as usize].on_rq {
                self.enqueue_entity(ctx, cpu, g, cpu, true, false);
            }
            self.refresh_vm_weights(vm);
        }
        self.h_nr[cpu as usize] += 1;
        self.cpu_tasks[cpu as usize].insert(t);
        self.idle_cpus.remove(&cpu);
    }

    fn dequeue_task(&mut self, ctx: &mut SchedCtx, t: TaskId, cpu: u32) {
        let vm = self.task_vm[t as usize];
        self.vm_runnable[vm as usize] -= 1;
        let leaf = self.leaf_rq(t, cpu);
        self.dequeue_entity(ctx, leaf, t, cpu);
        if self.tun.group_per_vm {
            let g = self.group_ent(vm, cpu);
            if self.rqs[leaf as usize].nr_running == 0 && self.ents[g as usize].on_rq {
                self.dequeue_entity(ctx, cpu, g, cpu);
            }
            self.refresh_vm_weights(vm);
        }
        self.h_nr[cpu as usize] -= 1;
        self.cpu_tasks[cpu as usize].remove(&t);
        if self.h_nr[cpu as usize] == 0 {
            self.idle_cpus.insert(cpu);
        }
    }

    /// Moves a queued (not running) task to another pCPU, keeping its relative position
    /// (vruntime renormalised to the destination's min_vruntime; lag kept under EEVDF).
    fn migrate_task(&mut self, ctx: &mut SchedCtx, t: TaskId, to: u32) {
        let from = self.task_cpu[t as usize];
        let rel =
            self.ents[t as usize].vruntime - self.rqs[self.leaf_rq(t, from) as usize].min_vruntime;
        self.dequeue_task(ctx, t, from);
        let leaf = self.leaf_rq(t, to);
        self.ents[t as usize].vruntime = self.rqs[leaf as usize].min_vruntime + rel;
        let eevdf = matches!(self.policy, Policy::Eevdf { .. });
        self.enqueue_task(ctx, t, to, eevdf, false);
    }

    /// `attach_task`: a pulled task may preempt the destination's current task at once
    /// (`check_preempt_curr`), as a wake-up would.
    fn pull_task(&mut self, ctx: &mut SchedCtx, t: TaskId, to: u32) {
        self.pulled_at[t as usize] = ctx.now.max(SimTime(1));
        self.migrate_task(ctx, t, to);
        self.check_preempt_wakeup(ctx, t, to);
    }

    // ------------------------------------------------------------- picking

    /// `wakeup_preempt_entity(curr, se)`: 1 if se should preempt curr by more than the
    /// wakeup granularity (scaled by se's weight), -1 if curr is not ahead, else 0.
    fn wakeup_preempt_entity(&self, curr: u32, se: u32) -> i32 {
        let vdiff = self.ents[curr as usize].vruntime - self.ents[se as usize].vruntime;
        if vdiff <= 0 {
            return -1;
        }
        let gran =
            Self::calc_delta_fair(self.tun.wakeup_granularity, self.ents[se as usize].weight);
        if vdiff > gran {
            1
        } else {
            0
        }
    }

    /// EEVDF: the eligible entity with the earliest deadline (`protect`: RUN_TO_PARITY).
    fn pick_eevdf(&self, rq: u32, protect: Option<u32>) -> Option<u32> {
        let r = &self.rqs[rq as usize];
        let v = self.avg_vruntime(rq);
        if let Some(p) = protect {
            let e = &self.ents[p as usize];
            if e.on_rq && e.vruntime <= v && e.protect == Some(e.deadline) {
                return Some(p);
            }
        }
        let mut cands: Vec<u32> = r.tree.iter().map(|k| k.1).collect();
        if let Some(c) = r.curr.filter(|c| self.ents[*c as usize].on_rq) {
            cands.push(c);
        }
        let best = cands
            .iter()
            .filter(|&&e| self.ents[e as usize].vruntime <= v)
            .min_by_key(|&&e| (self.ents[e as usize].deadline, e))
            .copied();
        // With integer rounding nobody may look eligible; fall back to the leftmost.
        best.or_else(|| {
            cands
                .iter()
                .min_by_key(|&&e| (self.ents[e as usize].vruntime, e))
                .copied()
        })
    }

    /// `pick_next_entity` on one queue (curr has been put back already).
    fn pick_entity(&mut self, rq: u32) -> Option<u32> {
        let r = &self.rqs[rq as usize];
        let left = r.tree.first().map(|k| k.1)?;
        let mut se = left;
        match self.policy {
            Policy::Cfs => {
                if r.skip == Some(se) {
                    if let Some(second) = r.tree.iter().nth(1).map(|k| k.1) {
                        if self.wakeup_preempt_entity(second, left) < 1 {
                            self.counters.bump(C_PICK_SKIP_AVOIDED);
                            se = second;
                        }
                    }
                }
                if let Some(l) = r.last {
                    if self.wakeup_preempt_entity(l, left) < 1 {
                        self.counters.bump(C_PICK_LAST_BUDDY);
                        se = l;
                    }
                }
                if let Some(n) = r.next {
                    if r.next_forced || self.wakeup_preempt_entity(n, left) < 1 {
                        self.counters.bump(C_PICK_NEXT_BUDDY);
                        se = n;
                    } else {
                        self.counters.bump(C_PICK_NEXT_BUDDY_REFUSED);
                    }
                }
            }
            Policy::Eevdf { pick_buddy } => {
                se = self.pick_eevdf(rq, None).unwrap_or(left);
                if let Some(n) = r.next {
                    let ok = r.next_forced || (pick_buddy && self.eligible(rq, n));
                    if ok {
                        self.counters.bump(C_PICK_NEXT_BUDDY);
                        se = n;
                    } else if n != se {
                        self.counters.bump(C_PICK_NEXT_BUDDY_REFUSED);
                    }
                }
            }
        }
        self.clear_buddies(rq, se);
        Some(se)
    }

    fn set_next_entity(&mut self, rq: u32, e: u32, now: SimTime) {
        let key = self.key(e);
        let r = &mut self.rqs[rq as usize];
        r.tree.remove(&key);
        r.curr = Some(e);
        let ent = &mut self.ents[e as usize];
        ent.exec_start = now;
        ent.prev_sum_exec = ent.sum_exec;
        ent.protect = Some(ent.deadline);
    }

    fn put_prev_entity(&mut self, ctx: &mut SchedCtx, rq: u32, e: u32, cpu: u32) {
        if self.rqs[rq as usize].curr != Some(e) {
            return;
        }
        self.update_curr(ctx, rq, cpu);
        let key = self.key(e);
        let on = self.ents[e as usize].on_rq;
        let r = &mut self.rqs[rq as usize];
        r.curr = None;
        if on {
            r.tree.insert(key);
        }
    }

    fn put_prev_task(&mut self, ctx: &mut SchedCtx, t: TaskId, cpu: u32) {
        let (p, n) = self.path(t, cpu);
        for &e in &p[..n] {
            let rq = self.ents[e as usize].rq;
            self.put_prev_entity(ctx, rq, e, cpu);
        }
    }

    /// Picks the task to run on `cpu`, descending from the root queue.
    fn pick_task(&mut self, ctx: &mut SchedCtx, cpu: u32) -> Option<TaskId> {
        let now = ctx.now;
        let mut rq = cpu;
        loop {
            let e = self.pick_entity(rq)?;
            self.set_next_entity(rq, e, now);
            match self.ents[e as usize].child {
                Some(child) => rq = child,
                None => return Some(e),
            }
        }
    }

    // ------------------------------------------------------------- engine hooks

    /// A wake-up, or for a task's first one `wake_up_new_task`: placed as a new task
    /// (CFS `START_DEBIT`: one slice behind min_vruntime; EEVDF: half a first slice)
    /// instead of as a sleeper. Fork balancing's idlest-CPU search is not modelled: a
    /// task starts on the i-th pCPU of its affinity (task i, see `init`), and its first
    /// wake-up keeps it there when that pCPU is idle. On an SMT host that start can share
    /// a core that a search would avoid; docs/models.md (software-ft) shows how much it
    /// can matter.
    pub fn wake(&mut self, ctx: &mut SchedCtx, t: TaskId) {
        let cpu = self.select_task_rq(ctx, t);
        let new = std::mem::replace(&mut self.never_queued[t as usize], false);
        self.enqueue_task(ctx, t, cpu, !new, new);
        self.check_preempt_wakeup(ctx, t, cpu);
    }

    /// `select_task_rq_fair` for a wake-up: the previous pCPU if idle, else an idle pCPU
    /// in its socket (an idle core first), else the previous pCPU.
    fn select_task_rq(&mut self, ctx: &SchedCtx, t: TaskId) -> u32 {
        let prev = self.task_cpu[t as usize];
        let aff = &ctx.view.tasks[t as usize].affinity;
        let idle = |c: u32| self.h_nr[c as usize] == 0 && self.running[c as usize].is_none();
        if aff.contains(prev as usize) && idle(prev) {
            self.counters.bump(C_WAKE_PREV_IDLE);
            return prev;
        }
        let topo = &ctx.view.topo;
        let sock = &self.domains[prev as usize][1];
        let start = sock.iter().position(|&c| c == prev).unwrap_or(0);
        let order = || (0..sock.len()).map(|i| sock[(start + i) % sock.len()]);
        if topo.threads_per_core > 1 {
            for c in order() {
                if aff.contains(c as usize)
                    && topo
                        .core_cpus(topo.cpus[c as usize].core)
                        .all(|s| idle(s as u32))
                {
                    self.counters.bump(C_WAKE_IDLE_SIBLING);
                    return c;
                }
            }
        }
        for c in order() {
            if aff.contains(c as usize) && idle(c) {
                self.counters.bump(C_WAKE_IDLE_SIBLING);
                return c;
            }
        }
        self.counters.bump(C_WAKE_BUSY_PREV);
        if aff.contains(prev as usize) {
            prev
        } else {
            // The least loaded allowed pCPU.
            aff.iter().min_by_key(|&c| (self.h_nr[c], c)).unwrap() as u32
        }
    }

    fn check_preempt_wakeup(&mut self, ctx: &mut SchedCtx, t: TaskId, cpu: u32) {
        let Some(curr) = self.running[cpu as usize] else {
            ctx.resched(cpu);
            return;
        };
        if !self.tun.wakeup_preemption || curr == t {
            return;
        }
        // find_matching_se: compare at the level where both are in the same queue.
        let (se, pse) =
            if self.tun.group_per_vm && self.task_vm[curr as usize] != self.task_vm[t as usize] {
                (
                    self.group_ent(self.task_vm[curr as usize], cpu),
                    self.group_ent(self.task_vm[t as usize], cpu),
                )
            } else {
                (curr, t)
            };
        let rq = self.ents[se as usize].rq;
        self.update_curr(ctx, rq, cpu);
        let preempt = match self.policy {
            Policy::Cfs => self.wakeup_preempt_entity(se, pse) == 1,
            Policy::Eevdf { .. } => self.pick_eevdf(rq, Some(se)) == Some(pse),
        };
        if preempt {
            self.counters.bump(C_WAKEUP_PREEMPT);
            if let Policy::Cfs = self.policy {
                self.set_next_buddy(t, cpu, false);
                if self.rqs[rq as usize].nr_running >= SCHED_NR_LATENCY {
                    self.rqs[rq as usize].last = Some(se);
                }
            }
            ctx.resched(cpu);
        } else {
            self.counters.bump(C_WAKEUP_NO_PREEMPT);
        }
    }

    fn set_next_buddy(&mut self, t: TaskId, cpu: u32, forced: bool) {
        let (p, n) = self.path(t, cpu);
        for &e in &p[..n] {
            let rq = self.ents[e as usize].rq as usize;
            self.rqs[rq].next = Some(e);
            // Fix (b) forces the task level only: fairness between VMs (the root level)
            // keeps its usual rule.
            self.rqs[rq].next_forced = forced && e == t;
        }
    }

    pub fn block(&mut self, ctx: &mut SchedCtx, cpu: CpuId, t: TaskId) {
        self.dequeue_task(ctx, t, cpu);
        // Put it back now, as schedule() does under the same run-queue lock: the task may
        // be woken and queued elsewhere before this pCPU picks again.
        if self.running[cpu as usize] == Some(t) {
            self.running[cpu as usize] = None;
            self.put_prev_task(ctx, t, cpu);
        }
    }

    pub fn pick_next(
        &mut self,
        ctx: &mut SchedCtx,
        cpu: CpuId,
        _prev: Option<TaskId>,
    ) -> Option<TaskId> {
        if let Some(p) = self.running[cpu as usize].take() {
            self.put_prev_task(ctx, p, cpu);
            if let Some((t, dst)) = self.active_move[cpu as usize].take() {
                // active_load_balance_cpu_stop: push the task that was running here.
                if t == p && self.ents[t as usize].on_rq && ctx.allowed(t, dst) {
                    self.counters.bump(C_ACTIVE_PUSH);
                    self.pull_task(ctx, t, dst);
                    if self.running[dst as usize].is_none() {
                        ctx.resched(dst);
                    }
                }
            }
        }
        // idle_balance() is skipped when this pCPU's idle periods are short on average.
        if self.h_nr[cpu as usize] == 0 && self.avg_idle[cpu as usize] >= self.tun.migration_cost {
            self.newidle_balance(ctx, cpu, false);
        }
        match self.pick_task(ctx, cpu) {
            Some(t) => {
                if let Some(since) = self.idle_since[cpu as usize].take() {
                    let idle = ctx.now.since(since).ns();
                    let avg = self.avg_idle[cpu as usize].ns() as i64;
                    let new = SimDuration((avg + (idle as i64 - avg) / 8) as u64);
                    self.avg_idle[cpu as usize] = new.min(self.tun.migration_cost * 2);
                }
                self.running[cpu as usize] = Some(t);
                ctx.set_timer(cpu, ctx.now + self.tun.tick);
                Some(t)
            }
            None => {
                self.idle_since[cpu as usize].get_or_insert(ctx.now);
                self.counters.bump(C_PICK_IDLE);
                ctx.cancel_timer(cpu);
                None
            }
        }
    }

    /// The scheduler tick on a busy pCPU: account, preempt, balance.
    pub fn tick(&mut self, ctx: &mut SchedCtx, cpu: CpuId) {
        let Some(t) = self.running[cpu as usize] else {
            return;
        };
        let (p, n) = self.path(t, cpu);
        for &e in &p[..n] {
            let rq = self.ents[e as usize].rq;
            self.update_curr(ctx, rq, cpu);
            if self.policy == Policy::Cfs && self.rqs[rq as usize].nr_running > 1 {
                self.check_preempt_tick(ctx, rq, e, cpu);
            }
        }
        self.periodic_balance(ctx, cpu);
        if self.h_nr[cpu as usize] >= 2 {
            // nohz idle balance: kick an idle pCPU that could take one of our tasks.
            // Only pCPUs idle long enough to have stopped their tick (nohz) are balanced
            // on behalf; a pCPU whose vCPU halts for microseconds is not.
            let kick = self.idle_cpus.iter().copied().find(|&c| {
                self.running[c as usize].is_none()
                    && self.avg_idle[c as usize] >= self.tun.migration_cost
                    && self.queued_tasks(cpu).any(|q| ctx.allowed(q, c))
            });
            if let Some(c) = kick {
                self.counters.bump(C_NOHZ_KICK);
                self.newidle_balance(ctx, c, false);
                if self.h_nr[c as usize] > 0 {
                    ctx.resched(c);
                }
            }
        }
        ctx.set_timer(cpu, ctx.now + self.tun.tick);
    }

    fn check_preempt_tick(&mut self, ctx: &mut SchedCtx, rq: u32, curr: u32, cpu: u32) {
        let ideal = self.sched_slice(rq, curr);
        let e = &self.ents[curr as usize];
        let ran = e.sum_exec - e.prev_sum_exec;
        if ran > ideal {
            self.counters.bump(C_TICK_PREEMPT);
            ctx.resched(cpu);
            self.clear_buddies(rq, curr);
            return;
        }
        if ran < self.tun.min_granularity {
            return;
        }
        if let Some(&(lv, _)) = self.rqs[rq as usize].tree.first() {
            let delta = e.vruntime - lv;
            if delta > ideal.ns() as i64 {
                self.counters.bump(C_TICK_PREEMPT);
                ctx.resched(cpu);
            }
        }
    }

    // ------------------------------------------------------------- directed yield

    /// core.c `yield_to` + `yield_to_task_fair`, with the papers' fixes (b) and (c).
    pub fn yield_to(&mut self, ctx: &mut SchedCtx, req: YieldRequest) -> YieldResult {
        let (me, cpu, target) = (req.from, req.from_cpu, req.target);
        let p_cpu = self.task_cpu[target as usize];
        if self.h_nr[cpu as usize] == 1 && self.h_nr[p_cpu as usize] == 1 {
            self.counters.bump(C_YIELD_ESRCH);
            return YieldResult::NoSuchTarget;
        }
        let runnable_queued =
            self.ents[target as usize].on_rq && self.running[p_cpu as usize] != Some(target);
        if !runnable_queued {
            self.counters.bump(C_YIELD_TARGET_RUNNING);
            return YieldResult::Failed;
        }
        let mut p_cpu = p_cpu;
        if req.migrate_to_yielder && p_cpu != cpu && ctx.allowed(target, cpu) {
            self.counters.bump(C_YIELD_MIGRATED);
            self.migrate_task(ctx, target, cpu);
            p_cpu = cpu;
        }
        // Fix (b): when the spinner itself keeps the boosted vCPU from running (both on this
        // run queue), the target is picked regardless of per-vCPU fairness ("the spinner
        // lowers its own priority", seed 004). Its CPU time is charged to its VM's group
        // entity as usual, which keeps fairness between VMs; like the long paper (seed 000,
        // sec. 6) no per-vCPU charge-back is made. A target on another pCPU keeps that pCPU's
        // usual rule: forcing picks there lets two spinners that boost two vCPUs of one pCPU
        // preempt each other endlessly.
        let force = req.ignore_vcpu_fairness && p_cpu == cpu;
        self.set_next_buddy(target, p_cpu, force);
        self.yield_task(ctx, me, cpu);
        self.counters.bump(C_YIELD_OK);
        if p_cpu != cpu {
            ctx.resched(p_cpu);
        }
        ctx.resched(cpu);
        YieldResult::Yielded
    }

    /// `yield_task_fair` for the running task.
    fn yield_task(&mut self, ctx: &mut SchedCtx, me: TaskId, cpu: u32) {
        let leaf = self.leaf_rq(me, cpu);
        if self.rqs[leaf as usize].nr_running <= 1 && self.rqs[cpu as usize].nr_running <= 1 {
            return;
        }
        self.update_curr(ctx, leaf, cpu);
        match self.policy {
            Policy::Cfs => {
                let (p, n) = self.path(me, cpu);
                for &e in &p[..n] {
                    let rq = self.ents[e as usize].rq;
                    self.clear_buddies(rq, e);
                    self.rqs[rq as usize].skip = Some(e);
                }
            }
            Policy::Eevdf { .. } => {
                let ent = &mut self.ents[me as usize];
                ent.deadline += Self::calc_delta_fair(self.tun.base_slice, ent.weight);
            }
        }
    }

    // ------------------------------------------------------------- load balancing

    /// Tasks queued (not running) on a pCPU, in a stable order.
    fn queued_tasks(&self, cpu: u32) -> impl Iterator<Item = TaskId> + '_ {
        let running = self.running[cpu as usize];
        self.cpu_tasks[cpu as usize]
            .iter()
            .copied()
            .filter(move |&t| Some(t) != running)
    }

    /// A pCPU's load as the balancer sees it: the root queue's weight (group entities in
    /// group mode, tasks otherwise).
    fn cpu_load(&self, cpu: u32) -> u64 {
        self.rqs[cpu as usize].load
    }

    /// A task's hierarchical load (`task_h_load`): its share of its group entity's weight.
    fn task_h_load(&self, t: TaskId) -> u64 {
        let e = &self.ents[t as usize];
        if !self.tun.group_per_vm {
            return e.weight;
        }
        let cpu = self.task_cpu[t as usize];
        let ge = &self.ents[self.group_ent(self.task_vm[t as usize], cpu) as usize];
        let group_load = self.rqs[self.leaf_rq(t, cpu) as usize].load.max(1);
        ge.weight * e.weight / group_load
    }

    /// Queued tasks in the order `detach_tasks` tries them: least recently run first
    /// (the tail of `cfs_tasks`).
    fn pull_order(&self, cpu: u32) -> Vec<TaskId> {
        let mut v: Vec<TaskId> = self.queued_tasks(cpu).collect();
        v.sort_by_key(|&t| (self.ents[t as usize].exec_start, t));
        v
    }

    fn cache_hot(&self, t: TaskId, now: SimTime) -> bool {
        now.since(self.ents[t as usize].exec_start) < self.tun.migration_cost
            && self.ents[t as usize].sum_exec > SimDuration::ZERO
    }

    /// Pulls one queued task to an idle `cpu` from the busiest pCPU, innermost domain first.
    fn newidle_balance(&mut self, ctx: &mut SchedCtx, cpu: u32, ignore_hot: bool) {
        let now = ctx.now;
        for level in 0..3 {
            let busiest = self.domains[cpu as usize][level]
                .iter()
                .copied()
                .filter(|&c| c != cpu && self.h_nr[c as usize] >= 2)
                .max_by_key(|&c| (self.h_nr[c as usize], std::cmp::Reverse(c)));
            let Some(src) = busiest else { continue };
            let pick = self
                .pull_order(src)
                .into_iter()
                .find(|&t| ctx.allowed(t, cpu) && (ignore_hot || !self.cache_hot(t, now)));
            if let Some(t) = pick {
                self.counters.bump(C_NEWIDLE_PULL);
                self.pull_task(ctx, t, cpu);
                return;
            }
        }
    }

    /// Periodic balancing from a busy pCPU's tick, per domain at its interval.
    fn periodic_balance(&mut self, ctx: &mut SchedCtx, cpu: u32) {
        let now = ctx.now;
        for level in 0..3 {
            let span = self.domains[cpu as usize][level].len() as u64;
            if span <= 1 {
                continue;
            }
            // Interval: the domain's weight in ms, times busy_factor 32 on a busy pCPU.
            let interval = SimDuration::from_ms(span) * 32;
            if now < self.last_balance[cpu as usize][level] + interval {
                continue;
            }
            self.last_balance[cpu as usize][level] = now;
            let this = self.cpu_load(cpu);
            let busiest = self.domains[cpu as usize][level]
                .iter()
                .copied()
                .filter(|&c| c != cpu && self.h_nr[c as usize] >= 2)
                .max_by_key(|&c| (self.cpu_load(c), std::cmp::Reverse(c)));
            let Some(src) = busiest else { continue };
            let pct = [110, 117, 125][level];
            if self.cpu_load(src) * 100 <= this * pct {
                self.nr_balance_failed[cpu as usize][level] = 0;
                continue;
            }
            // cache_nice_tries: SMT 0, MC 1, DIE 1. Beyond them hot tasks may move; beyond
            // cache_nice_tries + 2 failures the running task is pushed (active balance).
            let nice_tries = [0, 1, 1][level];
            let failed = self.nr_balance_failed[cpu as usize][level];
            let allow_hot = failed > nice_tries;
            let mut imbalance = (self.cpu_load(src) - this) / 2;
            let mut moved = false;
            let cands: Vec<TaskId> = self
                .pull_order(src)
                .into_iter()
                .filter(|&t| ctx.allowed(t, cpu) && (allow_hot || !self.cache_hot(t, now)))
                .filter(|&t| {
                    self.pulled_at[t as usize] == SimTime::ZERO
                        || now >= self.pulled_at[t as usize] + interval
                })
                .collect();
            for t in cands {
                let w = self.task_h_load(t);
                if w / 2 > imbalance {
                    continue;
                }
                self.counters.bump(C_BALANCE_PULL);
                self.pull_task(ctx, t, cpu);
                moved = true;
                imbalance = imbalance.saturating_sub(w);
                if imbalance == 0 {
                    break;
                }
            }
            if moved {
                self.nr_balance_failed[cpu as usize][level] = 0;
            } else {
                self.counters.bump(C_BALANCE_FAILED);
                self.nr_balance_failed[cpu as usize][level] = failed + 1;
                if failed + 1 > nice_tries + 2 {
                    if let Some(r) = self.running[src as usize].filter(|&r| ctx.allowed(r, cpu)) {
                        self.active_move[src as usize] = Some((r, cpu));
                        ctx.resched(src);
                        self.nr_balance_failed[cpu as usize][level] = nice_tries + 1;
                    }
                }
            }
        }
    }
}

impl Scheduler for Fair {
    fn init(&mut self, ctx: &mut SchedCtx) {
        Fair::init(self, ctx)
    }
    fn wake(&mut self, ctx: &mut SchedCtx, t: TaskId) {
        Fair::wake(self, ctx, t)
    }
    fn block(&mut self, ctx: &mut SchedCtx, cpu: CpuId, t: TaskId) {
        Fair::block(self, ctx, cpu, t)
    }
    fn pick_next(
        &mut self,
        ctx: &mut SchedCtx,
        cpu: CpuId,
        prev: Option<TaskId>,
    ) -> Option<TaskId> {
        Fair::pick_next(self, ctx, cpu, prev)
    }
    fn timer(&mut self, ctx: &mut SchedCtx, cpu: CpuId) {
        self.tick(ctx, cpu)
    }
    fn yield_to(&mut self, ctx: &mut SchedCtx, req: YieldRequest) -> YieldResult {
        Fair::yield_to(self, ctx, req)
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.counters.list()
    }
    /// A task's turn is at most one scheduling period (CFS: latency, or min_granularity
    /// per task beyond sched_nr_latency; EEVDF: a base slice, at most 2 x base_slice + tick
    /// past its deadline), so the largest of those bounds every other task's turn.
    fn starvation_bound(&self, view: &super::SchedView) -> Option<crate::time::SimDuration> {
        let turn = self
            .tun
            .latency
            .max(self.tun.min_granularity)
            .max(self.tun.base_slice * 2 + self.tun.tick);
        Some(super::proportional_share_bound(view, turn))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::{RunState, SchedOut, SchedView, TaskInfo};
    use crate::time::SimTime;
    use crate::topology::{CpuSet, Topology};

    fn view(ntasks: usize) -> SchedView {
        SchedView {
            topo: Topology::new(1, 1, 1, 1),
            tasks: (0..ntasks)
                .map(|i| TaskInfo {
                    vm: 0,
                    index: i as u32,
                    affinity: CpuSet::full(1),
                    weight: 256,
                    cap: 0,
                    class: None,
                    latency_vcpu: false,
                })
                .collect(),
            state: vec![RunState::Runnable; ntasks],
            cpu_curr: vec![None],
            nvms: 1,
        }
    }

    fn tunables() -> Tunables {
        Tunables {
            latency: SimDuration(6_000_000),
            min_granularity: SimDuration(750_000),
            wakeup_granularity: SimDuration(1_000_000),
            base_slice: SimDuration(750_000),
            tick: SimDuration(4_000_000),
            migration_cost: SimDuration(500_000),
            group_per_vm: false,
            tunable_scaling: false,
            gentle_fair_sleepers: true,
            start_debit: true,
            wakeup_preemption: true,
        }
    }

    /// An initialised scheduler of `ntasks` tasks on one pCPU, after `body` ran on it at
    /// time 0 (the context borrows the view and the output, so it cannot be returned).
    fn with_fair(
        policy: Policy,
        ntasks: usize,
        body: impl FnOnce(&mut Fair, &mut SchedCtx),
    ) -> Fair {
        let v = view(ntasks);
        let mut out = SchedOut {
            resched_pending: vec![false],
            ..Default::default()
        };
        let mut ctx = SchedCtx {
            now: SimTime(0),
            view: &v,
            out: &mut out,
        };
        let mut f = Fair::new(policy, tunables());
        f.init(&mut ctx);
        body(&mut f, &mut ctx);
        f
    }

    /// Three tasks queued on one pCPU; returns the scheduler with the buddy `next` set.
    fn queue_with_next(policy: Policy, lead: i64) -> Fair {
        let mut f = with_fair(policy, 3, |f, ctx| {
            for t in 0..3 {
                f.enqueue_task(ctx, t, 0, true, false);
            }
        });
        // Hand-set positions: task 1 is the leftmost, task 2 leads it by `lead`, task 0 last.
        for (t, v) in [(0u32, 10_000_000i64), (1, 0), (2, lead)] {
            let old = f.key(t);
            f.rqs[0].tree.remove(&old);
            f.ents[t as usize].vruntime = v;
            f.ents[t as usize].deadline = v + 1_000_000;
            f.rqs[0].tree.insert((v, t));
        }
        f.rqs[0].next = Some(2);
        f
    }

    #[test]
    fn cfs_honours_the_next_buddy_only_within_the_wakeup_granularity() {
        // Granularity for a nice-0 buddy: 1 ms of vruntime.
        let mut near = queue_with_next(Policy::Cfs, 900_000);
        assert_eq!(near.pick_entity(0), Some(2));
        let mut far = queue_with_next(Policy::Cfs, 1_100_000);
        assert_eq!(
            far.pick_entity(0),
            Some(1),
            "a buddy beyond the granularity is refused"
        );
        assert_eq!(far.counters.values[C_PICK_NEXT_BUDDY_REFUSED], 1);
        // Fix (b) forces it.
        let mut forced = queue_with_next(Policy::Cfs, 1_100_000);
        forced.rqs[0].next_forced = true;
        assert_eq!(forced.pick_entity(0), Some(2));
    }

    #[test]
    fn eevdf_buddy_rule_6_6_ignores_and_6_14_honours_an_eligible_buddy() {
        // V = (10ms + 0 + 0.2ms)/3 = 3.4 ms: task 2 at 0.2 ms is eligible but its deadline
        // (1.2 ms) is later than task 1's (1 ms), so plain EEVDF picks task 1.
        let mut v66 = queue_with_next(Policy::Eevdf { pick_buddy: false }, 200_000);
        assert_eq!(v66.pick_entity(0), Some(1));
        let mut v614 = queue_with_next(Policy::Eevdf { pick_buddy: true }, 200_000);
        assert_eq!(v614.pick_entity(0), Some(2));
        // An ineligible buddy is refused even under 6.14: at 6 ms it is past V = 16/3 ms.
        let mut inel = queue_with_next(Policy::Eevdf { pick_buddy: true }, 6_000_000);
        assert_eq!(inel.pick_entity(0), Some(1));
    }

    /// A task's first wake-up is `wake_up_new_task`: CFS places it one vslice after
    /// min_vruntime (START_DEBIT); a later wake-up after sleeping is placed as a sleeper,
    /// half a latency before min_vruntime (GENTLE_FAIR_SLEEPERS).
    #[test]
    fn first_wake_is_placed_as_a_new_task_later_ones_as_sleepers() {
        with_fair(Policy::Cfs, 2, |f, ctx| {
            f.wake(ctx, 0);
            let min = f.rqs[0].min_vruntime;
            f.wake(ctx, 1);
            // Two queued nice-0 tasks share the 6 ms period: a 3 ms slice, in vruntime too.
            assert_eq!(f.ents[1].vruntime, min + 3_000_000);
            // Long asleep: a sleeper's credit is capped at half the 6 ms latency.
            f.dequeue_task(ctx, 1, 0);
            f.ents[1].vruntime = min - 100_000_000;
            f.wake(ctx, 1);
            assert_eq!(f.ents[1].vruntime, f.rqs[0].min_vruntime - 3_000_000);
            assert!(!f.never_queued[1]);
        });
    }

    #[test]
    fn tunables_scale_with_log_of_cpus() {
        assert_eq!([1, 2, 4, 8, 64].map(scale_factor), [1, 2, 3, 4, 4]);
    }
}
