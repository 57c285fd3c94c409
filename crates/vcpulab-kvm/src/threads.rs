//! Thread mode: the guest programs as plain host threads (no /dev/kvm, or `mode =
//! "threads"`). The same shared-memory layout, parameters, start barrier, stop flag, PLE
//! window and exits (as direct calls of the harness's exit handler), so results are
//! comparable; only VM exits, KVM stats and steal time are missing.

use crate::guest::*;
use crate::harness::{delay_loop, rdtsc, Ctx, Next, VcpuRunner};
use std::hint::spin_loop;
use std::sync::atomic::Ordering::*;

pub struct HostThread;

impl VcpuRunner for HostThread {
    fn run(&mut self, ctx: &Ctx, v: usize) -> Result<(), String> {
        let m = &ctx.mem;
        let prog = ctx.cfg.vcpus[v].program;
        let slot = slot_addr(v);
        let grp = group_addr(ctx.cfg.vcpus[v].group);
        let p = |off: i32| m.get(slot + off as u64);
        let (cs, ncs, window) = (p(P_CS), p(P_NCS), p(P_PLE));
        let stop = m.word(GLOBAL + G_STOP as u64);
        let stopped = || stop.load(Relaxed) != 0;
        // After each op: publish the count (the monitor reads it at the warm-up's end, like
        // the guest programs' `stop_or`), then the stop check.
        let published = m.word(slot + R_OPS as u64);
        let op_done = |ops: u64| {
            published.store(ops, Relaxed); // a plain store, as the guest's `mov`
            stopped()
        };
        let (mut ops, mut spins, mut ple) = (0u64, 0u64, 0u64);
        let mut sample_ptr = samples_addr(v);
        let samples_end = p(P_SAMPLES_END);

        // a spin iteration: count it, stop check, PLE exit after `window` spins of one wait
        let mut cur;
        let spin = |cur: &mut u64, spins: &mut u64, ple: &mut u64| -> Result<bool, String> {
            spin_loop();
            *spins += 1;
            if stopped() {
                return Ok(false);
            }
            *cur += 1;
            if *cur >= window {
                *cur = 0;
                *ple += 1;
                ctx.on_exit(v, PORT_PLE)?;
            }
            Ok(true)
        };

        // start barrier
        m.word(GLOBAL + G_ARRIVED as u64).fetch_add(1, SeqCst);
        let ntotal = m.get(GLOBAL + G_NTOTAL as u64);
        let mut started = true;
        while m.get(GLOBAL + G_ARRIVED as u64) != ntotal {
            spin_loop();
            if stopped() {
                started = false;
                break;
            }
        }
        m.set(slot + R_TSTART as u64, rdtsc());
        if started {
            match prog {
                Program::Compute => loop {
                    delay_loop(ncs);
                    ops += 1;
                    if op_done(ops) {
                        break;
                    }
                },
                Program::Tas => {
                    let w = m.word(grp + L_WORD as u64);
                    'outer: loop {
                        delay_loop(ncs);
                        cur = 0;
                        while w.swap(1, Acquire) != 0 {
                            while w.load(Relaxed) != 0 {
                                if !spin(&mut cur, &mut spins, &mut ple)? {
                                    break 'outer;
                                }
                            }
                        }
                        delay_loop(cs);
                        ops += 1;
                        w.store(0, Release);
                        if op_done(ops) {
                            break;
                        }
                    }
                }
                Program::Ticket => {
                    let (next, owner) = (m.word(grp + L_WORD as u64), m.word(grp + L_OWNER as u64));
                    'outer: loop {
                        delay_loop(ncs);
                        cur = 0;
                        let t = next.fetch_add(1, AcqRel);
                        while owner.load(Acquire) != t {
                            if !spin(&mut cur, &mut spins, &mut ple)? {
                                break 'outer;
                            }
                        }
                        delay_loop(cs);
                        ops += 1;
                        owner.store(t + 1, Release);
                        if op_done(ops) {
                            break;
                        }
                    }
                }
                Program::Barrier => {
                    let (count, sense, n) = (
                        m.word(grp + B_COUNT as u64),
                        m.word(grp + B_SENSE as u64),
                        m.get(grp + B_N as u64),
                    );
                    let mut local = 0u64;
                    'outer: loop {
                        delay_loop(ncs);
                        cur = 0;
                        local ^= 1;
                        if count.fetch_add(1, AcqRel) + 1 == n {
                            count.store(0, Relaxed);
                            sense.store(local, Release);
                        } else {
                            while sense.load(Acquire) != local {
                                if !spin(&mut cur, &mut spins, &mut ple)? {
                                    break 'outer;
                                }
                            }
                        }
                        ops += 1;
                        if op_done(ops) {
                            break;
                        }
                    }
                }
                // Thread mode has no interrupts: `irq-wake` blocks as `wake` does.
                Program::Wake | Program::Timer | Program::IrqWake => loop {
                    delay_loop(ncs);
                    if prog == Program::Timer {
                        m.set(slot + R_STAMP as u64, rdtsc() + p(P_SLEEP));
                        ctx.on_exit(v, PORT_SLEEP)?;
                    } else {
                        ctx.on_exit(v, PORT_HALT)?;
                    }
                    let lat = rdtsc().wrapping_sub(m.get(slot + R_STAMP as u64));
                    if sample_ptr < samples_end {
                        m.set(sample_ptr, lat);
                        sample_ptr += 8;
                    }
                    ops += 1;
                    if op_done(ops) {
                        break;
                    }
                },
                Program::Idle => {}
                Program::NullExit => loop {
                    let before = rdtsc();
                    ctx.on_exit(v, PORT_NULL)?;
                    if sample_ptr < samples_end {
                        m.set(sample_ptr, rdtsc().wrapping_sub(before));
                        sample_ptr += 8;
                    }
                    ops += 1;
                    if op_done(ops) {
                        break;
                    }
                },
                Program::Gaps => {
                    let threshold = p(P_SLEEP);
                    let mut prev = rdtsc();
                    loop {
                        let now = rdtsc();
                        let gap = now.wrapping_sub(prev);
                        prev = now;
                        if gap >= threshold {
                            ops += 1;
                            if sample_ptr < samples_end {
                                m.set(sample_ptr, gap);
                                sample_ptr += 8;
                            }
                        }
                        if op_done(ops) {
                            break;
                        }
                    }
                }
                // The lock programs' wait on a word nobody writes; a sample per window.
                Program::Spin => {
                    let owner = m.word(grp + L_OWNER as u64);
                    let mut start = rdtsc();
                    cur = 0;
                    'outer: while owner.load(Acquire) != 1 {
                        spin_loop();
                        spins += 1;
                        if stopped() {
                            break 'outer;
                        }
                        cur += 1;
                        if cur >= window {
                            cur = 0;
                            let now = rdtsc();
                            if sample_ptr < samples_end {
                                m.set(sample_ptr, now.wrapping_sub(start));
                                sample_ptr += 8;
                            }
                            start = now;
                            ops += 1;
                            published.store(ops, Relaxed);
                        }
                    }
                }
                Program::PingPong => {
                    let (w, role) = (m.word(grp + L_WORD as u64), p(P_ROLE));
                    'outer: loop {
                        cur = 0;
                        while w.load(Acquire) != 2 * ops + role {
                            if !spin(&mut cur, &mut spins, &mut ple)? {
                                break 'outer;
                            }
                        }
                        w.fetch_add(1, Release);
                        ops += 1;
                        if op_done(ops) {
                            break;
                        }
                    }
                }
            }
        }
        m.set(slot + R_TEND as u64, rdtsc());
        m.set(slot + R_OPS as u64, ops);
        m.set(slot + R_SPINS as u64, spins);
        m.set(slot + R_PLE as u64, ple);
        m.set(slot + R_SAMPLES as u64, sample_ptr);
        match ctx.on_exit(v, PORT_DONE)? {
            Next::Done => Ok(()),
            Next::Resume => Err("done exit resumed".into()),
        }
    }
}
