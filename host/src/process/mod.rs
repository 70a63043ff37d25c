//! Leader election and plumbing, beneath the module supply and the controllers: leader
//! election (`leader`), the HTTP endpoints (`http`) and what readiness is made of (`health`),
//! metrics (`metrics`, and every API request measured: `api_metrics`), logs (`telemetry`), the allocator (`allocator`) and memory given back (`memory`).
//! Nothing here imports from the layers above; what they tell it comes as plain values.

pub mod allocator;
pub mod api_metrics;
pub mod health;
pub mod http;
pub mod leader;
pub mod memory;
pub mod metrics;
pub mod telemetry;
pub mod tenant_metrics;
