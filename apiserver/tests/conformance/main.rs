//! Conformance-style tests: the scenarios a real kube-apiserver answers, with the real
//! codes, reasons and messages.

mod binary;
mod builtins;
mod cel;
mod common;
mod crud;
mod deletion;
mod discovery;
mod faults;
mod kube_rs;
mod kubectl;
mod managed_fields;
mod metadata;
mod patching;
mod secrets;
mod status_generation;
mod validation;
mod watching;
