//! The module supply: where a rules module comes from and what runs it. Sources offer bytes
//! (`sources`: a watched file, a ConfigMap, an OCI reference, and each rule set's sources),
//! each read or pulled and checked by the one `fetch::fetch_module`; `oci` pulls and verifies
//! artifacts; `digest` is the one spelling of `sha256:<hex>`; the loader (`loader`) compiles
//! and checks modules, shared by digest; the sandbox (`sandbox`) runs each call; the plan
//! contract (`contract`: the rules a decision is asked of and the plan check) is what the host
//! enforces; `serving` says which module serves which rule set. Nothing here imports from the
//! controllers or the wiring above.

mod loader;
pub mod contract;
pub mod digest;
pub mod fetch;
pub mod cache_files;
pub mod cache_shares;
pub mod disk_cache;
pub mod oci;
pub mod sandbox;
pub mod serving;
pub mod shares;
pub mod sources;
pub mod tenant;
pub mod tenant_calls;
pub mod tenant_bounds;

pub use digest::digest;
pub use loader::ModuleLoader;
pub use tenant::Tenant;
