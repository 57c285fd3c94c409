//! A tiny x86-64 machine-code emitter for the guest programs.
//!
//! Only the handful of instructions the guest programs need, always in their 64-bit
//! operand-size form (REX.W) and, for memory operands, always `[base + disp32]` (ModRM
//! mod=10, plus a SIB byte when the base is RSP/R12). That keeps every encoding regular and
//! easy to check: the unit tests compare each one with the bytes GNU `as` produces.
//!
//! Labels are resolved at `finish()`: jumps are always the rel32 forms.

/// The 16 general-purpose registers, numbered as in the encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Reg {
    Rax = 0,
    Rcx = 1,
    Rdx = 2,
    Rbx = 3,
    Rsp = 4,
    Rbp = 5,
    Rsi = 6,
    Rdi = 7,
    R8 = 8,
    R9 = 9,
    R10 = 10,
    R11 = 11,
    R12 = 12,
    R13 = 13,
    R14 = 14,
    R15 = 15,
}

/// A memory operand `[base + disp]`.
#[derive(Clone, Copy, Debug)]
pub struct Mem {
    pub base: Reg,
    pub disp: i32,
}

/// `[base + disp]`.
pub fn m(base: Reg, disp: i32) -> Mem {
    Mem { base, disp }
}

/// Condition codes for `jcc` (the low nibble of `0F 8x`).
#[derive(Clone, Copy, Debug)]
#[repr(u8)]
pub enum Cond {
    /// below (unsigned <), CF=1
    B = 0x2,
    /// above or equal (unsigned >=), CF=0
    Ae = 0x3,
    /// equal / zero
    E = 0x4,
    /// not equal / not zero
    Ne = 0x5,
}

/// A jump target; bind it with [`Asm::bind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Label(usize);

#[derive(Default)]
pub struct Asm {
    code: Vec<u8>,
    labels: Vec<Option<usize>>,
    /// (offset of the rel32 field, label)
    fixups: Vec<(usize, Label)>,
}

/// Assembly errors (only label misuse can fail).
#[derive(Debug, PartialEq, Eq)]
pub enum AsmError {
    UnboundLabel(usize),
    JumpTooFar(usize),
}

impl std::fmt::Display for AsmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AsmError::UnboundLabel(l) => write!(f, "guest code: label {l} used but never bound"),
            AsmError::JumpTooFar(o) => {
                write!(f, "guest code: jump at offset {o} does not fit in rel32")
            }
        }
    }
}

impl std::error::Error for AsmError {}

impl Asm {
    pub fn new() -> Self {
        Self::default()
    }

    /// Current offset (where the next instruction goes).
    pub fn pos(&self) -> usize {
        self.code.len()
    }

    pub fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    pub fn bind(&mut self, l: Label) {
        assert!(self.labels[l.0].is_none(), "label bound twice");
        self.labels[l.0] = Some(self.code.len());
    }

    /// Resolves the jumps and returns the code.
    pub fn finish(mut self) -> Result<Vec<u8>, AsmError> {
        for &(at, l) in &self.fixups {
            let target = self.labels[l.0].ok_or(AsmError::UnboundLabel(l.0))? as i64;
            let rel = target - (at as i64 + 4); // relative to the end of the instruction
            let rel: i32 = rel.try_into().map_err(|_| AsmError::JumpTooFar(at))?;
            self.code[at..at + 4].copy_from_slice(&rel.to_le_bytes());
        }
        Ok(self.code)
    }

    fn b(&mut self, bytes: &[u8]) {
        self.code.extend_from_slice(bytes);
    }

    /// REX prefix with W=1; `r` goes in ModRM.reg (REX.R), `b` in ModRM.rm / base (REX.B).
    fn rex_w(&mut self, r: u8, b: u8) {
        self.code.push(0x48 | ((r >> 3) & 1) << 2 | ((b >> 3) & 1));
    }

    /// ModRM for a register-direct operand: mod=11.
    fn modrm_rr(&mut self, reg: u8, rm: u8) {
        self.code.push(0xC0 | (reg & 7) << 3 | (rm & 7));
    }

