//! `eevdf` — Linux 6.6+ EEVDF (Earliest Eligible Virtual Deadline First), with KVM's
//! directed yield; the buddy and yield rules of 6.6-6.13, 6.14-6.18 or 6.19 are selectable.
//!
//! ## Policy (kernel/sched/fair.c of 6.6 .. 6.19)
//! - Virtual runtime as in CFS (`delta x 1024 / weight`). V, the queue's weighted average
//!   vruntime (current task included), defines eligibility: an entity is eligible when its
//!   lag V - vruntime >= 0.
//! - Each entity has a virtual deadline = vruntime + base_slice x 1024 / weight, renewed
//!   when its vruntime reaches it, which also asks for a reschedule if others are queued
//!   (`update_deadline`; there is no tick-slice check any more). `base_slice` 0.75 ms,
//!   scaled by 1 + ilog2(min(ncpus, 8)).
//! - Pick (`pick_eevdf`): the eligible entity with the earliest deadline. RUN_TO_PARITY:
//!   the running entity keeps the pCPU while eligible until it gets a new deadline, so a
//!   wake-up preempts only if it is what `pick_eevdf` would choose anyway.
//! - Placement (`place_entity`, PLACE_LAG): vruntime = V - lag x (W + w) / W, where lag was
//!   saved at dequeue, clamped to +-max(2 x slice, tick) x 1024 / weight; a new entity's
//!   first deadline is half a slice away (PLACE_DEADLINE_INITIAL).
//! - Buddies: 6.6-6.13 honour the next buddy only with NEXT_BUDDY (default off), so the
//!   buddy `yield_to` sets is ignored; 6.14+ (PICK_BUDDY) honour it if it is eligible.
//! - Yield (`yield_task_fair`; `yield_to_task_fair` sets the target as next buddy and
//!   then calls it, so a directed yield's yielder gets the same treatment):
//!   - 6.6-6.18: the yielder's deadline moves one slice later (`deadline +=
//!     calc_delta_fair(slice)`), its vruntime stays; no skip buddy.
//!   - 6.19 ("sched/fair: Forfeit vruntime on yield", torvalds/linux 79104becf42b, Fernand
//!     Sieber, in mainline from v6.19-rc1 and queued for the 6.12 stable tree in December
//!     2025): if the yielder is eligible (`entity_eligible` on its own cfs_rq), it
//!     forfeits the rest of its request: vruntime = its deadline, then deadline = that +
//!     one slice (`calc_delta_fair(slice)`), and `update_min_vruntime`; an ineligible
//!     yielder is left alone, vruntime and deadline unchanged (the commit keeps the
//!     forfeit to eligible tasks because core scheduling may keep picking an ineligible
//!     yielder, whose vruntime would then run away). The commit's reason: under 6.6-6.18 a
//!     task that yields in a loop while still the only eligible one is picked again and
//!     again while its deadline alone runs ahead, and it then waits long once it is not.
//!   - `buddy_rule` selects "6.14" (default: 6.14's buddy, 6.6's yield), "6.6" (no buddy,
//!     6.6's yield) or "6.19" (6.14's buddy, 6.19's forfeit). The key keeps its name
//!     although the rule now covers the yield too.
//!   - `yield_rule` sets the yield apart from the buddy: "buddy_rule" (default: as above),
//!     "deadline" (6.6's) or "forfeit" (6.19's). The forfeit reached the stable kernels
//!     too: 6.18.2 has it (a crash report on the stable list, 2025-12-31, names the commit
//!     as new in 6.18.2), and it was queued for 6.12.y in December 2025. So a 6.18.2+ host
//!     has 6.14's buddy rule with 6.19's yield, a pair `buddy_rule` alone cannot name;
//!     `vcpulab kvm compare` sets it from the host kernel's release.
//! - `yield_to` as in core.c (see `cfs`).
//! - Wake-up placement, load balancing and group scheduling as in `cfs`, but a busy pCPU
//!   balances twice as often (`busy_factor` 16, as 6.x's `sd_init`), and `wake_affine`
//!   has 6.x's rules (since 4.16): an idle previous pCPU keeps the task
//!   (`wake_affine_idle`), equal loads keep it too (`wake_affine_weight`'s `<`).
//!
//! - Nice changes at run time (`Scheduler::set_nice`, a user-space PLE handler's boost):
//!   v6.18's `set_user_nice` path, lag and remaining request kept in real time, then
//!   `prio_changed_fair`'s preemption test (`fair/reweight.rs`, with its deviations).
//!
//! ## Parameters
//! `base_slice` 0.75 ms (unscaled), `tick` 4 ms, `migration_cost` 0.5 ms, `group_per_vm`
//! false, `root_host_threads` true (see `fair.rs`), `buddy_rule` "6.14", `tunable_scaling`
//! true, `tick_grid` true (the tick on one jiffy grid for all pCPUs; see `fair.rs`),
//! `busy_factor` 16 (6.x's `sd_init`; 32 before 2026-11-27, 4.15's value), `wake_affine`
//! true (see `fair.rs`), `wakee_load` "weight" (the wakee's full weight in
//! `wake_affine_weight`; "pelt", upstream, its load average: `fair/pelt.rs`, which says
//! why the default stays), `yield_series` "off", `yield_rule` "buddy_rule". The default
//! `buddy_rule` stays "6.14": it is
//! what vcpulab modelled before 6.19 existed, and the reproductions were written against
//! it.
//!
//! - `delay_dequeue` (default true, as upstream since 6.12; set it false to model
//!   6.6-6.11, e.g. with `buddy_rule = "6.6"`): DELAY_DEQUEUE and DELAY_ZERO. A task that
//!   goes to sleep ineligible stays queued (in V and the load, not runnable) until the
//!   pick would run it, then leaves with its lag clipped to at most 0; woken before that,
//!   it stays on its pCPU and keeps its place, or restarts at lag 0 if its lag has turned
//!   positive. The rules and sources are in `fair/delay.rs`; counters
//!   `delay_dequeue_delayed`, `_picked`, `_picked_lag_zeroed`, `_woken_in_place`,
//!   `_woken_replaced` (listed only when on). `vcpulab kvm compare` sets it from the host
//!   kernel's release (on for 6.12 or later). It became the default on 2026-11-28, with
//!   the re-run of every `eevdf` reproduction (docs/validation.md, "DELAY_DEQUEUE as the
//!   default").
//!
//! - `yield_series` (default "off": upstream) runs the scheduler side of Wanpeng Li's
//!   proposed "Semantics-aware vCPU scheduling for oversubscribed KVM" series on each
//!   `yield_to`, between the buddy and the yield: "v2" pushes the yielder's vruntime at
//!   the common ancestor (the "debooster"), "v3" credits lag to the nominated buddy and
//!   forces a local reschedule. The rules, their sources and deviations are in
//!   `eevdf/series.rs`. "v3" needs the PICK_BUDDY rule it credits the buddy for, so it is
//!   refused with `buddy_rule = "6.6"`.
//!
//! ## Counters
//! With the forfeit on (`buddy_rule = "6.19"` or `yield_rule = "forfeit"`) only (so the other rules' summaries keep their counters):
//! `yield_forfeit` (an eligible yielder forfeited its vruntime) and
//! `yield_ineligible_unchanged` (an ineligible yielder was left as it was). With
//! `yield_series` on, that version's counters (`eevdf/series.rs`) follow.
//!
//! ## Fixes from the seed papers
//! (b): on the spinner's own run queue the yield_to buddy is honoured even if ineligible;
//! (c): the target moves to the spinner's queue. See `cfs`.
//!
//! ## Deviations
//! - No PREEMPT_SHORT; no custom slices. V is computed exactly (O(queue length)) rather
//!   than with the kernel's incremental sums.
//! - "6.19" changes only the yield against "6.14"; the rest of 6.19's fair class (e.g. its
//!   wake-up buddy changes) is not modelled.
//! - As in `cfs`: runnable counts instead of PELT, wake_affine without sync wake-ups, no NUMA balancing.
//!
//! ## Files
//! The machinery EEVDF shares with CFS (queues, groups, wake-up placement, `yield_to`,
//! balancing) is `fair.rs`; this file holds the parameters and EEVDF's part, `Eevdf` as a
//! `FairPolicy`: V and eligibility, `pick_eevdf`, lag placement, `update_deadline`, the
//! lag saved at dequeue, the buddy rule, the yield (deadline pushed, or vruntime
//! forfeited).

