//! The wasm adapter: exports a rule set from `zundoko-rules` through the WIT world
//! `zundokokiyoshi:rules/zundoko-rules`. It only converts between the WIT bindings and the
//! rules' plain types; every decision is made in `zundoko-rules`, which is tested natively.
#![cfg(target_arch = "wasm32")]

mod heap;
mod convert;
#[cfg(feature = "hostile")]
mod hostile;

wit_bindgen::generate!({
    path: "../../wit",
    world: "zundoko-rules",
});

use exports::zundokokiyoshi::rules::rules::Guest;
use zundokokiyoshi::rules::log::{Level, log};
use zundokokiyoshi::rules::types as wit;

#[global_allocator]
static ALLOCATOR: heap::BumpAllocator = heap::BumpAllocator::new();

fn rule_set() -> zundoko_rules::RuleSet {
    if cfg!(feature = "strict-ja") {
        zundoko_rules::strict_japanese()
    } else if cfg!(feature = "hostile") {
        let mut rules = zundoko_rules::classic();
        rules.info.name = "zundoko-hostile";
        rules.info.description = "test fixture: classic rules that misbehave as params.hostile asks";
        rules
    } else {
        zundoko_rules::classic()
    }
}

/// A panic aborts the instance (panic=abort); report its message through the log import
/// first, so the host can say why the guest trapped.
fn report_panics() {
    std::panic::set_hook(Box::new(|info| log(Level::Error, &format!("panic: {info}"))));
}

struct Rules;

impl Guest for Rules {
    fn info() -> wit::ModuleInfo {
        convert::module_info(rule_set().module_info())
    }

    fn reconcile(observed: wit::Observed) -> Result<wit::Plan, wit::RuleError> {
        report_panics();
        let observed = convert::observed(observed);
        #[cfg(feature = "hostile")]
        if let Some(plan) = hostile::misbehave(&observed) {
            return Ok(convert::plan(plan));
        }
        rule_set()
            .reconcile(&observed)
            .map(convert::plan)
            .map_err(convert::rule_error)
    }
}

export!(Rules);
