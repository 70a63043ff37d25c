//! The Zundoko Kiyoshi operator: a Kubernetes controller whose rules run as a sandboxed
//! wasm component. Data flows one way: event, observe, guest, plan, check, apply.

pub mod apply;
pub mod children;
pub mod cli;
pub mod conformance;
pub mod context;
pub mod controller;
pub mod crd;
pub mod error;
pub mod events;
pub mod health;
pub mod http;
pub mod lean;
pub mod leader;
pub mod memory;
pub mod metrics;
pub mod modules;
pub mod observe;
pub mod operator;
pub mod pace;
pub mod plan_check;
pub mod rules;
pub mod rulesets;
pub mod sandbox;
pub mod simulate;
pub mod status;
pub mod swap;
pub mod telemetry;
pub mod text;
