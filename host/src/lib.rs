//! The Zundoko Kiyoshi operator: a Kubernetes controller whose rules run as a sandboxed
//! wasm component. Data flows one way: event, observe, guest, plan, check, apply.
//!
//! Layers, top to bottom; a module imports (`crate::...`) only from its own layer or a lower
//! one, and no two folders import each other (`tests/layers.rs` checks it; docs/design.md
//! draws it):
//! - [`cli`] (and main.rs): the command line and its offline verbs;
//! - [`operator`]: the operator put together: start-up, the sources, the controllers;
//! - [`controllers`]: the Hikawa controller (`hikawa`), the rule-set controller (`rulesets`),
//!   and beneath both what both write (`writes`: creates, Events, conditions, status patches);
//! - [`supply`]: the module supply: sources (file, ConfigMap, OCI, rule sets), the OCI client,
//!   the loader, the sandbox, the plan contract, and which module serves which rule set;
//! - [`process`]: leader election and plumbing: HTTP endpoints, health, metrics, logs, memory;
//! - [`crd`], [`text`]: the API types and text helpers.

pub mod cli;
pub mod controllers;
pub mod crd;
pub mod operator;
pub mod process;
pub mod supply;
pub mod text;
