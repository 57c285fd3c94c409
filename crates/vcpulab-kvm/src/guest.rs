//! The guest programs, emitted as x86-64 machine code for 64-bit long mode at CPL3.
//!
//! Register conventions on entry (set by the harness with `KVM_SET_REGS`):
//! - `rbp` = [`GLOBAL`]: start barrier and stop flag, shared by all vCPUs;
//! - `rbx` = the vCPU's group area ([`group_addr`]): the lock / barrier of its workload;
//! - `r8`  = the vCPU's slot ([`slot_addr`]): parameters in, results out;
//! - `rdi` = the vCPU's sample buffer ([`samples_addr`]).
//!
//! In the programs: `rsi` counts completed operations, `r9` spin iterations, `r10` PLE
//! exits, `r11` the spins of the current wait, `r12` critical-section loops, `r13`
//! non-critical (compute) loops, `r14` the PLE window (spins; `u64::MAX` = off), `r15` the
//! barrier's local sense.
//!
//! Every program: loads its parameters, meets all vCPUs at an in-guest start barrier,
//! stamps the TSC, loops until the host sets the stop flag, stamps the TSC again, stores
//! its results and exits with `out PORT_DONE`. The measured loops make no exits, except
//! the user-space PLE exit (`out PORT_PLE`) when a spin exceeds the window, and the
//! blocking exits that *are* the measurement in the wake-up and timer programs.

use crate::asm::{m, Asm, AsmError, Cond, Label, Mem, Reg, Reg::*};

/// Guest-physical layout. Memory is identity-mapped, so these are also the guest's
/// virtual addresses.
pub const MEM_SIZE: u64 = 32 << 20;
pub const GDT: u64 = 0x500;
pub const PML4: u64 = 0x1000;
pub const PDPT: u64 = 0x2000;
pub const PD: u64 = 0x3000;
pub const TSS: u64 = 0x9000;
pub const CODE: u64 = 0x10000;
pub const CODE_MAX: usize = 0x10000;
pub const GLOBAL: u64 = 0x100000;
pub const GROUPS: u64 = 0x101000;
pub const GROUP_SIZE: u64 = 0x1000;
pub const MAX_GROUPS: usize = 64;
pub const SLOTS: u64 = 0x200000;
pub const SLOT_SIZE: u64 = 0x1000;
pub const MAX_VCPUS: usize = 64;
/// Steal-time records (`struct kvm_steal_time`, 64 bytes, 64-byte aligned).
pub const STEAL: u64 = 0x280000;
pub const SAMPLES: u64 = 0x300000;
/// Per vCPU: 0x40000 bytes = 32768 samples.
pub const SAMPLES_SIZE: u64 = 0x40000;
pub const MAX_SAMPLES: usize = (SAMPLES_SIZE / 8) as usize;

// GLOBAL offsets (separate cache lines)
pub const G_ARRIVED: i32 = 0x00;
pub const G_STOP: i32 = 0x40;
pub const G_NTOTAL: i32 = 0x80;

// group offsets
pub const L_WORD: i32 = 0x00; // TAS lock word, ticket "next"
pub const L_OWNER: i32 = 0x40; // ticket "owner" (now serving)
pub const B_COUNT: i32 = 0x80; // barrier arrivals in this round
pub const B_SENSE: i32 = 0xC0; // barrier global sense
pub const B_N: i32 = 0x100; // participants

// slot offsets: parameters
pub const P_NCS: i32 = 0x00; // loops of non-critical compute per op
pub const P_CS: i32 = 0x08; // loops inside the critical section
pub const P_PLE: i32 = 0x10; // PLE window in spins (u64::MAX = off)
pub const P_SLEEP: i32 = 0x18; // timer program: TSC ticks to sleep
pub const P_SAMPLES_END: i32 = 0x20; // end of the sample buffer
pub const P_ROLE: i32 = 0x28; // ping-pong: 0 or 1
                              // slot offsets: results
