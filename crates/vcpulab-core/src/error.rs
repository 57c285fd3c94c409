//! Errors with enough context to fix the input: file, key path, what is wrong.

use std::fmt;

/// A scenario (or sweep, or experiment) input that cannot be used.
#[derive(Clone, Debug, PartialEq)]
pub struct ScenarioError {
    /// The file the input came from, or a description such as `<dict>`.
    pub origin: String,
    /// The key path inside the input, e.g. `vm[1].workload[0].ops[2].duration`; empty for
    /// errors about the whole document (syntax errors).
    pub path: String,
    pub message: String,
}

impl ScenarioError {
    pub fn new(origin: &str, path: impl Into<String>, message: impl Into<String>) -> Self {
        ScenarioError {
            origin: origin.to_string(),
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}: {}", self.origin, self.message)
        } else {
            write!(f, "{}: {}: {}", self.origin, self.path, self.message)
        }
    }
}

impl std::error::Error for ScenarioError {}

/// A failure while simulating a valid scenario: a model that cannot make progress, or a
/// broken invariant (a bug in vcpulab). Carries what is needed to reproduce it.
#[derive(Clone, Debug, PartialEq)]
pub struct SimError {
    pub scenario: String,
    pub seed: u64,
    pub at_ns: u64,
    pub message: String,
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "simulation of scenario {:?} (seed {}) failed at t={}ns: {}",
            self.scenario, self.seed, self.at_ns, self.message
        )
    }
}

impl std::error::Error for SimError {}

/// Any error the public API returns.
#[derive(Clone, Debug, PartialEq)]
pub enum Error {
    Scenario(ScenarioError),
    Sim(SimError),
    /// Reading a file failed (not found, permission); carries the path.
    Io {
        path: String,
        message: String,
    },
    /// An unknown experiment, case or other name; the message lists what exists.
    NotFound(String),
    /// The caller stopped the run (`RunOptions::stop` said so: Ctrl-C).
    Interrupted,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Scenario(e) => e.fmt(f),
            Error::Sim(e) => e.fmt(f),
            Error::Io { path, message } => write!(f, "{path}: {message}"),
            Error::NotFound(m) => f.write_str(m),
            Error::Interrupted => f.write_str("interrupted"),
        }
    }
}

impl std::error::Error for Error {}

impl From<ScenarioError> for Error {
    fn from(e: ScenarioError) -> Self {
        Error::Scenario(e)
    }
}
impl From<SimError> for Error {
    fn from(e: SimError) -> Self {
        Error::Sim(e)
    }
}
