//! KVM-specific host behaviour: pause-loop exiting (PLE) and its handler, and the seed
//! papers' fixes as a features table.
//!
//! ## Pause-loop exiting
//! A guest that spins (PAUSE in a loop) for longer than `ple_window` cycles exits to KVM
//! (Intel PLE / AMD pause filtering). The window is per vCPU: it doubles (`ple_window_grow`)
//! on each exit up to `ple_window_max`, and is reset to `ple_window` when the vCPU is
//! scheduled in again (`ple_window_shrink` = 0). `ple_window_grow` = 1 keeps it fixed, as
//! the papers did (16 x 2048 cycles). Intel ignores PAUSE loops at CPL > 0, so user-mode
//! spins never exit on Intel; AMD's pause filter counts them too.
//!
//! ## The handler, `kvm_vcpu_on_spin` (virt/kvm/kvm_main.c)
//! Walk the VM's vCPUs as a ring starting after `last_boosted_vcpu` and `yield_to` the
//! first candidate. Skip: vCPUs that were not preempted (4.15: `preempted`, set when the
//! vCPU thread was descheduled while runnable; 5.3+: `ready`, also set when a halted vCPU
//! is woken); the spinner itself; halted vCPUs; when `yield_to_kernel_mode`, vCPUs
//! preempted in user mode (5.3+: unless an interrupt is pending for them); vCPUs not
//! eligible for directed yield (a vCPU that is itself inside the handler, i.e. was
//! descheduled by its own directed yield, is eligible only every other time it is
//! examined). `yield_to` > 0 records the vCPU as last boosted and stops; < 0 (-ESRCH)
//! uses one of 3 tries; 0 goes on.
//!
//! ## `last_boosted_vcpu` and the 2024 bug (`last_boosted_rule`)
//! Before 6.13 the handler made two passes over `kvm_for_each_vcpu(i, ...)`, `i` the vCPU
//! index, and stored that index. Commit 7e513617da71 ("KVM: Rework core loop of
//! kvm_vcpu_on_spin() to use a single for-loop", Sean Christopherson, applied to kvm-x86
//! `generic` on 2024-10-31, so in v6.13) made it one loop: `start = last_boosted_vcpu + 1;
//! for (i = 0; i < nr_vcpus; i++) { idx = (start + i) % nr_vcpus; ... }`, visiting the same
//! ring, but on a successful yield it stored `i`, the loop offset from `start`, instead of
//! `idx`, the boosted vCPU's index. So the next handler started after vCPU number
//! (offset of the last boost) rather than after the last boosted vCPU: e.g. with 4 vCPUs
//! and last = 0, a boost of vCPU 3 (offset 2) stored 2, and the next walk began at vCPU 3
//! again instead of vCPU 0. The fix 32bd348be3fa ("KVM: Fix last_boosted_vcpu index
//! assignment bug", Wanpeng Li, committed 2025-11-25, Cc: stable) stores `idx` again.
//! `last_boosted_rule = "fixed"` (default: the pre-6.13 and the fixed behaviour, which is
//! what vcpulab always modelled) or `"2024-bug"` (6.13 up to the fix); the bug needs the
//! single-loop handler, so it is refused with `version = "4.15"`.
//!
//! ## The papers' fixes (seed 000, 004), all off by default (upstream behaviour)
//! See `KvmFeatures`.
//!
//! ## IPI-aware directed yield (`ipi_aware_yield`, off by default: upstream)
//! The KVM side of Wanpeng Li's proposed "Semantics-aware vCPU scheduling for
//! oversubscribed KVM" series, read from v2 ([PATCH v2 6-9/9], 2025-12-19, lore
//! 20251219035334.39790-7..10@gmail.com; v3 of 2026-06-12 "keeps the v2 design").
//! - Tracking (`kvm_track_ipi_communication`): a fixed IPI from a vCPU delivered to
//!   exactly one other vCPU records on the sender its receiver, the time and "pending",
//!   and on the receiver its sender. In vcpulab an `ipi` operation whose destinations
//!   (after leaving out the sender, and for a shootdown the vCPUs outside the mm) are
//!   exactly one vCPU is such a unicast; a multicast is one delivery with several
//!   recipients and is not tracked.
//! - EOI (`kvm_clear_ipi_on_eoi`, model: the receiver acknowledges the IPI): the
//!   receiver's record of that sender is cleared, and the sender's "pending" too if the
//!   sender's last receiver is this vCPU and the IPI is at most `ipi_window` old. v2
//!   clears the receiver's whole context, its own pending IPIs as a sender included; v3
//!   clears "on a matching-vector EOI without dropping unrelated pending IPI state",
//!   which is what vcpulab does.
//! - `kvm_vcpu_is_ipi_receiver(me, v)`: me's IPI is pending, went to v, and is at most
//!   `ipi_window` (`ipi_window_ns`, 50 ms) old.
//! - Candidates (`kvm_vcpu_is_good_yield_candidate`), replacing the user-mode filter
//!   after the `ready`, spinner and halted checks: (1) a confirmed IPI receiver of the
//!   spinner; (2) a vCPU with a pending interrupt (`kvm_arch_dy_has_pending_interrupt`;
//!   in vcpulab any pending IPI, as for the 5.3+ exception above); (3) a preempted vCPU,
//!   in kernel mode when `yield_to_kernel_mode`; else skipped. Unlike upstream, a `ready`
//!   vCPU that was woken rather than preempted passes only through (1) or (2). These are
//!   tiers of one test in the usual ring walk, not a reordering of the walk.
//! - A second, relaxed walk (`enable_relaxed_boost`, default on) when the first yielded
//!   nothing: any preempted vCPU (then the directed-yield eligibility check). The
//!   three -ESRCH tries are shared by both walks (the patch does not reset `try`).
//!
//! The series was tested with APICv off, so the hardware did not hide IPIs and EOIs
//! from KVM; vcpulab sees every IPI. Needs the 5.3+ handler (`ready`); refused with
//! `version = "4.15"` and with fix (a), which changes the same filter.
//!
//! ## User-space PLE handlers (`ple_handler`, default "kvm": `kvm_vcpu_on_spin`)
//! A VMM that takes the guest's spin exits in user space (the vcpulab KVM harness, whose
//! guest exits with an OUT after its own spin window; PVM traps no PAUSE) handles them with
//! system calls on the vCPU threads, not with `yield_to`. As the harness's `Ple::on_spin`
//! (crates/vcpulab-kvm/src/harness.rs, 2026-12-05): `"none"` returns at once; `"yield"`
//! calls `sched_yield` on the spinner's thread; `"nice-boost"` takes the next vCPU in round
//! robin after the last boosted one (the spinner skipped, running, queued or halted alike),
//! ends the VM's active boost (nice 0 again; a vCPU boosted again is left as it is), sets
//! the chosen one to `ple_boost_nice` (-20) until `ple_boost` (1 ms) passes or the next
//! exit's boost begins, then calls `sched_yield`; `"migrate"` the same with the chosen one's
//! affinity, set to the spinner's pCPU alone (`sched_setaffinity`; its own comes back at
//! the boost's end). The harness's monitor ends an expired
//! boost within its period (at most a boost); the model ends it on time. The calls are
//! free in the model: the exit's cost (`ple_exit_cost`) is the whole round trip, and the
//! harness's `sched_setattr` calls (a few microseconds each) are not measured apart.
//!
//! ## The world switch (`world_switch_cost`, default 0)
//! A vCPU thread switched out while in the guest (preempted) or inside an exit has to
//! leave guest mode and, when it runs again, re-enter it. Under hardware virtualization
//! that is a VM exit and entry (~1 us, within `[host.costs] context_switch`); under PVM
//! it is a world switch of tens of microseconds, the same path as an exit's round trip. A
//! host profile sets it from its exit round trip (the harness's null exit: 58.5 us on the
//! Xeon of pvm-xeon-2cpu-v1252). Measured apart on that machine (2026-12-05, session 31,
//! scripts/kvm_noise_monitor.py): each preemption of a busy vCPU by the harness's monitor
//! (runs of ~23-37 us) cost the vCPU ~94 us of guest time. Paid at the vCPU's next
//! dispatch, as switch overhead; a halted vCPU pays `halt_wakeup_cost` instead.