pub const R_TSTART: i32 = 0x40;
pub const R_TEND: i32 = 0x48;
pub const R_OPS: i32 = 0x50;
pub const R_SPINS: i32 = 0x58;
pub const R_PLE: i32 = 0x60;
pub const R_SAMPLES: i32 = 0x68; // end pointer of the samples written
/// Host/guest handshake word: the host's TSC stamp at the wake-up (wake program) or the
/// guest's deadline (timer program).
pub const R_STAMP: i32 = 0x80;

/// Exit ports.
pub const PORT_DONE: u8 = 0x20;
pub const PORT_PLE: u8 = 0x21;
pub const PORT_HALT: u8 = 0x22;
pub const PORT_SLEEP: u8 = 0x23;
/// Calibration: an exit the harness resumes at once.
pub const PORT_NULL: u8 = 0x24;
/// `irq-wake`: the harness schedules the vCPU's interrupt after the io latency and resumes
/// it at once (the vCPU then halts in the kernel until the interrupt).
pub const PORT_IRQ_ARM: u8 = 0x25;

/// The interrupt vector of the `irq-wake` program's wake-up (an MSI the harness sends
/// through an irqfd), and the local APIC's end-of-interrupt register (xAPIC MMIO).
pub const IRQ_VECTOR: u8 = 0x40;
pub const LAPIC_EOI: u64 = 0xFEE0_00B0;
/// The IDT of `irq-wake` vCPUs: 256 16-byte gates, of which only [`IRQ_VECTOR`] is present.
pub const IDT: u64 = 0x8000;

pub fn group_addr(g: usize) -> u64 {
    GROUPS + g as u64 * GROUP_SIZE
}
pub fn slot_addr(v: usize) -> u64 {
    SLOTS + v as u64 * SLOT_SIZE
}
pub fn samples_addr(v: usize) -> u64 {
    SAMPLES + v as u64 * SAMPLES_SIZE
}
pub fn steal_addr(v: usize) -> u64 {
    STEAL + v as u64 * 64
}

/// The guest programs, mirroring the simulator's `program` ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Program {
    /// `compute`: a loop of `ncs` iterations is one op.
    Compute,
    /// `lock` kind `tas`: test-and-test-and-set with PAUSE.
    Tas,
    /// `lock` kind `ticket`: ticket lock with PAUSE.
    Ticket,
    /// `ipi` targets all: a sense-reversing all-vCPU barrier (everyone waits for everyone's
    /// acknowledgement).
    Barrier,
    /// `io`: halt (a blocking exit); the harness wakes the vCPU after the latency; the
    /// sample is guest TSC on resumption minus the host's TSC at the wake-up.
    Wake,
    /// `sleep`: arm a TSC deadline and block; the sample is guest TSC on resumption minus
    /// the deadline.
    Timer,
    /// No workload: finish right after the start barrier.
    Idle,
    /// Calibration (`vcpulab kvm calibrate`): a loop of `out PORT_NULL`, which the harness
    /// resumes at once; one op is one exit to user space and back into the guest.
    NullExit,
    /// Calibration: two vCPUs of a group pass a counter back and forth (role 0 writes it
    /// when even, role 1 when odd, each polling with PAUSE); one op is one handoff of the
    /// counter's cache line from one spinning vCPU to the other.
    PingPong,
    /// `io` woken by an interrupt: at CPL0, ask the harness for an interrupt after the io
    /// latency (`out PORT_IRQ_ARM`), then `sti; hlt`, a halt KVM handles in the kernel
    /// (with halt polling, as a guest kernel's idle loop); the harness stamps the TSC and
    /// writes the vCPU's irqfd, routed as an MSI to it; the handler acknowledges it (EOI).
    /// The sample is guest TSC after the halt minus the host's stamp. PVM emulates every
    /// CPL0 instruction (~1 us each), so the handler and the loop add a few us.
    IrqWake,
    /// Calibration: read the TSC in a tight loop and record every gap longer than the
    /// threshold (`sleep_ns`, in the slot's `P_SLEEP` as TSC ticks): the time the vCPU lost
    /// to the host (its interrupts, the tick, other threads) while it was running. One op
    /// is one such gap; every gap is a sample (ns).
    Gaps,
    /// Calibration: wait on a lock word nobody writes with the lock programs' wait loop
    /// (PAUSE, the spin count, the stop check, the count towards the PLE window) and, where
    /// a lock program would take its user-space PLE exit after `ple.window` spins, record
    /// the TSC time those spins took and start the next window instead. One op is one
    /// window; every window is a sample (ns). What a spin costs on this CPU decides how
    /// long the harness's PLE window lasts.
    Spin,
}

