//! The minimal VMM: one VM, 32 MiB of guest RAM identity-mapped with 2 MiB user pages,
//! N vCPUs in 64-bit long mode at CPL3 (IOPL 3, so `out` exits to us). No in-kernel
//! irqchip, unless a vCPU runs `irq-wake`: wake-ups use blocking exits. With `irq-wake`
//! the VM gets a split irqchip (local APICs in the kernel), every vCPU is made runnable
//! (the APs would otherwise wait for INIT/SIPI) with its local APIC enabled, the
//! `irq-wake` vCPUs run at CPL0 with an IDT, and the harness's eventfd of each is an
//! irqfd routed as an MSI to it.

use crate::config::Config;
use crate::error::{Error, Result};
use crate::guest::*;
use crate::harness::{self, Ctx, Memory, Next, VcpuRunner};
use crate::stats::KvmStats;
use kvm_bindings::{
    kvm_enable_cap, kvm_irq_routing_entry, kvm_mp_state, kvm_msr_entry, kvm_segment,
    kvm_userspace_memory_region, KvmIrqRouting, Msrs, KVM_CAP_SPLIT_IRQCHIP, KVM_IRQ_ROUTING_MSI,
    KVM_MAX_CPUID_ENTRIES, KVM_MP_STATE_RUNNABLE,
};
use kvm_ioctls::{Kvm, VcpuExit, VcpuFd, VmFd};
use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use vm_memory::{Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryMmap};

/// MSR_KVM_STEAL_TIME.
const MSR_KVM_STEAL_TIME: u32 = 0x4b56_4d03;

pub struct Vm {
    kvm: Kvm,
}

impl Vm {
    /// Opens /dev/kvm.
    pub fn open() -> Result<Vm> {
        Kvm::new()
            .map(|kvm| Vm { kvm })
            .map_err(|e| Error::KvmUnavailable(format!("cannot open /dev/kvm: {e}")))
    }

    /// Creates the VM, its memory (page tables, GDT, code, parameters) and the vCPUs.
    pub fn build(self, cfg: &Config) -> Result<BuiltVm> {
        let kvm = self.kvm;
        let vm = kvm
            .create_vm()
            .map_err(|e| Error::Kvm("KVM_CREATE_VM", e.errno()))?;
        let mem: GuestMemoryMmap =
            GuestMemoryMmap::from_ranges(&[(GuestAddress(0), MEM_SIZE as usize)])
                .map_err(|e| Error::Memory(format!("{e}")))?;
        let host = mem
            .get_host_address(GuestAddress(0))
            .map_err(|e| Error::Memory(format!("{e}")))?;
        let region = kvm_userspace_memory_region {
            slot: 0,
            flags: 0,
            guest_phys_addr: 0,
            memory_size: MEM_SIZE,
            userspace_addr: host as u64,
        };
        // SAFETY: `host` is the start of a MEM_SIZE mapping owned by `mem`, which BuiltVm
        // keeps alive for as long as the VM (the VM fd is dropped first, see BuiltVm).
        unsafe { vm.set_user_memory_region(region) }
            .map_err(|e| Error::Kvm("KVM_SET_USER_MEMORY_REGION", e.errno()))?;
        write_tables(&mem)?;
        let code = assemble().map_err(|e| Error::Memory(e.to_string()))?;
        mem.write_slice(&code.code, GuestAddress(CODE))
            .map_err(|e| Error::Memory(format!("{e}")))?;
        let irq_vcpus: Vec<usize> = cfg
            .vcpus
            .iter()
            .enumerate()
            .filter(|(_, v)| v.program.kernel_mode())
            .map(|(i, _)| i)
            .collect();
        let irqchip = !irq_vcpus.is_empty();
        if irqchip {
            // A split irqchip: the local APICs in the kernel, no in-kernel PIC or IOAPIC.
            // KVM_CREATE_IRQCHIP's PIC would take ports 0x20-0x21 (PORT_DONE, PORT_PLE)
            // in the kernel, so those exits would never reach the harness. 24: the IOAPIC
            // pins reserved below the MSI routes (whose GSIs start there).
            let cap = kvm_enable_cap {
                cap: KVM_CAP_SPLIT_IRQCHIP,
                args: [24, 0, 0, 0],
                ..Default::default()
            };
            vm.enable_cap(&cap)
                .map_err(|e| Error::Kvm("KVM_ENABLE_CAP(KVM_CAP_SPLIT_IRQCHIP)", e.errno()))?;
            write_idt_gate(&mem, IRQ_VECTOR, CODE + code.irq_handler as u64)?;
        }

        let cpuid = kvm
            .get_supported_cpuid(KVM_MAX_CPUID_ENTRIES)
            .map_err(|e| Error::Kvm("KVM_GET_SUPPORTED_CPUID", e.errno()))?;
        let mut vcpus = Vec::new();
        let mut steal_ok = true;
        for (i, vc) in cfg.vcpus.iter().enumerate() {
            let fd = vm
                .create_vcpu(i as u64)
                .map_err(|e| Error::Kvm("KVM_CREATE_VCPU", e.errno()))?;
            let mut c = cpuid.clone();
            for e in c.as_mut_slice() {
                if e.function == 1 {
                    e.ebx = (e.ebx & 0x00ff_ffff) | ((i as u32) << 24); // initial APIC id
                } else if e.function == 0xb || e.function == 0x1f {
                    e.edx = i as u32; // x2APIC id
                }
            }
            fd.set_cpuid2(&c)
                .map_err(|e| Error::Kvm("KVM_SET_CPUID2", e.errno()))?;
            setup_vcpu(
                &fd,
                i,
                code.entry(vc.program),
                vc.group,
                vc.program.kernel_mode(),
            )?;
            if irqchip {
                enable_lapic(&fd)?;
            }
            let msrs = Msrs::from_entries(&[kvm_msr_entry {
                index: MSR_KVM_STEAL_TIME,
                data: steal_addr(i) | 1,
                ..Default::default()
            }])
            .map_err(|_| Error::Memory("msr list".into()))?;
            if fd.set_msrs(&msrs).map(|n| n != 1).unwrap_or(true) {
                steal_ok = false;
            }
            let stats = KvmStats::open(fd.as_raw_fd());
            vcpus.push(Some(KvmVcpu {
                fd,
                stats,
                steal: steal_ok,
            }));
        }
        Ok(BuiltVm {
            vcpus,
            vm,
            mem,
            host,
            kvm,
            irq_vcpus,
        })
    }
}

