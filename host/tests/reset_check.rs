//! The fresh-instance self-check at start, seen from outside (`zundoko-operator run` processes
//! against the local API server): how used slots are reset is in `/readyz` and the metrics; a
//! scan that fails the check is turned off, the operator says so and sings on the default reset;
//! `--pagemap-scan off` chooses that reset; with no reset to trust, the operator does not start.
//! The check's own bytes are tested in `supply/sandbox/reset_check.rs`.

mod common;

use std::time::{Duration, Instant};

use common::module_bytes;
use common::replica::{ONE_SHARD, Replica, setup};
use common::running::eventually;
use zundoko_rules::classic;

/// Whether this kernel has `PAGEMAP_SCAN` (what the self-check is asked about).
fn kernel_scans() -> bool {
    wasmtime::PoolingAllocationConfig::is_pagemap_scan_available()
}

async fn ready_replica(what: &str, extra: &[(&str, &str)]) -> (common::replica::Setup, Replica) {
    let setup = setup(what, false).await;
    let module = setup.dir.join("rules.wasm");
    std::fs::write(&module, module_bytes("zundoko-classic")).unwrap();
    let extra: Vec<(&str, &str)> = ONE_SHARD.iter().copied().chain(extra.iter().copied()).collect();
    let op = Replica::spawn_with(what, &setup.kubeconfig, &setup.env, &extra, &module, &setup.dir);
    eventually("ready", Duration::from_secs(60), async || op.get("/readyz").is_some_and(|(c, _)| c == 200)).await;
    (setup, op)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reset_in_force_is_in_readyz_and_the_metrics() {
    let (_setup, op) = ready_replica("reset-auto", &[]).await;
    let (_, body) = op.get("/readyz").unwrap();
    if kernel_scans() {
        assert!(body.contains("instances reset by pagemap scan (self-check passed)"), "{body}");
        assert_eq!(op.metric("zundoko_instance_reset_info{path=\"pagemap\"} "), Some(1.0));
    } else {
        assert!(body.contains("no pagemap scan on this kernel"), "{body}");
        assert_eq!(op.metric("zundoko_instance_reset_info{path=\"default\"} "), Some(1.0));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_that_fails_the_self_check_is_turned_off_said_and_the_songs_go_on() {
    let (setup, op) = ready_replica("reset-fallback", &[("ZUNDOKO_FAULT_RESET_CHECK", "mismatch")]).await;
    let (_, body) = op.get("/readyz").unwrap();
    assert_eq!(op.metric("zundoko_instance_reset_info{path=\"default\"} "), Some(1.0), "{body}");
    assert_eq!(op.metric("zundoko_instance_reset_info{path=\"pagemap\"} "), None, "one path at a time");
    if kernel_scans() {
        assert!(body.contains("pagemap scan turned off: with it, an instance after the reset"), "{body}");
        assert!(body.contains("the memory differs from its image at byte"), "{body}");
        let log = op.log();
        assert!(log.lines().any(|l| l.contains("WARN") && l.contains("pagemap scan turned off")), "{log}");
    } else {
        assert!(body.contains("no pagemap scan on this kernel"), "{body}");
    }
    // The default reset serves: a whole song.
    setup.cluster.create_hikawa("default", "after-fallback", 0, &[]).await;
    setup.cluster.assert_songs_complete("default", &["after-fallback".to_string()], &classic(), Duration::from_secs(60)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pagemap_scan_off_resets_the_default_way() {
    let (setup, op) = ready_replica("reset-off", &[("ZUNDOKO_PAGEMAP_SCAN", "off")]).await;
    let (_, body) = op.get("/readyz").unwrap();
    assert!(body.contains("pagemap scan off (--pagemap-scan off)"), "{body}");
    assert_eq!(op.metric("zundoko_instance_reset_info{path=\"default\"} "), Some(1.0));
    setup.cluster.create_hikawa("default", "scan-off", 0, &[]).await;
    setup.cluster.assert_songs_complete("default", &["scan-off".to_string()], &classic(), Duration::from_secs(60)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_reset_to_trust_nothing_runs() {
    let server = zundoko_apiserver::ApiServer::start(zundoko_apiserver::ServerConfig::default()).await.unwrap();
    let dir = common::kubelet::temp_dir("reset-broken");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, server.kubeconfig_yaml()).unwrap();
    let module = dir.join("rules.wasm");
    std::fs::write(&module, module_bytes("zundoko-classic")).unwrap();
    // The operator, and a command run by hand: both refuse, naming the check.
    for args in [&["run", "--http-addr", "off", "--module"][..], &["check", "--module"][..]] {
        let started = Instant::now();
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_zundoko-operator"))
            .args(args)
            .arg(&module)
            .env_clear()
            .env("KUBECONFIG", &kubeconfig)
            .env("ZUNDOKO_FAULT_RESET_CHECK", "mismatch-always")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains("fresh-instance self-check failed") && stderr.contains("nothing is run"), "{args:?}: {stderr}");
        assert!(started.elapsed() < Duration::from_secs(60), "{args:?}");
    }
}
