//! Compiling a module in a child process with a memory limit of its own. Compiling needs
//! memory in proportion to the module's code: an 18 MB componentize-py component (10,625
//! functions) peaks at about 345 MiB and a 12 MB componentize-js one at 452 MiB, whatever the
//! compiler settings (Cranelift at opt level none, speed, without address maps or unwind
//! info, and Winch all measured within 15% of each other), more than the operator's whole Pod
//! limit used to be.
//! In a child, the compile is bounded (RLIMIT_DATA: a compile past it fails, naming the
//! limit, instead of the kernel OOM-killing the operator), one at a time, off the async
//! workers, and every byte it used is given back when the child exits. The child hands the
//! compiled code back on its stdout (read a piece at a time, up to the child's own memory
//! limit); the operator keeps it in the compiled-module cache as it comes, authenticated with a
//! key the child never sees.
//!
//! Both ends are here: the parent ([`CompilerProcess::compile_to`]) and the child's whole life
//! ([`run_child`]). The child is the operator's own binary run as
//! `zundoko-operator compile-module --max-compile-mib N --limits-json JSON` with the module on
//! stdin and its code on stdout; the verb and its flags are the constants below, which the
//! parent spells its command line with and `cli/compile.rs` (the clap plumbing) parses it with.

use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::error::GuestError;
use super::limits::SandboxLimits;

/// The child's verb (a hidden command of the operator's binary).
pub const VERB: &str = "compile-module";
/// `--max-compile-mib N`: the child's RLIMIT_DATA, in MiB.
pub const MAX_COMPILE_MIB: &str = "max-compile-mib";
/// `--limits-json JSON`: the engine's [`SandboxLimits`], so the code fits the parent's engine.
pub const LIMITS_JSON: &str = "limits-json";

/// A flag as written on the command line.
fn flag(name: &str) -> String {
    format!("--{name}")
}

/// How to run the compiler process.
#[derive(Clone, Debug)]
pub struct CompilerProcess {
    /// The operator's own binary (its hidden [`VERB`] command).
    pub exe: PathBuf,
    /// The child's RLIMIT_DATA.
    pub max_memory_bytes: usize,
    /// The longest a compile may take before the child is killed.
    pub timeout: Duration,
}

thread_local! {
    /// The ceilings of the compiles made on this thread now (a tenant policy's), if any.
    static CEILING: std::cell::Cell<(Option<usize>, Option<Duration>)> = const { std::cell::Cell::new((None, None)) };
}

/// Run `load` with its compiles (on this thread) bounded to at most `memory_bytes` and `time`
/// as well as the operator's own bounds: a tenant policy's `compileMemoryMiB` and
/// `compileSeconds`, carried as the compile queue carries whose turn it is.
pub fn within<R>(memory_bytes: Option<usize>, time: Option<Duration>, load: impl FnOnce() -> R) -> R {
    let before = CEILING.with(|c| c.replace((memory_bytes, time)));
    let result = load();
    CEILING.with(|c| c.set(before));
    result
}

impl CompilerProcess {
    /// This compiler process bounded further by the ceilings [`within`] set on this thread.
    pub fn bounded(&self) -> CompilerProcess {
        let (memory, time) = CEILING.with(std::cell::Cell::get);
        CompilerProcess {
            exe: self.exe.clone(),
            max_memory_bytes: memory.map_or(self.max_memory_bytes, |m| m.min(self.max_memory_bytes)),
            timeout: time.map_or(self.timeout, |t| t.min(self.timeout)),
        }
    }

    /// A compile stopped at one of this process's bounds: by a tenant policy's ceiling (its
    /// `field`) if `policys` says [`within`] set that bound on this thread (it was the lower,
    /// so [`bounded`](Self::bounded) took it), `message` naming no flag; else by the operator's
    /// own flag, `flagged` naming it.
    fn stopped(field: &'static str, policys: impl Fn((Option<usize>, Option<Duration>)) -> bool, message: String, flagged: String) -> GuestError {
        if policys(CEILING.with(std::cell::Cell::get)) {
            return GuestError::CompileOverCeiling { field, message };
        }
        GuestError::CompileFailed(flagged)
    }