impl Program {
    pub const ALL: [Program; 12] = [
        Program::Compute,
        Program::Tas,
        Program::Ticket,
        Program::Barrier,
        Program::Wake,
        Program::Timer,
        Program::Idle,
        Program::NullExit,
        Program::PingPong,
        Program::Gaps,
        Program::IrqWake,
        Program::Spin,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Program::Compute => "compute",
            Program::Tas => "tas",
            Program::Ticket => "ticket",
            Program::Barrier => "barrier",
            Program::Wake => "wake",
            Program::Timer => "timer",
            Program::Idle => "idle",
            Program::NullExit => "null-exit",
            Program::PingPong => "ping-pong",
            Program::Gaps => "gaps",
            Program::IrqWake => "irq-wake",
            Program::Spin => "spin",
        }
    }

    /// Runs at CPL0 with interrupts (an in-kernel irqchip, an IDT): only `irq-wake`.
    pub fn kernel_mode(self) -> bool {
        self == Program::IrqWake
    }
}

/// The assembled code, each program's entry offset (from [`CODE`]) and the interrupt
/// handler's.
pub struct GuestCode {
    pub code: Vec<u8>,
    pub entries: Vec<(Program, usize)>,
    pub irq_handler: usize,
}

impl GuestCode {
    pub fn entry(&self, p: Program) -> u64 {
        CODE + self
            .entries
            .iter()
            .find(|e| e.0 == p)
            .expect("every program is assembled")
            .1 as u64
    }
}

/// Assembles every program.
pub fn assemble() -> Result<GuestCode, AsmError> {
    let mut a = Asm::new();
    let mut entries = Vec::new();
    for p in Program::ALL {
        entries.push((p, a.pos()));
        emit(&mut a, p);
    }
    // The handler of IRQ_VECTOR for `irq-wake` (r15 = LAPIC_EOI, set by the program):
    // acknowledge and return to the instruction after the `hlt`. It touches no register or
    // flag, so it needs no saves.
    let irq_handler = a.pos();
    a.store_imm32(m(R15, 0), 0);
    a.iretq();
    let code = a.finish()?;
    assert!(code.len() <= CODE_MAX);
    Ok(GuestCode {
        code,
        entries,
        irq_handler,
    })
}

