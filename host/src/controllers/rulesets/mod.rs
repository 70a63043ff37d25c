//! The ZundokoRules controller: each rule set's module resolved, checked and rolled out
//! (`controller`), its status computed (`status`). What it publishes (which module serves
//! which rule set) lives below, in [`crate::supply::serving`], where the Hikawa controller
//! reads it.

pub mod controller;
mod status;
