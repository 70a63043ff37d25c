//! The controllers: one folder per controller, the Hikawa's (`hikawa`) and the rule sets'
//! (`rulesets`), and beneath both what both write (`writes`: creates, Events, conditions,
//! status patches). Neither controller imports from the other's folder for its work; both
//! import `writes`. `error` is the reconcile error both return.

pub mod error;
pub mod hikawa;
pub mod rulesets;
pub mod writes;
