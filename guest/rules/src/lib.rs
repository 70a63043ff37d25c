//! The rules as the host links them natively: the contract's model and the shipped rule
//! sets. The rules themselves live in their own crates (`rules/zundoko-classic`,
//! `rules/zundoko-strict-ja`), built to components the same way as any scaffolded rule set;
//! this crate only gathers them for the host's tests and the native benchmark baseline.

pub use zundoko_guest_sdk::model::*;
pub use zundoko_guest_sdk::song::RuleSet;
pub use zundoko_guest_sdk::{naming, song, testing};

/// The default rules of the product (`rules/zundoko-classic`).
pub fn classic() -> RuleSet {
    zundoko_classic::rules()
}

/// The shipped variant (`rules/zundoko-strict-ja`).
pub fn strict_japanese() -> RuleSet {
    zundoko_strict_ja::rules()
}
