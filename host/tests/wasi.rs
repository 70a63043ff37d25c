//! Modules whose language runtime imports WASI (CPython, through componentize-py): the
//! virtual WASI keeps every call a function of its input and grants nothing, and whatever the
//! module does (raise, loop, allocate, print, read the clocks or randomness, open a socket or
//! look up a name, sleep, read its environment, arguments, stdin or files, exit) the call ends
//! with a result or a named reason, within its budget; what it saw is asserted from the status
//! message it reports it in, whole (the fixture marks a message it had to cut).
//!
//! The fixture is one Python component, `target/fixtures/zundoko-py-hostile.wasm` (`make
//! fixtures-langs`, which needs python3 with venv), whose behaviour a Hikawa's
//! `spec.params.misbehave` picks; otherwise it sings the classic rules. Without it the tests
//! say so loudly and pass, except in CI (CI=true), where they fail.

mod common;

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use common::fixture_path;
use common::compile_once::LoadOnce as _;
use zundoko_operator::supply::sandbox::compiler_process::CompilerProcess;
use zundoko_operator::supply::sandbox::{GuestError, RulesModule, SandboxEngine, SandboxLimits};
use zundoko_rules::Observed;

const FIXTURE: &str = "zundoko-py-hostile";
const NOW_MS: i64 = 1_767_225_600_123;

/// A compiled-module cache shared by the test runs (a CPython component takes seconds to
/// compile; its code is reused from here).
fn cache_dir() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/tmp/wasi-tests")
}

fn fixture() -> Vec<u8> {
    let path = fixture_path(FIXTURE);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e} (build it: make fixtures-langs)", path.display()))
}

/// Whether the fixture was built; if not, said loudly (and a failure in CI).
fn built() -> bool {
    let path = fixture_path(FIXTURE);
    if path.exists() {
        return true;
    }
    common::ci::cannot_run(&format!("{} is missing: build it with `make fixtures-langs` (needs python3 with venv)", path.display()));
    false
}

/// The fixture, loaded once for all the tests in this file.
fn module() -> &'static RulesModule {
    static MODULE: OnceLock<RulesModule> = OnceLock::new();
    MODULE.get_or_init(|| {
        let engine = SandboxEngine::new(SandboxLimits::default()).unwrap().with_compiled_cache(&cache_dir()).unwrap();
        let module = engine.load_once(&fixture()).unwrap_or_else(|e| panic!("the Python fixture loads: {e}"));
        assert!(module.uses_wasi(), "a CPython component imports WASI");
        module
    })
}

fn hikawa(misbehave: &str, entropy: u64) -> Observed {
    with_params(&[("misbehave", misbehave)], entropy)
}

fn with_params(params: &[(&str, &str)], entropy: u64) -> Observed {
    Observed { now: NOW_MS, entropy, ..common::observed_with(params) }
}

use common::status_message as message;

#[test]
fn a_python_module_that_behaves_sings_and_its_calls_replay_exactly() {
    if !built() {
        return;
    }
    let module = module();
    let observed = hikawa("", 42);
    let first = module.reconcile(&observed).unwrap();
    let again = module.reconcile(&observed).unwrap();
    assert_eq!(first.value, again.value, "the same input decides the same");
    assert_eq!(first.fuel_used, again.fuel_used, "and costs the same fuel");
    assert!(first.value.says().next().is_some(), "a new Hikawa's first word: {:?}", first.value);
}

#[test]
fn an_uncaught_exception_fails_the_call_naming_it() {
    if !built() {
        return;
    }
    match module().reconcile(&hikawa("raise", 1)) {
        Err(GuestError::Trap { guest_message: Some(said), .. }) => {
            assert_eq!(said, "RuntimeError: hostile: raised on purpose", "the exception's line of the traceback");
        }
        other => panic!("expected a trap naming the exception, got {other:?}"),
    }
    match module().reconcile(&hikawa("rule-error", 1)) {
        Err(GuestError::Rules(e)) => assert_eq!(GuestError::Rules(e).reason(), "InvalidParams"),
        other => panic!("expected the rules' own error, got {other:?}"),
    }
}

#[test]
fn an_endless_loop_and_endless_allocation_stop_at_the_budget() {
    if !built() {
        return;
    }
    let module = module();
    match module.reconcile(&hikawa("loop", 1)) {
        Err(GuestError::OutOfCpuBudget { budget }) => assert_eq!(budget, module.limits().fuel),
        other => panic!("expected OutOfCpuBudget, got {other:?}"),
    }
    // A refused grow is the memory cap, named, even if CPython turned it into a MemoryError
    // and died of that.
    match module.reconcile(&hikawa("alloc", 1)) {
        Err(error @ GuestError::MemoryCap { limit, requested }) => {
            assert_eq!(limit, module.limits().memory_bytes);
            assert!(requested > limit, "{requested} asked, over {limit}");
            assert_eq!(error.reason(), "MemoryCapExceeded");
        }
        other => panic!("expected MemoryCapExceeded, got {other:?}"),
    }
    // And the module still serves.
    assert!(module.reconcile(&hikawa("", 3)).is_ok());
}