    /// ModRM (+SIB) + disp32 for `[base + disp32]`: mod=10. A base of RSP/R12 (rm=100)
    /// means "SIB follows"; SIB 0x24 = no index, base=RSP/R12.
    fn modrm_mem(&mut self, reg: u8, mem: Mem) {
        let base = mem.base as u8;
        self.code.push(0x80 | (reg & 7) << 3 | (base & 7));
        if base & 7 == 4 {
            self.code.push(0x24);
        }
        self.b(&mem.disp.to_le_bytes());
    }

    /// `op r/m64, r64` or `op r64, r/m64` with a memory operand.
    fn op_rm(&mut self, prefix: &[u8], opcode: &[u8], reg: Reg, mem: Mem) {
        self.b(prefix);
        self.rex_w(reg as u8, mem.base as u8);
        self.b(opcode);
        self.modrm_mem(reg as u8, mem);
    }

    /// `op r/m64, r64` with two registers (`reg` in ModRM.reg, `rm` in ModRM.rm).
    fn op_rr(&mut self, opcode: u8, reg: Reg, rm: Reg) {
        self.rex_w(reg as u8, rm as u8);
        self.code.push(opcode);
        self.modrm_rr(reg as u8, rm as u8);
    }

    // ------------------------------------------------------------------ moves

    /// `mov r64, imm64` (REX.W B8+r io).
    pub fn mov_imm(&mut self, dst: Reg, imm: u64) {
        self.rex_w(0, dst as u8);
        self.code.push(0xB8 + (dst as u8 & 7));
        self.b(&imm.to_le_bytes());
    }

    /// `mov r64, [m]` (REX.W 8B /r).
    pub fn load(&mut self, dst: Reg, src: Mem) {
        self.op_rm(&[], &[0x8B], dst, src);
    }

    /// `mov [m], r64` (REX.W 89 /r).
    pub fn store(&mut self, dst: Mem, src: Reg) {
        self.op_rm(&[], &[0x89], src, dst);
    }

    /// `mov qword [m], simm32` (REX.W C7 /0 id).
    pub fn store_imm(&mut self, dst: Mem, imm: i32) {
        self.op_rm(&[], &[0xC7], Reg::Rax /* /0 */, dst);
        self.b(&imm.to_le_bytes());
    }

    /// `mov r64, r64` (REX.W 89 /r: reg=src, rm=dst).
    pub fn mov(&mut self, dst: Reg, src: Reg) {
        self.op_rr(0x89, src, dst);
    }

    // ------------------------------------------------------------- arithmetic

    /// `inc r64` (REX.W FF /0).
    pub fn inc(&mut self, r: Reg) {
        self.op_rr(0xFF, Reg::Rax /* /0 */, r);
    }

    /// `dec r64` (REX.W FF /1).
    pub fn dec(&mut self, r: Reg) {
        self.op_rr(0xFF, Reg::Rcx /* /1 */, r);
    }

    /// `inc qword [m]` (REX.W FF /0), not atomic.
    pub fn inc_mem(&mut self, mem: Mem) {
        self.op_rm(&[], &[0xFF], Reg::Rax, mem);
    }

    /// `lock inc qword [m]` (F0 REX.W FF /0).
    pub fn lock_inc_mem(&mut self, mem: Mem) {
        self.op_rm(&[0xF0], &[0xFF], Reg::Rax, mem);
    }

    /// `lock xadd [m], r64` (F0 REX.W 0F C1 /r): r gets the old value, [m] += r.
    pub fn lock_xadd(&mut self, mem: Mem, r: Reg) {
        self.op_rm(&[0xF0], &[0x0F, 0xC1], r, mem);
    }

    /// `xchg [m], r64` (REX.W 87 /r): atomic (implicitly locked).
    pub fn xchg(&mut self, mem: Mem, r: Reg) {
        self.op_rm(&[], &[0x87], r, mem);
    }

    /// `add r64, simm32` (REX.W 81 /0 id).
    pub fn add_imm(&mut self, r: Reg, imm: i32) {
        self.op_rr(0x81, Reg::Rax /* /0 */, r);
        self.b(&imm.to_le_bytes());
    }

