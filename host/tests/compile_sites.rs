//! Where the operator compiles: every compile in `run` waits its fair turn (compile_queue.rs).
//! A module compiles in the compiler child (which takes the turn before it starts); the only
//! compile in `run`'s own process is the fresh-instance self-check's module at start, which
//! takes the turn too. The commands run by hand (check, simulate, test, push, explain) compile
//! in their own process: their engine has no compiler process, and `run`'s always has one.
//!
//! Three ways: `run`'s configuration always names a compiler process and an engine with one
//! never compiles a module itself (a compiler that cannot start fails the load: no fallback);
//! the self-check's compile waits while another compile holds the turn; and every call into
//! wasmtime's compiler in host/src is one of the sites listed here (a new one fails this test,
//! named, until it is listed with why it waits its turn or why `run` cannot reach it).

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser as _;
use zundoko_operator::cli::args::{Cli, Command};
use zundoko_operator::supply::sandbox::compiler_process::CompilerProcess;
use zundoko_operator::supply::sandbox::{COMPILES, GuestError, SandboxEngine, SandboxLimits, WhoCompiles, reset_check};

#[test]
fn run_compiles_every_module_in_its_compiler_process_and_never_falls_back_to_its_own() {
    let cli = Cli::try_parse_from(["zundoko-operator", "run", "--module", "/nowhere/rules.wasm"]).unwrap();
    let Command::Run(args) = cli.command else { panic!("parsed as run") };
    let config = args.operator_config().unwrap();
    assert!(config.compiler.is_some(), "run's engine has no compiler process: its modules would compile in the operator's own process, outside the fair queue");
    // An engine with a compiler process that cannot start: the module is not compiled here
    // instead, whatever its size (a 36 KB one included).
    let compiler = CompilerProcess { exe: PathBuf::from("/nowhere/zundoko-operator"), max_memory_bytes: 640 << 20, timeout: Duration::from_secs(60) };
    let dir = std::env::temp_dir().join(format!("zundoko-compile-sites-{}", std::process::id()));
    let engine = SandboxEngine::new(SandboxLimits::default()).unwrap().with_compiled_cache(&dir).unwrap().with_compiler_process(compiler).unwrap();
    let small = common::module_bytes("zundoko-classic");
    match engine.load(&small) {
        Err(GuestError::CompileFailed(why)) => assert!(why.contains("cannot start the compiler process"), "{why}"),
        Err(other) => panic!("refused for another reason: {other}"),
        Ok(_) => panic!("a {}-byte module compiled in the operator's own process", small.len()),
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_self_checks_compile_in_runs_own_process_waits_its_turn() {
    // A rule set's compile holds the turn: the self-check's compile waits for it.
    let held = COMPILES.turn_for(WhoCompiles::RuleSet(zundoko_operator::supply::Tenant::Cluster, "compiling-now".into()));
    let check = std::thread::spawn(|| reset_check::check_reset(false, false));
    while COMPILES.waiting_for(&WhoCompiles::DefaultModule) == 0 && !check.is_finished() {
        std::thread::yield_now();
    }
    assert!(!check.is_finished(), "the self-check compiled while another compile held the turn");
    drop(held);
    check.join().unwrap().unwrap();
}

/// wasmtime's ways to compile: a call of any of them in host/src is a compile site.
const COMPILERS: [&str; 8] = [
    "precompile_component(",
    "precompile_module(",
    "Component::new(",
    "Component::from_binary(",
    "Component::from_file(",
    "Module::new(",
    "Module::from_binary(",
    "Module::from_file(",
];

/// Every compile site in host/src (outside its unit tests), and why it keeps `run` fair.
const SITES: [(&str, &str, &str); 4] = [
    ("supply/sandbox/compiler_process.rs", "precompile_component(", "the compiler child itself (`run_child`), started only after the turn is taken in `compile_to`"),
    ("supply/sandbox/compiled_cache.rs", "precompile_component(", "`CompiledCache::component`: only an engine without a compiler process (module.rs `compile`), which `run` never is"),
    ("supply/sandbox/module.rs", "Component::new(", "an engine with neither cache nor compiler process (module.rs `compile`), which `run` never is"),
    ("supply/sandbox/reset_check.rs", "Module::new(", "the self-check's own module, compiled within a turn as the default module's"),
];

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

#[test]
fn every_compile_in_the_operators_code_is_a_listed_site() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut seen = Vec::new();
    for file in files {
        let name = file.strip_prefix(&src).unwrap().to_str().unwrap().replace('\\', "/");
        let text = std::fs::read_to_string(&file).unwrap();
        // A file's unit tests (its trailing `mod tests`) compile what they like.
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
        for (number, line) in code.lines().enumerate() {
            let line = line.split("//").next().unwrap_or_default();
            for compiler in COMPILERS.iter().filter(|c| line.contains(**c)) {
                let listed = SITES.iter().any(|(site, call, _)| *site == name && call == compiler);
                assert!(
                    listed,
                    "host/src/{name}:{}: `{compiler}` compiles in the caller's process: if `run` can reach it, take the turn (compile_queue.rs COMPILES) around it; either way list it in SITES with why",
                    number + 1
                );
                seen.push((name.clone(), *compiler));
            }
        }
    }
    for (site, call, why) in SITES {
        assert!(seen.iter().any(|(name, c)| name == site && *c == call), "listed but not found (moved? then list where): {site} `{call}` ({why})");
    }
}
