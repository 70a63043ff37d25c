//! The product's default rules: each word is Zun or Doko with equal chance; after
//! Zun Zun Zun Zun Doko, Ki-yo-shi! one interval later, and nothing more.

use zundoko_guest_sdk::song::{RuleSet, Words};

pub fn rules() -> RuleSet {
    RuleSet {
        // The module's name, version and description are this crate's, from Cargo.toml.
        info: zundoko_guest_sdk::module_info_from_cargo!(static),
        words: Words { zun: "Zun".into(), doko: "Doko".into(), kiyoshi: "Ki-yo-shi!".into() },
        zuns: 4,
        strict: false,
    }
}

zundoko_guest_sdk::export_rules!(rules());