use super::fair::{
    Fair, FairPolicy, Tunables, C_PICK_NEXT_BUDDY, C_PICK_NEXT_BUDDY_REFUSED, C_TICK_PREEMPT,
};
use super::{ParamInfo, ParamKind, Params, SchedCtx, TaskId};
use crate::reader::{Res, Table};
use crate::time::SimDuration;

pub mod series;

pub const DESCRIPTION: &str = "Linux 6.6+ EEVDF: eligibility by lag, earliest virtual deadline, 6.6, 6.14 or 6.19 buddy and yield rule, yield_to";

pub const PARAMS: &[ParamInfo] = &[
    super::fair::CORE_SCHED_PARAM,
    super::fair::TICK_GRID_PARAM,
    super::fair::WAKE_AFFINE_PARAM,
    super::fair::WAKEE_LOAD_PARAM,
    super::fair::busy_factor_param("16"),
    ParamInfo {
        name: "base_slice",
        kind: ParamKind::Duration,
        default: "750us",
        help: "sysctl_sched_base_slice (unscaled)",
    },
    ParamInfo {
        name: "tunable_scaling",
        kind: ParamKind::Bool,
        default: "true",
        help: "scale base_slice by 1 + ilog2(min(ncpus, 8))",
    },
    ParamInfo {
        name: "tick",
        kind: ParamKind::Duration,
        default: "4ms",
        help: "scheduler tick (HZ=250)",
    },
    ParamInfo {
        name: "migration_cost",
        kind: ParamKind::Duration,
        default: "500us",
        help: "a task that ran this recently is cache-hot",
    },
    ParamInfo {
        name: "group_per_vm",
        kind: ParamKind::Bool,
        default: "false",
        help: "each VM is a cgroup (fair share per VM)",
    },
    ParamInfo {
        name: "fork_balance",
        kind: ParamKind::Bool,
        default: "true",
        help: "a new task starts on the idlest pCPU (find_idlest_cpu: socket, then core, then CPU); false: on the i-th pCPU of its affinity",
    },
    ParamInfo {
        name: "root_host_threads",
        kind: ParamKind::Bool,
        default: "true",
        help: "with group_per_vm, host threads no VM owns are root-cgroup tasks on the root run queue beside the VMs' groups (upstream); false: they share one group of their own",
    },
    ParamInfo {
        name: "buddy_rule",
        kind: ParamKind::Choice(&["6.14", "6.6", "6.19"]),
        default: "6.14",
        help: "6.14: next buddy honoured if eligible (PICK_BUDDY); 6.6: ignored (NEXT_BUDDY off); 6.19: as 6.14, and an eligible yielder forfeits its vruntime (79104becf42b)",
    },
    ParamInfo {
        name: "yield_rule",
        kind: ParamKind::Choice(&["buddy_rule", "deadline", "forfeit"]),
        default: "buddy_rule",
        help: "the yield apart from the buddy: buddy_rule (default): forfeit under buddy_rule 6.19, deadline otherwise; deadline: the yielder's deadline one slice later (mainline 6.6-6.18); forfeit: an eligible yielder forfeits its vruntime (79104becf42b; also in the 6.18 stable kernels from 6.18.2)",
    },
    ParamInfo {
        name: "delay_dequeue",
        kind: ParamKind::Bool,
        default: "true",
        help: "DELAY_DEQUEUE and DELAY_ZERO (6.12+): a task that sleeps ineligible stays queued until picked, so its negative lag is paid off rather than kept through the sleep (fair/delay.rs)",
    },
    ParamInfo {
        name: "yield_series",
        kind: ParamKind::Choice(&["off", "v2", "v3"]),
        default: "off",
        help: "the proposed semantics-aware directed yield series on yield_to: off (upstream); v2: the yielder's vruntime pushed at the common ancestor (debooster); v3: lag credited to the buddy and a forced local reschedule",
    },
];

