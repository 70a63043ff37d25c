//! The module supply: the sandbox that runs a rules module (`sandbox`), compiled modules shared
//! by digest (`loader`), the rules a decision is asked of (`rules`: a module or the native
//! rules), the default module's hot swap (`swap`), and rule sets with their rollouts (`rulesets`).

mod loader;
pub mod oci;
pub mod rules;
pub mod rulesets;
pub mod sandbox;
pub mod swap;

pub use loader::ModuleLoader;