    /// Run the child: it compiles `bytes` with an engine made from `limits` (so its code fits
    /// this engine) and hands back the compiled code, given to `sink` in pieces of at most
    /// [`PIECE_BYTES`] as it comes: never whole in this process (a componentize-js
    /// component's code is 40 MB, which a buffer made the cold start's peak: 76 MiB against a
    /// warm start's 45). Returns how many bytes `sink` got. Blocking.
    pub fn compile_to(&self, bytes: &[u8], limits: &SandboxLimits, sink: &mut (dyn FnMut(&[u8]) -> std::io::Result<()> + Send)) -> Result<u64, GuestError> {
        // One compile at a time (two children would need twice the memory the Pod allows),
        // the turns fair among rule sets, the default module's first (compile_queue.rs).
        let _turn = super::compile_queue::COMPILES.turn();
        let failed = |why: String| GuestError::CompileFailed(why);
        let limits_json = serde_json::to_string(limits).map_err(|e| failed(e.to_string()))?;
        let mut child = Command::new(&self.exe)
            .arg(VERB)
            .arg(flag(MAX_COMPILE_MIB))
            .arg((self.max_memory_bytes >> 20).to_string())
            .arg(flag(LIMITS_JSON))
            .arg(limits_json)
            // Nothing of the operator's environment (the cache's directory, a registry's
            // settings, whatever the Pod was given) and not its working directory: the child
            // compiles untrusted bytes and is told only what it needs.
            .env_clear()
            .current_dir("/")
            // The operator's allocator (mimalloc) reserves 1 GiB at a time, writable where the
            // kernel overcommits, and RLIMIT_DATA counts a writable mapping in full: in 16 MiB
            // steps instead, the limit counts about what the compile uses, and one step too many
            // fails as an allocation (lazily committed reservations would fault instead).
            .env("MIMALLOC_ARENA_RESERVE", "16MiB")
            // No backtraces in the child (see `report_panics_without_locks`): capturing one
            // allocates while std's backtrace lock is held.
            .env("RUST_BACKTRACE", "0")
            .env("RUST_LIB_BACKTRACE", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| failed(format!("cannot start the compiler process {}: {e}", self.exe.display())))?;
        let mut stdin = child.stdin.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        let mut stdout = child.stdout.take().expect("piped");
        // No more code than the child's memory could hold.
        let max_code = self.max_memory_bytes as u64;
        // The module goes in while the child reads it; its code and its stderr (one line) come back.
        let status = std::thread::scope(|scope| {
            let writer = scope.spawn(move || stdin.write_all(bytes));
            let code = scope.spawn(move || pass_on(&mut stdout, max_code, sink));
            let reader = scope.spawn(move || {
                let mut text = String::new();
                let _ = (&mut stderr).take(64 << 10).read_to_string(&mut text);
                text
            });
            let started = Instant::now();
            let status = loop {
                match child.try_wait() {
                    Ok(Some(status)) => break Ok(status),
                    Ok(None) if started.elapsed() > self.timeout => {
                        let _ = child.kill();
                        let _ = child.wait();
                        let message = |by: &str| format!("the compile took longer than {:?}{by}; the compiler process was stopped", self.timeout);
                        let policys = |(_, time): (Option<usize>, Option<Duration>)| time == Some(self.timeout);
                        break Err(Self::stopped("spec.ceilings.compileSeconds", policys, message(""), message(" (--compile-timeout-secs)")));
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                    Err(e) => break Err(failed(format!("lost the compiler process: {e}"))),
                }
            };
            let _ = writer.join();
            (status, reader.join().unwrap_or_default(), code.join())
        });
        let (status, stderr, code) = status;
        let status = status?;
        if status.success() {
            return match code {
                Ok(Ok(0)) => Err(failed("the compiler process handed back no code".into())),
                Ok(Ok(len)) => Ok(len),
                Ok(Err(e)) => Err(failed(format!("reading the compiler process's code: {e}"))),
                Err(_) => Err(failed("reading the compiler process's code failed".into())),
            };
        }
        // The last line that says something: std's hint about backtraces (after an allocation
        // failure's own line) says nothing of why.
        let said = stderr.lines().rev().find(|l| !l.trim().is_empty() && !l.starts_with("note: run with `RUST_BACKTRACE")).unwrap_or("").trim();
        let said = crate::text::printable(said.strip_prefix("error: ").unwrap_or(said), 512);
        // Rust's allocator says "memory allocation of N bytes failed" and aborts; a fallible
        // reservation (reading the module in) fails as an io error "out of memory".
        if ["memory allocation", "Cannot allocate memory", "out of memory"].iter().any(|said| stderr.contains(said)) {
            let message = |by: &str| format!("compiling it needed more than {} MiB{by}: {said}", self.max_memory_bytes >> 20);
            let policys = |(memory, _): (Option<usize>, Option<Duration>)| memory == Some(self.max_memory_bytes);
            return Err(Self::stopped("spec.ceilings.compileMemoryMiB", policys, message(""), message(&format!(" (--{MAX_COMPILE_MIB})"))));
        }
        Err(failed(if said.is_empty() { format!("the compiler process ended with {status}") } else { said }))
    }
}

/// What the compiler process's code is handed on in: a piece at a time.
pub const PIECE_BYTES: usize = 1 << 20;

/// The code read from `from` and given to `sink` a piece at a time, at most `max_code` bytes
/// (more is an error: no more code than the child's memory could hold). Stops at the first
/// error, the sink's included, and reads no further: the child then ends on a closed pipe.
fn pass_on(from: &mut impl std::io::Read, max_code: u64, sink: &mut (dyn FnMut(&[u8]) -> std::io::Result<()> + Send)) -> std::io::Result<u64> {
    let mut piece = vec![0u8; PIECE_BYTES];
    let mut total = 0u64;
    loop {
        let read = match from.read(&mut piece) {
            Ok(0) => return Ok(total),
            Ok(read) => read,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        total += read as u64;
        if total > max_code {
            return Err(std::io::Error::other(format!("more than {max_code} bytes of code (the compiler process's memory limit)")));
        }
        sink(&piece[..read])?;
    }
}

/// The child's whole life: bound its own memory to `max_compile_mib`, read the module from
/// stdin, and compile it with an engine made from `limits_json` into the compiled-module cache
/// under `cache_dir`. An error ends the child with its message on stderr, which the parent reads.
pub fn run_child(max_compile_mib: usize, limits_json: &str) -> anyhow::Result<()> {
    use anyhow::Context as _;
    report_panics_without_locks();
    limit_own_memory(max_compile_mib << 20).context("cannot set the compiler process's memory limit")?;
    let limits: SandboxLimits = serde_json::from_str(limits_json).with_context(|| flag(LIMITS_JSON))?;
    let mut bytes = Vec::new();
    std::io::stdin().read_to_end(&mut bytes).context("reading the module from stdin")?;
    let engine = super::SandboxEngine::for_compiling(limits)?;
    let code = engine.engine().precompile_component(&bytes).map_err(|e| anyhow::anyhow!("{e:#}"))?;
    // The code goes back to the operator on stdout: the child never sees the cache (nor its key).
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(&code).and_then(|()| stdout.flush()).context("handing the code back on stdout")
}

/// In the child, before its memory is bounded: a panic is one line on stderr, then an abort.
/// std's own report holds a lock (the one backtraces are printed under) while it formats and
/// symbolizes, and both allocate; an allocation failing under the bound then reports itself
/// under the same lock, and waits for it forever. Seen: a child hung with one thread in each,
/// until the compile's timeout, instead of failing at once as "needed more than N MiB".
fn report_panics_without_locks() {
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let message = payload.downcast_ref::<&str>().copied().or_else(|| payload.downcast_ref::<String>().map(String::as_str)).unwrap_or("");
        let at = info.location();
        let (file, line) = at.map_or(("?", 0), |at| (at.file(), at.line()));
        let _ = writeln!(std::io::stderr(), "error: the compiler process panicked at {file}:{line}: {message}");
        std::process::abort();
    }));
}