#[test]
fn megabytes_of_output_reach_the_log_bounded() {
    if !built() {
        return;
    }
    let module = module();
    let limits = module.limits();
    // 200 lines and 8 MiB printed cost about a tenth of the default budget: the call ends, and
    // decides.
    let outcome = module.reconcile(&hikawa("print", 1)).unwrap_or_else(|e| panic!("printing is not an error: {e}"));
    assert!(outcome.value.says().next().is_some(), "and then it decides: {:?}", outcome.value);
    let logs = &outcome.logs;
    // The log's bound, and what a line holds: cut, and escaped (docs/writing-rules.md: "64 lines
    // of 1 KiB, escaped; the rest counted as dropped").
    assert_eq!(logs.len(), limits.max_log_lines, "the first lines printed reach the log, up to its bound");
    assert_eq!(logs[0].message, "line 0 \\u{1b}[31mred\\u{1b}[0m", "a printed line reaches the log escaped");
    assert!(logs.iter().all(|l| !l.message.contains('\x1b')), "no escape reaches the log: {logs:?}");
    assert!(logs.iter().all(|l| l.message.len() <= limits.max_log_line_bytes + 8), "lines are cut");
    // The rest: the 136 short lines past the bound, the megabytes' lines and the bytes past
    // the output's bound, dropped and counted.
    let past = 200 - limits.max_log_lines;
    assert!(outcome.dropped_log_lines > past, "the lines past the bound are counted as dropped: {} counted, {past} lines at least", outcome.dropped_log_lines);
}

#[test]
fn the_clocks_read_the_calls_now_and_waiting_takes_no_time() {
    if !built() {
        return;
    }
    let module = module();
    let clock = |entropy| message(&module.reconcile(&with_params(&[("misbehave", "clock"), ("reads", "1000")], entropy)).unwrap().value);
    let read = clock(1);
    // time.time() is the call's now (as a float: 1767225600.1230001), on the first read and
    // the last; monotonic stays at 0.
    let now = format!("{}.{:03}", NOW_MS / 1000, NOW_MS % 1000);
    let (first, last) = read.strip_prefix("clock: time ").and_then(|r| r.split_once(", ")).and_then(|(t, _)| t.split_once("..")).expect(&read);
    assert!(first.starts_with(&now) && first == last, "the wall clock reads the call's now ({now}) and does not move: {read}");
    assert!(read.contains("monotonic 0.0..0.0"), "the monotonic clock starts at zero and reading does not move it: {read}");
    assert_eq!(read, clock(99), "the clocks do not depend on entropy");
    // A million reads cost the whole budget: stopped, with the reason.
    assert!(matches!(module.reconcile(&hikawa("clock", 1)), Err(GuestError::OutOfCpuBudget { .. })));
    // time.sleep(3600) moves both clocks by the hour, seen from inside; the thread does not
    // wait (an hour, or any part of one a loaded machine's call would not explain).
    let started = Instant::now();
    let slept = module.reconcile(&hikawa("sleep", 1)).unwrap();
    let took = started.elapsed();
    println!("time.sleep(3600) returned after {took:?}");
    assert!(took < Duration::from_secs(10), "slept for real: {took:?}");
    let later = format!("{}.{:03}", NOW_MS / 1000 + 3600, NOW_MS % 1000);
    let said = message(&slept.value);
    let (before, after) = said.strip_prefix("sleep: time ").and_then(|r| r.split_once(", ")).and_then(|(t, _)| t.split_once("..")).expect(&said);
    assert!(before.starts_with(&now) && after.starts_with(&later), "the wall clock moved by the hour ({now} to {later}): {said}");
    assert!(said.ends_with("monotonic 0.0..3600.0"), "the monotonic clock moved by the hour: {said}");
    assert!(slept.value.says().next().is_some(), "and then it decides: {:?}", slept.value);
}

#[test]
fn randomness_comes_from_the_calls_entropy() {
    if !built() {
        return;
    }
    let module = module();
    let random = |entropy| message(&module.reconcile(&with_params(&[("misbehave", "random"), ("reads", "100")], entropy)).unwrap().value);
    assert_eq!(random(5), random(5), "the same entropy, the same bytes");
    assert_ne!(random(5), random(6), "another entropy, other bytes");
}

