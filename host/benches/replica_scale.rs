//! Replicas: words/s and RSS per replica with 1, 2 and 3 replicas when the rules cost a fixed
//! CPU per call, and the shard handover time after a replica is killed (SPEC 10, 12).
//!
//! For each replica count N, on a fresh local API server process (this benchmark re-run as
//! `ZUNDOKO_BENCH_ROLE=apiserver`, as in scale.rs):
//!
//! 1. N `zundoko-operator run --leader-election --shards 32` processes (replica-1..N, short
//!    leases: 4 s, renew deadline 3 s, retry 0.5 s), the rules `target/fixtures/zundoko-burn.wasm`:
//!    the classic rules after about 5 ms of wasm per call (`make fixtures`).
//! 2. Wait until the replicas' `zundoko_shards_held` (each one's /metrics) add up to the shard
//!    count, each at most its fair share (ceil(shards / N)), for 2 s on end.
//! 3. Create H Hikawas with `intervalMillis: 0` (16 at once) and time from the first created
//!    to the last Kiyoshi; words = the children (Zundokos and Kiyoshis) listed from the API
//!    server at the end. Per replica: decisions (guest calls), words said, mean time per
//!    decision, CPU, RSS (VmRSS) and peak RSS (VmHWM) at the end.
//! 4. With N >= 2: `kill -9` the replica holding the most shards, and time from the kill until
//!    the survivors' `zundoko_shards_held` add up to the shard count again (handover), and
//!    until each survivor is at most at its new fair share (rebalanced). Idle: after the songs.
//!
//! `make bench-scale` runs it after the scale benchmark; alone:
//! `cargo bench -p zundoko-operator --bench replica_scale`. Environment:
//! `ZUNDOKO_BENCH_REPLICA_HIKAWAS` (default 300), `ZUNDOKO_BENCH_REPLICAS` (default `1,2,3`),
//! `ZUNDOKO_BENCH_SHARDS` (default 32), `ZUNDOKO_BENCH_LOG` (the replicas' log filter, default
//! `warn`; each replica's log goes to a file, shown when something goes wrong),
//! `ZUNDOKO_BENCH_PIN=1` (replica k on CPU (k - 1) mod cores only: a core per replica, so the
//! gain of each added replica shows even where one replica alone fills every core).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube::api::ListParams;
use kube::Api;
use zundoko_operator::crd::{Hikawa, Kiyoshi, Zundoko};

/// How long the shards must stay settled before the songs start.
const SETTLED_FOR: Duration = Duration::from_secs(2);

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    match std::env::var(ROLE).as_deref() {
        Ok("apiserver") => runtime.block_on(apiserver_process()),
        _ => runtime.block_on(bench()),
    }
}

fn env_number<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.trim().replace('_', "").parse().ok()).unwrap_or(default)
}

// Process figures from /proc, a free port, an HTTP GET; the API server's process and the
// Hikawas to sing: shared with the scale benchmark.
#[path = "common/processes.rs"]
mod processes;
use processes::*;
#[path = "common/cluster.rs"]
mod cluster;
use cluster::*;

// ---------------------------------------------------------------------------------------
// The local API server: a fresh process per replica count.

/// Serves until its stdin closes, then prints its CPU time (`cpu SECONDS`).
async fn apiserver_process() {
    let _server = serve().await;
    until_stdin_closes().await;
    println!("cpu {:.3}", cpu_seconds("self"));
    std::process::exit(0);
}

async fn fresh_server() -> ServerProcess {
    start_server("replicas", &[]).await
}

/// Stop the server.
async fn finish(mut server: ServerProcess) {
    drop(server.process.stdin.take());
    let _ = tokio::task::spawn_blocking(move || server.process.wait_with_output()).await;
    let _ = std::fs::remove_file(&server.kubeconfig);
}

// ---------------------------------------------------------------------------------------
// The replicas, each its own operator process.

