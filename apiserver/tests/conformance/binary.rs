//! The standalone binary: prints its address and kubeconfig path, writes the kubeconfig
//! before serving, and serves until terminated.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[tokio::test]
async fn binary_writes_kubeconfig_and_serves() {
    let dir = std::env::temp_dir().join(format!("zundoko-apiserver-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kc = dir.join("kubeconfig");
    let mut child = Command::new(env!("CARGO_BIN_EXE_zundoko-apiserver"))
        .args(["--port", "0", "--kubeconfig-out", kc.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let url = first.rsplit(' ').next().unwrap().to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{first}");
    let second = lines.next().unwrap().unwrap();
    assert!(second.ends_with(kc.to_str().unwrap()), "{second}");
    let yaml = std::fs::read_to_string(&kc).unwrap();
    assert!(yaml.contains(&format!("server: {url}")), "{yaml}");
    assert!(yaml.contains("current-context: zundoko-local"));
    let v: serde_json::Value = reqwest::get(format!("{url}/version")).await.unwrap().json().await.unwrap();
    assert_eq!(v["major"], "1");
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap()).await.unwrap();
    assert!(status.success(), "{status:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
