//! __NAME__: a Zundoko rule set. Change `reconcile` and the words; `cargo test -p __NAME__`
//! checks them natively, `make rules NAME=__NAME__` builds the component.
//!
//! The rules get everything they may know in `observed` (the Hikawa, its children in order,
//! the time, 64 random bits) and answer with a plan; they have no clock, no randomness and
//! no I/O of their own. `zundoko_guest_sdk::steps` builds the plans a song is made of.

use zundoko_guest_sdk::{ModuleInfo, Observed, Plan, RuleError, Rules, module_info_from_cargo, steps};

pub const ZUN: &str = "Zun";
pub const DOKO: &str = "Doko";
/// The last word of every song: said once, after the call, and nothing after it.
pub const KIYOSHI: &str = "Ki-yo-shi!";
/// The call that ends the song.
pub const CALL: [&str; 5] = [ZUN, ZUN, ZUN, ZUN, DOKO];

pub struct MyRules;

impl Rules for MyRules {
    /// Name, version and description come from Cargo.toml.
    fn info(&self) -> ModuleInfo {
        module_info_from_cargo!()
    }

    fn reconcile(&self, observed: &Observed) -> Result<Plan, RuleError> {
        if observed.kiyoshi.is_some() {
            return Ok(steps::song_over(observed));
        }
        if observed.wait_millis() > 0 {
            return Ok(steps::wait(observed));
        }
        let words: Vec<&str> = observed.words().collect();
        if words.ends_with(&CALL) {
            return Ok(steps::say_kiyoshi(observed, KIYOSHI));
        }
        let word = if observed.entropy & 1 == 0 { ZUN } else { DOKO };
        Ok(steps::say_word(observed, word))
    }
}

zundoko_guest_sdk::export_rules!(MyRules);
