//! Modules from OCI registries: references (`reference`), the Wasm artifact layout
//! (`artifact`), pulls and pushes bounded in size, time and concurrency (`registry`), blobs kept
//! by digest (`cache`), cosign-compatible signatures (`signature`), the operator's trusted keys as
//! they are now (`keys`), pull secrets (`auth`) and
//! the requests of a pull, every body capped and every redirect checked (`wire`), and the
//! origins they may speak to: redirect targets and token realms held to a registry's rules
//! (`origins`).
//! A source like the file and the ConfigMap: it yields bytes, checked against their digest and
//! signature, that the loader then compiles and checks as any module.

pub mod auth;
pub mod artifact;
pub mod cache;
pub mod given_files;
pub mod reference;
pub mod keys;
mod origins;
mod permits;
pub mod registry;
mod settings;
pub mod signature;
mod tag_records;
/// Public only for the fuzz targets and property tests (fuzz/, host/tests/fuzzed_boundaries/).
#[doc(hidden)]
pub mod wire;

pub use reference::ModuleRef;
pub use registry::{Fetched, PullError, Registry, RegistrySettings, registry_allowed};
pub use signature::{SignKey, TrustedKey};
pub use wire::MAX_CA_FILE_BYTES;