//! ## Halt polling (host side), `kvm_vcpu_halt` in virt/kvm/kvm_main.c
//! Read in torvalds/linux at the 6.1x tree whose `kvm_vcpu_on_spin` is the single-loop
//! version (the halt path has been this shape since 5.18's `kvm_vcpu_halt` split and
//! 6.2's `kvm_vcpu_max_halt_poll_ns`). A halting vCPU polls for its own window
//! `vcpu->halt_poll_ns` (first clamped to the global `halt_poll_ns`) before it blocks;
//! the loop (`kvm_vcpu_can_poll`) stops at once when another task is runnable on the pCPU
//! (`single_task_running`) or a reschedule is due. After the halt, with `halt_ns` the time
//! from the halt to the vCPU running again and `max` = `halt_poll_ns`: `halt_ns <=
//! window` leaves the window; else a window above 0 with `halt_ns > max` shrinks
//! (`shrink_halt_poll_ns`: divided by `halt_poll_ns_shrink`, 0 resets to 0, and any result
//! below `halt_poll_ns_grow_start` is 0); else a window below `max` with `halt_ns < max`
//! grows (`grow_halt_poll_ns`: times `halt_poll_ns_grow`, at least
//! `halt_poll_ns_grow_start`; the next halt clamps it to `max`); `max` = 0 sets it to 0.
//! x86 treats every wake-up as valid (`vcpu_valid_wakeup` distinguishes only on s390).
//! Defaults are x86's: `KVM_HALT_POLL_NS_DEFAULT` 200000, grow 2, grow_start 10000,
//! shrink 0. A guest running the haltpoll cpuidle driver turns host polling off for its
//! vCPUs (MSR_KVM_POLL_CONTROL = 0, read by x86's `kvm_arch_no_poll`).
//!
//! ## Guest haltpoll, drivers/cpuidle/governors/haltpoll.c
//! The guest polls in its idle loop (cpuidle state 0, the vCPU stays on its pCPU and
//! burns it) for up to its per-CPU `poll_limit_ns`, then halts. `select`: a limit of 0
//! halts; after a poll that timed out it halts, after a poll ended by an event it polls
//! again, after a halt it polls. `reflect` after a halt of `block_ns`: `limit < block_ns
//! <= guest_halt_poll_ns` grows the limit (times `guest_halt_poll_grow`, at least
//! `guest_halt_poll_grow_start`, at most `guest_halt_poll_ns`); `block_ns >
//! guest_halt_poll_ns` with `guest_halt_poll_allow_shrink` divides it by
//! `guest_halt_poll_shrink` (0: to 0). Defaults 200000 ns, grow 2, grow_start 50000,
//! shrink 2, allow_shrink true (torvalds/linux 2cc2c3cb54de).

use crate::reader::{Res, Table};
use crate::rng::Rng;
use crate::time::SimDuration;
use crate::workload::{parse_dist, Dist};

/// The seed papers' fixes, like Linux's `kernel/sched/features.h`: each switch commented,
/// defaults are upstream behaviour.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KvmFeatures {
    /// (a) Candidates include vCPUs preempted in user mode, and vCPUs with a pending IPI
    /// from the spinner whether preempted or not (the PLE may come from an IPI barrier
    /// whose target runs user code, or was halted and is waiting to run since the IPI
    /// woke it).
    pub boost_user_mode_candidates: bool,
    /// (b) The boosted vCPU runs even when per-vCPU fairness would refuse it (on the
    /// spinner's own run queue); its CPU time is charged to its VM's group entity as
    /// usual, so fairness between VMs holds.
    pub boost_ignores_vcpu_fairness: bool,
    /// (c) The boosted vCPU moves to the spinner's run queue.
    pub migrate_boosted_to_spinner: bool,
}

pub const FEATURE_NAMES: &[&str] = &[
    "boost_user_mode_candidates",
    "boost_ignores_vcpu_fairness",
    "migrate_boosted_to_spinner",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vendor {
    Intel,
    Amd,
}

/// Which kernel's candidate rules to apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum KvmVersion {
    /// 4.15 (the papers' host): `preempted`, no pending-interrupt exception.
    V4_15,
    /// 5.3 and later: `ready`, and vCPUs with a pending interrupt pass the kernel-mode filter.
    V5_3,
}

/// What `kvm_vcpu_on_spin` stores as `last_boosted_vcpu` after a successful yield (see
/// the module notes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LastBoostedRule {
    /// The boosted vCPU's index (before 6.13, and since 32bd348be3fa).
    #[default]
    Fixed,
    /// The loop offset from the walk's start (7e513617da71, 6.13 until the fix).
    Bug2024,
}

impl LastBoostedRule {
    /// The value stored after boosting vCPU `idx`, found `offset` steps into the walk.
    pub fn stored(self, idx: u32, offset: u32) -> u32 {
        match self {
            LastBoostedRule::Fixed => idx,
            LastBoostedRule::Bug2024 => offset,
        }
    }
}

/// The series' IPI-aware directed yield (see the module notes).
#[derive(Clone, Debug, PartialEq)]
pub struct IpiAwareYield {
    /// `ipi_window_ns`: how long a tracked IPI counts as recent.
    pub window: SimDuration,
    /// `enable_relaxed_boost`: the second, preempted-only walk.
    pub relaxed_boost: bool,
}