/// EEVDF over the shared fair-class machinery.
pub fn new(p: &Params) -> Fair<Eevdf> {
    Fair::new(
        Eevdf {
            base_slice: p.duration("base_slice"),
            pick_buddy: matches!(p.choice("buddy_rule").as_str(), "6.14" | "6.19"),
            forfeit_on_yield: match p.choice("yield_rule").as_str() {
                "forfeit" => true,
                "deadline" => false,
                _ => p.choice("buddy_rule") == "6.19",
            },
            yields: YieldCounts::default(),
            period_floor: SimDuration::from_ms(6),
            series: series::YieldSeries {
                series: series::Series::parse(&p.choice("yield_series")),
                ..Default::default()
            },
            delay_dequeue: p.bool("delay_dequeue"),
        },
        Tunables {
            tick: p.duration("tick"),
            migration_cost: p.duration("migration_cost"),
            group_per_vm: p.bool("group_per_vm"),
            tunable_scaling: p.bool("tunable_scaling"),
            fork_balance: p.bool("fork_balance"),
            root_host_threads: p.bool("root_host_threads"),
            tick_grid: p.bool(super::fair::TICK_GRID_PARAM.name),
            busy_factor: p.int("busy_factor") as u64,
            wake_affine: p.bool(super::fair::WAKE_AFFINE_PARAM.name),
            wakee_pelt: p.choice(super::fair::WAKEE_LOAD_PARAM.name) == "pelt",
        },
    )
}

