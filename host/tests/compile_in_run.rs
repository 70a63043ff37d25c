//! A JavaScript module through the path `run` takes: `run`'s flags at their defaults
//! (`--max-compile-mib 640`, `--compile-timeout-secs 300`) turned into the operator's
//! configuration, the module from its file, compiled in the compiler process (the operator's
//! own binary, `compile-module`, within that memory limit), its code kept in the compiled-module
//! cache and mapped from there, and songs sung with it. SpiderMonkey's component is the biggest
//! compile the operator meets (452 MiB at its peak, measured): a JavaScript module that cannot
//! compile in `run` fails here, not in a user's cluster.
//!
//! The module is `target/modules/zundoko-classic-js.wasm` (`make guest-langs`, which needs node
//! and npm). Without it the test says so loudly and passes, except in CI (CI=true), where it
//! fails.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser as _;
use common::cluster::Cluster;
use common::running::{eventually, start_with};
use zundoko_operator::cli::args::{Cli, Command};

const MODULE: &str = "zundoko-classic-js";

/// The module, if built; if not, said loudly (and a failure in CI).
fn module_path() -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/modules").join(format!("{MODULE}.wasm"));
    if path.exists() {
        return Some(path);
    }
    common::ci::cannot_run(&format!("{} is missing: build it with `make guest-langs` (needs node and npm)", path.display()));
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_javascript_module_compiles_in_the_child_at_runs_defaults_and_sings() {
    let Some(path) = module_path() else { return };
    let cache = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../target/tmp/compile-in-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let flags = ["zundoko-operator", "run", "--module", path.to_str().unwrap(), "--cache-dir", cache.to_str().unwrap(), "--http-addr", "off"];
    let Command::Run(args) = Cli::try_parse_from(flags).unwrap().command else { unreachable!("run") };
    let mut config = args.operator_config().unwrap();
    let compiler = config.compiler.as_mut().expect("run compiles every module in the compiler process");
    assert_eq!(compiler.max_memory_bytes, 640 << 20, "--max-compile-mib's default");
    assert_eq!(compiler.timeout, Duration::from_secs(300), "--compile-timeout-secs's default");
    // `run` starts its own binary; a test's binary is not the operator's, so the child is.
    compiler.exe = PathBuf::from(env!("CARGO_BIN_EXE_zundoko-operator"));

    let cluster = Cluster::start().await;
    let operator = start_with(&cluster, config).await.unwrap_or_else(|e| panic!("run's path could not serve {MODULE}: {e:#}"));
    let digest = zundoko_operator::supply::digest::digest(&std::fs::read(&path).unwrap());
    assert_eq!(operator.serving().as_deref(), Some(digest.as_str()), "the JavaScript module serves");
    // Its code came from the child into the cache (the operator maps it from there).
    let compiled = std::fs::read_dir(cache.join("compiled")).unwrap().filter_map(Result::ok).filter(|e| e.path().extension().is_some_and(|x| x == "cwasm")).count();
    assert_eq!(compiled, 1, "the child's code is in the cache");

    let names: Vec<String> = (0..3).map(|i| format!("js{i}")).collect();
    for name in &names {
        cluster.create_hikawa("default", name, 0, &[]).await;
    }
    cluster.assert_songs_complete("default", &names, &zundoko_rules::classic(), Duration::from_secs(180)).await;
    eventually("no reconcile failed", Duration::from_secs(1), async || operator.failed_reconciles() == 0).await;
    operator.stop().await;
    let _ = std::fs::remove_dir_all(&cache);
}