fn emit(a: &mut Asm, p: Program) {
    let done = a.label();
    prologue(a, done);
    match p {
        Program::Compute => {
            let top = a.label();
            a.bind(top);
            a.delay(R13);
            a.inc(Rsi);
            stop_or(a, top, done);
        }
        Program::Tas => {
            let (top, try_, spin, got) = (a.label(), a.label(), a.label(), a.label());
            a.bind(top);
            a.delay(R13);
            a.xor(R11, R11);
            a.bind(try_);
            a.mov_imm(Rax, 1);
            a.xchg(m(Rbx, L_WORD), Rax); // test-and-set
            a.test(Rax, Rax);
            a.jcc(Cond::E, got);
            a.bind(spin); // test: spin reading until the word looks free
            a.pause();
            spin_check(a, done, ple_exit);
            a.cmp_mem_imm(m(Rbx, L_WORD), 0);
            a.jcc(Cond::Ne, spin);
            a.jmp(try_);
            a.bind(got);
            a.delay(R12); // critical section
            a.inc(Rsi);
            a.store_imm(m(Rbx, L_WORD), 0); // release
            stop_or(a, top, done);
        }
        Program::Ticket => {
            let (top, wait, got) = (a.label(), a.label(), a.label());
            a.bind(top);
            a.delay(R13);
            a.xor(R11, R11);
            a.mov_imm(Rax, 1);
            a.lock_xadd(m(Rbx, L_WORD), Rax); // rax = my ticket
            spin_until_equal(a, Rax, m(Rbx, L_OWNER), [wait, got, done], ple_exit);
            a.bind(got);
            a.delay(R12);
            a.inc(Rsi);
            a.inc_mem(m(Rbx, L_OWNER)); // release: only the holder writes `owner`
            stop_or(a, top, done);
        }
        Program::Barrier => {
            let (top, wait, passed) = (a.label(), a.label(), a.label());
            a.xor(R15, R15);
            a.bind(top);
            a.delay(R13);
            a.xor(R11, R11);
            a.xor_imm8(R15, 1); // local sense flips each round
            a.mov_imm(Rax, 1);
            a.lock_xadd(m(Rbx, B_COUNT), Rax);
            a.inc(Rax);
            a.cmp_load(Rax, m(Rbx, B_N));
            a.jcc(Cond::Ne, wait);
            a.store_imm(m(Rbx, B_COUNT), 0); // the last to arrive resets and releases
            a.store(m(Rbx, B_SENSE), R15);
            a.jmp(passed);
            spin_until_equal(a, R15, m(Rbx, B_SENSE), [wait, passed, done], ple_exit);
            a.bind(passed);
            a.inc(Rsi);
            stop_or(a, top, done);
        }
        Program::Wake | Program::Timer | Program::IrqWake => {
            let top = a.label();
            if p == Program::IrqWake {
                a.mov_imm(R15, LAPIC_EOI); // for the interrupt handler
            }
            a.bind(top);
            a.delay(R13);
            match p {
                Program::Timer => {
                    a.rdtsc64();
                    a.add_load(Rax, m(R8, P_SLEEP));
                    a.store(m(R8, R_STAMP), Rax); // the deadline
                    a.out(PORT_SLEEP);
                }
                Program::IrqWake => {
                    a.out(PORT_IRQ_ARM);
                    a.sti();
                    a.hlt(); // the handler returns here
                    a.cli();
                }
                _ => a.out(PORT_HALT),
            }
            a.rdtsc64();
            a.sub_load(Rax, m(R8, R_STAMP)); // latency in TSC ticks
            store_sample(a, Rax);
            a.inc(Rsi);
            stop_or(a, top, done);
        }
        Program::Idle => {
            a.jmp(done);
        }
        Program::NullExit => {
            // Each round trip is also a sample (TSC ticks from before the exit to after
            // the re-entry), so a profile can give its distribution, not only its mean.
            let top = a.label();
            a.bind(top);
            a.rdtsc64();
            a.mov(R15, Rax);
            a.out(PORT_NULL);
            a.rdtsc64();
            a.sub(Rax, R15);
            store_sample(a, Rax);
            a.inc(Rsi);
            stop_or(a, top, done);
        }
        Program::PingPong => {
            // My k-th write happens when the counter is 2k + role.
            let (top, wait, go) = (a.label(), a.label(), a.label());
            a.load(R15, m(R8, P_ROLE));
            a.bind(top);
            a.xor(R11, R11);
            a.mov(Rax, Rsi);
            a.shl_imm(Rax, 1);
            a.or(Rax, R15);
            spin_until_equal(a, Rax, m(Rbx, L_WORD), [wait, go, done], ple_exit);
            a.bind(go);
            a.inc_mem(m(Rbx, L_WORD)); // only the vCPU whose turn it is writes
            a.inc(Rsi);
            stop_or(a, top, done);
        }
        Program::Gaps => {
            let (top, short) = (a.label(), a.label());
            a.load(R12, m(R8, P_SLEEP)); // the threshold, TSC ticks
            a.rdtsc64();
            a.mov(R15, Rax);
            a.bind(top);
            a.rdtsc64();
            a.mov(R11, Rax);
            a.sub(R11, R15); // the gap since the last read
            a.mov(R15, Rax);
            a.cmp(R11, R12);
            a.jcc(Cond::B, short);
            a.inc(Rsi);
            store_sample(a, R11);
            a.bind(short);
            stop_or(a, top, done);
        }
        Program::Spin => {
            // The lock programs' wait, with the PLE exit replaced by taking a sample: r15
            // holds the TSC at the window's start.
            a.mov_imm(R12, 1); // the group's owner word stays 0: no vCPU takes a ticket
            a.rdtsc64();
            a.mov(R15, Rax);
            a.xor(R11, R11);
            let wait = a.label();
            spin_until_equal(a, R12, m(Rbx, L_OWNER), [wait, done, done], |a| {
                a.rdtsc64();
                a.mov(R13, Rax);
                a.sub(Rax, R15); // the window's TSC ticks
                a.mov(R15, R13);
                store_sample(a, Rax);
                a.inc(Rsi);
                a.store(m(R8, R_OPS), Rsi);
            });
        }
    }
    epilogue(a, done);
}