impl Default for IpiAwareYield {
    fn default() -> Self {
        IpiAwareYield {
            window: SimDuration::from_ms(50),
            relaxed_boost: true,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct KvmSpec {
    pub vendor: Vendor,
    pub version: KvmVersion,
    pub ple: bool,
    /// Cycles (at the host's base clock, the TSC rate).
    pub ple_window: u64,
    pub ple_window_grow: u64,
    pub ple_window_max: u64,
    /// CPU time a PLE exit costs (VM exit, handler, VM entry), ns: a constant, or a
    /// distribution drawn per exit ([`draw_cost`]).
    pub ple_exit_cost: Dist,
    pub features: KvmFeatures,
    pub last_boosted: LastBoostedRule,
    pub halt_poll: HaltPoll,
    /// The series' IPI-aware directed yield; None: upstream's candidate rules.
    pub ipi_aware: Option<IpiAwareYield>,
    /// What handles a PLE exit: KVM's `kvm_vcpu_on_spin`, or a user-space VMM's policy.
    pub handler: PleHandler,
    /// CPU time a vCPU loses when its thread is switched out while in the guest (or in an
    /// exit it has not returned from) and later resumes guest code: the way out of guest
    /// mode and back in, beyond the host's `context_switch`. ns: a constant, or a
    /// distribution drawn per resumption ([`draw_cost`]). 0 by default (a hardware VM
    /// exit and entry are ~1 us, within `context_switch`); under PVM a world switch,
    /// which a host profile sets from its measured exit round trip.
    pub world_switch_cost: Dist,
}

/// What runs at a PLE exit (`ple_handler`; see "User-space PLE handlers" in the module
/// notes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PleHandler {
    /// `"kvm"` (the default): KVM's `kvm_vcpu_on_spin`, a directed yield.
    Kvm,
    /// `"none"`: the exit goes to user space and straight back into the guest.
    None,
    /// `"yield"`: the spinner's thread calls `sched_yield`.
    Yield,
    /// `"nice-boost"`: a candidate vCPU's thread goes to nice `nice` for `boost` (or until
    /// the next exit's boost), then the spinner's thread calls `sched_yield`.
    NiceBoost { boost: SimDuration, nice: i8 },
    /// `"migrate"`: a candidate vCPU's thread is pinned to the spinner's pCPU for `boost`
    /// (or until the next exit's boost), then the spinner's thread calls `sched_yield`.
    Migrate { boost: SimDuration },
}

/// The harness's boost (crates/vcpulab-kvm `PleConfig::boost_ns`' default) and nice value.
pub const DEFAULT_PLE_BOOST: SimDuration = SimDuration::from_ms(1);
pub const DEFAULT_PLE_BOOST_NICE: i8 = -20;

/// KVM's halt-polling module parameters (see the module notes), and what a wake-up from
/// a real block costs over one caught by polling.
#[derive(Clone, Debug, PartialEq)]
pub struct HaltPoll {
    /// The global ceiling `halt_poll_ns` (ns); 0 turns polling off.
    pub max_ns: u64,
    pub grow: u64,
    pub grow_start_ns: u64,
    /// 0: reset the window to 0.
    pub shrink: u64,
    /// Latency a halted vCPU pays from its wake-up to guest code when it had blocked
    /// (schedule out, wake-up IPI to the idle pCPU, schedule in, VM entry) and a polled
    /// wake-up does not. The kernel documentation puts the saving at "a few
    /// micro-seconds" without a figure, so the default is 0 (not modelled) and a scenario
    /// that studies it sets it. ns: a constant, or a distribution drawn per wake-up
    /// ([`draw_cost`]).
    pub wakeup_cost: Dist,
}

impl Default for HaltPoll {
    fn default() -> Self {
        HaltPoll {
            max_ns: 200_000,
            grow: 2,
            grow_start_ns: 10_000,
            shrink: 0,
            wakeup_cost: Dist::Fixed(0.0),
        }
    }
}

/// `grow_halt_poll_ns`: the window after a short block it was too small for.
pub fn grow_halt_poll(hp: &HaltPoll, cur: u64) -> u64 {
    if hp.grow == 0 {
        return cur;
    }
    cur.saturating_mul(hp.grow).max(hp.grow_start_ns)
}

/// `shrink_halt_poll_ns`: the window after a block longer than the ceiling.
pub fn shrink_halt_poll(hp: &HaltPoll, cur: u64) -> u64 {
    // A divisor of 0 resets the window to 0.
    let v = cur.checked_div(hp.shrink).unwrap_or(0);
    if v < hp.grow_start_ns {
        0
    } else {
        v
    }
}

/// The window `kvm_vcpu_halt` leaves after a halt of `halt_ns` that began with window
/// `cur` (already clamped to the ceiling), x86 (every wake-up valid).
pub fn adjust_halt_poll(hp: &HaltPoll, cur: u64, halt_ns: u64) -> u64 {
    let max = hp.max_ns;
    if max == 0 {
        0
    } else if halt_ns <= cur {
        cur
    } else if cur > 0 && halt_ns > max {
        shrink_halt_poll(hp, cur)
    } else if cur < max && halt_ns < max {
        grow_halt_poll(hp, cur)
    } else {
        cur
    }
}

/// The guest haltpoll governor's parameters (`[vm.haltpoll]`, see the module notes).
#[derive(Clone, Debug, PartialEq)]
pub struct GuestHaltPoll {
    pub max_ns: u64,
    pub grow: u64,
    pub grow_start_ns: u64,
    pub shrink: u64,
    pub allow_shrink: bool,
}

impl Default for GuestHaltPoll {
    fn default() -> Self {
        GuestHaltPoll {
            max_ns: 200_000,
            grow: 2,
            grow_start_ns: 50_000,
            shrink: 2,
            allow_shrink: true,
        }
    }
}

pub const GUEST_HALT_POLL_KEYS: &[&str] = &[
    "guest_halt_poll_ns",
    "guest_halt_poll_grow",
    "guest_halt_poll_grow_start",
    "guest_halt_poll_shrink",
    "guest_halt_poll_allow_shrink",
];

pub fn parse_guest_haltpoll(t: &Table) -> Res<GuestHaltPoll> {
    let mut g = GuestHaltPoll::default();
    if let Some(v) = t.opt_u64("guest_halt_poll_ns", 0, u32::MAX as u64)? {
        g.max_ns = v;
    }
    if let Some(v) = t.opt_u64("guest_halt_poll_grow", 0, 1 << 16)? {
        g.grow = v;
    }
    if let Some(v) = t.opt_u64("guest_halt_poll_grow_start", 0, u32::MAX as u64)? {
        g.grow_start_ns = v;
    }
    if let Some(v) = t.opt_u64("guest_halt_poll_shrink", 0, 1 << 16)? {
        g.shrink = v;
    }
    if let Some(v) = t.opt_bool("guest_halt_poll_allow_shrink")? {
        g.allow_shrink = v;
    }
    t.finish(GUEST_HALT_POLL_KEYS)?;
    Ok(g)
}

/// The governor's `select`: poll (true) or halt (false) on entering idle, given the
/// CPU's limit and how its last idle period ended.
pub fn guest_should_poll(limit_ns: u64, last: GuestIdle) -> bool {
    match last {
        _ if limit_ns == 0 => false,
        GuestIdle::PollTimedOut => false,
        GuestIdle::PollWoken | GuestIdle::Halted => true,
    }
}

/// How a guest CPU's last idle period ended (the governor's `last_state_idx` and
/// `poll_time_limit`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GuestIdle {
    #[default]
    Halted,
    PollWoken,
    PollTimedOut,
}

/// `adjust_poll_limit` after a halt of `block_ns`.
pub fn guest_adjust_limit(g: &GuestHaltPoll, limit: u64, block_ns: u64) -> u64 {
    if block_ns > limit && block_ns <= g.max_ns {
        limit
            .saturating_mul(g.grow)
            .max(g.grow_start_ns)
            .min(g.max_ns)
    } else if block_ns > g.max_ns && g.allow_shrink {
        limit.checked_div(g.shrink).unwrap_or(0)
    } else {
        limit
    }
}

impl Default for KvmSpec {
    fn default() -> Self {
        KvmSpec {
            vendor: Vendor::Intel,
            version: KvmVersion::V5_3,
            ple: true,
            ple_window: 4096,
            ple_window_grow: 2,
            // 4.18+ default for VMX (UINT_MAX); 4.15 used INT_MAX / 2.
            ple_window_max: u32::MAX as u64,
            // A VM exit + entry round trip on Westmere..Cascade Lake is ~0.5-1 us; the
            // handler walk and yield_to add a few hundred ns: 1 us in all.
            ple_exit_cost: Dist::Fixed(1_000.0),
            features: KvmFeatures::default(),
            last_boosted: LastBoostedRule::Fixed,
            halt_poll: HaltPoll::default(),
            ipi_aware: None,
            handler: PleHandler::Kvm,
            world_switch_cost: Dist::Fixed(0.0),
        }
    }
}

pub const KVM_KEYS: &[&str] = &[
    "vendor",
    "version",
    "ple",
    "ple_gap",
    "ple_window",
    "ple_window_grow",
    "ple_window_shrink",
    "ple_window_max",
    "ple_exit_cost",
    "features",
    "last_boosted_rule",
    "halt_poll_ns",
    "halt_poll_ns_grow",
    "halt_poll_ns_grow_start",
    "halt_poll_ns_shrink",
    "halt_wakeup_cost",
    "ipi_aware_yield",
    "ipi_window",
    "relaxed_boost",
    "ple_handler",
    "ple_boost",
    "ple_boost_nice",
    "world_switch_cost",
];

/// "5.3" .. "5.<n>" (n >= 3) or "6.<n>": the versions the 5.3+ handler models.
fn is_v5_3_or_later(v: &str) -> bool {
    let Some((major, minor)) = v.split_once('.') else {
        return false;
    };
    let digits = |s: &str| {
        !s.is_empty()
            && s.len() <= 4
            && s.bytes().all(|b| b.is_ascii_digit())
            && !(s.len() > 1 && s.starts_with('0'))
    };
    if !digits(minor) {
        return false;
    }
    match major {
        "5" => minor.parse::<u32>().is_ok_and(|m| m >= 3),
        "6" => true,
        _ => false,
    }
}

pub fn parse_kvm(t: &Table) -> Res<KvmSpec> {
    let mut k = KvmSpec::default();
    match t.opt_str("vendor")? {
        None | Some("intel") => {}
        Some("amd") => k.vendor = Vendor::Amd,
        Some(o) => {
            return t.err(
                "vendor",
                format!("unknown vendor {o:?}; allowed: \"intel\", \"amd\""),
            )
        }
    }
    match t.opt_str("version")? {
        None => {}
        Some("4.15") => k.version = KvmVersion::V4_15,
        Some(v) if is_v5_3_or_later(v) => k.version = KvmVersion::V5_3,
        Some(o) => {
            return t.err("version", format!("unknown KVM version {o:?}; allowed: \"4.15\" (the papers' host), or \"5.3\" .. \"6.x\""))
        }
    }
    if let Some(b) = t.opt_bool("ple")? {
        k.ple = b;
    }
    // Accepted and validated but without effect: ple_gap only decides whether two PAUSEs
    // belong to one loop, and every modelled spin is one tight PAUSE loop.
    t.opt_u64("ple_gap", 1, 1 << 20)?;
    if let Some(w) = t.opt_u64("ple_window", 1, 1 << 40)? {
        k.ple_window = w;
    }
    if let Some(g) = t.opt_u64("ple_window_grow", 0, 1 << 20)? {
        k.ple_window_grow = g;
    }
    if let Some(s) = t.opt_u64("ple_window_shrink", 0, 0)? {
        let _ = s; // only the upstream default (reset to the base window) is modelled
    }
    if let Some(m) = t.opt_u64("ple_window_max", 1, u64::MAX >> 1)? {
        k.ple_window_max = m;
    }
    if let Some(c) = t.get("ple_exit_cost") {
        k.ple_exit_cost = parse_dist(&c)?;
    }
    if let Some(c) = t.get("world_switch_cost") {
        k.world_switch_cost = parse_dist(&c)?;
    }
    if let Some(f) = t.get("features") {
        let ft = f.table()?;
        let get = |name: &str| ft.opt_bool(name).map(|b| b.unwrap_or(false));
        k.features = KvmFeatures {
            boost_user_mode_candidates: get("boost_user_mode_candidates")?,
            boost_ignores_vcpu_fairness: get("boost_ignores_vcpu_fairness")?,
            migrate_boosted_to_spinner: get("migrate_boosted_to_spinner")?,
        };
        ft.finish(FEATURE_NAMES)?;
    }
    match t.opt_str("last_boosted_rule")? {
        None | Some("fixed") => {}
        Some("2024-bug") if k.version == KvmVersion::V4_15 => {
            return t.err(
                "last_boosted_rule",
                "\"2024-bug\" is a bug of the single-loop handler of 6.13 and later; it cannot \
                 go with version \"4.15\" (allowed there: \"fixed\")",
            )
        }
        Some("2024-bug") => k.last_boosted = LastBoostedRule::Bug2024,
        Some(o) => {
            return t.err(
                "last_boosted_rule",
                format!("unknown rule {o:?}; allowed: \"fixed\", \"2024-bug\""),
            )
        }
    }
    let hp = &mut k.halt_poll;
    if let Some(v) = t.opt_u64("halt_poll_ns", 0, u32::MAX as u64)? {
        hp.max_ns = v;
    }
    if let Some(v) = t.opt_u64("halt_poll_ns_grow", 0, 1 << 16)? {
        hp.grow = v;
    }
    if let Some(v) = t.opt_u64("halt_poll_ns_grow_start", 0, u32::MAX as u64)? {
        hp.grow_start_ns = v;
    }
    if let Some(v) = t.opt_u64("halt_poll_ns_shrink", 0, 1 << 16)? {
        hp.shrink = v;
    }
    if let Some(c) = t.get("halt_wakeup_cost") {
        hp.wakeup_cost = parse_dist(&c)?;
    }
    if t.opt_bool("ipi_aware_yield")? == Some(true) {
        if k.version == KvmVersion::V4_15 {
            return t.err(
                "ipi_aware_yield",
                "the IPI-aware directed yield was written for the 6.19+ handler (it needs the \
                 5.3+ `ready` flag); it cannot go with version \"4.15\"",
            );
        }
        if k.features.boost_user_mode_candidates {
            return t.err(
                "ipi_aware_yield",
                "the IPI-aware directed yield and fix (a) boost_user_mode_candidates both \
                 replace kvm_vcpu_on_spin's user-mode filter; choose one",
            );
        }
        let mut ia = IpiAwareYield::default();
        if let Some(w) = t.opt_duration("ipi_window")? {
            ia.window = w;
        }
        if let Some(b) = t.opt_bool("relaxed_boost")? {
            ia.relaxed_boost = b;
        }
        k.ipi_aware = Some(ia);
    } else {
        for key in ["ipi_window", "relaxed_boost"] {
            if t.has(key) {
                return t.err(
                    key,
                    format!(
                        "{key} tunes the IPI-aware directed yield; it needs ipi_aware_yield = true"
                    ),
                );
            }
        }
    }
    k.handler = parse_ple_handler(t, &k)?;
    t.finish(KVM_KEYS)?;
    Ok(k)
}

/// `ple_handler` and the keys of its "nice-boost" (`ple_boost`, `ple_boost_nice`). A
/// user-space handler replaces `kvm_vcpu_on_spin`, so the keys that tune that one are
/// refused beside it.
fn parse_ple_handler(t: &Table, k: &KvmSpec) -> Res<PleHandler> {
    const ALLOWED: &str = "\"kvm\", \"none\", \"yield\", \"nice-boost\", \"migrate\"";
    let name = t.opt_str("ple_handler")?;
    let boosts = matches!(name, Some("nice-boost" | "migrate"));
    let boost = t.opt_duration("ple_boost")?.unwrap_or(DEFAULT_PLE_BOOST);
    if boosts && boost == SimDuration::ZERO {
        return t.err(
            "ple_boost",
            "must be longer than 0 (a boost of 0 is ple_handler = \"yield\")",
        );
    }
    if !boosts && t.has("ple_boost") {
        return t.err(
            "ple_boost",
            "ple_boost tunes ple_handler = \"nice-boost\" or \"migrate\"; it needs one of them",
        );
    }
    if name != Some("nice-boost") && t.has("ple_boost_nice") {
        return t.err(
            "ple_boost_nice",
            "ple_boost_nice tunes ple_handler = \"nice-boost\"; it needs that handler",
        );
    }
    let handler = match name {
        None | Some("kvm") => return Ok(PleHandler::Kvm),
        Some("none") => PleHandler::None,
        Some("yield") => PleHandler::Yield,
        Some("migrate") => PleHandler::Migrate { boost },
        Some("nice-boost") => {
            let nice = match t.opt_f64("ple_boost_nice", -20.0, 19.0)? {
                None => DEFAULT_PLE_BOOST_NICE,
                Some(n) if n.fract() == 0.0 => n as i8,
                Some(n) => {
                    return t.err(
                        "ple_boost_nice",
                        format!("{n} is not a whole nice value; allowed: -20 .. 19"),
                    )
                }
            };
            PleHandler::NiceBoost { boost, nice }
        }
        Some(o) => {
            return t.err(
                "ple_handler",
                format!("unknown handler {o:?}; allowed: {ALLOWED}"),
            )
        }
    };
    let why =
        "a user-space handler (ple_handler other than \"kvm\") replaces kvm_vcpu_on_spin, which";
    if k.features != KvmFeatures::default() {
        return t.err(
            "ple_handler",
            format!("{why} [kvm.features] changes; remove the features or use \"kvm\""),
        );
    }
    if k.ipi_aware.is_some() {
        return t.err(
            "ple_handler",
            format!("{why} ipi_aware_yield changes; choose one"),
        );
    }
    if k.last_boosted == LastBoostedRule::Bug2024 {
        return t.err(
            "last_boosted_rule",
            format!("{why} keeps last_boosted_vcpu: \"2024-bug\" does not apply (allowed with ple_handler {:?}: \"fixed\")", name.unwrap_or_default()),
        );
    }
    if !k.ple {
        return t.err("ple_handler", "handles PLE exits; it needs ple = true");
    }
    Ok(handler)
}

/// What the PLE handler knows about one vCPU of the spinner's VM.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Candidate {
    pub is_spinner: bool,
    /// 4.15 `preempted`: descheduled while runnable.
    pub preempted: bool,
    /// 5.3+ `ready`: preempted, or woken and not yet running.
    pub ready: bool,
    pub halted: bool,
    /// Preempted in guest kernel mode.
    pub in_kernel: bool,
    /// An interrupt (an IPI we sent, a device interrupt) is pending for it.
    pub pending_interrupt: bool,
    /// One of those is an IPI from the spinner itself (the spinner waits for its ack).
    pub ipi_from_spinner: bool,
    pub in_spin_loop: bool,
    pub dy_eligible: bool,
    /// A confirmed recent IPI receiver of the spinner (`kvm_vcpu_is_ipi_receiver`).
    pub ipi_receiver: bool,
}