fn w<T: vm_memory::ByteValued>(mem: &GuestMemoryMmap, v: T, at: u64) -> Result<()> {
    mem.write_obj(v, GuestAddress(at))
        .map_err(|e| Error::Memory(format!("{e}")))
}

/// Identity page tables (2 MiB pages, present|writable|user) for the first 4 GiB, and the
/// GDT with kernel and user (DPL 3) 64-bit code and data descriptors and a TSS.
fn write_tables(mem: &GuestMemoryMmap) -> Result<()> {
    w(mem, PDPT | 7, PML4)?; // PML4[0] -> PDPT, P|RW|US
    for i in 0..4u64 {
        w(mem, (PD + i * 0x1000) | 7, PDPT + i * 8)?; // PDPT[i] -> PD i
    }
    for i in 0..2048u64 {
        w(mem, (i << 21) | 0x87, PD + i * 8)?; // P|RW|US|PS: a 2 MiB page
    }
    let gdt: [u64; 7] = [
        0,
        0x00af_9b00_0000_ffff, // 0x08 kernel code 64
        0x00cf_9300_0000_ffff, // 0x10 kernel data
        0x00af_fb00_0000_ffff, // 0x18 user code 64, DPL 3
        0x00cf_f300_0000_ffff, // 0x20 user data, DPL 3
        // 0x28: 64-bit TSS (16 bytes): base TSS, limit 0x67, type 9 (available), present
        0x0000_8900_0000_0067 | ((TSS & 0xff_ffff) << 16) | ((TSS >> 24 & 0xff) << 56),
        TSS >> 32,
    ];
    for (i, d) in gdt.iter().enumerate() {
        w(mem, *d, GDT + 8 * i as u64)?;
    }
    Ok(())
}

/// A 64-bit interrupt gate (DPL 0, kernel code selector 0x08, no IST) for `vector`.
fn write_idt_gate(mem: &GuestMemoryMmap, vector: u8, handler: u64) -> Result<()> {
    let lo = (handler & 0xffff)
        | (0x08 << 16)
        | (0x8E00u64 << 32) // present, DPL 0, type 0xE (64-bit interrupt gate)
        | ((handler >> 16 & 0xffff) << 48);
    let at = IDT + 16 * vector as u64;
    w(mem, lo, at)?;
    w(mem, handler >> 32, at + 8)
}

