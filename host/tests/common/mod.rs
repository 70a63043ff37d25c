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

/// A Hikawa `default/hk` (interval 500 ms, created at 0) with these params and no children, as
/// a guest call sees it at 1 s with entropy 7.
pub fn observed_with(params: &[(&str, &str)]) -> zundoko_rules::Observed {
    zundoko_rules::Observed {
        hikawa: zundoko_rules::Hikawa {
            namespace: "default".into(),
            name: "hk".into(),
            uid: "u".into(),
            generation: 1,
            created_at: Some(0),
            interval_millis: 500,
            params: params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ..Default::default()
        },
        now: 1_000,
        entropy: 7,
        ..zundoko_rules::Observed::default()
    }
}

/// The module with a custom section appended: the same rules, other bytes, another digest.
pub fn with_custom_section(bytes: Vec<u8>, n: u64) -> Vec<u8> {
    zundoko_operator::supply::sandbox::budget::append_custom_section(bytes, "zundoko-test", &n.to_le_bytes())
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

pub mod ci;
pub mod cluster;
pub mod deploy;
pub mod hostile;
pub mod rbac;
pub mod kubelet;
pub mod registry;
pub mod replica;
pub mod rules;
pub mod running;
