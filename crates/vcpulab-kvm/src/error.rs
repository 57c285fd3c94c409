//! Harness errors: one enum, each variant with a message (like kvm-ioctls' errno errors,
//! plus what the harness was doing).

use std::fmt;

#[derive(Debug)]
pub enum Error {
    /// The input was invalid.
    Config(String),
    /// /dev/kvm is missing or cannot be used, and the mode demanded KVM.
    KvmUnavailable(String),
    /// A KVM ioctl failed: (what we were doing, errno).
    Kvm(&'static str, i32),
    /// Guest memory setup failed.
    Memory(String),
    /// A host scheduling call failed: (what, errno).
    Policy(String, i32),
    /// A cgroup file operation failed.
    Cgroup(String, std::io::Error),
    /// The guest stopped in an unexpected way (fault = shutdown, unknown exit).
    GuestFault { vcpu: usize, exit: String },
    /// The run exceeded its time limit.
    Timeout(String),
    /// Ctrl-C / SIGTERM.
    Interrupted,
    /// Anything else from the OS: (what, errno).
    Os(String, i32),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let strerror = |e: &i32| std::io::Error::from_raw_os_error(*e).to_string();
        match self {
            Error::Config(m) => write!(f, "invalid harness input: {m}"),
            Error::KvmUnavailable(m) => write!(f, "KVM unavailable: {m}"),
            Error::Kvm(what, e) => write!(f, "KVM {what} failed: {} (errno {e})", strerror(e)),
            Error::Memory(m) => write!(f, "guest memory: {m}"),
            Error::Policy(what, e) => {
                write!(f, "host policy {what} failed: {} (errno {e})", strerror(e))
            }
            Error::Cgroup(what, e) => write!(f, "cgroup {what}: {e}"),
            Error::GuestFault { vcpu, exit } => write!(f, "guest fault on vCPU {vcpu}: {exit}"),
            Error::Timeout(m) => write!(f, "timeout: {m}"),
            Error::Interrupted => write!(
                f,
                "interrupted (SIGINT/SIGTERM); the run was stopped and host settings restored"
            ),
            Error::Os(what, e) => write!(f, "{what} failed: {} (errno {e})", strerror(e)),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    /// Short machine-readable kind for the JSON error object.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Config(_) => "config",
            Error::KvmUnavailable(_) => "kvm-unavailable",
            Error::Kvm(..) => "kvm",
            Error::Memory(_) => "memory",
            Error::Policy(..) => "policy",
            Error::Cgroup(..) => "cgroup",
            Error::GuestFault { .. } => "guest-fault",
            Error::Timeout(_) => "timeout",
            Error::Interrupted => "interrupted",
            Error::Os(..) => "os",
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