/// In the child, first thing: bound its data segment and heap.
pub fn limit_own_memory(max_bytes: usize) -> std::io::Result<()> {
    let limit = libc::rlimit { rlim_cur: max_bytes as libc::rlim_t, rlim_max: max_bytes as libc::rlim_t };
    // SAFETY: setrlimit with a valid pointer to an initialised struct.
    if unsafe { libc::setrlimit(libc::RLIMIT_DATA, &limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_tenants_compile_ceilings_lower_the_operators_bounds_never_raise_them() {
        let operator = CompilerProcess { exe: "zundoko-operator".into(), max_memory_bytes: 512 << 20, timeout: Duration::from_secs(60) };
        assert_eq!((operator.bounded().max_memory_bytes, operator.bounded().timeout), (512 << 20, Duration::from_secs(60)));
        let (memory, timeout) = within(Some(64 << 20), Some(Duration::from_secs(5)), || (operator.bounded().max_memory_bytes, operator.bounded().timeout));
        assert_eq!((memory, timeout), (64 << 20, Duration::from_secs(5)));
        let raised = within(Some(1 << 30), Some(Duration::from_secs(600)), || (operator.bounded().max_memory_bytes, operator.bounded().timeout));
        assert_eq!(raised, (512 << 20, Duration::from_secs(60)));
        assert_eq!(operator.bounded().max_memory_bytes, 512 << 20, "the ceiling ends with its load");
    }

    use super::*;

    /// A stand-in compiler: a shell script of this test's own (`body` after reading stdin).
    fn stand_in(test: &str, body: &str) -> (PathBuf, PathBuf) {
        let dir = crate::supply::disk_cache::private_temp_dir(&format!("zundoko-child-{test}-")).unwrap();
        let script = dir.join("compiler.sh");
        std::fs::write(&script, format!("#!/bin/sh\ncat >/dev/null\n{body}\n")).unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        (dir, script)
    }

    #[test]
    fn a_compile_a_tenant_policys_ceiling_stopped_names_its_field_and_one_the_operators_bound_stopped_its_flag() {
        let compile = |process: &CompilerProcess| process.bounded().compile_to(b"module", &SandboxLimits::default(), &mut |_: &[u8]| Ok(())).unwrap_err();
        // Out of memory, as the child says it (std's line, then its hint about backtraces).
        let (dir, script) = stand_in("memory", "echo 'memory allocation of 4096 bytes failed' >&2\necho 'note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace' >&2\nexit 134");
        let operator = CompilerProcess { exe: script, max_memory_bytes: 512 << 20, timeout: Duration::from_secs(60) };
        match within(Some(64 << 20), None, || compile(&operator)) {
            GuestError::CompileOverCeiling { field, message } => {
                assert_eq!(field, "spec.ceilings.compileMemoryMiB");
                assert_eq!(message, "compiling it needed more than 64 MiB: memory allocation of 4096 bytes failed");
            }
            other => panic!("not the policy's: {other}"),
        }
        // The operator's bound was the lower (or no policy set one): its flag is named.
        for error in [within(Some(1 << 30), None, || compile(&operator)), compile(&operator)] {
            assert!(matches!(&error, GuestError::CompileFailed(why) if why.starts_with("compiling it needed more than 512 MiB (--max-compile-mib)")), "{error}");
        }
        let _ = std::fs::remove_dir_all(&dir);
        // Too long: stopped at the policy's time, or at the operator's.
        let (dir, script) = stand_in("time", "exec sleep 30");
        let operator = CompilerProcess { exe: script, max_memory_bytes: 512 << 20, timeout: Duration::from_millis(300) };
        let error = within(None, Some(Duration::from_millis(100)), || compile(&operator));
        assert!(matches!(&error, GuestError::CompileOverCeiling { field: "spec.ceilings.compileSeconds", message } if message.starts_with("the compile took longer than 100ms;")), "{error}");
        let error = compile(&operator);
        assert!(matches!(&error, GuestError::CompileFailed(why) if why.starts_with("the compile took longer than 300ms (--compile-timeout-secs)")), "{error}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_compiler_process_gets_a_cleared_environment_and_not_the_operators_directory() {
        // A stand-in compiler that hands back, as its code, its environment and working
        // directory. This test's environment (PATH, HOME, CARGO_*: as the operator's has
        // ZUNDOKO_CACHE_DIR) must not reach it: only the three variables set for it do.
        let dir = crate::supply::disk_cache::private_temp_dir("zundoko-child-env-").unwrap();
        let script = dir.join("compiler.sh");
        std::fs::write(&script, "#!/bin/sh\ncat >/dev/null\nenv\necho \"cwd=$(pwd)\"\n").unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        assert!(std::env::vars().count() > 0, "the parent has an environment to leak");
        let process = CompilerProcess { exe: script, max_memory_bytes: 64 << 20, timeout: Duration::from_secs(30) };
        let mut said = Vec::new();
        process.compile_to(b"module", &SandboxLimits::default(), &mut |piece: &[u8]| {
            said.extend_from_slice(piece);
            Ok(())
        })
        .unwrap();
        let said = String::from_utf8(said).unwrap();
        let names: Vec<&str> = said.lines().filter_map(|l| l.split_once('=').map(|(name, _)| name)).filter(|n| *n != "cwd" && *n != "PWD" && *n != "SHLVL" && *n != "_").collect();
        assert_eq!(names.iter().copied().collect::<std::collections::BTreeSet<_>>(), ["MIMALLOC_ARENA_RESERVE", "RUST_BACKTRACE", "RUST_LIB_BACKTRACE"].into(), "{said}");
        assert!(!said.contains("ZUNDOKO_CACHE_DIR") && said.contains("cwd=/\n"), "{said}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_code_is_passed_on_a_piece_at_a_time_and_no_more_than_the_bound() {
        let code: Vec<u8> = (0..3 * PIECE_BYTES + 5).map(|i| (i % 253) as u8).collect();
        let (mut got, mut largest) = (Vec::new(), 0);
        let passed = pass_on(&mut code.as_slice(), code.len() as u64, &mut |piece: &[u8]| {
            largest = largest.max(piece.len());
            got.extend_from_slice(piece);
            Ok(())
        });
        assert_eq!(passed.unwrap(), code.len() as u64);
        assert_eq!(got, code);
        assert!(largest <= PIECE_BYTES, "a piece of {largest} bytes");
        // One byte past the bound: refused, and the sink got no more than the bound.
        let mut given = 0;
        let over = pass_on(&mut code.as_slice(), code.len() as u64 - 1, &mut |piece: &[u8]| {
            given += piece.len();
            Ok(())
        });
        assert!(over.unwrap_err().to_string().contains("more than"), "refused past the bound");
        assert!(given < code.len(), "the sink got {given} bytes");
        // The sink's error ends the handover.
        let mut calls = 0;
        let stopped = pass_on(&mut code.as_slice(), code.len() as u64, &mut |_: &[u8]| {
            calls += 1;
            Err(std::io::Error::other("disk full"))
        });
        assert_eq!(stopped.unwrap_err().to_string(), "disk full");
        assert_eq!(calls, 1);
    }
}