/// Loads the parameters, zeroes the counters, meets everyone at the start barrier and
/// stamps the start time.
fn prologue(a: &mut Asm, done: Label) {
    a.load(R12, m(R8, P_CS));
    a.load(R13, m(R8, P_NCS));
    a.load(R14, m(R8, P_PLE));
    a.xor(Rsi, Rsi);
    a.xor(R9, R9);
    a.xor(R10, R10);
    a.lock_inc_mem(m(Rbp, G_ARRIVED));
    let (wait, go) = (a.label(), a.label());
    a.load(Rax, m(Rbp, G_NTOTAL));
    a.bind(wait);
    a.cmp_load(Rax, m(Rbp, G_ARRIVED));
    a.jcc(Cond::E, go);
    a.pause();
    a.cmp_mem_imm(m(Rbp, G_STOP), 0); // aborted before the start
    a.jcc(Cond::Ne, done);
    a.jmp(wait);
    a.bind(go);
    a.rdtsc64();
    a.store(m(R8, R_TSTART), Rax);
}

/// Inside a spin: count it, leave if the host said stop, and when the current wait has
/// spun `r14` times start a new window and run `at_window` (the lock programs: the PLE
/// exit, `ple_exit`).
fn spin_check(a: &mut Asm, done: Label, at_window: impl FnOnce(&mut Asm)) {
    let cont = a.label();
    a.inc(R9);
    a.cmp_mem_imm(m(Rbp, G_STOP), 0);
    a.jcc(Cond::Ne, done);
    a.inc(R11);
    a.cmp(R11, R14);
    a.jcc(Cond::B, cont);
    a.xor(R11, R11);
    at_window(a);
    a.bind(cont);
}

/// The user-space pause-loop exit: count it and `out` to the harness.
fn ple_exit(a: &mut Asm) {
    a.inc(R10);
    a.out(PORT_PLE);
}

/// Binds `wait`: spin (PAUSE, then `spin_check` with `at_window`) until `[mem]` equals
/// `r`, then go to `out`. The wait of the ticket, barrier, ping-pong and spin programs.
fn spin_until_equal(
    a: &mut Asm,
    r: Reg,
    mem: Mem,
    [wait, out, done]: [Label; 3],
    at_window: impl FnOnce(&mut Asm),
) {
    a.bind(wait);
    a.cmp_load(r, mem);
    a.jcc(Cond::E, out);
    a.pause();
    spin_check(a, done, at_window);
    a.jmp(wait);
}

