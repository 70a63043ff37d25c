//! The ZundokoRules controller: each rule set's module resolved, checked and rolled out, its
//! status computed and written. `controller` runs it; a reconcile reads as its steps, a file
//! each: `resolve` -> `check` -> `roll_out` -> `publish` -> `record`. The rollout's rules are
//! pure, in `tally` (with `status`, what the status says). What it publishes (which module
//! serves which rule set) lives below, in [`crate::supply::serving`], where the Hikawa
//! controller reads it. A tenant's rule set (`ZundokoNamespacedRules`) takes the same steps,
//! held first to the cluster policy selecting its namespace (`policy`). The status carries the
//! tenant's use of the operator as this replica counts it (`usage`).

mod check;
pub mod policy;
pub mod controller;
mod publish;
mod record;
mod resolve;
mod roll_out;
mod status;
mod tally;
mod usage;
