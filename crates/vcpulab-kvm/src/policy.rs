//! Host scheduling policies of single threads (by tid): affinity, nice, scheduling class,
//! RT priority, EEVDF custom slice, SCHED_DEADLINE, all through `sched_setattr`, and their
//! restoration. Every change is recorded in a [`Saved`] state first, so it can be undone.

use crate::config::{SchedClass, ThreadPolicy};
use crate::error::{Error, Result};

/// `struct sched_attr` (include/uapi/linux/sched/types.h), 56 bytes (SCHED_ATTR_SIZE_VER1).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedAttr {
    pub size: u32,
    pub sched_policy: u32,
    pub sched_flags: u64,
    pub sched_nice: i32,
    pub sched_priority: u32,
    pub sched_runtime: u64,
    pub sched_deadline: u64,
    pub sched_period: u64,
    pub sched_util_min: u32,
    pub sched_util_max: u32,
}

pub const SCHED_OTHER: u32 = 0;
pub const SCHED_FIFO: u32 = 1;
pub const SCHED_RR: u32 = 2;
pub const SCHED_BATCH: u32 = 3;
pub const SCHED_IDLE: u32 = 5;
pub const SCHED_DEADLINE: u32 = 6;
/// SCHED_FLAG_RESET_ON_FORK: children don't inherit RT/DEADLINE.
pub const SCHED_FLAG_RESET_ON_FORK: u64 = 0x01;

pub fn gettid() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

pub fn get_attr(tid: i32) -> Result<SchedAttr> {
    let mut a = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        ..Default::default()
    };
    // SAFETY: `a` is a valid, writable sched_attr of the size we pass; the kernel writes at
    // most `size` bytes into it.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid,
            &mut a as *mut SchedAttr,
            a.size,
            0u32,
        )
    };
    if r != 0 {
        return Err(Error::Policy(format!("sched_getattr(tid {tid})"), errno()));
    }
    Ok(a)
}

pub fn set_attr(tid: i32, a: &SchedAttr) -> Result<()> {
    let mut a = *a;
    a.size = std::mem::size_of::<SchedAttr>() as u32;
    // SAFETY: `a` is a valid sched_attr that lives across the call; the kernel only reads it.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &a as *const SchedAttr, 0u32) };
    if r != 0 {
        return Err(Error::Policy(
            format!(
                "sched_setattr(tid {tid}, policy {}, nice {}, prio {}, runtime {})",
                a.sched_policy, a.sched_nice, a.sched_priority, a.sched_runtime
            ),
            errno(),
        ));
    }
    Ok(())
}

pub fn get_affinity(tid: i32) -> Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; all-zero is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t of the size passed.
    let r =
        unsafe { libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return Err(Error::Policy(
            format!("sched_getaffinity(tid {tid})"),
            errno(),
        ));
    }
    // SAFETY: CPU_ISSET only reads `set`, and i < CPU_SETSIZE.
    Ok((0..libc::CPU_SETSIZE as usize)
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .collect())
}

pub fn set_affinity(tid: i32, cpus: &[usize]) -> Result<()> {
    // SAFETY: cpu_set_t is plain data; all-zero is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        if c >= libc::CPU_SETSIZE as usize {
            return Err(Error::Config(format!("cpu {c} is beyond CPU_SETSIZE")));
        }
        // SAFETY: c < CPU_SETSIZE, `set` is a valid cpu_set_t.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed; the kernel only reads it.
    let r = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r != 0 {
        return Err(Error::Policy(
            format!("sched_setaffinity(tid {tid}, {cpus:?})"),
            errno(),
        ));
    }
    Ok(())
}

/// The CPU the calling thread runs on now.
pub fn current_cpu() -> usize {
    // SAFETY: sched_getcpu has no arguments.
    let c = unsafe { libc::sched_getcpu() };
    c.max(0) as usize
}

pub fn sched_yield() {
    // SAFETY: sched_yield has no arguments and cannot fail on Linux.
    unsafe { libc::sched_yield() };
}

/// What a thread had before we changed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Saved {
    pub tid: i32,
    pub attr: SchedAttr,
    pub affinity: Vec<usize>,
}

impl Saved {
    pub fn capture(tid: i32) -> Result<Saved> {
        Ok(Saved {
            tid,
            attr: get_attr(tid)?,
            affinity: get_affinity(tid)?,
        })
    }

    /// Puts the thread back. For a fair-class thread the slice is reset to the default
    /// (sched_runtime 0): the kernel reports the effective slice, which cannot be told
    /// apart from a custom one, and threads start with the default.
    pub fn restore(&self) -> Result<()> {
        let mut a = self.attr;
        if a.sched_policy == SCHED_OTHER
            || a.sched_policy == SCHED_BATCH
            || a.sched_policy == SCHED_IDLE
        {
            a.sched_runtime = 0;
            a.sched_deadline = 0;
            a.sched_period = 0;
        }
        let r1 = set_attr(self.tid, &a);
        let r2 = set_affinity(self.tid, &self.affinity);
        r1.and(r2)
    }
}

