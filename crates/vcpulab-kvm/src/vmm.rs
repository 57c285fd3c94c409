//! The minimal VMM: one VM, 32 MiB of guest RAM identity-mapped with 2 MiB user pages,
//! N vCPUs in 64-bit long mode at CPL3 (IOPL 3, so `out` exits to us). No in-kernel
//! irqchip: every vCPU is runnable from the start (no INIT/SIPI), and interrupts are not
//! needed because wake-ups use blocking exits.

use crate::config::Config;
use crate::error::{Error, Result};
use crate::guest::*;
use crate::harness::{self, Ctx, Memory, Next, VcpuRunner};
use crate::stats::KvmStats;
use kvm_bindings::{
    kvm_msr_entry, kvm_segment, kvm_userspace_memory_region, Msrs, KVM_MAX_CPUID_ENTRIES,
};
use kvm_ioctls::{Kvm, VcpuExit, VcpuFd, VmFd};
use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
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
            setup_vcpu(&fd, i, code.entry(vc.program), vc.group)?;
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

fn setup_vcpu(fd: &VcpuFd, i: usize, entry: u64, group: usize) -> Result<()> {
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
    s.cs = code;
    s.ds = data;
    s.es = data;
    s.fs = data;
    s.gs = data;
    s.ss = data;
    s.gdt.base = GDT;
    s.gdt.limit = 7 * 8 - 1;
    s.idt.base = 0;
    s.idt.limit = 0; // no IDT: any guest exception ends in a shutdown exit
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
    r.rsp = samples_addr(i); // unused by the programs (no calls), but valid
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