/// How often each branch of the 6.19 yield was taken.
#[derive(Clone, Copy, Debug, Default)]
pub struct YieldCounts {
    pub(super) forfeit: u64,
    pub(super) ineligible_unchanged: u64,
}

/// EEVDF's tunables (scaled at `init` when `tunable_scaling` is on) and buddy rule.
#[derive(Clone, Debug)]
pub struct Eevdf {
    /// `sysctl_sched_base_slice`: the request of every entity, in real time.
    pub(super) base_slice: SimDuration,
    /// The 6.14+ rule (PICK_BUDDY): the next buddy is honoured if eligible. Without it
    /// (6.6-6.13) the buddy needs NEXT_BUDDY, which is off.
    pub(super) pick_buddy: bool,
    /// The 6.19 yield (79104becf42b; stable 6.18.2+): an eligible yielder's vruntime jumps
    /// to its deadline. Without it (mainline 6.6-6.18) the yielder's deadline moves one
    /// slice later.
    pub(super) forfeit_on_yield: bool,
    /// The 6.19 yield's two branches (reported only when it is on).
    pub(super) yields: YieldCounts,
    /// The least turn the starvation bound assumes: CFS's default period (6 ms, scaled
    /// like the base slice), which the bound kept when both policies shared CFS's
    /// tunables; EEVDF itself has no such period.
    pub(super) period_floor: SimDuration,
    /// The proposed directed-yield series' scheduler side (`yield_series`) and its state.
    pub(super) series: series::YieldSeries,
    /// DELAY_DEQUEUE and DELAY_ZERO (6.12+; `fair/delay.rs`).
    pub(super) delay_dequeue: bool,
}

impl FairPolicy for Eevdf {
    const PLACE_MIGRATED: bool = true;
    const RELAXED_DETACH: bool = true;
    /// 6.x's `wake_affine_idle` keeps an idle previous pCPU and `wake_affine_weight`
    /// does not move on equal loads (both since 4.16).
    const WAKE_AFFINE_4_16: bool = true;

    fn scale(&mut self, k: u64) {
        self.base_slice *= k;
        self.period_floor *= k;
    }

    /// A base slice, run at most 2 x base_slice + tick past its deadline (the lag limit).
    fn longest_turn(&self, tick: SimDuration) -> SimDuration {
        self.period_floor.max((self.base_slice * 2).plus(tick))
    }

