//! The Zundoko Kiyoshi operator: a Kubernetes controller whose rules run as a sandboxed
//! wasm component. Data flows one way: event, observe, guest, plan, check, apply.
//!
//! One folder per mechanism:
//! - [`reconcile`]: the reconcile path, from a Hikawa event to the writes of a checked plan;
//! - [`modules`]: the module supply: the sandbox, compiled modules, the default module's hot
//!   swap, rule sets and their rollouts;
//! - [`process`]: the process and its plumbing: start-up, leader election, HTTP endpoints,
//!   health, metrics, logs, memory;
//! - [`cli`]: the command line and its offline commands (`simulate`, `test`).

pub mod cli;
pub mod crd;
pub mod error;
pub mod modules;
pub mod process;
pub mod reconcile;
pub mod text;