/// Stores `r` as the next sample at `rdi`, unless the vCPU's sample buffer is full.
fn store_sample(a: &mut Asm, r: Reg) {
    let full = a.label();
    a.cmp_load(Rdi, m(R8, P_SAMPLES_END));
    a.jcc(Cond::Ae, full);
    a.store(m(Rdi, 0), r);
    a.add_imm(Rdi, 8);
    a.bind(full);
}

/// After each op: publish the op count (the host reads it at the end of a warm-up; one
/// store to the vCPU's own slot), then `if stop == 0 goto top; goto done`.
fn stop_or(a: &mut Asm, top: Label, done: Label) {
    a.store(m(R8, R_OPS), Rsi);
    a.cmp_mem_imm(m(Rbp, G_STOP), 0);
    a.jcc(Cond::E, top);
    a.jmp(done);
}

/// Stamps the end time, stores the counters and exits with `out PORT_DONE`. A guest that
/// is resumed after that hits `hlt`, which faults at CPL3 (a shutdown exit).
fn epilogue(a: &mut Asm, done: Label) {
    a.bind(done);
    a.rdtsc64();
    a.store(m(R8, R_TEND), Rax);
    a.store(m(R8, R_OPS), Rsi);
    a.store(m(R8, R_SPINS), R9);
    a.store(m(R8, R_PLE), R10);
    a.store(m(R8, R_SAMPLES), Rdi);
    a.out(PORT_DONE);
    a.hlt();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_program_assembles_with_distinct_entries() {
        let g = assemble().unwrap();
        assert_eq!(g.entries.len(), Program::ALL.len());
        let mut offs: Vec<usize> = g.entries.iter().map(|e| e.1).collect();
        offs.dedup();
        assert_eq!(offs.len(), Program::ALL.len());
        assert!(g.code.len() < CODE_MAX);
        // every program ends with `out PORT_DONE, al; hlt`
        let done = [0xE6, PORT_DONE, 0xF4];
        assert_eq!(
            g.code.windows(3).filter(|w| *w == done).count(),
            Program::ALL.len()
        );
    }

    #[test]
    fn measured_loops_exit_only_where_intended() {
        // Count `out` instructions (E6 xx) per program: compute/idle only DONE; lock and
        // barrier programs DONE + PLE; wake and timer DONE + their blocking exit.
        let g = assemble().unwrap();
        let mut bounds: Vec<(Program, usize)> = g.entries.clone();
        bounds.push((Program::Gaps, g.code.len()));
        for w in bounds.windows(2) {
            let body = &g.code[w[0].1..w[1].1];
            let ports: Vec<u8> = body
                .windows(2)
                .filter(|b| b[0] == 0xE6 && b[1] >= 0x20 && b[1] <= 0x25)
                .map(|b| b[1])
                .collect();
            let want: &[u8] = match w[0].0 {
                Program::Compute | Program::Idle => &[PORT_DONE],
                Program::Tas | Program::Ticket | Program::Barrier => &[PORT_PLE, PORT_DONE],
                Program::Wake => &[PORT_HALT, PORT_DONE],
                Program::NullExit => &[PORT_NULL, PORT_DONE],
                Program::PingPong => &[PORT_PLE, PORT_DONE],
                Program::Gaps => &[PORT_DONE],
                Program::Timer => &[PORT_SLEEP, PORT_DONE],
                Program::IrqWake => &[PORT_IRQ_ARM, PORT_DONE],
                Program::Spin => &[PORT_DONE],
            };
            assert_eq!(ports, want, "{:?}", w[0].0);
        }
    }

    #[test]
    fn layout_regions_do_not_overlap() {
        assert!(CODE + CODE_MAX as u64 <= GLOBAL);
        const { assert!(PD + 4 * 0x1000 <= IDT && IDT + 256 * 16 <= TSS) };
        assert!(group_addr(MAX_GROUPS) <= SLOTS);
        assert!(slot_addr(MAX_VCPUS) <= STEAL);
        assert!(steal_addr(MAX_VCPUS) <= SAMPLES);
        assert!(samples_addr(MAX_VCPUS) <= MEM_SIZE);
    }
}