/// The sum of one metric's samples (`name` exactly, any labels); None when it has none.
fn metric(text: &str, name: &str) -> Option<f64> {
    let mut found = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some(rest) = line.strip_prefix(name) else { continue };
        if !(rest.starts_with(' ') || rest.starts_with('{')) {
            continue;
        }
        if let Some(v) = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) {
            *found.get_or_insert(0.0) += v;
        }
    }
    found
}

struct Replica {
    name: String,
    process: Child,
    pid: String,
    port: u16,
    log: PathBuf,
    alive: bool,
}

impl Replica {
    fn spawn(k: usize, kubeconfig: &Path, module: &str, shards: u16, logs: &Path) -> Replica {
        let name = format!("replica-{k}");
        let port = free_port();
        let log = logs.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).expect("a log file");
        let mut command = Command::new(env!("CARGO_BIN_EXE_zundoko-operator"));
        command
            .args(["run", "--module", module, "--leader-election", "--shards", &shards.to_string()])
            .args(["--operator-namespace", NAMESPACE, "--pod-name", &name, "--lease-name", "zundoko-operator"])
            .args(["--lease-duration-secs", "4", "--lease-renew-deadline-secs", "3", "--lease-retry-period-secs", "0.5"])
            .args(["--api-timeout-secs", "1.5", "--http-addr", &format!("127.0.0.1:{port}")])
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", std::env::var("ZUNDOKO_BENCH_LOG").unwrap_or_else(|_| "warn".into()))
            .env("ZUNDOKO_LOG_FORMAT", "text")
            .env_remove("ZUNDOKO_CONCURRENCY")
            .env_remove("ZUNDOKO_SHARDS")
            .env_remove("POD_NAME")
            .env_remove("POD_NAMESPACE")
            .stdout(Stdio::null())
            .stderr(Stdio::from(file));
        if let Some(cpu) = pinned_cpu(k) {
            use std::os::unix::process::CommandExt as _;
            // SAFETY: between fork and exec, only sched_setaffinity (async-signal-safe) on a
            // set built before the fork.
            let set = cpu_set(cpu);
            unsafe {
                command.pre_exec(move || {
                    if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                });
            }
        }
        let process = command.spawn().expect("starting the operator");
        let pid = process.id().to_string();
        Replica { name, process, pid, port, log, alive: true }
    }

    async fn metrics(&self) -> Option<String> {
        match http_get(self.port, "/metrics", Duration::from_secs(5)).await {
            Some((200, text)) => Some(text),
            _ => None,
        }
    }

    /// Panics, with the end of its log, if the process has exited.
    fn check_running(&mut self) {
        if let Some(status) = self.process.try_wait().expect("waiting on a replica") {
            panic!("{} exited ({status}); the end of its log:\n{}", self.name, log_tail(&self.log, 40));
        }
    }

    fn kill(&mut self) {
        if self.alive {
            let _ = self.process.kill(); // SIGKILL
            let _ = self.process.wait();
            self.alive = false;
        }
    }
}

/// With `ZUNDOKO_BENCH_PIN=1`, replica k runs on CPU (k - 1) mod cores only: one core's worth
/// per replica, so words/s shows what each added replica brings until the cores run out.
fn pinned_cpu(k: usize) -> Option<usize> {
    let pin = std::env::var("ZUNDOKO_BENCH_PIN").is_ok_and(|v| v == "1");
    pin.then(|| (k - 1) % std::thread::available_parallelism().map_or(1, |n| n.get()))
}

fn cpu_set(cpu: usize) -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is plain bits; all zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(cpu, &mut set) };
    set
}

fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn logs_tail(replicas: &[Replica]) -> String {
    replicas.iter().map(|r| format!("--- {} ({}):\n{}", r.name, r.log.display(), log_tail(&r.log, 15))).collect::<Vec<_>>().join("\n")
}

