//! deploy/ as `make deploy` applies it, rendered offline by `kubectl kustomize`. The render
//! happens in a scratch copy with the given module in place of the build output
//! deploy/module/rules.wasm, so a test never writes into the source tree.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU32, Ordering};

use serde::Deserialize;
use serde_json::Value;

/// The namespace deploy/ puts the operator in, and its service account.
pub const NAMESPACE: &str = "zundoko-system";
pub const ACCOUNT: &str = "zundoko-operator";
/// The ConfigMap that carries the rules module.
pub const MODULE_CONFIGMAP: &str = "zundoko-rules";

/// deploy/ rendered with the built classic module, once per test binary...
pub static RENDERED: LazyLock<String> = LazyLock::new(|| render(&crate::common::module_bytes("zundoko-classic")));
/// ...and its documents.
pub static DOCS: LazyLock<Vec<Value>> = LazyLock::new(|| documents(&RENDERED));

/// A container's environment variable, if it sets it to a value.
pub fn env(c: &k8s_openapi::api::core::v1::Container, name: &str) -> Option<String> {
    c.env.iter().flatten().find(|e| e.name == name).and_then(|e| e.value.clone())
}

/// What deploy/'s RBAC grants the operator's service account.
pub fn operator_rbac() -> crate::common::rbac::RbacRules {
    crate::common::rbac::RbacRules::for_service_account(&DOCS, NAMESPACE, ACCOUNT)
}

/// The rendered documents of this kind.
pub fn of_kind(kind: &str) -> Vec<&'static Value> {
    DOCS.iter().filter(|d| d["kind"] == kind).collect()
}

pub fn deploy_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

/// The YAML stream `kubectl kustomize deploy/` prints with `module` as deploy/module/rules.wasm.
pub fn render(module: &[u8]) -> String {
    render_dir("", module)
}

/// The YAML stream `kubectl kustomize deploy/SUB` prints with `module` as
/// deploy/module/rules.wasm (`module`: the ConfigMap alone, as `make swap` applies it).
pub fn render_dir(sub: &str, module: &[u8]) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let scratch = Scratch(PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "deploy-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )));
    let root = scratch.0.join("deploy");
    copy_tree(&deploy_dir(), &root);
    std::fs::write(root.join("module/rules.wasm"), module).unwrap();
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(root.join(sub))
        .output()
        .unwrap_or_else(|e| panic!("running `kubectl kustomize` (the kubectl client must be installed): {e}"));
    assert!(out.status.success(), "kubectl kustomize {} failed:\n{}", root.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The YAML stream `kubectl kustomize` prints for an overlay beside deploy/ (`kustomization`:
/// its kustomization.yaml, naming `../deploy` and its components), with `module` as
/// deploy/module/rules.wasm: what a user's overlay of deploy/ renders.
pub fn render_overlay(kustomization: &str, module: &[u8]) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let scratch = Scratch(PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "overlay-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )));
    copy_tree(&deploy_dir(), &scratch.0.join("deploy"));
    std::fs::write(scratch.0.join("deploy/module/rules.wasm"), module).unwrap();
    std::fs::create_dir_all(scratch.0.join("overlay")).unwrap();
    std::fs::write(scratch.0.join("overlay/kustomization.yaml"), kustomization).unwrap();
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(scratch.0.join("overlay"))
        .output()
        .unwrap_or_else(|e| panic!("running `kubectl kustomize` (the kubectl client must be installed): {e}"));
    assert!(out.status.success(), "kubectl kustomize of the overlay failed:\n{kustomization}\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Every document of a YAML stream, empty ones skipped.
pub fn documents(yaml: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(yaml)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("a rendered document does not parse: {e}")))
        .filter(|v| !v.is_null())
        .collect()
}

/// deploy/ without the build output, which the caller replaces.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&src, &dst);
        } else if src.extension().is_none_or(|e| e != "wasm") {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// Removes the scratch copy when the render is done, panicking or not.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
