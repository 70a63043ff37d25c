//! The Zundoko Kiyoshi rules, as pure Rust.
//!
//! This crate has no I/O, no clock and no randomness of its own: everything comes in an
//! [`Observed`] and everything goes out as a [`Plan`]. The wasm guest (`guest/component`)
//! wraps it behind the WIT contract; the host links it natively for tests and benchmarks.

pub mod model;
pub mod naming;
pub mod song;

pub use model::*;
pub use song::{RuleSet, classic, strict_japanese};