/// With an in-kernel irqchip: the vCPU runnable from the start, and its local APIC
/// software-enabled (spurious-interrupt vector register, offset 0xF0: bit 8, vector 0xFF).
fn enable_lapic(fd: &VcpuFd) -> Result<()> {
    fd.set_mp_state(kvm_mp_state {
        mp_state: KVM_MP_STATE_RUNNABLE,
    })
    .map_err(|e| Error::Kvm("KVM_SET_MP_STATE", e.errno()))?;
    let mut lapic = fd
        .get_lapic()
        .map_err(|e| Error::Kvm("KVM_GET_LAPIC", e.errno()))?;
    for (k, b) in 0x1FFu32.to_le_bytes().iter().enumerate() {
        lapic.regs[0xF0 + k] = *b as _;
    }
    fd.set_lapic(&lapic)
        .map_err(|e| Error::Kvm("KVM_SET_LAPIC", e.errno()))
}

fn setup_vcpu(fd: &VcpuFd, i: usize, entry: u64, group: usize, kernel: bool) -> Result<()> {
    let mut s = fd
        .get_sregs()
        .map_err(|e| Error::Kvm("KVM_GET_SREGS", e.errno()))?;
    let code = kvm_segment {
        base: 0,
        limit: 0xffff_ffff,
        selector: 0x1b,
        type_: 11,
        present: 1,
        dpl: 3,
        db: 0,
        s: 1,
        l: 1,
        g: 1,
        avl: 0,
        unusable: 0,
        padding: 0,
    };
    let data = kvm_segment {
        selector: 0x23,
        type_: 3,
        db: 1,
        l: 0,
        ..code
    };
    // `irq-wake` runs at CPL0 (kernel code 0x08, data 0x10), with the IDT of its interrupt.
    let (code, data) = if kernel {
        (
            kvm_segment {
                selector: 0x08,
                dpl: 0,
                ..code
            },
            kvm_segment {
                selector: 0x10,
                dpl: 0,
                ..data
            },
        )
    } else {
        (code, data)
    };
    s.cs = code;
    s.ds = data;
    s.es = data;
    s.fs = data;
    s.gs = data;
    s.ss = data;
    s.gdt.base = GDT;
    s.gdt.limit = 7 * 8 - 1;
    // Without an IDT any guest exception ends in a shutdown exit; `irq-wake`'s has its
    // one interrupt gate.
    (s.idt.base, s.idt.limit) = if kernel { (IDT, 256 * 16 - 1) } else { (0, 0) };
    s.tr = kvm_segment {
        base: TSS,
        limit: 0x67,
        selector: 0x28,
        type_: 11,
        present: 1,
        s: 0,
        ..Default::default()
    };
    s.cr3 = PML4;
    s.cr4 = 0x20 | 0x600; // PAE, OSFXSR, OSXMMEXCPT
    s.cr0 = 0x8005_0033; // PG, AM, WP, NE, ET, MP, PE
    s.efer = 0x500; // LME, LMA
    fd.set_sregs(&s)
        .map_err(|e| Error::Kvm("KVM_SET_SREGS", e.errno()))?;
    let mut r = fd
        .get_regs()
        .map_err(|e| Error::Kvm("KVM_GET_REGS", e.errno()))?;
    r.rip = entry;
    r.rflags = 0x3002; // IOPL 3: `out` is allowed at CPL3 and exits to the harness

    // Unused by the programs (no calls), but valid; an `irq-wake` vCPU's interrupt frame
    // goes on it, so that one is the top of the vCPU's own slot page.
    r.rsp = if kernel {
        slot_addr(i) + SLOT_SIZE
    } else {
        samples_addr(i)
    };
    r.rbp = GLOBAL;
    r.rbx = group_addr(group);
    r.r8 = slot_addr(i);
    r.rdi = samples_addr(i);
    fd.set_regs(&r)
        .map_err(|e| Error::Kvm("KVM_SET_REGS", e.errno()))
}

pub struct KvmVcpu {
    fd: VcpuFd,
    stats: Option<KvmStats>,
    steal: bool,
}

/// The VM with its memory. Field order matters: vCPU fds, then the VM fd are closed before
/// the memory is unmapped.
pub struct BuiltVm {
    vcpus: Vec<Option<KvmVcpu>>,
    vm: VmFd,
    mem: GuestMemoryMmap,
    host: *mut u8,
    #[allow(dead_code)]
    kvm: Kvm,
    /// The vCPUs that run `irq-wake` (their interrupts are routed by `route_interrupts`).
    irq_vcpus: Vec<usize>,
}