/// Why `kvm_vcpu_on_spin` passed over a vCPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    NotWaiting,
    Spinner,
    Halted,
    UserMode,
    NotDyEligible,
    /// IPI-aware yield: neither an IPI receiver, nor with a pending interrupt, nor
    /// preempted.
    NotPreempted,
}

/// Why the IPI-aware handler took a vCPU as a candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    /// (1) a confirmed recent IPI receiver of the spinner.
    IpiReceiver,
    /// (2) an interrupt is pending for it.
    PendingInterrupt,
    /// (3) preempted (in kernel mode when yielding to kernel mode).
    Preempted,
    /// The relaxed second walk: preempted.
    Relaxed,
}

/// The IPI-aware handler's checks on one vCPU, in the patch's order: `ready`, not the
/// spinner, not halted, then the tiers (first walk) or preempted (second walk), then the
/// directed-yield eligibility (toggled as upstream).
pub fn check_candidate_ipi_aware(
    c: &mut Candidate,
    yield_to_kernel_mode: bool,
    first_walk: bool,
) -> Result<Tier, Skip> {
    if !c.ready {
        return Err(Skip::NotWaiting);
    }
    if c.is_spinner {
        return Err(Skip::Spinner);
    }
    if c.halted {
        return Err(Skip::Halted);
    }
    let tier = if !first_walk {
        if !c.preempted {
            return Err(Skip::NotPreempted);
        }
        Tier::Relaxed
    } else if c.ipi_receiver {
        Tier::IpiReceiver
    } else if c.pending_interrupt {
        Tier::PendingInterrupt
    } else if !c.preempted {
        return Err(Skip::NotPreempted);
    } else if yield_to_kernel_mode && !c.in_kernel {
        return Err(Skip::UserMode);
    } else {
        Tier::Preempted
    };
    if c.in_spin_loop {
        let eligible = c.dy_eligible;
        c.dy_eligible = !c.dy_eligible;
        if !eligible {
            return Err(Skip::NotDyEligible);
        }
    }
    Ok(tier)
}

