//! The sandbox: compile rules modules once, run each call in a fresh, limited instance.

/// Public (with `convert`) only for the fuzz targets and property tests (fuzz/,
/// host/tests/fuzzed_boundaries/): a guest's values as the host lifts them.
#[doc(hidden)]
pub mod bindings;
pub mod budget;
mod compile_queue;
mod compiled_cache;
pub mod compiler_process;
#[doc(hidden)]
pub mod convert;
mod error;
mod guest_threads;
mod host_state;
mod in_flight;
mod limits;
pub mod metadata;
mod module;
pub mod reset_check;
mod sealed_code;
mod turns;
mod wasi;

pub use bindings::{RULES_EXPORT, WORLD};
pub use compile_queue::{COMPILES, CompileQueue, WhoCompiles};
pub use error::{GuestError, PlanRejection};
pub use guest_threads::GuestThreads;
pub use host_state::GuestLog;
pub use limits::SandboxLimits;
pub use module::{GuestOutcome, ModuleIdentity, RulesModule, SandboxEngine};
pub use reset_check::{PagemapScan, ResetPath};
pub use turns::{CallShares, Turn, Turns};
