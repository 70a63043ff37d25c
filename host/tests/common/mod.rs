//! Shared by the host's integration tests: the shipped components `make guest` builds into
//! target/modules/, and the test fixtures `make fixtures` builds into target/fixtures/.
#![allow(dead_code)]

use std::path::PathBuf;

/// A shipped module, `target/modules/<name>.wasm` (`zundoko-classic`, `zundoko-strict-ja`).
pub fn module_path(name: &str) -> PathBuf {
    built("modules", name, "make guest")
}

pub fn module_bytes(name: &str) -> Vec<u8> {
    std::fs::read(module_path(name)).unwrap()
}

/// A test fixture, `target/fixtures/<name>.wasm` (`zundoko-hostile`, `zundoko-huge-name`, ...).
pub fn fixture_path(name: &str) -> PathBuf {
    built("fixtures", name, "make fixtures")
}

pub fn fixture_bytes(name: &str) -> Vec<u8> {
    std::fs::read(fixture_path(name)).unwrap()
}

/// The module with a custom section appended: the same rules, other bytes, another digest.
pub fn with_custom_section(mut bytes: Vec<u8>, n: u64) -> Vec<u8> {
    let name = b"zundoko-test";
    let payload = n.to_le_bytes();
    let size = 1 + name.len() + payload.len();
    assert!(size < 128 && name.len() < 128, "one-byte LEB128 lengths");
    bytes.extend([0u8, size as u8, name.len() as u8]);
    bytes.extend(name);
    bytes.extend(payload);
    bytes
}

fn built(dir: &str, name: &str, how: &str) -> PathBuf {
    let target = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target");
    let path = target.join(dir).join(format!("{name}.wasm"));
    if !path.exists() && dir == "modules" && target.join("fixtures").join(format!("{name}.wasm")).exists() {
        panic!("{name} is a test fixture, in target/fixtures/: load it with fixture_path/fixture_bytes");
    }
    assert!(path.exists(), "{} is missing: run `{how}` (or `make test`, which builds it)", path.display());
    path
}

pub mod cluster;
pub mod deploy;
pub mod rbac;
pub mod kubelet;
pub mod registry;
pub mod replica;
pub mod rules;
pub mod running;