/// One vCPU's IPI tracking (`ipi_context` of the series).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IpiContext {
    /// As a sender: the vCPU (task) of its last tracked IPI, and when it was sent.
    pub last_receiver: Option<u32>,
    pub sent_at: u64,
    /// As a sender: that IPI is not yet acknowledged.
    pub pending: bool,
    /// As a receiver: the sender of the last tracked IPI it got.
    pub last_sender: Option<u32>,
}

/// `kvm_track_ipi_communication`: a unicast fixed IPI from `s` to `r` at `now_ns`.
pub fn track_ipi(ctx: &mut [IpiContext], s: u32, r: u32, now_ns: u64) {
    if s == r {
        return;
    }
    let sender = &mut ctx[s as usize];
    sender.last_receiver = Some(r);
    sender.pending = true;
    sender.sent_at = now_ns;
    ctx[r as usize].last_sender = Some(s);
}

/// `kvm_vcpu_is_ipi_receiver(s, r)` at `now_ns`.
pub fn is_ipi_receiver(
    ctx: &[IpiContext],
    s: u32,
    r: u32,
    now_ns: u64,
    window: SimDuration,
) -> bool {
    let c = &ctx[s as usize];
    c.pending && c.last_receiver == Some(r) && now_ns.saturating_sub(c.sent_at) <= window.ns()
}

/// The EOI of an IPI from `s` at receiver `r` (see the module notes); returns whether it
/// cleared the sender's pending flag.
pub fn ipi_eoi(ctx: &mut [IpiContext], s: u32, r: u32, now_ns: u64, window: SimDuration) -> bool {
    if ctx[r as usize].last_sender == Some(s) {
        ctx[r as usize].last_sender = None;
    }
    let sender = &mut ctx[s as usize];
    if sender.pending
        && sender.last_receiver == Some(r)
        && now_ns.saturating_sub(sender.sent_at) <= window.ns()
    {
        sender.pending = false;
        return true;
    }
    false
}

/// The order the handler visits vCPU indices: after the last boosted one, wrapping
/// around to it (the two passes of 4.15 and 6.6).
pub fn ring_order(n: u32, last_boosted: u32) -> impl Iterator<Item = u32> {
    let last = last_boosted.min(n.saturating_sub(1));
    (last + 1..n).chain(0..=last)
}