/// The kit seeds Python's `random` when a call first draws instead of at every call's start
/// (sdk/python/zundoko_kit/lazy_seed.py): a call that draws only from `random` must still get
/// numbers from its own entropy, never the state baked into the snapshot.
#[test]
fn random_seeded_on_first_draw_comes_from_the_calls_entropy() {
    if !built() {
        return;
    }
    let module = module();
    let draw = |entropy| message(&module.reconcile(&hikawa("draw", entropy)).unwrap().value);
    assert_eq!(draw(5), draw(5), "the same entropy, the same numbers");
    let drawn: std::collections::HashSet<String> = (5..9).map(draw).collect();
    assert_eq!(drawn.len(), 4, "another entropy, other numbers: {drawn:?}");
}

/// A rule set that takes `random.random` before the kit is imported keeps the C function, which
/// draws without seeding: the kit must leave `random` reseeded at every call's start for it.
#[test]
fn random_held_before_the_kit_is_still_seeded_by_each_call() {
    let path = fixture_path("zundoko-py-held-random");
    if !path.exists() {
        common::ci::cannot_run(&format!("{} is missing: build it with `make fixtures-langs`", path.display()));
        return;
    }
    let engine = SandboxEngine::new(SandboxLimits::default()).unwrap().with_compiled_cache(&cache_dir()).unwrap();
    let module = engine.load_once(&std::fs::read(&path).unwrap()).unwrap_or_else(|e| panic!("the held-random fixture loads: {e}"));
    let held = |entropy| message(&module.reconcile(&with_params(&[], entropy)).unwrap().value);
    assert_eq!(held(5), held(5), "the same entropy, the same numbers");
    let drawn: std::collections::HashSet<String> = (5..9).map(held).collect();
    assert_eq!(drawn.len(), 4, "another entropy, other numbers: {drawn:?}");
}

#[test]
fn sockets_and_name_lookup_are_refused() {
    if !built() {
        return;
    }
    let said = message(&module().reconcile(&hikawa("socket", 1)).unwrap().value);
    // Three parts, whole (the fixture marks a message it had to cut to the 256-byte limit).
    assert!(!said.ends_with(" [cut]"), "the message was cut: {said}");
    let parts: Vec<&str> = said.strip_prefix("socket: ").expect(&said).split("; ").collect();
    let [socket, connect, lookup] = parts[..] else { panic!("three results: {said}") };
    // Creating a socket: access denied, as Python names it.
    assert!(socket.starts_with("socket: PermissionError"), "{said}");
    // create_connection and getaddrinfo: the name lookup fails (wasi-libc's EAI_FAIL).
    for (what, part) in [("connect", connect), ("lookup", lookup)] {
        assert!(part.starts_with(&format!("{what}: gaierror")), "{what}: the lookup refused: {said}");
    }
}

#[test]
fn environment_arguments_stdin_and_files_are_empty_and_exit_is_a_named_failure() {
    if !built() {
        return;
    }
    let module = module();
    let said = message(&module.reconcile(&hikawa("env", 1)).unwrap().value);
    assert_eq!(said, "env: environ {}; argv []; stdin ''; open FileNotFoundError; listdir FileNotFoundError", "what the guest was given");
    // os._exit(n) is WASI's exit, which carries success or failure only: n != 0 is exit(1).
    // sys.exit(n) raises SystemExit, which the runtime turns into the same exit.
    for (misbehave, code, exited) in [("exit", "3", 1), ("exit", "0", 0), ("sys-exit", "3", 1)] {
        match module.reconcile(&with_params(&[("misbehave", misbehave), ("code", code)], 1)) {
            Err(error @ GuestError::Trap { .. }) => {
                assert_eq!(error.reason(), "GuestTrapped", "{error}");
                assert!(error.to_string().contains(&format!("the guest called exit({exited})")), "{misbehave} {code}: {error}");
            }
            other => panic!("{misbehave}({code}): expected the call to fail naming the exit, got {other:?}"),
        }
    }
    assert!(module.reconcile(&hikawa("", 3)).is_ok(), "and the module still serves");
}