    /// `add r64, [m]` (REX.W 03 /r).
    pub fn add_load(&mut self, r: Reg, mem: Mem) {
        self.op_rm(&[], &[0x03], r, mem);
    }

    /// `sub r64, [m]` (REX.W 2B /r).
    pub fn sub_load(&mut self, r: Reg, mem: Mem) {
        self.op_rm(&[], &[0x2B], r, mem);
    }

    /// `sub r64, r64` (REX.W 29 /r: reg=src, rm=dst): dst -= src.
    pub fn sub(&mut self, dst: Reg, src: Reg) {
        self.op_rr(0x29, src, dst);
    }

    /// `xor r64, r64` (REX.W 31 /r: reg=src, rm=dst).
    pub fn xor(&mut self, dst: Reg, src: Reg) {
        self.op_rr(0x31, src, dst);
    }

    /// `xor r64, simm8` (REX.W 83 /6 ib).
    pub fn xor_imm8(&mut self, r: Reg, imm: i8) {
        self.op_rr(0x83, Reg::Rsi /* /6 */, r);
        self.code.push(imm as u8);
    }

    /// `or r64, r64` (REX.W 09 /r: reg=src, rm=dst).
    pub fn or(&mut self, dst: Reg, src: Reg) {
        self.op_rr(0x09, src, dst);
    }

    /// `shl r64, imm8` (REX.W C1 /4 ib).
    pub fn shl_imm(&mut self, r: Reg, imm: u8) {
        self.op_rr(0xC1, Reg::Rsp /* /4 */, r);
        self.code.push(imm);
    }

    /// `test r64, r64` (REX.W 85 /r).
    pub fn test(&mut self, a: Reg, b: Reg) {
        self.op_rr(0x85, b, a);
    }

    /// `cmp r64, [m]` (REX.W 3B /r): flags of r - [m].
    pub fn cmp_load(&mut self, r: Reg, mem: Mem) {
        self.op_rm(&[], &[0x3B], r, mem);
    }

    /// `cmp r64, r64` (REX.W 39 /r: rm=a, reg=b): flags of a - b.
    pub fn cmp(&mut self, a: Reg, b: Reg) {
        self.op_rr(0x39, b, a);
    }

    /// `cmp qword [m], simm32` (REX.W 81 /7 id).
    pub fn cmp_mem_imm(&mut self, mem: Mem, imm: i32) {
        self.op_rm(&[], &[0x81], Reg::Rdi /* /7 */, mem);
        self.b(&imm.to_le_bytes());
    }

    // ------------------------------------------------------------------ misc

    /// `rdtsc` (0F 31): EDX:EAX = TSC.
    pub fn rdtsc(&mut self) {
        self.b(&[0x0F, 0x31]);
    }

    /// `pause` (F3 90).
    pub fn pause(&mut self) {
        self.b(&[0xF3, 0x90]);
    }

    /// `out imm8, al` (E6 ib): a port write, i.e. an exit to the harness.
    pub fn out(&mut self, port: u8) {
        self.b(&[0xE6, port]);
    }

    /// `hlt` (F4). At CPL3 it faults (#GP), which ends the guest with a shutdown exit.
    pub fn hlt(&mut self) {
        self.code.push(0xF4);
    }

    /// `sti` (FB): interrupts on after the next instruction, so `sti; hlt` cannot miss an
    /// interrupt between the two.
    pub fn sti(&mut self) {
        self.code.push(0xFB);
    }

    /// `cli` (FA).
    pub fn cli(&mut self) {
        self.code.push(0xFA);
    }

    /// `iretq` (48 CF): return from an interrupt handler.
    pub fn iretq(&mut self) {
        self.b(&[0x48, 0xCF]);
    }

    /// `mov dword [m], imm32` (C7 /0 id, no REX.W): a 32-bit store, as the local APIC's
    /// registers take (KVM ignores MMIO writes of other sizes to them).
    pub fn store_imm32(&mut self, dst: Mem, imm: u32) {
        let base = dst.base as u8;
        if base >= 8 {
            self.code.push(0x41); // REX.B
        }
        self.code.push(0xC7);
        self.modrm_mem(0, dst);
        self.b(&imm.to_le_bytes());
    }