/// Each live replica's `zundoko_shards_held` (None: not served yet), in replica order.
async fn shards_held(replicas: &mut [Replica]) -> Vec<Option<u64>> {
    let mut held = Vec::new();
    for r in replicas.iter_mut().filter(|r| r.alive) {
        r.check_running();
        held.push(r.metrics().await.and_then(|t| metric(&t, "zundoko_shards_held")).map(|v| v as u64));
    }
    held
}

fn fair_share(shards: u16, replicas: usize) -> u64 {
    u64::from(shards).div_ceil(replicas.max(1) as u64)
}

/// Every shard held, by the live replicas together.
fn all_held(held: &[Option<u64>], shards: u16) -> bool {
    held.iter().all(Option::is_some) && held.iter().flatten().sum::<u64>() == u64::from(shards)
}

/// Every shard held, and no live replica above its fair share.
fn balanced(held: &[Option<u64>], shards: u16) -> bool {
    all_held(held, shards) && held.iter().flatten().all(|&h| h <= fair_share(shards, held.len()))
}

fn show(held: &[Option<u64>]) -> String {
    held.iter().map(|h| h.map_or("-".to_string(), |h| h.to_string())).collect::<Vec<_>>().join("/")
}

/// Poll every 100 ms until `done` has held for `settled` on end: the time from `from` to when it
/// first held in the run that lasted, and the last reading. Panics after `timeout`.
async fn wait_until(
    replicas: &mut [Replica],
    from: Instant,
    settled: Duration,
    timeout: Duration,
    what: &str,
    done: impl Fn(&[Option<u64>]) -> bool,
) -> (Duration, Vec<Option<u64>>) {
    let mut since: Option<Duration> = None;
    loop {
        let held = shards_held(replicas).await;
        let now = from.elapsed();
        if done(&held) {
            let first = *since.get_or_insert(now);
            if now - first >= settled {
                return (first, held);
            }
        } else {
            since = None;
        }
        if now > timeout {
            let served = held.iter().any(Option::is_some);
            panic!(
                "{what}: not after {:.0} s; shards held per replica: {} ({}); logs:\n{}",
                timeout.as_secs_f64(),
                show(&held),
                if served { "zundoko_shards_held served" } else { "no replica serves zundoko_shards_held: does this build have --shards?" },
                logs_tail(replicas)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// ---------------------------------------------------------------------------------------
// One replica count.

#[derive(Default)]
struct PerReplica {
    shards: u64,
    decisions: u64,
    words: u64,
    ms_per_decision: f64,
    cpu_s: f64,
    rss_kib: u64,
    hwm_kib: u64,
    errors: u64,
}

#[derive(Default)]
struct Run {
    replicas: usize,
    settle_s: f64,
    words: u64,
    seconds: f64,
    per_replica: Vec<PerReplica>,
    /// The API server's CPU over the songs.
    server_cpu_s: f64,
    killed: Option<String>,
    handover_s: Option<f64>,
    rebalanced_s: Option<f64>,
    after_kill: String,
    problems: Vec<String>,
}

impl Run {
    fn words_per_sec(&self) -> f64 {
        self.words as f64 / self.seconds
    }
}

async fn run(n: usize, hikawas: usize, shards: u16, module: &str) -> Run {
    let server = fresh_server().await;
    let logs = std::env::temp_dir().join(format!("zundoko-bench-replicas-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&logs).expect("a log directory");
    let started = Instant::now();
    let mut replicas: Vec<Replica> = (1..=n).map(|k| Replica::spawn(k, &server.kubeconfig, module, shards, &logs)).collect();
    let mut run = Run { replicas: n, ..Run::default() };

    // 1. Every shard held, each replica at most its fair share, for SETTLED_FOR on end.
    let (settled, held) =
        wait_until(&mut replicas, started, SETTLED_FOR, Duration::from_secs(120), "shards held and balanced", |h| balanced(h, shards)).await;
    run.settle_s = settled.as_secs_f64();
    eprintln!("  [{n} replica(s): shards {} after {:.1} s]", show(&held), run.settle_s);

    // 2. The songs.
    let cpu_before: Vec<f64> = replicas.iter().map(|r| cpu_seconds(&r.pid)).collect();
    let server_cpu_before = cpu_seconds(&server.pid);
    let began = Instant::now();
    let creator = tokio::spawn(create_hikawas(server.client.clone(), NAMESPACE.into(), hikawas, |_| {}));
    let (mut last_kiyoshis, mut last_progress) = (0u64, Instant::now());
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut kiyoshis = 0u64;
        for r in replicas.iter_mut() {
            r.check_running();
            if let Some(text) = r.metrics().await {
                kiyoshis += text.lines().filter(|l| l.starts_with("zundoko_words_total{kind=\"kiyoshi\"}")).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum::<f64>() as u64;
            }
        }
        if kiyoshis >= hikawas as u64 {
            break;
        }
        if kiyoshis > last_kiyoshis {
            (last_kiyoshis, last_progress) = (kiyoshis, Instant::now());
        }
        if last_progress.elapsed() > Duration::from_secs(60) {
            panic!("{n} replica(s): no Kiyoshi for 60 s ({kiyoshis} of {hikawas}); logs:\n{}", logs_tail(&replicas));
        }
    }
    run.seconds = began.elapsed().as_secs_f64();
    creator.await.expect("creating the Hikawas");
    let cpu_after: Vec<f64> = replicas.iter().map(|r| cpu_seconds(&r.pid)).collect();
    run.server_cpu_s = cpu_seconds(&server.pid) - server_cpu_before;

    // The children in the API server: the words said.
    let zundokos = Api::<Zundoko>::namespaced(server.client.clone(), NAMESPACE).list(&ListParams::default()).await.expect("listing the Zundokos");
    let kiyoshis = Api::<Kiyoshi>::namespaced(server.client.clone(), NAMESPACE).list(&ListParams::default()).await.expect("listing the Kiyoshis");
    run.words = (zundokos.items.len() + kiyoshis.items.len()) as u64;
    if kiyoshis.items.len() != hikawas {
        run.problems.push(format!("{} Kiyoshis for {hikawas} Hikawas", kiyoshis.items.len()));
    }
    let list = Api::<Hikawa>::namespaced(server.client.clone(), NAMESPACE).list(&ListParams::default()).await.expect("listing the Hikawas");
    let kiyoshied = list.items.iter().filter(|h| h.status.as_ref().is_some_and(|s| s.kiyoshied)).count();
    let said: u64 = list.items.iter().map(|h| u64::from(h.status.as_ref().map_or(0, |s| s.num_zundokos_said)) + 1).sum();
    if kiyoshied != hikawas || said != run.words {
        run.problems.push(format!("{kiyoshied}/{hikawas} Hikawas kiyoshied; their statuses count {said} words, the children are {}", run.words));
    }

    // Per replica, once the reconciles have stopped (at most 10 s).
    let mut reconciles = f64::NAN;
    let mut texts: Vec<String> = Vec::new();
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        texts.clear();
        for r in &replicas {
            texts.push(r.metrics().await.unwrap_or_default());
        }
        let now: f64 = texts.iter().filter_map(|t| metric(t, "zundoko_reconciles_total")).sum();
        if now == reconciles {
            break;
        }
        reconciles = now;
    }
    for (i, (r, text)) in replicas.iter().zip(&texts).enumerate() {
        // A decision is a call to the rules: the guest call histogram's count (or a decisions
        // counter, should the operator have one).
        let decisions = metric(text, "zundoko_decisions_total").or_else(|| metric(text, "zundoko_guest_call_duration_seconds_count")).unwrap_or(0.0);
        let call_s = metric(text, "zundoko_guest_call_duration_seconds_sum").unwrap_or(0.0);
        run.per_replica.push(PerReplica {
            shards: metric(text, "zundoko_shards_held").unwrap_or(0.0) as u64,
            decisions: decisions as u64,
            words: metric(text, "zundoko_words_total").unwrap_or(0.0) as u64,
            ms_per_decision: if decisions > 0.0 { call_s * 1000.0 / decisions } else { 0.0 },
            cpu_s: cpu_after[i] - cpu_before[i],
            rss_kib: proc_status_kib(&r.pid, "VmRSS:"),
            hwm_kib: proc_status_kib(&r.pid, "VmHWM:"),
            errors: metric(text, "zundoko_reconcile_errors_total").unwrap_or(0.0) as u64,
        });
    }
    let said_by_replicas: u64 = run.per_replica.iter().map(|p| p.words).sum();
    if said_by_replicas != run.words {
        run.problems.push(format!("the replicas counted {said_by_replicas} words said, the API server holds {} children", run.words));
    }
    let errors: u64 = run.per_replica.iter().map(|p| p.errors).sum();
    if errors > 0 {
        run.problems.push(format!("{errors} failed reconciles (zundoko_reconcile_errors_total)"));
    }
    eprintln!("  [{n} replica(s): {} words in {:.1} s]", run.words, run.seconds);

    // 3. Handover: kill -9 the replica holding the most shards (the first of them on a tie).
    if n >= 2 {
        let victim = (0..n).max_by_key(|&i| (run.per_replica[i].shards, std::cmp::Reverse(i))).unwrap();
        run.killed = Some(replicas[victim].name.clone());
        let killed_at = Instant::now();
        replicas[victim].kill();
        let (handover, _) = wait_until(&mut replicas, killed_at, Duration::ZERO, Duration::from_secs(60), "shards held again after the kill", |h| all_held(h, shards)).await;
        run.handover_s = Some(handover.as_secs_f64());
        let (rebalanced, held) =
            wait_until(&mut replicas, killed_at, Duration::ZERO, Duration::from_secs(60), "shards balanced again after the kill", |h| balanced(h, shards)).await;
        run.rebalanced_s = Some(rebalanced.as_secs_f64());
        run.after_kill = show(&held);
        eprintln!("  [{n} replica(s): {} killed, shards held again after {:.1} s, balanced after {:.1} s]", replicas[victim].name, handover.as_secs_f64(), rebalanced.as_secs_f64());
    }

    if !run.problems.is_empty() {
        eprintln!("  [{n} replica(s): problems: {}; logs in {}]\n{}", run.problems.join("; "), logs.display(), logs_tail(&replicas));
    }
    for r in replicas.iter_mut() {
        r.kill();
    }
    if run.problems.is_empty() {
        let _ = std::fs::remove_dir_all(&logs);
    }
    finish(server).await;
    run
}

// ---------------------------------------------------------------------------------------
// The report.

fn joined<T>(runs: &[PerReplica], f: impl Fn(&PerReplica) -> T) -> String
where
    T: std::fmt::Display,
{
    runs.iter().map(|p| f(p).to_string()).collect::<Vec<_>>().join("/")
}

fn print_runs(runs: &[Run], hikawas: usize, shards: u16, cores: usize) {
    let base = runs.iter().find(|r| r.replicas == 1).map(Run::words_per_sec);
    println!();
    let pinned = if pinned_cpu(1).is_some() { ", each replica pinned to one" } else { "" };
    println!("== {hikawas} Hikawas, intervalMillis 0, rules zundoko-burn (~5 ms of wasm per call), {shards} shards; {cores} cores{pinned} ==");
    println!(
        "{:>8} {:>7} {:>7} {:>8} {:>6} {:>6} {:>6} | {:>11} {:>17} {:>17} {:>14} {:>17} {:>17} | {:>8} {:>10}",
        "replicas", "words", "seconds", "words/s", "x 1", "cores", "server", "shards", "decisions", "words said", "ms/decision", "RSS MiB", "peak RSS MiB", "handover", "rebalanced"
    );
    for r in runs {
        let p = &r.per_replica;
        let cores_used: f64 = p.iter().map(|p| p.cpu_s).sum::<f64>() / r.seconds;
        let ratio = base.map_or("-".to_string(), |b| format!("{:.2}", r.words_per_sec() / b));
        println!(
            "{:>8} {:>7} {:>7.1} {:>8.0} {:>6} {:>6.2} {:>6.2} | {:>11} {:>17} {:>17} {:>14} {:>17} {:>17} | {:>8} {:>10}",
            r.replicas,
            r.words,
            r.seconds,
            r.words_per_sec(),
            ratio,
            cores_used,
            r.server_cpu_s / r.seconds,
            joined(p, |p| p.shards),
            joined(p, |p| p.decisions),
            joined(p, |p| p.words),
            joined(p, |p| format!("{:.1}", p.ms_per_decision)),
            joined(p, |p| format!("{:.1}", mib(p.rss_kib))),
            joined(p, |p| format!("{:.1}", mib(p.hwm_kib))),
            r.handover_s.map_or("-".to_string(), |s| format!("{s:.1} s")),
            r.rebalanced_s.map_or("-".to_string(), |s| format!("{s:.1} s")),
        );
    }
    for r in runs {
        let settle = format!("{} replica(s): every shard held and balanced {:.1} s after the start", r.replicas, r.settle_s);
        match &r.killed {
            Some(killed) => println!("{settle}; {killed} killed (kill -9, idle), the survivors then held {} shards", r.after_kill),
            None => println!("{settle}"),
        }
        for problem in &r.problems {
            println!("{} replica(s): PROBLEM: {problem}", r.replicas);
        }
    }
    println!("cores: the replicas' CPU over the songs, in cores (user + system, all replicas together); server: the API server's.");
    println!(
        "This machine has {cores} core(s), shared by the replicas, the API server and this benchmark: words/s can grow with replicas \
         only while cores are idle; past {cores} busy processes the gain stops (a replica already runs several calls at once)."
    );
}

async fn bench() {
    let hikawas: usize = env_number("ZUNDOKO_BENCH_REPLICA_HIKAWAS", 300);
    let shards: u16 = env_number("ZUNDOKO_BENCH_SHARDS", 32);
    let counts: Vec<usize> = std::env::var("ZUNDOKO_BENCH_REPLICAS")
        .unwrap_or_else(|_| "1,2,3".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .filter(|&n| n >= 1)
        .collect();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let module = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/fixtures/zundoko-burn.wasm");
    assert!(Path::new(module).exists(), "run `make fixtures` first ({module} is missing)");
    println!("Replicas: N `zundoko-operator run --leader-election --shards {shards}` processes (leases 4 s, renew deadline 3 s, retry 0.5 s),");
    println!("rules zundoko-burn (the classic rules after ~5 ms of wasm per call), a fresh local API server process per N.");
    println!("Once every shard is held and balanced (2 s on end): {hikawas} Hikawas with intervalMillis 0; words = children (Zundokos and");
    println!("Kiyoshis) from the first Hikawa created to the last Kiyoshi. Per replica (a/b/c): shards held, decisions (guest calls), words");
    println!("said, mean time per decision, RSS (VmRSS) and peak (VmHWM) at the end. Handover: kill -9 of the replica holding the most");
    println!("shards, after the songs, until the survivors hold every shard again; rebalanced: until each holds at most its fair share.");
    let pin = if pinned_cpu(1).is_some() { "; ZUNDOKO_BENCH_PIN=1: replica k runs on CPU (k - 1) mod cores only" } else { "" };
    println!("This machine: {cores} core(s){pin}.");
    let total = Instant::now();
    let mut runs = Vec::new();
    for n in counts {
        let started = Instant::now();
        let r = run(n, hikawas, shards, module).await;
        eprintln!("  [{n} replica(s): {:.0} s]", started.elapsed().as_secs_f64());
        runs.push(r);
    }
    print_runs(&runs, hikawas, shards, cores);
    println!();
    println!("whole benchmark: {:.0} s", total.elapsed().as_secs_f64());
}
