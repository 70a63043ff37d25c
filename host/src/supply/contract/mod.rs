//! The plan contract the host enforces: the rules a decision is asked of, a module or the
//! native rules (`rules`: `Rules`, `decide`), and the check every plan passes before any of it
//! is written (`plan_check`).

pub mod plan_check;
pub mod rules;