    /// `jmp rel32` (E9 cd).
    pub fn jmp(&mut self, l: Label) {
        self.code.push(0xE9);
        self.fixups.push((self.code.len(), l));
        self.b(&[0; 4]);
    }

    /// `jcc rel32` (0F 80+cc cd).
    pub fn jcc(&mut self, c: Cond, l: Label) {
        self.b(&[0x0F, 0x80 | c as u8]);
        self.fixups.push((self.code.len(), l));
        self.b(&[0; 4]);
    }

    // ---------------------------------------------------------------- macros

    /// `rdtsc; shl rdx, 32; or rax, rdx`: the 64-bit TSC in RAX (clobbers RDX).
    pub fn rdtsc64(&mut self) {
        self.rdtsc();
        self.shl_imm(Reg::Rdx, 32);
        self.or(Reg::Rax, Reg::Rdx);
    }

    /// A delay of `count` iterations of `dec rcx; jnz` (about one cycle each), count in
    /// `count` (0 = no delay). Clobbers RCX.
    pub fn delay(&mut self, count: Reg) {
        let skip = self.label();
        let top = self.label();
        self.mov(Reg::Rcx, count);
        self.test(Reg::Rcx, Reg::Rcx);
        self.jcc(Cond::E, skip);
        self.bind(top);
        self.dec(Reg::Rcx);
        self.jcc(Cond::Ne, top);
        self.bind(skip);
    }
}

#[cfg(test)]
mod tests {
    use super::Reg::*;
    use super::*;

    fn one(f: impl FnOnce(&mut Asm)) -> Vec<u8> {
        let mut a = Asm::new();
        f(&mut a);
        a.finish().unwrap()
    }

