//! The Zundoko Kiyoshi operator: a Kubernetes controller whose rules run as a sandboxed
//! wasm component. Data flows one way: event, observe, guest, plan, check, apply.

pub mod cli;
pub mod crd;
pub mod observe;
pub mod plan_check;
pub mod rules;
pub mod sandbox;
pub mod simulate;
pub mod telemetry;
