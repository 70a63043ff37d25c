//! Compiles end to end: `zundoko-operator run`, as the Deployment runs it, against the local API
//! server. Every module compiles in a child process (`compile-module`) of the operator, one at
//! a time, within `--compile-timeout-secs`, in its rule set's reconcile: a slow compile delays
//! the Hikawas of its rule set (and the compiles queued behind it), never the Hikawas of
//! modules already serving.
//!
//! A slow compile, made for sure and without burning a core: the Python module (19 MB, tens of
//! seconds to compile) from a registry, its compiler child stopped (SIGSTOP) the moment it
//! appears. A thread watches the operator's children in /proc the whole time.
//! Needs `make guest-langs` and docker-registry: without them the test says so loudly and
//! passes, except in CI (CI=true), where it fails.

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::module_bytes;
use common::registry::TestRegistry;
use common::replica::{ONE_SHARD, Replica, setup};
use common::rules::*;
use common::running::eventually;
use zundoko_operator::crd::{ModuleSource, ZundokoRulesSpec};
use zundoko_rules::{classic, strict_japanese};

/// The compiler children the watcher saw, and what it did.
#[derive(Default, Debug)]
struct Seen {
    /// Every compiler child, in the order they appeared.
    children: Vec<i32>,
    /// The most that were alive at once.
    most_at_once: usize,
    /// The child stopped, once armed.
    stopped: Option<i32>,
}

/// Watches one operator's `compile-module` children every 2 ms; once armed, stops (SIGSTOP)
/// the next one that appears. Kills what it stopped when dropped (a failed test leaves no
/// stopped process behind).
struct Watcher {
    seen: Arc<Mutex<Seen>>,
    armed: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
}

