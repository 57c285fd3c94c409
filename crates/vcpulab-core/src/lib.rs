//! vcpulab-core: a deterministic discrete-event simulator of virtual-CPU scheduling.
//!
//! - [`scenario`]: the scenario schema (TOML / JSON), validated with precise errors;
//!   [`workload`] parses the workloads in it.
//! - [`model`]: a validated scenario compiled for the engine (built once per run).
//! - [`engine`]: the event loop, host clock model and guest model, one file per concern.
//! - [`vocab`]: the words the layers share (lock kinds, VM classes, ...), a leaf module.
//! - [`sched`]: host schedulers, one file each, behind one ops-table trait.
//! - [`repro`]: built-in reproductions of the seed papers' experiments.
//! - [`api`]: the entry points the CLI and the Python bindings use.

pub mod api;
pub mod contract;
pub mod engine;
pub mod error;
pub mod ft;
pub mod kvm;
pub mod metrics;
pub mod model;
pub mod overrides;
pub mod profile;
pub mod reader;
pub mod repro;
pub mod rng;
pub mod scenario;
pub mod sched;
pub mod summary;
pub mod time;
pub mod topology;
pub mod vocab;
pub mod workload;

pub use error::{Error, ScenarioError, SimError};
pub use scenario::Scenario;
pub use summary::Summary;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");
