//! The Zundoko guest SDK: what a rule set is written against.
//!
//! A rule set is a crate of its own (`rules/<name>/`, scaffolded by `make new-rules`): it
//! implements [`Rules`] in plain Rust, tests it natively with [`testing`], and ends with
//! `zundoko_guest_sdk::export_rules!(...)`, which in a wasm32 build exports it through the
//! WIT world `zundokokiyoshi:rules/zundoko-rules` (and natively expands to nothing).
//!
//! The model has no I/O, no clock and no randomness of its own: everything comes in an
//! [`Observed`] and everything goes out as a [`Plan`]. The host links the same model
//! (through `zundoko-rules`), so the rules, the host's checks and the native benchmark all
//! speak one language.

pub mod log;
pub mod model;
pub mod naming;
pub mod song;
pub mod steps;
pub mod testing;

#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub mod bindings;
#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub mod component;
#[cfg(target_arch = "wasm32")]
mod convert;
#[cfg(target_arch = "wasm32")]
mod heap;

pub use model::*;
pub use song::RuleSet;

/// A rule set: who it is, and one pure decision per call.
pub trait Rules {
    /// Name, version and one-line description. The host refuses a module whose metadata is
    /// empty, too long (name 64 bytes, version 32, description 256) or not printable.
    fn info(&self) -> ModuleInfo;
    /// Decide what to do for one Hikawa. Must be a pure function of `observed`.
    fn reconcile(&self, observed: &Observed) -> Result<Plan, RuleError>;
}

/// The metadata from the rule set's own Cargo.toml: `name`, `version`, `description`.
/// `module_info_from_cargo!()` is a [`ModuleInfo`]; `module_info_from_cargo!(static)` the
/// [`song::ModuleInfoStatic`] a [`song::RuleSet`] holds.
#[macro_export]
macro_rules! module_info_from_cargo {
    () => {
        $crate::module_info_from_cargo!(@ $crate::ModuleInfo)
    };
    (static) => {
        $crate::module_info_from_cargo!(@ $crate::song::ModuleInfoStatic)
    };
    (@ $info:path) => {{
        // A macro's path cannot name a struct literal; an alias can.
        type Info = $info;
        Info {
            name: env!("CARGO_PKG_NAME").into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: env!("CARGO_PKG_DESCRIPTION").into(),
        }
    }};
}

/// Export a rule set as the module's implementation of the WIT world. `$rules` is any
/// expression of a type implementing [`Rules`]; it is evaluated on each call (every call
/// runs in a fresh instance anyway). Use it once per component, in the rule set's `lib.rs`.
/// Natively it expands to nothing, so the same crate is an ordinary library for tests and
/// for the host.
#[macro_export]
macro_rules! export_rules {
    ($rules:expr) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct ZundokoRulesComponent;
            impl $crate::bindings::exports::zundokokiyoshi::rules::rules::Guest for ZundokoRulesComponent {
                fn info() -> $crate::bindings::zundokokiyoshi::rules::types::ModuleInfo {
                    $crate::component::info(&$rules)
                }
                fn reconcile(
                    observed: $crate::bindings::zundokokiyoshi::rules::types::Observed,
                ) -> ::core::result::Result<
                    $crate::bindings::zundokokiyoshi::rules::types::Plan,
                    $crate::bindings::zundokokiyoshi::rules::types::RuleError,
                > {
                    $crate::component::reconcile(&$rules, observed)
                }
            }
            $crate::bindings::export_component!(ZundokoRulesComponent with_types_in $crate::bindings);
        };
    };
}
