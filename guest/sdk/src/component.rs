//! The wasm side of `export_rules!`: the WIT bindings and the calls from the host, converted
//! to and from the plain model. Every decision is made by the rule set.

wit_bindgen::generate!({
    path: "../../wit",
    world: "zundoko-rules",
    pub_export_macro: true,
    export_macro_name: "export_component",
    default_bindings_module: "zundoko_guest_sdk::component",
});

use crate::{Rules, convert};
use zundokokiyoshi::rules::log::{Level, log};
use zundokokiyoshi::rules::types as wit;

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
    std::panic::set_hook(Box::new(|info| log(Level::Error, &format!("panic: {info}"))));
}

/// The log import, for `crate::log`.
pub(crate) fn write_log(level: crate::log::Level, message: &str) {
    let level = match level {
        crate::log::Level::Trace => Level::Trace,
        crate::log::Level::Debug => Level::Debug,
        crate::log::Level::Info => Level::Info,
        crate::log::Level::Warn => Level::Warn,
        crate::log::Level::Error => Level::Error,
    };
    log(level, message);
}