// SAFETY: `host` is only a cached address of `mem`'s mapping, which is Send.
unsafe impl Send for BuiltVm {}

impl BuiltVm {
    pub fn memory(&self) -> Memory {
        Memory::from_guest(self.host, MEM_SIZE as usize)
    }

    pub fn tsc_hz(&self) -> Option<f64> {
        let v = self.vcpus.iter().flatten().next()?;
        v.fd.get_tsc_khz().ok().map(|k| k as f64 * 1000.0)
    }

    /// Routes an MSI with `IRQ_VECTOR` to each `irq-wake` vCPU and makes its eventfd
    /// (`efds[v]`, the one the harness's waker writes) the irqfd that sends it. GSIs from 24,
    /// past the IOAPIC's pins.
    pub fn route_interrupts(&self, efds: &[RawFd]) -> Result<()> {
        if self.irq_vcpus.is_empty() {
            return Ok(());
        }
        let mut routing = KvmIrqRouting::new(self.irq_vcpus.len())
            .map_err(|_| Error::Memory("irq routing table".into()))?;
        for (k, &v) in self.irq_vcpus.iter().enumerate() {
            let mut e = kvm_irq_routing_entry {
                gsi: 24 + v as u32,
                type_: KVM_IRQ_ROUTING_MSI,
                ..Default::default()
            };
            e.u.msi.address_lo = 0xFEE0_0000 | (v as u32) << 12; // fixed, physical, APIC id v
            e.u.msi.data = IRQ_VECTOR as u32; // edge, fixed delivery
            routing.as_mut_slice()[k] = e;
        }
        self.vm
            .set_gsi_routing(&routing)
            .map_err(|e| Error::Kvm("KVM_SET_GSI_ROUTING", e.errno()))?;
        for &v in &self.irq_vcpus {
            // SAFETY: efds[v] is an open eventfd the harness owns for the whole run; the
            // wrapper is never dropped (ManuallyDrop), so it does not close it. KVM_IRQFD
            // takes its own reference to the eventfd.
            let fd = std::mem::ManuallyDrop::new(unsafe {
                vmm_sys_util::eventfd::EventFd::from_raw_fd(efds[v])
            });
            self.vm
                .register_irqfd(&fd, 24 + v as u32)
                .map_err(|e| Error::Kvm("KVM_IRQFD", e.errno()))?;
        }
        Ok(())
    }

    pub fn take_vcpus(&mut self) -> Vec<Box<dyn VcpuRunner>> {
        self.vcpus
            .iter_mut()
            .map(|v| Box::new(v.take().expect("vCPUs taken once")) as Box<dyn VcpuRunner>)
            .collect()
    }

    #[allow(dead_code)]
    fn keep(&self) -> (&VmFd, &GuestMemoryMmap) {
        (&self.vm, &self.mem)
    }
}

impl VcpuRunner for KvmVcpu {
    fn run(&mut self, ctx: &Ctx, v: usize) -> std::result::Result<(), String> {
        let ie = &mut self.fd.get_kvm_run().immediate_exit as *mut u8;
        harness::set_immediate_exit_ptr(ie);
        let r = loop {
            match self.fd.run() {
                Ok(VcpuExit::IoOut(port, _)) => match ctx.on_exit(v, port as u8) {
                    Ok(Next::Done) => break Ok(()),
                    Ok(Next::Resume) => continue,
                    Err(e) => break Err(e),
                },
                Ok(VcpuExit::Shutdown) => {
                    break Err("shutdown exit (a guest exception: triple fault at CPL3)".to_string())
                }
                Ok(other) => break Err(format!("unexpected exit {other:?}")),
                Err(e) if e.errno() == libc::EINTR || e.errno() == libc::EAGAIN => {
                    self.fd.set_kvm_immediate_exit(0);
                    if harness::stopping(ctx) && harness::kicked() {
                        break Err(
                            "kicked out of KVM_RUN: the guest did not stop in time".to_string()
                        );
                    }
                    continue;
                }
                Err(e) => break Err(format!("KVM_RUN failed: {e}")),
            }
        };
        harness::set_immediate_exit_ptr(std::ptr::null_mut());
        r
    }

    fn kvm_stats(&self) -> BTreeMap<String, u64> {
        self.stats.as_ref().map(|s| s.read()).unwrap_or_default()
    }

    fn steal_ns(&self, ctx: &Ctx, v: usize) -> Option<u64> {
        // struct kvm_steal_time { u64 steal; u32 version; ... }
        self.steal.then(|| ctx.mem.get(steal_addr(v)))
    }
}
