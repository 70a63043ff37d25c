//! Replicas: every replica works on its share of the Hikawas. Shards (`assign.rs`) are each
//! held through a Lease with client-go's leader-election semantics (`lock.rs` the rules,
//! `elector.rs` the loop, `fence.rs` writes kept inside the term); the live replicas beat in
//! a members Lease (`members.rs`); the balancer hands shards over safely (`shards.rs`).

pub mod assign;
pub mod elector;
pub mod fence;
pub mod lock;
pub mod members;
pub mod shards;

pub use elector::{Control, Election, Seen, Term};
pub use fence::Fence;
pub use lock::{Durations, LeaseLock, Plan};
pub use shards::{Entered, InFlight, ShardSettings, ShardTable, Sharding};
