//! Real `kubectl` against the server with a generated kubeconfig.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kube::CustomResourceExt;

use crate::common::*;

fn tmpdir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("zundoko-apiserver-kubectl-{}-{}", std::process::id(), rand::random::<u32>()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

async fn kubectl(kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    let kc = kubeconfig.to_path_buf();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let out = Command::new("kubectl").env("KUBECONFIG", &kc).env("HOME", kc.parent().unwrap()).args(&args).output().expect("kubectl on PATH");
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
    })
    .await
    .unwrap()
}

/// Whether kubectl runs here; if not, a failure under CI (`.ci/run` installs it), otherwise
/// said loudly (the caller returns).
/// A server under `--authorization-mode RBAC` and a scratch directory holding its kubeconfig.
async fn rbac_server_and_kubeconfig() -> (zundoko_apiserver::ApiServer, PathBuf, PathBuf) {
    let s = server_with(zundoko_apiserver::ServerConfig { authorization: zundoko_apiserver::AuthorizationMode::Rbac, ..Default::default() }).await;
    let dir = tmpdir();
    let kc = dir.join("kubeconfig");
    std::fs::write(&kc, s.kubeconfig_yaml()).unwrap();
    (s, dir, kc)
}

fn kubectl_runs() -> bool {
    let version = Command::new("kubectl").arg("version").arg("--client").output();
    if version.as_ref().is_ok_and(|out| out.status.success()) {
        return true;
    }
    crate::ci::cannot_run(&format!("kubectl is not installed or does not run ({version:?}): apt-get install kubectl"));
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_get_watch_delete() {
    if !kubectl_runs() {
        return;
    }
    let s = server().await;
    let dir = tmpdir();
    let kc = dir.join("kubeconfig");
    std::fs::write(&kc, s.kubeconfig_yaml()).unwrap();
    std::fs::write(dir.join("crd.yaml"), serde_yaml::to_string(&Hikawa::crd()).unwrap()).unwrap();
    std::fs::write(
        dir.join("hikawa.yaml"),
        "apiVersion: zundokokiyoshi.kaitoy.github.com/v1beta1\nkind: Hikawa\nmetadata:\n  name: hikawa-sample\nspec:\n  intervalMillis: 500\n  numZundokos: 0\n  sayKiyoshi: false\n",
    )
    .unwrap();
    let crd = dir.join("crd.yaml");
    let (ok, out, err) = kubectl(&kc, &["apply", "--server-side", "-f", crd.to_str().unwrap()]).await;
    assert!(ok, "apply CRD: {out} {err}");
    assert!(out.contains("customresourcedefinition.apiextensions.k8s.io/hikawas.zundokokiyoshi.kaitoy.github.com serverside-applied"), "{out}");
    let h = dir.join("hikawa.yaml");
    let (ok, out, err) = kubectl(&kc, &["apply", "--server-side", "-f", h.to_str().unwrap()]).await;
    assert!(ok, "apply CR: {out} {err}");
    assert!(out.contains("hikawa.zundokokiyoshi.kaitoy.github.com/hikawa-sample serverside-applied"), "{out}");
    // Re-applying is fine too.
    let (ok, _, err) = kubectl(&kc, &["apply", "--server-side", "-f", h.to_str().unwrap()]).await;
    assert!(ok, "{err}");
    let (ok, out, err) = kubectl(&kc, &["get", "hikawas"]).await;
    assert!(ok, "get: {err}");
    let header = out.lines().next().unwrap_or("");
    for col in ["NAME", "INTERVAL", "SAID", "AGE"] {
        assert!(header.contains(col), "{out}");
    }
    assert!(out.contains("hikawa-sample") && out.contains("500"), "{out}");
    let (ok, out, err) = kubectl(&kc, &["get", "hikawa", "hikawa-sample", "-o", "jsonpath={.spec.intervalMillis}"]).await;
    assert!(ok, "{err}");
    assert_eq!(out, "500");
    // Create and watch.
    let (ok, _, err) = kubectl(&kc, &["create", "configmap", "cm1", "--from-literal=a=b"]).await;
    assert!(ok, "{err}");
    let (ok, out, err) = kubectl(&kc, &["get", "cm", "cm1", "-o", "jsonpath={.data.a}"]).await;
    assert!(ok && out == "b", "{out} {err}");
    let kc2 = kc.clone();
    let watch = tokio::spawn(async move { kubectl(&kc2, &["get", "hikawas", "-w", "--request-timeout=3s"]).await });
    tokio::time::sleep(Duration::from_millis(800)).await;
    let mut second = std::fs::read_to_string(&h).unwrap().replace("hikawa-sample", "hikawa-two");
    second.push('\n');
    let h2 = dir.join("two.yaml");
    std::fs::write(&h2, second).unwrap();
    let (ok, _, err) = kubectl(&kc, &["create", "-f", h2.to_str().unwrap()]).await;
    assert!(ok, "{err}");
    let (_, out, _) = watch.await.unwrap();
    assert!(out.contains("hikawa-sample") && out.contains("hikawa-two"), "watch output: {out}");
    // Delete (kubectl waits for the object to be gone).
    let (ok, out, err) = kubectl(&kc, &["delete", "hikawa", "hikawa-sample", "--timeout=10s"]).await;
    assert!(ok, "delete: {out} {err}");
    assert!(out.contains("deleted"), "{out}");
    let (ok, _, err) = kubectl(&kc, &["get", "hikawa", "hikawa-sample"]).await;
    assert!(!ok);
    assert!(err.contains("NotFound") || err.contains("not found"), "{err}");
    let (ok, out, err) = kubectl(&kc, &["get", "namespaces"]).await;
    assert!(ok && out.contains("kube-system") && out.contains("Active"), "{out} {err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_secrets_docker_registry_round_trip() {
    use base64::Engine as _;
    if !kubectl_runs() {
        return;
    }
    let s = server().await;
    let dir = tmpdir();
    let kc = dir.join("kubeconfig");
    std::fs::write(&kc, s.kubeconfig_yaml()).unwrap();
    // kubectl sends the generated Secret as protobuf.
    let args = ["create", "secret", "docker-registry", "regcred", "--docker-server=registry.example:5000", "--docker-username=zun", "--docker-password=doko"];
    let (ok, out, err) = kubectl(&kc, &args).await;
    assert!(ok, "create secret docker-registry: {out} {err}");
    assert!(out.contains("secret/regcred created"), "{out}");
    let (ok, out, err) = kubectl(&kc, &["get", "secret", "regcred", "-o", "json"]).await;
    assert!(ok, "{err}");
    let got: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(got["type"], "kubernetes.io/dockerconfigjson", "{got}");
    let b64 = base64::engine::general_purpose::STANDARD;
    let config = b64.decode(got["data"][".dockerconfigjson"].as_str().unwrap()).unwrap();
    let config: serde_json::Value = serde_json::from_slice(&config).unwrap();
    let auth = &config["auths"]["registry.example:5000"];
    assert_eq!((&auth["username"], &auth["password"]), (&"zun".into(), &"doko".into()), "{config}");
    assert_eq!(auth["auth"], b64.encode("zun:doko"), "{config}");
    let (ok, _, err) = kubectl(&kc, &["create", "secret", "generic", "plain", "--from-literal=a=b"]).await;
    assert!(ok, "{err}");
    let (ok, out, err) = kubectl(&kc, &["get", "secret", "plain", "-o", "jsonpath={.type} {.data.a}"]).await;
    assert!(ok && out == "Opaque Yg==", "{out} {err}");
    let (ok, out, err) = kubectl(&kc, &["get", "secrets"]).await;
    assert!(ok, "{err}");
    let header: Vec<&str> = out.lines().next().unwrap_or("").split_whitespace().collect();
    assert_eq!(header, ["NAME", "TYPE", "DATA", "AGE"], "{out}");
    let row: Vec<&str> = out.lines().find(|l| l.starts_with("regcred")).unwrap_or("").split_whitespace().collect();
    assert_eq!(row[..3], ["regcred", "kubernetes.io/dockerconfigjson", "1"], "{out}");
    let (ok, out, err) = kubectl(&kc, &["delete", "secret", "regcred"]).await;
    assert!(ok && out.contains("deleted"), "{out} {err}");
    let (ok, _, err) = kubectl(&kc, &["get", "secret", "regcred"]).await;
    assert!(!ok && err.contains("not found"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--authorization-mode RBAC` with kubectl: the kubeconfig (sent without its token over plain
/// HTTP, as client-go does) may do anything, `kubectl create rolebinding` (protobuf) grants,
/// and `--as` is refused with kube-apiserver's words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_as_a_service_account_under_rbac() {
    if !kubectl_runs() {
        return;
    }
    let (_s, dir, kc) = rbac_server_and_kubeconfig().await;
    let run = |args: &'static [&'static str]| kubectl(&kc, args);
    assert!(run(&["create", "namespace", "team-a"]).await.0);
    let (ok, _, err) = run(&["create", "rolebinding", "e", "-n", "team-a", "--clusterrole=edit", "--serviceaccount=team-a:alice"]).await;
    assert!(ok, "{err}");
    let (ok, out, err) = run(&["create", "configmap", "c", "-n", "team-a", "--from-literal=k=v", "--as=system:serviceaccount:team-a:alice"]).await;
    assert!(ok, "{out}{err}");
    let (ok, _, err) = run(&["create", "configmap", "c", "-n", "default", "--from-literal=k=v", "--as=system:serviceaccount:team-a:alice"]).await;
    assert!(!ok);
    assert!(
        err.contains("configmaps is forbidden: User \"system:serviceaccount:team-a:alice\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"default\""),
        "{err}"
    );
    let (ok, out, err) = run(&["get", "configmaps", "-n", "team-a", "-o", "name", "--as=system:serviceaccount:team-a:alice"]).await;
    assert!(ok && out.contains("configmap/c"), "{out}{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `kubectl auth can-i` (a SelfSubjectAccessReview, as the impersonated user) says yes or no as
/// RBAC decides, and `--list` (a SelfSubjectRulesReview) shows the namespace's rules.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_can_i_as_a_service_account_under_rbac() {
    if !kubectl_runs() {
        return;
    }
    let (_s, dir, kc) = rbac_server_and_kubeconfig().await;
    let crd = dir.join("crd.yaml");
    std::fs::write(&crd, serde_yaml::to_string(&Hikawa::crd()).unwrap()).unwrap();
    let (ok, out, err) = kubectl(&kc, &["apply", "--server-side", "-f", crd.to_str().unwrap()]).await;
    assert!(ok, "{out}{err}");
    let run = |args: &'static [&'static str]| kubectl(&kc, args);
    for ns in ["team-a", "team-b"] {
        assert!(kubectl(&kc, &["create", "namespace", ns]).await.0);
    }
    let (ok, out, err) = run(&["create", "role", "hikawa-writer", "-n", "team-a", "--verb=create", "--resource=hikawas.zundokokiyoshi.kaitoy.github.com"]).await;
    assert!(ok, "{out}{err}");
    let (ok, out, err) = run(&["create", "rolebinding", "w", "-n", "team-a", "--role=hikawa-writer", "--serviceaccount=team-a:alice"]).await;
    assert!(ok, "{out}{err}");
    const AS: &str = "--as=system:serviceaccount:team-a:alice";
    let (ok, out, err) = run(&["auth", "can-i", "create", "hikawas.zundokokiyoshi.kaitoy.github.com", "-n", "team-a", AS]).await;
    assert!(ok && out.trim() == "yes", "{out}{err}");
    // No: exit code 1.
    let (ok, out, err) = run(&["auth", "can-i", "create", "hikawas.zundokokiyoshi.kaitoy.github.com", "-n", "team-b", AS]).await;
    assert!(!ok && out.trim() == "no", "{out}{err}");
    let (ok, out, err) = run(&["auth", "can-i", "delete", "hikawas.zundokokiyoshi.kaitoy.github.com", "-n", "team-a", AS]).await;
    assert!(!ok && out.trim() == "no", "{out}{err}");
    // The kubeconfig (system:masters) may do anything.
    let (ok, out, err) = run(&["auth", "can-i", "delete", "hikawas.zundokokiyoshi.kaitoy.github.com", "-n", "team-b"]).await;
    assert!(ok && out.trim() == "yes", "{out}{err}");
    let hikawas_line = |out: &str| out.lines().find(|l| l.starts_with("hikawas.zundokokiyoshi.kaitoy.github.com ")).map(String::from);
    let (ok, out, err) = run(&["auth", "can-i", "--list", "-n", "team-a", AS]).await;
    assert!(ok, "{out}{err}");
    assert!(hikawas_line(&out).is_some_and(|l| l.trim_end().ends_with("[create]")), "{out}");
    assert!(out.lines().any(|l| l.starts_with("selfsubjectaccessreviews.authorization.k8s.io ")), "system:basic-user's: {out}");
    let (ok, out, err) = run(&["auth", "can-i", "--list", "-n", "team-b", AS]).await;
    assert!(ok && hikawas_line(&out).is_none(), "{out}{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
