//! The shipped variant, to show a swap: the original operator's stricter rule (exactly
//! four ズン before the ドコ: a fifth ズン spoils it), sung in Japanese.

use zundoko_guest_sdk::song::{RuleSet, Words};

pub fn rules() -> RuleSet {
    RuleSet {
        // The module's name, version and description are this crate's, from Cargo.toml.
        info: zundoko_guest_sdk::module_info_from_cargo!(static),
        words: Words { zun: "ズン".into(), doko: "ドコ".into(), kiyoshi: "キ・ヨ・シ！".into() },
        zuns: 4,
        strict: true,
    }
}

zundoko_guest_sdk::export_rules!(rules());