    /// PLACE_LAG: at V - lag x (W + w) / W (W: the queue's load, w: the entity's), the lag
    /// saved when it left; deadline one vslice later, half one for a new entity
    /// (PLACE_DEADLINE_INITIAL).
    #[inline]
    fn place_entity(f: &mut Fair<Self>, rq: u32, e: u32, initial: bool) {
        let vavg = f.avg_vruntime(rq);
        let r = &f.rqs[rq as usize];
        let w = f.ents[e as usize].weight as i128;
        let mut lag = f.ents[e as usize].vlag as i128;
        if r.nr_running > 0 && r.load > 0 {
            let big_w = r.load as i128;
            lag = lag * (big_w + w) / big_w;
        }
        let slice = f.policy.base_slice;
        let ent = &mut f.ents[e as usize];
        ent.vruntime = vavg - lag as i64;
        let mut vslice = Fair::<Self>::calc_delta_fair(slice, ent.weight);
        if initial {
            vslice /= 2;
        }
        ent.deadline = ent.vruntime + vslice;
    }

    /// `update_deadline`: a used-up slice gets a new deadline, and a reschedule if others
    /// are queued (there is no tick check).
    #[inline]
    fn update_deadline(f: &mut Fair<Self>, ctx: &mut SchedCtx, rq: u32, curr: u32, cpu: u32) {
        let slice = f.policy.base_slice;
        let e = &mut f.ents[curr as usize];
        if e.vruntime >= e.deadline {
            e.deadline = e.vruntime + Fair::<Self>::calc_delta_fair(slice, e.weight);
            if f.rqs[rq as usize].nr_running > 1 {
                f.counters.bump(C_TICK_PREEMPT);
                ctx.resched(cpu);
                f.clear_next(rq);
            }
        }
    }

    /// `update_entity_lag`: the lag V - vruntime, clamped to +-max(2 x slice, tick) of
    /// vruntime.
    #[inline]
    fn update_entity_lag(f: &mut Fair<Self>, rq: u32, e: u32) {
        let v = f.avg_vruntime(rq);
        let ent = &f.ents[e as usize];
        let limit =
            Fair::<Self>::calc_delta_fair((f.policy.base_slice * 2).max(f.tun.tick), ent.weight);
        f.ents[e as usize].vlag = (v - ent.vruntime).clamp(-limit, limit);
    }

    /// `pick_eevdf`; then the next buddy if forced (fix (b)) or, under the 6.14 rule,
    /// eligible.
    #[inline]
    fn pick_next_entity(f: &mut Fair<Self>, rq: u32, left: u32) -> u32 {
        let r = &f.rqs[rq as usize];
        let mut se = f.pick_eevdf(rq, None).unwrap_or(left);
        if let Some(n) = r.next {
            let ok = r.next_forced || (f.policy.pick_buddy && f.eligible(rq, n));
            if ok {
                f.counters.bump(C_PICK_NEXT_BUDDY);
                se = n;
            } else if n != se {
                f.counters.bump(C_PICK_NEXT_BUDDY_REFUSED);
            }
        }
        se
    }

    /// Preempts only if the woken entity is what `pick_eevdf` would choose, with curr
    /// protected while it keeps its deadline (RUN_TO_PARITY).
    #[inline]
    fn check_preempt_wakeup(
        f: &mut Fair<Self>,
        _t: TaskId,
        rq: u32,
        se: u32,
        pse: u32,
        _cpu: u32,
    ) -> bool {
        f.pick_eevdf(rq, Some(se)) == Some(pse)
    }

    /// Mainline 6.6-6.18: the yielder's deadline moves one slice later. 6.19 and stable
    /// 6.18.2+ (79104becf42b): an eligible yielder forfeits the rest of its request
    /// (vruntime to its deadline, a new deadline one slice on); an ineligible one is left
    /// alone. No skip buddy in either.
    #[inline]
    fn yield_task(f: &mut Fair<Self>, me: TaskId, cpu: u32) {
        let slice = f.policy.base_slice;
        if !f.policy.forfeit_on_yield {
            let ent = &mut f.ents[me as usize];
            ent.deadline += Fair::<Self>::calc_delta_fair(slice, ent.weight);
            return;
        }
        let rq = f.leaf_rq(me, cpu);
        if !f.eligible(rq, me) {
            f.policy.yields.ineligible_unchanged += 1;
            return;
        }
        f.policy.yields.forfeit += 1;
        let ent = &mut f.ents[me as usize];
        ent.vruntime = ent.deadline;
        ent.deadline += Fair::<Self>::calc_delta_fair(slice, ent.weight);
        f.update_min_vruntime(rq);
    }

