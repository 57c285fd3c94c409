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
//! ## The papers' fixes (seed 000, 004), all off by default (upstream behaviour)
//! See `KvmFeatures`.

use crate::reader::{Res, Table};
use crate::time::SimDuration;

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

#[derive(Clone, Debug, PartialEq)]
pub struct KvmSpec {
    pub vendor: Vendor,
    pub version: KvmVersion,
    pub ple: bool,
    /// Cycles (at the host's base clock, the TSC rate).
    pub ple_window: u64,
    pub ple_window_grow: u64,
    pub ple_window_max: u64,
    /// CPU time a PLE exit costs (VM exit, handler, VM entry).
    pub ple_exit_cost: SimDuration,
    pub features: KvmFeatures,
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
            ple_exit_cost: SimDuration::from_us(1),
            features: KvmFeatures::default(),
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
    if let Some(c) = t.opt_duration("ple_exit_cost")? {
        k.ple_exit_cost = c;
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
    t.finish(KVM_KEYS)?;
    Ok(k)
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
}

/// Why `kvm_vcpu_on_spin` passed over a vCPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    NotWaiting,
    Spinner,
    Halted,
    UserMode,
    NotDyEligible,
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
}
