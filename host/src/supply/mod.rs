//! The module supply: where a rules module comes from and what runs it. Sources offer bytes
//! (`sources`: a watched file, a ConfigMap, an OCI reference, and each rule set's sources);
//! `oci` pulls and verifies artifacts; the loader (`loader`) compiles and checks them, shared
//! by digest; the sandbox (`sandbox`) runs each call; the plan contract (`contract`: the rules
//! a decision is asked of and the plan check) is what the host enforces; `serving` says which
//! module serves which rule set. Nothing here imports from the controllers or the wiring above.

mod loader;
pub mod contract;
pub mod disk_cache;
pub mod oci;
pub mod sandbox;
pub mod serving;
pub mod sources;

pub use loader::ModuleLoader;