    /// The series' rules between the buddy and the yield (`eevdf/series.rs`).
    #[inline]
    fn yield_to_task(
        f: &mut Fair<Self>,
        ctx: &mut SchedCtx,
        me: TaskId,
        cpu: u32,
        target: TaskId,
        p_cpu: u32,
    ) {
        series::yield_to(f, ctx, me, cpu, target, p_cpu);
    }

    fn policy_counters(&self, out: &mut Vec<(&'static str, u64)>) {
        if self.forfeit_on_yield {
            out.push(("yield_forfeit", self.yields.forfeit));
            out.push((
                "yield_ineligible_unchanged",
                self.yields.ineligible_unchanged,
            ));
        }
        series::counters(&self.series, out);
    }

    fn delays_dequeue(&self) -> bool {
        self.delay_dequeue
    }

    /// `set_user_nice` (`fair/reweight.rs`).
    fn set_nice(f: &mut Fair<Self>, ctx: &mut SchedCtx, t: TaskId, nice: i8) -> bool {
        f.reweight_task(ctx, t, nice);
        true
    }

    /// DELAY_DEQUEUE: a sleeper that is not eligible (vruntime past V) stays queued.
    #[inline]
    fn delay_dequeue(f: &Fair<Self>, rq: u32, e: u32) -> bool {
        f.policy.delay_dequeue && !f.eligible(rq, e)
    }
}

impl Fair<Eevdf> {
    /// Weighted average vruntime of the queue, curr included (EEVDF's V).
    pub(super) fn avg_vruntime(&self, rq: u32) -> i64 {
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

    /// Eligible: lag V - vruntime >= 0.
    pub(super) fn eligible(&self, rq: u32, e: u32) -> bool {
        self.ents[e as usize].vruntime <= self.avg_vruntime(rq)
    }

    /// EEVDF: the eligible entity with the earliest deadline (`protect`: RUN_TO_PARITY).
    pub(super) fn pick_eevdf(&self, rq: u32, protect: Option<u32>) -> Option<u32> {
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
}

/// `eevdf`: `Fair` with the EEVDF policy. Its periodic events are ticks and slice ends
/// (`base_slice`).
impl super::Registered for Eevdf {
    type Sched = Fair<Eevdf>;
    const NAME: &'static str = "eevdf";
    const DESCRIPTION: &'static str = DESCRIPTION;
    const PARAMS: &'static [ParamInfo] = PARAMS;
    const PROPERTIES: super::Properties = super::Properties {
        time_sharing: true,
        credit_accounting: false,
        pools: super::Pools::None,
    };
    fn build(p: &Params) -> Fair<Eevdf> {
        new(p).with_core_sched(p)
    }
    fn check_params(t: &Table) -> Res<()> {
        check_params(t)
    }
    fn event_period(p: &Params) -> Option<crate::time::SimDuration> {
        Some(p.duration("tick").min(p.duration("base_slice")))
    }
}

/// "v3" credits lag so that PICK_BUDDY (6.14+) honours the buddy; the 6.6 rule has no
/// PICK_BUDDY, so the combination would credit a buddy nobody picks.
pub fn check_params(t: &Table) -> Res<()> {
    super::fair::check_busy_factor(t)?;
    let rule = t.opt_str("buddy_rule")?.unwrap_or("6.14");
    if t.opt_str("yield_series")? == Some("v3") && rule == "6.6" {
        return t.err(
            "yield_series",
            "\"v3\" credits lag to the yield_to buddy for PICK_BUDDY (Linux 6.14+) to pick it; \
             buddy_rule = \"6.6\" has no PICK_BUDDY. Use buddy_rule \"6.14\" or \"6.19\" (the \
             series was based on 6.19 and 7.1)",
        );
    }
    Ok(())
}
