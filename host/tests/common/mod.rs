//! Shared by the host's integration tests: the components `make guest` builds.
#![allow(dead_code)]

use std::path::PathBuf;

pub fn module_path(name: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/modules").join(format!("{name}.wasm"));
    assert!(path.exists(), "{} is missing: run `make guest` (or `make test`, which builds it)", path.display());
    path
}

pub fn module_bytes(name: &str) -> Vec<u8> {
    std::fs::read(module_path(name)).unwrap()
}

pub mod cluster;
pub mod deploy;
pub mod rbac;
pub mod kubelet;
pub mod running;
