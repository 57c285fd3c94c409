//! Per-thread observability: /proc schedstat (run and runqueue-wait time, timeslices),
//! voluntary / involuntary context switches, and KVM binary stats (`KVM_GET_STATS_FD`).

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct ThreadStats {
    pub run_ns: u64,
    pub wait_ns: u64,
    pub timeslices: u64,
    pub voluntary: u64,
    pub involuntary: u64,
}

impl ThreadStats {
    pub fn read(tid: i32) -> ThreadStats {
        let mut s = ThreadStats::default();
        if let Ok(t) = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")) {
            let v: Vec<u64> = t
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            if v.len() >= 3 {
                (s.run_ns, s.wait_ns, s.timeslices) = (v[0], v[1], v[2]);
            }
        }
        if let Ok(t) = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")) {
            for line in t.lines() {
                if let Some(v) = line.strip_prefix("voluntary_ctxt_switches:") {
                    s.voluntary = v.trim().parse().unwrap_or(0);
                } else if let Some(v) = line.strip_prefix("nonvoluntary_ctxt_switches:") {
                    s.involuntary = v.trim().parse().unwrap_or(0);
                }
            }
        }
        s
    }

    pub fn delta(&self, earlier: &ThreadStats) -> ThreadStats {
        ThreadStats {
            run_ns: self.run_ns.saturating_sub(earlier.run_ns),
            wait_ns: self.wait_ns.saturating_sub(earlier.wait_ns),
            timeslices: self.timeslices.saturating_sub(earlier.timeslices),
            voluntary: self.voluntary.saturating_sub(earlier.voluntary),
            involuntary: self.involuntary.saturating_sub(earlier.involuntary),
        }
    }
}

/// `KVM_GET_STATS_FD` = _IO(KVMIO, 0xce).
const KVM_GET_STATS_FD: libc::c_ulong = 0xAECE;

/// The binary stats of one KVM object (a vCPU fd here).
pub struct KvmStats {
    fd: OwnedFd,
    /// (name, offset in bytes from data_offset, number of u64 values)
    descs: Vec<(String, u64, usize)>,
    data_offset: u64,
}

fn pread_exact(fd: i32, buf: &mut [u8], off: u64) -> bool {
    // SAFETY: `buf` is valid and writable for buf.len() bytes; fd is a descriptor we own.
    let n = unsafe {
        libc::pread(
            fd,
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
            off as libc::off_t,
        )
    };
    n == buf.len() as isize
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}

impl KvmStats {
    /// Opens the stats of the KVM object behind `obj_fd`; None if unsupported.
    pub fn open(obj_fd: i32) -> Option<KvmStats> {
        // SAFETY: KVM_GET_STATS_FD takes no argument and returns a new fd or -1.
        let fd = unsafe { libc::ioctl(obj_fd, KVM_GET_STATS_FD, 0) };
        if fd < 0 {
            return None;
        }
        // SAFETY: fd is a fresh descriptor returned by the kernel that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // header: flags, name_size, num_desc, id_offset, desc_offset, data_offset (u32 each)
        let mut h = [0u8; 24];
        if !pread_exact(fd.as_raw_fd(), &mut h, 0) {
            return None;
        }
        let (name_size, num_desc, desc_offset, data_offset) = (
            u32_at(&h, 4) as usize,
            u32_at(&h, 8) as usize,
            u32_at(&h, 16) as u64,
            u32_at(&h, 20) as u64,
        );
        let desc_size = 16 + name_size;
        let mut d = vec![0u8; desc_size * num_desc];
        if !pread_exact(fd.as_raw_fd(), &mut d, desc_offset) {
            return None;
        }
        let mut descs = Vec::with_capacity(num_desc);
        for i in 0..num_desc {
            let b = &d[i * desc_size..(i + 1) * desc_size];
            // desc: flags u32, exponent i16, size u16, offset u32, bucket_size u32, name[]
            let size = u16::from_le_bytes([b[6], b[7]]) as usize;
            let offset = u32_at(b, 8) as u64;
            let name = String::from_utf8_lossy(&b[16..])
                .trim_end_matches('\0')
                .to_string();
            descs.push((name, offset, size));
        }
        Some(KvmStats {
            fd,
            descs,
            data_offset,
        })
    }

    /// Scalar stats (histograms skipped) by name.
    pub fn read(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for (name, offset, size) in &self.descs {
            if *size != 1 {
                continue;
            }
            let mut b = [0u8; 8];
            if pread_exact(self.fd.as_raw_fd(), &mut b, self.data_offset + offset) {
                out.insert(name.clone(), u64::from_le_bytes(b));
            }
        }
        out
    }
}

/// The stats that changed between two reads (cumulative counters only; "max"/"peak"
/// style values that did not change are left out too).
pub fn stats_delta(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter_map(|(k, v)| {
            let b = before.get(k).copied().unwrap_or(0);
            (*v != b).then(|| (k.clone(), v.saturating_sub(b)))
        })
        .collect()
}