#[test]
fn a_module_asking_beyond_the_ceilings_is_refused_before_compiling() {
    if !built() {
        return;
    }
    let bytes = zundoko_operator::supply::sandbox::budget::with_section(&fixture_without_budget(), br#"{"memoryMiB": 100000}"#);
    let engine = SandboxEngine::new(SandboxLimits::default()).unwrap();
    let started = Instant::now();
    let e = engine.load(&bytes).err().expect("refused");
    assert_eq!(e.reason(), "BudgetOverCeiling", "{e}");
    assert!(e.to_string().contains("--max-memory-mib"), "{e}");
    // Refused from the section alone: no compile (which takes seconds) happened.
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
}

/// The fixture with any budget section of its own removed, so a test's section is the one read.
fn fixture_without_budget() -> Vec<u8> {
    let path = cache_dir().join(format!("no-budget-{:?}.wasm", std::thread::current().id()));
    std::fs::create_dir_all(cache_dir()).unwrap();
    std::fs::copy(fixture_path(FIXTURE), &path).unwrap();
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/set-budget.py");
    let status = std::process::Command::new("python3").arg(script).arg(&path).stdout(std::process::Stdio::null()).status().unwrap();
    assert!(status.success());
    std::fs::read(&path).unwrap()
}

#[test]
fn a_big_module_compiles_in_a_child_process_within_its_memory_limit() {
    if !built() {
        return;
    }
    let exe = std::path::PathBuf::from(env!("CARGO_BIN_EXE_zundoko-operator"));
    let compiler = |mib: usize| CompilerProcess { exe: exe.clone(), max_memory_bytes: mib << 20, timeout: Duration::from_secs(600) };
    // Too little memory for CPython's 10,000 functions (64 MiB), or even to read its 19 MB in
    // (16 MiB): refused, naming the limit, wherever the child ran out; the operator's own
    // process is untouched.
    let dir = cache_dir().join(format!("child-{}", std::process::id()));
    for mib in [16, 64] {
        let tight = SandboxEngine::new(SandboxLimits::default()).unwrap().with_compiled_cache(&dir).unwrap().with_compiler_process(compiler(mib)).unwrap();
        let e = tight.load(&fixture()).err().unwrap_or_else(|| panic!("{mib} MiB is too little"));
        assert_eq!(e.reason(), "CompileFailed", "{e}");
        assert!(e.to_string().contains(&format!("needed more than {mib} MiB (--max-compile-mib)")), "{e}");
    }
    // Enough: compiled in the child, mapped from the cache here, and it decides.
    let roomy = SandboxEngine::new(SandboxLimits::default()).unwrap().with_compiled_cache(&dir).unwrap().with_compiler_process(compiler(640)).unwrap();
    let module = Arc::new(roomy.load(&fixture()).unwrap());
    assert!(module.reconcile(&hikawa("", 1)).is_ok());
    let kept = std::fs::read_dir(dir.join("compiled")).unwrap().filter_map(Result::ok).filter(|e| e.path().extension().is_some_and(|x| x == "cwasm")).count();
    assert_eq!(kept, 1, "the child's code is in the cache");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The operator serving the Python module: its songs finish as the Rust rules' do, and a
/// Hikawa whose call raises, loops or allocates without end is marked with the reason while
/// the others sing on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_sings_with_python_rules_and_marks_only_the_failing_hikawas() {
    if !built() {
        return;
    }
    use common::cluster::{Cluster, quick_settings};
    use common::running::eventually;
    let module: Arc<dyn zundoko_operator::supply::contract::rules::Rules> = Arc::new(tokio::task::spawn_blocking(|| module().clone()).await.unwrap());
    let cluster = Cluster::start().await;
    let operator = cluster.operator(module, quick_settings());
    for (name, misbehave) in [("raiser", "raise"), ("looper", "loop"), ("hoarder", "alloc")] {
        cluster.create_hikawa("default", name, 0, &[("misbehave", misbehave)]).await;
    }
    let good: Vec<String> = (0..3).map(|i| format!("good{i}")).collect();
    for name in &good {
        cluster.create_hikawa("default", name, 0, &[]).await;
    }
    cluster.assert_songs_complete("default", &good, &zundoko_rules::classic(), Duration::from_secs(180)).await;
    for (name, reasons, says) in [
        ("raiser", &["GuestTrapped"][..], "RuntimeError: hostile: raised on purpose"),
        ("looper", &["OutOfCpuBudget"][..], "CPU budget"),
        ("hoarder", &["MemoryCapExceeded"][..], "memory"),
    ] {
        let failed = async || {
            let hikawa = cluster.hikawas("default").get(name).await.unwrap();
            hikawa.status.is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "False"))
        };
        eventually(&format!("{name} marked failed"), Duration::from_secs(60), failed).await;
        let status = cluster.hikawas("default").get(name).await.unwrap().status.unwrap();
        let ready = status.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
        assert!(reasons.contains(&ready.reason.as_str()), "{name}: {} ({})", ready.reason, ready.message);
        assert!(ready.message.contains(says), "{name}: {}", ready.message);
        let song = cluster.song("default", name).await;
        assert!(song.words.is_empty() && song.kiyoshis.is_empty(), "{name}: nothing of a failed call applied: {song:?}");
    }
    operator.stop().await;
}