/// The handler's checks, in upstream order. Examining a vCPU that is itself in the spin
/// loop toggles its `dy_eligible` (so such a vCPU qualifies every other time).
pub fn check_candidate(
    spec: &KvmSpec,
    c: &mut Candidate,
    yield_to_kernel_mode: bool,
) -> Result<(), Skip> {
    let waiting = if spec.version >= KvmVersion::V5_3 {
        c.ready
    } else {
        c.preempted
    };
    // Fix (a): a vCPU holding the spinner's IPI is what the spinner waits for, preempted
    // or not (on 4.15 a vCPU woken from halt by that IPI is not `preempted` until it has
    // run), so it is a candidate.
    let awaited = spec.features.boost_user_mode_candidates && c.ipi_from_spinner;
    if !(waiting || awaited) {
        return Err(Skip::NotWaiting);
    }
    if c.is_spinner {
        return Err(Skip::Spinner);
    }
    if c.halted {
        return Err(Skip::Halted);
    }
    // 5.3+ filters user mode only for preempted vCPUs (a `ready` vCPU woken from halt
    // has no preempted-in-kernel state to read); on 4.15 every candidate here was
    // preempted, or is one (a) lets in.
    let filtered = spec.version < KvmVersion::V5_3 || c.preempted;
    if yield_to_kernel_mode && !c.in_kernel && filtered {
        let irq_exception = spec.version >= KvmVersion::V5_3 && c.pending_interrupt;
        if !(irq_exception || spec.features.boost_user_mode_candidates) {
            return Err(Skip::UserMode);
        }
    }
    if c.in_spin_loop {
        let eligible = c.dy_eligible;
        c.dy_eligible = !c.dy_eligible;
        if !eligible {
            return Err(Skip::NotDyEligible);
        }
    }
    Ok(())
}

/// One event's cost (a PLE exit, a wake-up from a real block), ns. A constant draws
/// nothing, so a scenario that gives constants keeps its exact trajectory; a distribution
/// (a host profile's measured latencies, issue 27 part 1) draws from `rng`, the event's
/// own stream, and is truncated at zero.
#[inline]
pub fn draw_cost(cost: &Dist, rng: &mut Rng) -> SimDuration {
    SimDuration(cost.sample(rng).round().max(0.0) as u64)
}