/// The operator's children running the compiler (`zundoko-operator compile-module ...`).
fn compiler_children(parent: u32) -> BTreeSet<i32> {
    let mut found = BTreeSet::new();
    let Ok(dir) = std::fs::read_dir("/proc") else { return found };
    for entry in dir.filter_map(Result::ok) {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // pid (comm) state ppid ...: comm may hold spaces, so read after its closing paren.
        let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
        if ppid != Some(parent) {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if cmdline.split(|b| *b == 0).any(|arg| arg == b"compile-module") {
            found.insert(pid);
        }
    }
    found
}

impl Watcher {
    fn start(operator: u32) -> Watcher {
        let (seen, armed, done) = (Arc::new(Mutex::new(Seen::default())), Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let (s, a, d) = (seen.clone(), armed.clone(), done.clone());
        std::thread::spawn(move || {
            while !d.load(Ordering::SeqCst) {
                let alive = compiler_children(operator);
                let mut seen = s.lock().unwrap();
                seen.most_at_once = seen.most_at_once.max(alive.len());
                for pid in alive {
                    if seen.children.contains(&pid) {
                        continue;
                    }
                    seen.children.push(pid);
                    if a.swap(false, Ordering::SeqCst) {
                        // SAFETY: a signal to a child of the operator this test started.
                        unsafe { libc::kill(pid, libc::SIGSTOP) };
                        seen.stopped = Some(pid);
                    }
                }
                drop(seen);
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        Watcher { seen, armed, done }
    }

    fn arm(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }

    fn seen<R>(&self, f: impl FnOnce(&Seen) -> R) -> R {
        f(&self.seen.lock().unwrap())
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(pid) = self.seen.lock().unwrap_or_else(|p| p.into_inner()).stopped
            && std::path::Path::new(&format!("/proc/{pid}")).exists()
        {
            // SAFETY: the child this test stopped, if it is still there.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// Whether `pid` is alive and stopped (state T in /proc/PID/stat).
fn stopped(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(')').is_some_and(|(_, rest)| rest.split_whitespace().next() == Some("T"))
}

/// The Python module, or None (said loudly) when it was not built and CI is not set.
fn python_module() -> Option<Vec<u8>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/modules/zundoko-classic-py.wasm");
    if path.exists() {
        return Some(std::fs::read(&path).unwrap());
    }
    common::ci::cannot_run(&format!("{} is missing (make guest-langs): the slow compile was not tested", path.display()));
    None
}

/// --compile-timeout-secs here: long enough for the songs sung meanwhile on a busy machine.
const TIMEOUT_SECS: u64 = 60;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_compile_delays_only_its_rule_set_compiles_wait_their_turn_and_time_out_with_the_reason() {
    let Some(python) = python_module() else { return };
    let Some(registry) = TestRegistry::start(false) else { return };
    // Pushed unchecked: a checked push would compile it here first.
    registry.push_raw_module("rules/python:v1", &python).await;
    let setup = setup("compiles", true).await;
    let cluster = &setup.cluster;
    cluster.put_configmap(RULES_NS, "rules-japanese", &module_bytes("zundoko-strict-ja")).await;
    let cache = setup.dir.join("cache");
    let timeout = TIMEOUT_SECS.to_string();
    let extra = [
        ONE_SHARD[0],
        ("ZUNDOKO_COMPILE_TIMEOUT_SECS", timeout.as_str()),
        ("ZUNDOKO_INSECURE_REGISTRIES", registry.addr.as_str()),
        // A fresh compiled cache: every module here compiles.
        ("ZUNDOKO_CACHE_DIR", cache.to_str().unwrap()),
    ];
    let operator = Replica::spawn_with("operator", &setup.kubeconfig, &setup.env, &extra, &setup.dir.join("no-module-file"), &setup.dir);
    let watcher = Watcher::start(operator.child.id());
    // The default module (the ConfigMap's classic rules) serves.
    sing(cluster, "first", 0, None, &[]).await;
    cluster.assert_songs_complete("default", &["first".to_string()], &classic(), Duration::from_secs(120)).await;

    // The Python rule set: its pull, then its compile, which the watcher stops at once.
    watcher.arm();
    let python_rules = ZundokoRulesSpec { source: ModuleSource::oci(&format!("{}/rules/python:v1", registry.addr)), sha256: None, candidate: None };
    create_rules(cluster, "python", python_rules).await;
    sing(cluster, "py", 0, Some("python"), &[]).await;
    let compiling = Instant::now();
    eventually("the Python module's compile started (and was stopped)", Duration::from_secs(60), async || watcher.seen(|s| s.stopped.is_some())).await;
    let slow = watcher.seen(|s| s.stopped.unwrap());
    // A signal is delivered when the kernel next schedules the child, not when kill returns.
    eventually(&format!("the compiler child {slow} is stopped"), Duration::from_secs(10), async || stopped(slow)).await;

    // Meanwhile: Hikawas of the module already serving sing whole songs, and a rule set whose
    // module must compile too waits its turn (no second compiler child while the first lives).
    create_rules(cluster, "japanese", plain("rules-japanese")).await;
    sing(cluster, "ja", 0, Some("japanese"), &[]).await;
    let meanwhile = names("meanwhile", 3);
    for name in &meanwhile {
        sing(cluster, name, 0, None, &[]).await;
    }
    cluster.assert_songs_complete("default", &meanwhile, &classic(), Duration::from_secs(TIMEOUT_SECS * 2 / 3)).await;
    assert!(stopped(slow), "the songs were sung while the compile had not ended");
    assert!(compiling.elapsed() < Duration::from_secs(TIMEOUT_SECS), "not yet timed out: the check below would prove nothing");
    assert_eq!(watcher.seen(|s| s.children.len()), 2, "only the default module's compile and the Python one's so far: {:?}", watcher.seen(|s| s.children.clone()));
    for name in ["py", "ja"] {
        assert!(cluster.song("default", name).await.words.is_empty(), "{name} said a word before its module compiled");
    }

    // At --compile-timeout-secs the child is killed, and the rule set says why.
    let status = wait_rules_for(cluster, "python", "the compile timed out", Duration::from_secs(TIMEOUT_SECS + 90), |s| s.phase.as_deref() == Some("Rejected")).await;
    assert!(compiling.elapsed() >= Duration::from_secs(TIMEOUT_SECS), "rejected after {:?}, before the timeout", compiling.elapsed());
    assert_eq!(status.reason.as_deref(), Some("CompileFailed"), "{status:?}");
    let message = status.message.unwrap_or_default();
    assert!(message.contains(&format!("longer than {TIMEOUT_SECS}s")) && message.contains("--compile-timeout-secs"), "{message}");
    eventually("the stopped child is gone", Duration::from_secs(10), async || !std::path::Path::new(&format!("/proc/{slow}")).exists()).await;
    eventually("py hears why", Duration::from_secs(30), async || {
        ready(cluster, "py").await.is_some_and(|(status, reason, message)| status == "False" && reason == "RulesNotActive" && message.contains("CompileFailed"))
    })
    .await;

    // Then the Japanese module compiles, in a child of its own, and its Hikawa sings.
    cluster.assert_songs_complete("default", &["ja".to_string()], &strict_japanese(), Duration::from_secs(120)).await;
    let (children, most) = watcher.seen(|s| (s.children.clone(), s.most_at_once));
    assert_eq!(children.len(), 3, "the default module's, the Python one's and the Japanese one's compiles: {children:?}");
    assert_eq!(most, 1, "two compiles at once");
    assert!(cluster.song("default", "py").await.words.is_empty());
    drop(watcher);
    drop(operator);
}

/// `wait_rules` with a deadline of its own.
async fn wait_rules_for(
    cluster: &common::cluster::Cluster,
    name: &str,
    what: &str,
    deadline: Duration,
    check: impl Fn(&zundoko_operator::crd::ZundokoRulesStatus) -> bool,
) -> zundoko_operator::crd::ZundokoRulesStatus {
    eventually(what, deadline, async || check(&rules_status(cluster, name).await)).await;
    rules_status(cluster, name).await
}
