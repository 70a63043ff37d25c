//! The process and its plumbing: the operator put together (`operator`), leader election
//! (`leader`), the HTTP endpoints (`http`) and what readiness is made of (`health`), metrics,
//! logs (`telemetry`) and memory given back (`memory`).

pub mod health;
pub mod http;
pub mod leader;
pub mod memory;
pub mod metrics;
pub mod operator;
pub mod telemetry;