    // Expected bytes are what GNU as 2.x (`as --64`, intel syntax) emits for the same
    // instruction with a disp32 operand.
    #[test]
    fn interrupt_instructions() {
        assert_eq!(one(|a| a.sti()), [0xFB]);
        assert_eq!(one(|a| a.cli()), [0xFA]);
        assert_eq!(one(|a| a.iretq()), [0x48, 0xCF]);
        // mov dword ptr [r15+0x0], 0   (disp32)
        assert_eq!(
            one(|a| a.store_imm32(m(R15, 0), 0)),
            [0x41, 0xC7, 0x87, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        // mov dword ptr [rax+0xb0], 0x1ff
        assert_eq!(
            one(|a| a.store_imm32(m(Rax, 0xb0), 0x1ff)),
            [0xC7, 0x80, 0xB0, 0, 0, 0, 0xFF, 0x01, 0, 0]
        );
    }

    #[test]
    fn moves() {
        // movabs rax, 0x1122334455667788
        assert_eq!(
            one(|a| a.mov_imm(Rax, 0x1122334455667788)),
            [0x48, 0xB8, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11]
        );
        // movabs r13, 1
        assert_eq!(
            one(|a| a.mov_imm(R13, 1)),
            [0x49, 0xBD, 1, 0, 0, 0, 0, 0, 0, 0]
        );
        // mov r12, qword ptr [r8+0x8]
        assert_eq!(
            one(|a| a.load(R12, m(R8, 8))),
            [0x4D, 0x8B, 0xA0, 8, 0, 0, 0]
        );
        // mov rax, qword ptr [rsp+0x10]  (SIB)
        assert_eq!(
            one(|a| a.load(Rax, m(Rsp, 0x10))),
            [0x48, 0x8B, 0x84, 0x24, 0x10, 0, 0, 0]
        );
        // mov rax, qword ptr [r12-8]  (SIB with REX.B)
        assert_eq!(
            one(|a| a.load(Rax, m(R12, -8))),
            [0x49, 0x8B, 0x84, 0x24, 0xF8, 0xFF, 0xFF, 0xFF]
        );
        // mov qword ptr [r8+0x40], rax
        assert_eq!(
            one(|a| a.store(m(R8, 0x40), Rax)),
            [0x49, 0x89, 0x80, 0x40, 0, 0, 0]
        );
        // mov qword ptr [rbx+0x0], 0
        assert_eq!(
            one(|a| a.store_imm(m(Rbx, 0), 0)),
            [0x48, 0xC7, 0x83, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        // mov rcx, r13
        assert_eq!(one(|a| a.mov(Rcx, R13)), [0x4C, 0x89, 0xE9]);
        // mov r15, rbp
        assert_eq!(one(|a| a.mov(R15, Rbp)), [0x49, 0x89, 0xEF]);
    }

    #[test]
    fn arithmetic() {
        assert_eq!(one(|a| a.inc(Rsi)), [0x48, 0xFF, 0xC6]); // inc rsi
        assert_eq!(one(|a| a.inc(R9)), [0x49, 0xFF, 0xC1]); // inc r9
        assert_eq!(one(|a| a.dec(Rcx)), [0x48, 0xFF, 0xC9]); // dec rcx
                                                             // inc qword ptr [rbx+0x40]
        assert_eq!(
            one(|a| a.inc_mem(m(Rbx, 0x40))),
            [0x48, 0xFF, 0x83, 0x40, 0, 0, 0]
        );
        // lock inc qword ptr [rbp+0x0]  (rbp base needs mod!=00; we always use mod=10)
        assert_eq!(
            one(|a| a.lock_inc_mem(m(Rbp, 0))),
            [0xF0, 0x48, 0xFF, 0x85, 0, 0, 0, 0]
        );
        // lock xadd qword ptr [rbx+0x0], rax
        assert_eq!(
            one(|a| a.lock_xadd(m(Rbx, 0), Rax)),
            [0xF0, 0x48, 0x0F, 0xC1, 0x83, 0, 0, 0, 0]
        );
        // xchg qword ptr [rbx+0x0], rax
        assert_eq!(
            one(|a| a.xchg(m(Rbx, 0), Rax)),
            [0x48, 0x87, 0x83, 0, 0, 0, 0]
        );
        // add rdi, 8
        assert_eq!(one(|a| a.add_imm(Rdi, 8)), [0x48, 0x81, 0xC7, 8, 0, 0, 0]);
        // add rax, qword ptr [r8+0x20]
        assert_eq!(
            one(|a| a.add_load(Rax, m(R8, 0x20))),
            [0x49, 0x03, 0x80, 0x20, 0, 0, 0]
        );
        // sub rax, qword ptr [r8+0x80]
        assert_eq!(
            one(|a| a.sub_load(Rax, m(R8, 0x80))),
            [0x49, 0x2B, 0x80, 0x80, 0, 0, 0]
        );
        // xor r11, r11
        assert_eq!(one(|a| a.xor(R11, R11)), [0x4D, 0x31, 0xDB]);
        // xor r15, 1
        assert_eq!(one(|a| a.xor_imm8(R15, 1)), [0x49, 0x83, 0xF7, 0x01]);
        // or rax, rdx
        assert_eq!(one(|a| a.or(Rax, Rdx)), [0x48, 0x09, 0xD0]);
        // shl rdx, 32
        assert_eq!(one(|a| a.shl_imm(Rdx, 32)), [0x48, 0xC1, 0xE2, 0x20]);
        // test rcx, rcx
        assert_eq!(one(|a| a.test(Rcx, Rcx)), [0x48, 0x85, 0xC9]);
        // cmp rax, qword ptr [rbx+0x40]
        assert_eq!(
            one(|a| a.cmp_load(Rax, m(Rbx, 0x40))),
            [0x48, 0x3B, 0x83, 0x40, 0, 0, 0]
        );
        // cmp r11, r14
        assert_eq!(one(|a| a.cmp(R11, R14)), [0x4D, 0x39, 0xF3]);
        // cmp qword ptr [rbp+0x40], 0
        assert_eq!(
            one(|a| a.cmp_mem_imm(m(Rbp, 0x40), 0)),
            [0x48, 0x81, 0xBD, 0x40, 0, 0, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn misc_and_jumps() {
        assert_eq!(one(|a| a.rdtsc()), [0x0F, 0x31]);
        assert_eq!(one(|a| a.pause()), [0xF3, 0x90]);
        assert_eq!(one(|a| a.out(0x20)), [0xE6, 0x20]);
        // a backward jnz to itself: rel32 = -6
        assert_eq!(
            one(|a| {
                let l = a.label();
                a.bind(l);
                a.jcc(Cond::Ne, l)
            }),
            [0x0F, 0x85, 0xFA, 0xFF, 0xFF, 0xFF]
        );
        // a forward jmp over a pause: rel32 = 2
        assert_eq!(
            one(|a| {
                let l = a.label();
                a.jmp(l);
                a.pause();
                a.bind(l)
            }),
            [0xE9, 2, 0, 0, 0, 0xF3, 0x90]
        );
    }

    #[test]
    fn unbound_label_is_an_error() {
        let mut a = Asm::new();
        let l = a.label();
        a.jmp(l);
        assert_eq!(a.finish(), Err(AsmError::UnboundLabel(0)));
    }

    /// Cross-check against GNU as when it is installed (development machines): every
    /// instruction above, assembled and compared byte for byte.
    #[test]
    fn matches_gnu_as_if_available() {
        use std::process::Command;
        if Command::new("as").arg("--version").output().is_err()
            || Command::new("objcopy").arg("--version").output().is_err()
        {
            eprintln!("skipped: GNU as/objcopy not installed");
            return;
        }
        let src = "
            .intel_syntax noprefix
            movabs rax, 0x1122334455667788
            mov r12, qword ptr [r8+0x8]
            mov rax, qword ptr [r12-8]
            mov qword ptr [r8+0x40], rax
            mov rcx, r13
            inc rsi
            dec rcx
            lock xadd qword ptr [rbx+0x100], rax
            xchg qword ptr [rbx+0x100], rax
            add rdi, 0x100
            xor r15, 1
            shl rdx, 32
            cmp r11, r14
            sub r11, r15
            cmp qword ptr [rbp+0x100], 0x100
            rdtsc
            pause
            out 0x21, al
        ";
        let mut a = Asm::new();
        a.mov_imm(Rax, 0x1122334455667788);
        a.load(R12, m(R8, 8));
        a.load(Rax, m(R12, -8));
        a.store(m(R8, 0x40), Rax);
        a.mov(Rcx, R13);
        a.inc(Rsi);
        a.dec(Rcx);
        a.lock_xadd(m(Rbx, 0x100), Rax);
        a.xchg(m(Rbx, 0x100), Rax);
        a.add_imm(Rdi, 0x100);
        a.xor_imm8(R15, 1);
        a.shl_imm(Rdx, 32);
        a.cmp(R11, R14);
        a.sub(R11, R15);
        a.cmp_mem_imm(m(Rbp, 0x100), 0x100);
        a.rdtsc();
        a.pause();
        a.out(0x21);
        let ours = a.finish().unwrap();
        let dir = std::env::temp_dir().join(format!("vcpulab-asm-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let s = dir.join("t.s");
        let o = dir.join("t.o");
        let bin = dir.join("t.bin");
        std::fs::write(&s, src).unwrap();
        // GNU as picks disp8 forms where it can; disp32 is forced by using displacements
        // >= 0x80 above, except [r8+0x8]/[r12-8]/[r8+0x40], which we compare separately.
        assert!(Command::new("as")
            .args(["--64", "-o"])
            .arg(&o)
            .arg(&s)
            .status()
            .unwrap()
            .success());
        assert!(Command::new("objcopy")
            .args(["-O", "binary", "-j", ".text"])
            .arg(&o)
            .arg(&bin)
            .status()
            .unwrap()
            .success());
        let theirs = std::fs::read(&bin).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        // Normalise: their disp8 encodings (mod=01) of the three small displacements.
        let mut norm = Vec::new();
        {
            let mut a = Asm::new();
            a.mov_imm(Rax, 0x1122334455667788);
            norm.extend(a.finish().unwrap());
        }
        norm.extend([0x4D, 0x8B, 0x60, 0x08]); // mov r12,[r8+8] disp8
        norm.extend([0x49, 0x8B, 0x44, 0x24, 0xF8]); // mov rax,[r12-8] disp8
        norm.extend([0x49, 0x89, 0x40, 0x40]); // mov [r8+0x40],rax disp8
        norm.extend(&ours[10 + 7 + 8 + 7..]);
        assert_eq!(theirs, norm, "GNU as disagrees with the emitter");
    }
}
