//! The Hikawa controller, in the order data flows: the controller (`controller`) is handed a
//! `context`; it observes the Hikawa and its children (`children`, decoded lean by `lean`,
//! `observe`), decides whether to decide (`pace`), takes a place among those deciding with the module
//! (`places`), calls the rules and checks the plan (the
//! plan contract, `supply/contract/`), then applies it (`apply`), writing the status
//! (`status`) and Events (`controllers/writes/events.rs`; `pace/warnings.rs` lends it the
//! pacing's memory of the last Warning). `reconcile` holds one reconcile's steps, `wakes` what
//! else wakes a Hikawa, `entropy` each decision's entropy, `provenance` the record of each
//! decision on the children it made, `retry` the record of a failure's backoff on its Event,
//! `queue` when each Hikawa came due and how long it waited.

pub mod apply;
pub mod children;
pub mod context;
pub mod controller;
pub mod entropy;
pub mod lean;
pub mod observe;
pub mod pace;
pub mod places;
pub mod provenance;
pub mod queue;
mod reconcile;
pub mod retry;
pub mod status;
mod wakes;

/// Which module decides for a Hikawa, an unavailable choice told as the reconcile error.
pub type Choice = crate::supply::serving::Choice<crate::controllers::error::Error>;