/// The sched_attr that `p` asks for, starting from the current one.
pub fn attr_for(p: &ThreadPolicy, cur: &SchedAttr) -> Result<Option<SchedAttr>> {
    if p.nice.is_none()
        && p.sched.is_none()
        && p.priority.is_none()
        && p.slice_ns.is_none()
        && p.dl_runtime_ns.is_none()
    {
        return Ok(None);
    }
    let mut a = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        ..Default::default()
    };
    let class = p.sched.unwrap_or(match cur.sched_policy {
        SCHED_FIFO => SchedClass::Fifo,
        SCHED_RR => SchedClass::Rr,
        SCHED_BATCH => SchedClass::Batch,
        SCHED_IDLE => SchedClass::Idle,
        SCHED_DEADLINE => SchedClass::Deadline,
        _ => SchedClass::Other,
    });
    a.sched_flags = SCHED_FLAG_RESET_ON_FORK;
    match class {
        SchedClass::Other | SchedClass::Batch | SchedClass::Idle => {
            a.sched_policy = match class {
                SchedClass::Other => SCHED_OTHER,
                SchedClass::Batch => SCHED_BATCH,
                _ => SCHED_IDLE,
            };
            a.sched_nice = p.nice.unwrap_or(cur.sched_nice);
            if !(-20..=19).contains(&a.sched_nice) {
                return Err(Error::Config(format!(
                    "nice {} is outside -20..19",
                    a.sched_nice
                )));
            }
            a.sched_runtime = p.slice_ns.unwrap_or(0);
            if p.priority.is_some() {
                return Err(Error::Config("priority applies to fifo/rr only".into()));
            }
        }
        SchedClass::Fifo | SchedClass::Rr => {
            a.sched_policy = if class == SchedClass::Fifo {
                SCHED_FIFO
            } else {
                SCHED_RR
            };
            a.sched_priority = p.priority.unwrap_or(1);
            if !(1..=99).contains(&a.sched_priority) {
                return Err(Error::Config(format!(
                    "priority {} is outside 1..99",
                    a.sched_priority
                )));
            }
            if p.nice.is_some() || p.slice_ns.is_some() {
                return Err(Error::Config(
                    "nice and slice apply to other/batch/idle only".into(),
                ));
            }
        }
        SchedClass::Deadline => {
            a.sched_policy = SCHED_DEADLINE;
            let rt = p
                .dl_runtime_ns
                .ok_or_else(|| Error::Config("deadline needs dl_runtime".into()))?;
            a.sched_runtime = rt;
            a.sched_deadline = p.dl_deadline_ns.or(p.dl_period_ns).unwrap_or(rt * 10);
            a.sched_period = p.dl_period_ns.unwrap_or(a.sched_deadline);
        }
    }
    Ok(Some(a))
}

/// Applies `p` (except its cgroup) to thread `tid`; returns what to restore.
pub fn apply(tid: i32, p: &ThreadPolicy) -> Result<Saved> {
    let saved = Saved::capture(tid)?;
    let result = (|| {
        if let Some(cpus) = &p.affinity {
            set_affinity(tid, cpus)?;
        }
        if let Some(a) = attr_for(p, &saved.attr)? {
            set_attr(tid, &a)?;
        }
        Ok(())
    })();
    match result {
        Ok(()) => Ok(saved),
        Err(e) => {
            let _ = saved.restore();
            Err(e)
        }
    }
}

/// Applies a policy to the calling thread and restores it on drop.
pub struct ThreadGuard {
    pub saved: Saved,
}

impl ThreadGuard {
    pub fn apply_current(p: &ThreadPolicy) -> Result<ThreadGuard> {
        Ok(ThreadGuard {
            saved: apply(gettid(), p)?,
        })
    }
}

impl Drop for ThreadGuard {
    fn drop(&mut self) {
        let _ = self.saved.restore();
    }
}

