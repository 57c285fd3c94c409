//! vcpulab-kvm: a real-KVM harness for vcpulab. Guest microbenchmarks (compute loops,
//! spinlocks, an all-vCPU barrier, wake-up and timer latency) run as a KVM guest whose
//! vCPUs are host threads under host scheduling policies (affinity, nice, RT classes,
//! custom slices, cgroups), with a user-space pause-loop exit (PLE).
//!
//! Linux/x86-64 only; elsewhere the crate is an empty stub whose [`run_json`] says so.
//! Without /dev/kvm the programs run as plain host threads (with a notice).

pub mod asm;
pub mod guest;

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub mod cgroup;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub mod config;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub mod error;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub mod harness;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub mod policy;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub mod stats;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod threads;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod vmm;

/// True where the harness is built (Linux on x86-64).
pub const SUPPORTED: bool = cfg!(all(target_os = "linux", target_arch = "x86_64"));

/// Runs one harness configuration given as JSON (see `config::Config`); returns the result
/// JSON, or an error JSON `{"error": {"kind", "message"}}` as Err.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub fn run_json(config: &str) -> Result<String, String> {
    let err = |kind: &str, message: String| {
        serde_json::json!({"error": {"kind": kind, "message": message}}).to_string()
    };
    let cfg: config::Config = serde_json::from_str(config)
        .map_err(|e| err("config", format!("invalid harness input: {e}")))?;
    match harness::run(cfg) {
        Ok(r) => Ok(serde_json::to_string(&r).expect("results serialize")),
        Err(e) => Err(err(e.kind(), e.to_string())),
    }
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
pub fn run_json(_config: &str) -> Result<String, String> {
    Err(serde_json::json!({"error": {"kind": "unsupported", "message": "the KVM harness is built for Linux on x86-64 only"}}).to_string())
}

/// Leftover cgroup directories of this harness (none after a clean run).
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub fn cgroup_leftovers() -> Vec<String> {
    cgroup::leftovers()
        .into_iter()
        .map(|p| p.display().to_string())
        .collect()
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
pub fn cgroup_leftovers() -> Vec<String> {
    Vec::new()
}
