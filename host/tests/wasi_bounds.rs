//! What a guest that imports WASI can make the host hold (issue 37, part 2), seen from the
//! operator's own binary: a module whose `info()` (run at load) or whose call subscribes half
//! a million clock pollables, or polls a list of thousands, fails with `HostResourceLimit`, and
//! the process's peak RSS (ru_maxrss of the child) stays within 16 MiB of the same command run
//! on a module that behaves. Before the bounds: +30 MiB at load, +22 MiB for one call (held by
//! wasmtime's 100,000-handle default only), and a poll list of 99,000 accepted.
//! The fixture is `target/fixtures/zundoko-wasi-hoard*.wasm` (`make fixtures`).

mod common;

use std::io::Read as _;
use std::process::{Command, Stdio};

use common::fixture_path;

/// The most a hostile WASI guest may add to the process's peak RSS, in MiB.
const BOUND_MIB: i64 = 16;

/// Run the operator with `args`; its exit status, output and peak RSS in MiB.
fn run(args: &[&str], cache: &std::path::Path) -> (bool, String, i64) {
    // Reaped by wait4 below (std's wait gives no rusage).
    #[allow(clippy::zombie_processes)]
    let mut child = Command::new(env!("CARGO_BIN_EXE_zundoko-operator"))
        .args(args)
        .env("ZUNDOKO_CACHE_DIR", cache)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut out, mut err) = (String::new(), String::new());
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 on our own child's pid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32);
    (libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, out + &err, usage.ru_maxrss / 1024)
}

fn hikawa(dir: &std::path::Path, name: &str, params: &[(&str, &str)]) -> String {
    let params: String = params.iter().map(|(k, v)| format!("    {k}: \"{v}\"\n")).collect();
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &path,
        format!("apiVersion: zundokokiyoshi.kaitoy.github.com/v1beta1\nkind: Hikawa\nmetadata:\n  name: {name}\nspec:\n  intervalMillis: 500\n  params:\n{params}"),
    )
    .unwrap();
    path.display().to_string()
}

#[test]
fn a_wasi_guest_cannot_make_the_host_hold_pollables_or_poll_lists_at_load_or_in_a_call() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../target/tmp/wasi-bounds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cache = dir.join("cache");
    let hoard = fixture_path("zundoko-wasi-hoard").display().to_string();
    let at_load = fixture_path("zundoko-wasi-hoard-load").display().to_string();

    // At load: info() subscribes 500,000 pollables.
    let (ok, said, idle) = run(&["check", "--module", &hoard], &cache);
    assert!(ok, "the fixture that behaves at load passes: {said}");
    let (ok, said, peak) = run(&["check", "--module", &at_load], &cache);
    assert!(!ok && said.contains("HostResourceLimit") && said.contains("4096"), "refused at load, named: {said}");
    assert!(peak - idle <= BOUND_MIB, "load: peak {peak} MiB against {idle} MiB for a module that behaves");

    // In a call.
    let simulate = |name: &str, params: &[(&str, &str)]| {
        let path = hikawa(&dir, name, params);
        run(&["simulate", "--module", &hoard, "--hikawa", &path, "--max-decisions", "1", "--seed", "1"], &cache)
    };
    let (ok, said, idle) = simulate("behaves", &[]);
    assert!(ok, "{said}");
    for (name, params, names) in [
        ("pollables", &[("hoard", "pollables")][..], "WASI resources held at once"),
        ("poll-2000", &[("hoard", "poll"), ("n", "2000")][..], "poll list"),
        ("poll-99000", &[("hoard", "poll"), ("n", "99000")][..], "resource handles held at once"),
        ("poll-million", &[("hoard", "poll")][..], "bytes copied from the guest in one host call"),
    ] {
        let (ok, said, peak) = simulate(name, params);
        assert!(!ok && said.contains("HostResourceLimit") && said.contains(names), "{name}: {said}");
        assert!(peak - idle <= BOUND_MIB, "{name}: peak {peak} MiB against {idle} MiB for a call that behaves");
    }
    // A few pollables are fine, and waiting an hour moves virtual time, not the thread.
    let (ok, said, _) = simulate("some", &[("hoard", "pollables"), ("n", "100")]);
    assert!(ok, "{said}");
    let _ = std::fs::remove_dir_all(&dir);
}