/// Host CPUs: a taskset-style list "0-3,6".
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || Error::Config(format!("bad cpu-list {s:?}"));
        if let Some((a, b)) = part.split_once('-') {
            let (a, b): (usize, usize) = (
                a.trim().parse().map_err(|_| bad())?,
                b.trim().parse().map_err(|_| bad())?,
            );
            if a > b {
                return Err(bad());
            }
            out.extend(a..=b);
        } else {
            out.push(part.parse().map_err(|_| bad())?);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::spawn(f).join().unwrap()
    }

    #[test]
    fn attr_is_56_bytes() {
        assert_eq!(std::mem::size_of::<SchedAttr>(), 56);
    }

    #[test]
    fn attr_for_builds_the_requested_class() {
        let cur = SchedAttr::default();
        assert_eq!(attr_for(&ThreadPolicy::default(), &cur).unwrap(), None);
        let a = attr_for(
            &ThreadPolicy {
                nice: Some(19),
                ..Default::default()
            },
            &cur,
        )
        .unwrap()
        .unwrap();
        assert_eq!((a.sched_policy, a.sched_nice), (SCHED_OTHER, 19));
        let a = attr_for(
            &ThreadPolicy {
                sched: Some(SchedClass::Fifo),
                priority: Some(10),
                ..Default::default()
            },
            &cur,
        )
        .unwrap()
        .unwrap();
        assert_eq!((a.sched_policy, a.sched_priority), (SCHED_FIFO, 10));
        let a = attr_for(
            &ThreadPolicy {
                slice_ns: Some(3_000_000),
                ..Default::default()
            },
            &cur,
        )
        .unwrap()
        .unwrap();
        assert_eq!((a.sched_policy, a.sched_runtime), (SCHED_OTHER, 3_000_000));
        let a = attr_for(
            &ThreadPolicy {
                sched: Some(SchedClass::Deadline),
                dl_runtime_ns: Some(1_000_000),
                dl_period_ns: Some(10_000_000),
                ..Default::default()
            },
            &cur,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (
                a.sched_policy,
                a.sched_runtime,
                a.sched_deadline,
                a.sched_period
            ),
            (SCHED_DEADLINE, 1_000_000, 10_000_000, 10_000_000)
        );
        assert!(attr_for(
            &ThreadPolicy {
                nice: Some(25),
                ..Default::default()
            },
            &cur
        )
        .is_err());
        assert!(attr_for(
            &ThreadPolicy {
                sched: Some(SchedClass::Fifo),
                nice: Some(1),
                ..Default::default()
            },
            &cur
        )
        .is_err());
        assert!(attr_for(
            &ThreadPolicy {
                sched: Some(SchedClass::Deadline),
                ..Default::default()
            },
            &cur
        )
        .is_err());
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-2,5").unwrap(), vec![0, 1, 2, 5]);
        assert_eq!(parse_cpu_list("1").unwrap(), vec![1]);
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
    }

    /// Nice and affinity are applied and then restored exactly (in a fresh thread, so
    /// the test process is untouched). Raising nice needs no privilege.
    #[test]
    fn guard_restores_nice_and_affinity() {
        in_thread(|| {
            let tid = gettid();
            let before = Saved::capture(tid).unwrap();
            let cpu0 = before.affinity[0];
            {
                let _g = ThreadGuard::apply_current(&ThreadPolicy {
                    nice: Some(7),
                    affinity: Some(vec![cpu0]),
                    ..Default::default()
                })
                .unwrap();
                let now = Saved::capture(tid).unwrap();
                assert_eq!(now.attr.sched_nice, 7);
                assert_eq!(now.affinity, vec![cpu0]);
            }
            let after = Saved::capture(tid).unwrap();
            assert_eq!(after.attr.sched_nice, before.attr.sched_nice);
            assert_eq!(after.attr.sched_policy, before.attr.sched_policy);
            assert_eq!(after.affinity, before.affinity);
        });
    }

    /// A failing policy leaves the thread as it was (the partial change is rolled back).
    #[test]
    fn failed_apply_rolls_back() {
        in_thread(|| {
            let tid = gettid();
            let before = Saved::capture(tid).unwrap();
            let cpu0 = before.affinity[0];
            // affinity succeeds, then an invalid nice fails
            let r = apply(
                tid,
                &ThreadPolicy {
                    affinity: Some(vec![cpu0]),
                    nice: Some(99),
                    ..Default::default()
                },
            );
            assert!(r.is_err());
            assert_eq!(Saved::capture(tid).unwrap().affinity, before.affinity);
        });
    }

    /// Root only: SCHED_FIFO and a custom slice are restored to the default class/slice.
    #[test]
    fn guard_restores_rt_and_slice_when_privileged() {
        in_thread(|| {
            let tid = gettid();
            let before = Saved::capture(tid).unwrap();
            match ThreadGuard::apply_current(&ThreadPolicy {
                sched: Some(SchedClass::Fifo),
                priority: Some(3),
                ..Default::default()
            }) {
                Err(Error::Policy(_, e)) if e == libc::EPERM => {
                    eprintln!("skipped: SCHED_FIFO needs privilege");
                    return;
                }
                Err(e) => panic!("{e}"),
                Ok(g) => {
                    assert_eq!(get_attr(tid).unwrap().sched_policy, SCHED_FIFO);
                    drop(g);
                }
            }
            let after = get_attr(tid).unwrap();
            assert_eq!(after.sched_policy, before.attr.sched_policy);
            assert_eq!(after.sched_priority, 0);
            {
                let _g = ThreadGuard::apply_current(&ThreadPolicy {
                    slice_ns: Some(7_000_000),
                    ..Default::default()
                })
                .unwrap();
                assert_eq!(get_attr(tid).unwrap().sched_runtime, 7_000_000);
            }
            assert_eq!(
                get_attr(tid).unwrap().sched_runtime,
                before.attr.sched_runtime
            );
        });
    }
}