/// The next PLE window after an exit (`__grow_ple_window`).
pub fn grow_window(spec: &KvmSpec, cur: u64) -> u64 {
    let g = spec.ple_window_grow;
    if g <= 1 {
        return if g == 0 { spec.ple_window } else { cur };
    }
    let v = if g < spec.ple_window {
        cur.saturating_mul(g)
    } else {
        cur.saturating_add(g)
    };
    v.min(spec.ple_window_max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preempted_kernel() -> Candidate {
        Candidate {
            preempted: true,
            ready: true,
            in_kernel: true,
            ..Default::default()
        }
    }

    #[test]
    fn candidates_are_visited_after_the_last_boosted_vcpu() {
        assert_eq!(ring_order(4, 1).collect::<Vec<_>>(), vec![2, 3, 0, 1]);
        assert_eq!(ring_order(4, 3).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
        assert_eq!(ring_order(1, 0).collect::<Vec<_>>(), vec![0]);
    }

    /// 4 vCPUs, the last boost was vCPU 0, and this walk (1, 2, 3, 0) boosts vCPU 3, two
    /// steps in. Fixed: 3 is stored and the next walk is 0, 1, 2, 3. The 2024 bug stores the
    /// offset 2, so the next walk is 3, 0, 1, 2: vCPU 3 is examined first again.
    #[test]
    fn the_2024_bug_stores_the_walk_offset_and_so_changes_the_next_walk() {
        let walk: Vec<u32> = ring_order(4, 0).collect();
        assert_eq!(walk, [1, 2, 3, 0]);
        let offset = walk.iter().position(|&v| v == 3).unwrap() as u32;
        let fixed = LastBoostedRule::Fixed.stored(3, offset);
        let bug = LastBoostedRule::Bug2024.stored(3, offset);
        assert_eq!((fixed, bug), (3, 2));
        assert_eq!(ring_order(4, fixed).collect::<Vec<_>>(), [0, 1, 2, 3]);
        assert_eq!(ring_order(4, bug).collect::<Vec<_>>(), [3, 0, 1, 2]);
    }

    #[test]
    fn upstream_skips_user_mode_vcpus_and_fix_a_includes_them() {
        let v415 = KvmSpec {
            version: KvmVersion::V4_15,
            ..Default::default()
        };
        let mut user = Candidate {
            in_kernel: false,
            ..preempted_kernel()
        };
        assert_eq!(check_candidate(&v415, &mut user, true), Err(Skip::UserMode));
        // 4.15 has no pending-interrupt exception; 5.3+ has.
        let mut user_irq = Candidate {
            pending_interrupt: true,
            ..user
        };
        assert_eq!(
            check_candidate(&v415, &mut user_irq, true),
            Err(Skip::UserMode)
        );
        assert_eq!(
            check_candidate(&KvmSpec::default(), &mut user_irq, true),
            Ok(())
        );
        // AMD user-mode spins: yield_to_kernel_mode is false, no filter.
        assert_eq!(check_candidate(&v415, &mut user, false), Ok(()));
        let mut fixed = v415.clone();
        fixed.features.boost_user_mode_candidates = true;
        assert_eq!(check_candidate(&fixed, &mut user, true), Ok(()));
    }

    /// (a): a vCPU woken from halt by the spinner's IPI and not yet run is not
    /// `preempted` on 4.15, so upstream passes it over; with (a) it is a candidate. An
    /// interrupt from someone else does not count.
    #[test]
    fn fix_a_boosts_the_woken_target_of_the_spinners_ipi() {
        let v415 = KvmSpec {
            version: KvmVersion::V4_15,
            ..Default::default()
        };
        let woken = Candidate {
            preempted: false,
            ready: true,
            pending_interrupt: true,
            ipi_from_spinner: true,
            ..Default::default()
        };
        assert_eq!(
            check_candidate(&v415, &mut { woken }, true),
            Err(Skip::NotWaiting)
        );
        let mut fixed = v415.clone();
        fixed.features.boost_user_mode_candidates = true;
        assert_eq!(check_candidate(&fixed, &mut { woken }, true), Ok(()));
        let others = Candidate {
            ipi_from_spinner: false,
            ..woken
        };
        assert_eq!(
            check_candidate(&fixed, &mut { others }, true),
            Err(Skip::NotWaiting)
        );
        // 5.3+ already counts a woken vCPU as `ready`, with its pending interrupt.
        assert_eq!(
            check_candidate(&KvmSpec::default(), &mut { woken }, true),
            Ok(())
        );
    }

    /// 5.3+: a vCPU woken from halt (ready, not preempted) is not filtered for user mode;
    /// a preempted one in user mode without a pending interrupt is.
    #[test]
    fn user_mode_filter_applies_to_preempted_vcpus_only_from_5_3() {
        let v53 = KvmSpec::default();
        let woken = Candidate {
            ready: true,
            preempted: false,
            in_kernel: false,
            ..Default::default()
        };
        assert_eq!(check_candidate(&v53, &mut { woken }, true), Ok(()));
        let preempted_user = Candidate {
            preempted: true,
            ..woken
        };
        assert_eq!(
            check_candidate(&v53, &mut { preempted_user }, true),
            Err(Skip::UserMode)
        );
    }

    #[test]
    fn other_skips_in_upstream_order() {
        let spec = KvmSpec {
            version: KvmVersion::V4_15,
            ..Default::default()
        };
        let mut running = Candidate {
            preempted: false,
            ..preempted_kernel()
        };
        assert_eq!(
            check_candidate(&spec, &mut running, true),
            Err(Skip::NotWaiting)
        );
        let mut me = Candidate {
            is_spinner: true,
            ..preempted_kernel()
        };
        assert_eq!(check_candidate(&spec, &mut me, true), Err(Skip::Spinner));
        let mut halted = Candidate {
            halted: true,
            ..preempted_kernel()
        };
        assert_eq!(check_candidate(&spec, &mut halted, true), Err(Skip::Halted));
        // 4.15 looks at `preempted`, 5.3+ at `ready` (set also for a woken vCPU).
        let woken = Candidate {
            preempted: false,
            ready: true,
            ..preempted_kernel()
        };
        assert_eq!(
            check_candidate(&spec, &mut { woken }, true),
            Err(Skip::NotWaiting)
        );
        assert_eq!(
            check_candidate(&KvmSpec::default(), &mut { woken }, true),
            Ok(())
        );
    }

    #[test]
    fn a_vcpu_in_its_own_spin_loop_is_eligible_every_other_time() {
        let spec = KvmSpec::default();
        let mut lock_waiter = Candidate {
            in_spin_loop: true,
            dy_eligible: false,
            ..preempted_kernel()
        };
        assert_eq!(
            check_candidate(&spec, &mut lock_waiter, true),
            Err(Skip::NotDyEligible)
        );
        assert_eq!(check_candidate(&spec, &mut lock_waiter, true), Ok(()));
        assert_eq!(
            check_candidate(&spec, &mut lock_waiter, true),
            Err(Skip::NotDyEligible)
        );
    }

    /// kvm_vcpu_halt's rule, x86 defaults: a wake inside the window leaves it; a block
    /// past the window but under the ceiling grows it (from 0 to grow_start, then
    /// doubling); a block past the ceiling resets it (shrink 0); a ceiling of 0 zeroes it.
    #[test]
    fn host_halt_poll_window_follows_kvm_vcpu_halt() {
        let hp = HaltPoll::default();
        assert_eq!(adjust_halt_poll(&hp, 0, 5_000), 10_000);
        assert_eq!(adjust_halt_poll(&hp, 10_000, 8_000), 10_000);
        assert_eq!(adjust_halt_poll(&hp, 10_000, 15_000), 20_000);
        assert_eq!(adjust_halt_poll(&hp, 160_000, 190_000), 320_000);
        assert_eq!(adjust_halt_poll(&hp, 80_000, 300_000), 0);
        // At the ceiling with a long block: shrink; exactly at it: neither.
        assert_eq!(adjust_halt_poll(&hp, 200_000, 200_000), 200_000);
        assert_eq!(adjust_halt_poll(&hp, 0, 300_000), 0);
        let off = HaltPoll {
            max_ns: 0,
            ..HaltPoll::default()
        };
        assert_eq!(adjust_halt_poll(&off, 40_000, 1_000), 0);
        let halving = HaltPoll {
            shrink: 2,
            ..HaltPoll::default()
        };
        assert_eq!(adjust_halt_poll(&halving, 160_000, 300_000), 80_000);
        // Below grow_start after the division: 0.
        assert_eq!(adjust_halt_poll(&halving, 15_000, 300_000), 0);
        let no_grow = HaltPoll {
            grow: 0,
            ..HaltPoll::default()
        };
        assert_eq!(adjust_halt_poll(&no_grow, 0, 5_000), 0);
    }

    /// haltpoll.c's select and adjust_poll_limit at the defaults (200 us, grow 2, start
    /// 50 us, shrink 2).
    #[test]
    fn guest_haltpoll_governor_rules() {
        let g = GuestHaltPoll::default();
        assert!(!guest_should_poll(0, GuestIdle::Halted));
        assert!(guest_should_poll(50_000, GuestIdle::Halted));
        assert!(guest_should_poll(50_000, GuestIdle::PollWoken));
        assert!(!guest_should_poll(50_000, GuestIdle::PollTimedOut));
        assert_eq!(guest_adjust_limit(&g, 0, 30_000), 50_000);
        assert_eq!(guest_adjust_limit(&g, 50_000, 80_000), 100_000);
        assert_eq!(guest_adjust_limit(&g, 150_000, 190_000), 200_000);
        assert_eq!(guest_adjust_limit(&g, 100_000, 90_000), 100_000);
        assert_eq!(guest_adjust_limit(&g, 100_000, 250_000), 50_000);
        let keep = GuestHaltPoll {
            allow_shrink: false,
            ..g.clone()
        };
        assert_eq!(guest_adjust_limit(&keep, 100_000, 250_000), 100_000);
    }

    #[test]
    fn ple_window_grows_to_max_and_fixed_mode_stays() {
        let spec = KvmSpec {
            ple_window_max: 20_000,
            ..Default::default()
        };
        let mut w = spec.ple_window;
        let seq: Vec<u64> = (0..4)
            .map(|_| {
                w = grow_window(&spec, w);
                w
            })
            .collect();
        assert_eq!(seq, vec![8192, 16384, 20_000, 20_000]);
        let fixed = KvmSpec {
            ple_window: 32768,
            ple_window_grow: 1,
            ..Default::default()
        };
        assert_eq!(grow_window(&fixed, 32768), 32768);
    }

    /// The series' tiers on hand-built vCPUs (Intel: yield to kernel mode): a confirmed
    /// IPI receiver passes even woken (not preempted) and in user mode; a pending
    /// interrupt passes; a preempted vCPU passes in kernel mode only; a woken vCPU with
    /// nothing pending, which upstream takes, is skipped. The relaxed walk takes any
    /// preempted vCPU and nothing else.
    #[test]
    fn ipi_aware_tiers_rank_receiver_then_pending_interrupt_then_preempted_in_kernel() {
        let woken_user = Candidate {
            ready: true,
            ..Default::default()
        };
        let tier = |c: Candidate, first: bool| check_candidate_ipi_aware(&mut { c }, true, first);
        let receiver = Candidate {
            ipi_receiver: true,
            pending_interrupt: true,
            ..woken_user
        };
        assert_eq!(tier(receiver, true), Ok(Tier::IpiReceiver));
        let pending = Candidate {
            pending_interrupt: true,
            ..woken_user
        };
        assert_eq!(tier(pending, true), Ok(Tier::PendingInterrupt));
        assert_eq!(tier(preempted_kernel(), true), Ok(Tier::Preempted));
        let preempted_user = Candidate {
            in_kernel: false,
            ..preempted_kernel()
        };
        assert_eq!(tier(preempted_user, true), Err(Skip::UserMode));
        assert_eq!(tier(woken_user, true), Err(Skip::NotPreempted));
        assert_eq!(
            check_candidate(&KvmSpec::default(), &mut { woken_user }, true),
            Ok(()),
            "upstream takes a woken vCPU"
        );
        // Second walk: preempted only, mode and interrupts aside.
        assert_eq!(tier(preempted_user, false), Ok(Tier::Relaxed));
        assert_eq!(tier(receiver, false), Err(Skip::NotPreempted));
        // The checks before the tiers still apply.
        let halted = Candidate {
            halted: true,
            ..receiver
        };
        assert_eq!(tier(halted, true), Err(Skip::Halted));
        let me = Candidate {
            is_spinner: true,
            ..receiver
        };
        assert_eq!(tier(me, true), Err(Skip::Spinner));
        let running = Candidate {
            ready: false,
            ..receiver
        };
        assert_eq!(tier(running, true), Err(Skip::NotWaiting));
        // And the directed-yield eligibility after them.
        let mut spinning = Candidate {
            in_spin_loop: true,
            dy_eligible: false,
            ..receiver
        };
        assert_eq!(
            check_candidate_ipi_aware(&mut spinning, true, true),
            Err(Skip::NotDyEligible)
        );
        assert_eq!(
            check_candidate_ipi_aware(&mut spinning, true, true),
            Ok(Tier::IpiReceiver)
        );
    }

    /// Sender 0 -> receiver 1: a receiver for 50 ms, no longer after; the EOI of 1 clears
    /// it, an EOI of another vCPU does not, and the receiver's own IPI as a sender (1 -> 2)
    /// survives its EOI of 0's (v3's matching-vector clear).
    #[test]
    fn ipi_tracking_window_and_clear_on_eoi() {
        let w = SimDuration::from_ms(50);
        let ms = 1_000_000u64;
        let mut ctx = vec![IpiContext::default(); 3];
        track_ipi(&mut ctx, 0, 1, 10 * ms);
        assert!(is_ipi_receiver(&ctx, 0, 1, 60 * ms, w));
        assert!(!is_ipi_receiver(&ctx, 0, 1, 60 * ms + 1, w));
        assert!(!is_ipi_receiver(&ctx, 0, 2, 20 * ms, w));
        assert!(!is_ipi_receiver(&ctx, 1, 0, 20 * ms, w));
        track_ipi(&mut ctx, 1, 2, 11 * ms);
        assert!(
            !ipi_eoi(&mut ctx, 0, 2, 12 * ms, w),
            "vCPU 2 did not get 0's IPI"
        );
        assert!(is_ipi_receiver(&ctx, 0, 1, 12 * ms, w));
        assert!(ipi_eoi(&mut ctx, 0, 1, 12 * ms, w));
        assert!(!is_ipi_receiver(&ctx, 0, 1, 12 * ms, w));
        assert_eq!(ctx[1].last_sender, None);
        assert!(is_ipi_receiver(&ctx, 1, 2, 12 * ms, w));
        // An EOI after the window leaves the (stale, unused) flag: the patch's rule.
        track_ipi(&mut ctx, 0, 1, 100 * ms);
        assert!(!ipi_eoi(&mut ctx, 0, 1, 151 * ms, w));
        assert!(ctx[0].pending);
        // A self-IPI is not tracked.
        let before = ctx.clone();
        track_ipi(&mut ctx, 2, 2, 200 * ms);
        assert_eq!(ctx, before);
    }

    #[test]
    fn ipi_aware_keys_validate() {
        let parse = |text: &str| {
            let v = crate::reader::parse_toml("k.toml", text).unwrap();
            let t = Table::root("k.toml", &v).unwrap();
            parse_kvm(&t).map_err(|e| e.to_string())
        };
        let k = parse("ipi_aware_yield = true\nipi_window = \"20ms\"").unwrap();
        assert_eq!(
            k.ipi_aware,
            Some(IpiAwareYield {
                window: SimDuration::from_ms(20),
                relaxed_boost: true
            })
        );
        assert_eq!(parse("").unwrap().ipi_aware, None);
        assert_eq!(parse("ipi_aware_yield = false").unwrap().ipi_aware, None);
        let e = parse("relaxed_boost = false").unwrap_err();
        assert!(
            e.contains("relaxed_boost") && e.contains("ipi_aware_yield = true"),
            "{e}"
        );
        let e = parse("version = \"4.15\"\nipi_aware_yield = true").unwrap_err();
        assert!(e.contains("ipi_aware_yield") && e.contains("4.15"), "{e}");
        let e = parse("ipi_aware_yield = true\n[features]\nboost_user_mode_candidates = true")
            .unwrap_err();
        assert!(e.contains("boost_user_mode_candidates"), "{e}");
        let e = parse("ipi_aware_yield = 1").unwrap_err();
        assert!(e.contains("ipi_aware_yield"), "{e}");
    }

    #[test]
    fn user_space_ple_handler_keys_validate() {
        let parse = |text: &str| {
            let v = crate::reader::parse_toml("k.toml", text).unwrap();
            let t = Table::root("k.toml", &v).unwrap();
            parse_kvm(&t).map_err(|e| e.to_string())
        };
        assert_eq!(parse("").unwrap().handler, PleHandler::Kvm);
        assert_eq!(
            parse("ple_handler = \"yield\"").unwrap().handler,
            PleHandler::Yield
        );
        assert_eq!(
            parse("ple_handler = \"nice-boost\"").unwrap().handler,
            PleHandler::NiceBoost {
                boost: DEFAULT_PLE_BOOST,
                nice: -20
            }
        );
        assert_eq!(
            parse("ple_handler = \"nice-boost\"\nple_boost = \"2ms\"\nple_boost_nice = -5")
                .unwrap()
                .handler,
            PleHandler::NiceBoost {
                boost: SimDuration::from_ms(2),
                nice: -5
            }
        );
        assert_eq!(
            parse("ple_handler = \"migrate\"\nple_boost = \"3ms\"")
                .unwrap()
                .handler,
            PleHandler::Migrate {
                boost: SimDuration::from_ms(3)
            }
        );
        for (text, key, says) in [
            (
                "ple_handler = \"sometimes\"",
                "ple_handler",
                "\"nice-boost\"",
            ),
            ("ple_boost = \"1ms\"", "ple_boost", "needs one of them"),
            (
                "ple_handler = \"migrate\"\nple_boost_nice = -20",
                "ple_boost_nice",
                "needs that handler",
            ),
            (
                "ple_handler = \"yield\"\nple_boost_nice = 3",
                "ple_boost_nice",
                "needs that handler",
            ),
            (
                "ple_handler = \"nice-boost\"\nple_boost_nice = -2.5",
                "ple_boost_nice",
                "whole",
            ),
            (
                "ple_handler = \"nice-boost\"\nple_boost_nice = -21",
                "ple_boost_nice",
                "-20",
            ),
            (
                "ple_handler = \"nice-boost\"\nple_boost = \"0ns\"",
                "ple_boost",
                "longer than 0",
            ),
            (
                "ple_handler = \"yield\"\n[features]\nboost_ignores_vcpu_fairness = true",
                "ple_handler",
                "[kvm.features]",
            ),
            (
                "ple_handler = \"none\"\nipi_aware_yield = true",
                "ple_handler",
                "ipi_aware_yield",
            ),
            (
                "ple_handler = \"none\"\nlast_boosted_rule = \"2024-bug\"",
                "k.toml: last_boosted_rule:",
                "\"fixed\"",
            ),
            (
                "ple_handler = \"yield\"\nple = false",
                "ple_handler",
                "ple = true",
            ),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(key) && e.contains(says), "{text}: {e}");
        }
        assert_eq!(parse("").unwrap().world_switch_cost, Dist::Fixed(0.0));
        assert_eq!(
            parse("world_switch_cost = \"60us\"")
                .unwrap()
                .world_switch_cost,
            Dist::Fixed(60_000.0)
        );
    }
}
