//! The wasm side of `export_rules!`: the calls from the host (through `bindings`), converted
//! to and from the plain model. Every decision is made by the rule set.

use crate::bindings::zundokokiyoshi::rules::types as wit;
use crate::{Rules, convert};

/// Every call runs in a fresh instance that is thrown away after it: a bump allocator.
#[global_allocator]
static ALLOCATOR: crate::heap::BumpAllocator = crate::heap::BumpAllocator::new();

pub fn info(rules: &impl Rules) -> wit::ModuleInfo {
    report_panics();
    convert::module_info(rules.info())
}

pub fn reconcile(rules: &impl Rules, observed: wit::Observed) -> Result<wit::Plan, wit::RuleError> {
    report_panics();
    rules.reconcile(&convert::observed(observed)).map(convert::plan).map_err(convert::rule_error)
}

/// A panic aborts the instance (panic=abort); report its message through the log import
/// first, so the host can say why the guest trapped.
fn report_panics() {
    std::panic::set_hook(Box::new(|info| crate::log::log(crate::log::Level::Error, &format!("panic: {info}"))));
}
