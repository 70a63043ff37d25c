//! Conformance-style tests: the scenarios a real kube-apiserver answers, with the real
//! codes, reasons and messages.

mod access_reviews;
mod binary;
mod builtins;
mod cel;
// How every test of the workspace reads CI (one file, the host's tests include it too).
#[path = "../../../host/tests/common/ci.rs"]
mod ci;
mod common;
mod connections;
mod cost;
mod crud;
mod deletion;
mod discovery;
mod faults;
mod kube_rs;
mod kubectl;
mod managed_fields;
mod metadata;
mod patching;
mod rbac;
mod secrets;
mod status_generation;
mod validation;
mod watching;
