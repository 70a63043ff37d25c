//! A tenant policy's compile ceilings where a tenant's module really compiles: the operator as
//! `run` configures it from its flags (the compiler child process, `--max-compile-mib 640` by
//! default), each compile in the child within the lower of that and the policy's
//! `compileMemoryMiB`. Team A's Python module (CPython's component, some 345 MiB at its
//! compile's peak: docs/benchmarks.md) under a policy allowing less is refused by that line of the
//! policy; team B's Rust module under the same policy compiles within it and sings.
//!
//! The Python module is `target/modules/zundoko-classic-py.wasm` (`make guest-langs`); 18 MB, it
//! comes from a registry (a ConfigMap holds at most 1 MiB). Without it or the registry binary the
//! test says so loudly and passes, except in CI, where it fails.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser as _;
use common::cluster::Cluster;
use common::registry::TestRegistry;
use common::running::start_with;
use common::tenants::*;
use common::{module_bytes, module_path};
use zundoko_operator::cli::args::{Cli, Command};
use zundoko_operator::crd::{ModuleSource, RulesKind, TenantCeilings, ZundokoRulesSpec, ZundokoTenantPolicySpec};
use zundoko_operator::supply::sources::digest;

const A: &str = "team-a";
const B: &str = "team-b";
/// The policy's compile memory ceiling. Measured in a debug build (the child alone, as the
/// parent starts it): the Rust classic rules compile at 96 MiB (not at 64), CPython's component
/// fails at 160 within half a second and peaks at some 345 MiB where it compiles.
const CEILING_MIB: u64 = 160;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compile_over_the_policys_ceiling_is_refused_in_the_compiler_process_naming_the_line() {
    let Some(python) = common::langs::lang_module("zundoko-classic-py") else { return };
    let Some(registry) = TestRegistry::start(false) else { return };
    let rust = module_bytes("zundoko-classic");
    registry.push("team-a/rules:py", &python, None).await;
    registry.push("team-b/rules:rust", &rust, None).await;

    // `run`'s configuration from its flags: a compiler process, and a cache of this test's own
    // (a compiled module found there would not be compiled again).
    let cache = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../target/tmp/tenant-compile-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let default_module = module_path("zundoko-classic");
    let flags = [
        "zundoko-operator", "run", "--module", default_module.to_str().unwrap(), "--cache-dir", cache.to_str().unwrap(), "--http-addr", "off",
        "--insecure-registry", registry.addr.as_str(),
    ];
    let Command::Run(args) = Cli::try_parse_from(flags).unwrap().command else { unreachable!("run") };
    let mut config = args.operator_config().unwrap();
    let compiler = config.compiler.as_mut().expect("run compiles every module in the compiler process");
    assert!(compiler.max_memory_bytes as u64 > CEILING_MIB << 20, "the policy's ceiling is the lower bound: {compiler:?}");
    // `run` starts its own binary; a test's binary is not the operator's, so the child is.
    compiler.exe = PathBuf::from(env!("CARGO_BIN_EXE_zundoko-operator"));

    let cluster = Cluster::start().await;
    for ns in [A, B] {
        cluster.create_namespace(ns).await;
        label_namespace(&cluster, ns, "team").await;
    }
    let ceilings = TenantCeilings { compile_memory_mib: Some(CEILING_MIB), ..TenantCeilings::default() };
    put_policy(&cluster, "teams", ZundokoTenantPolicySpec { namespace_selector: selecting("team"), ceilings, ..open_policy() }).await;
    let operator = start_with(&cluster, config).await.unwrap();
    let oci = |reference: &str| ZundokoRulesSpec { source: ModuleSource::oci(&format!("{}/{reference}", registry.addr)), sha256: None, candidate: None };
    create_tenant_rules(&cluster, A, "python", oci("team-a/rules:py")).await;
    create_tenant_rules(&cluster, B, "rust", oci("team-b/rules:rust")).await;
    sing_in(&cluster, B, "song", None, Some((RulesKind::ZundokoNamespacedRules, "rust", None))).await;

    // B's module compiled in the child within the ceiling: it serves, and sings.
    cluster.assert_songs_complete(B, &["song".to_string()], &zundoko_rules::classic(), Duration::from_secs(120)).await;
    let status = tenant_rules_status(&cluster, B, "rust").await;
    assert_eq!((status.phase.as_deref(), status.module.map(|m| m.digest)), (Some("Active"), Some(digest(&rust))), "{:?}", status.message);

    // A's compile ran out of the policy's memory in the child: refused by that line.
    let decided = |s: &zundoko_operator::crd::ZundokoRulesStatus| matches!(s.phase.as_deref(), Some("Active" | "Rejected"));
    let refused = wait_tenant_rules_within(&cluster, A, "python", "its module checked", Duration::from_secs(300), decided).await;
    let message = refused.message.clone().unwrap_or_default();
    assert_eq!((refused.phase.as_deref(), refused.reason.as_deref()), (Some("Rejected"), Some("PolicyRefused")), "{message}");
    let line = format!("ZundokoTenantPolicy teams spec.ceilings.compileMemoryMiB: compiling it needed more than {CEILING_MIB} MiB");
    assert!(message.starts_with(&line), "{message}");
    println!("team-a/python: {message}");
    assert!(refused.module.is_none(), "{refused:?}");
    // Nothing of A's was kept compiled: the cache holds B's code and the default module's only.
    let kept = std::fs::read_dir(cache.join("compiled")).unwrap().filter_map(Result::ok).filter(|e| e.path().extension().is_some_and(|x| x == "cwasm")).count();
    assert_eq!(kept, 1, "only the Rust classic rules' code (the default module and B's are one digest)");
    operator.stop().await;
    let _ = std::fs::remove_dir_all(&cache);
}
