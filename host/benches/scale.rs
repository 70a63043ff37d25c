//! Scale: N Hikawas with `intervalMillis: 0`, from creation to every Kiyoshi, against the
//! local API server, at 1,000 and 10,000 Hikawas. For each size, in one run, each on a fresh
//! API server process (this benchmark re-run as `ZUNDOKO_BENCH_ROLE=apiserver`):
//!
//! - `ceiling`: the API server's own ceiling for the operator's writes. No operator: a client
//!   process (this benchmark re-run as `ZUNDOKO_BENCH_ROLE=ceiling`) with the operator's own
//!   client stack and write path (`apply::apply`: create the child, then its Event and the
//!   status merge patch together) sings the same songs (the classic rules, called natively),
//!   one word per Hikawa at a time, `concurrency` words in flight: the operator's structure
//!   (a reconcile is one word of one Hikawa, `concurrency` reconciles at once) without its
//!   watches, caches and reconciles.
//! - `wasm`: `zundoko-operator run --module zundoko-classic.wasm` as its own process.
//! - `native`: the same with `--native-rules classic` (no sandbox).
//!
//! Printed per run: words (children: Zundokos and Kiyoshis; each is a child, an Event and a
//! status write), seconds from the first Hikawa created to the last Kiyoshi, words/s over the
//! whole run and over the steady middle (10% to 90% of the words), the client's RSS idle
//! (before any Hikawa), peak (VmHWM while the songs run; the start's own peak, loading the
//! module, is printed apart) and at the end (all songs over, every child in the caches), its
//! PSS, CPU per word of the client and of the API server, reconciles, requests and watch events
//! per word; then the ratios operator/ceiling and wasm/native.
//!
//! Each size runs at each injected latency (the local API server waits that long before it
//! handles each request, from every client: the operator, the ceiling's client and this
//! benchmark alike), so the operator meets the per-request latency of a loaded real API server;
//! at the end, one line per size and latency: words/s of the operator and of the ceiling, their
//! ratio, the operator's CPU per word (its own utime + stime, from /proc/PID/stat: the operator
//! is a process of its own) and its RSS.
//!
//! `make bench-scale`. Environment: `ZUNDOKO_BENCH_SIZES` (default `1000,10000`),
//! `ZUNDOKO_BENCH_LATENCIES` (milliseconds per request; default `0,5,25` at sizes up to 1,000
//! and `0` above), `ZUNDOKO_BENCH_CONCURRENCY` (default: the operator's default),
//! `ZUNDOKO_BENCH_RUNS` (default `ceiling,wasm,native,ceiling` without latency and
//! `ceiling,wasm,ceiling` with it: the ceiling before and after the operator, so load from
//! elsewhere on the machine weighs on both alike; the ratios are against their mean),
//! `ZUNDOKO_BENCH_PERF=FILE` (records the operator's first run with `perf record --call-graph
//! dwarf` into FILE, from its first Hikawa to its last Kiyoshi; dev tooling, needs linux-perf),
//! `ZUNDOKO_BENCH_LOG` (the operator's log filter, default `info` as the operator's own, with
//! its per-word `decided` line, written to /dev/null as a Pod's stderr is taken by the node; at
//! `warn` the operator's warnings reach this terminal), `ZUNDOKO_BENCH_OPERATOR_ENV` (`K=V;K=V`, for the
//! operator's process only).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use zundoko_apiserver::{ApiServer, ServerConfig};
use zundoko_operator::crd::{self, Hikawa, HikawaSpec};
use zundoko_operator::supply::contract::rules::{NativeRules, Rules, RulesSlot, decide};
use zundoko_operator::supply::serving::RuleSets;
use zundoko_operator::process::metrics::Metrics;
use zundoko_operator::controllers::hikawa::children::ChildIndex;
use zundoko_operator::process::leader::ShardTable;
use zundoko_operator::controllers::hikawa::context::{Context, Writer};
use zundoko_operator::controllers::hikawa::pace::{Pace, PaceSettings};
use zundoko_operator::supply::contract::plan_check::PlanLimits;
use zundoko_rules::Observed;

/// The operator's allocator (main.rs) in every role, so that the ceiling's client differs from
/// the operator only by what the operator does beyond its writes.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const ROLE: &str = "ZUNDOKO_BENCH_ROLE";
const NAMESPACE: &str = "default";
/// Hikawas created at once (by the benchmark for the operator runs, by the ceiling client for
/// its own): the same in every run.
const CREATE_CONCURRENCY: usize = 16;

fn main() {
    // As the operator's main does, so that RSS compares.
    zundoko_operator::process::memory::no_transparent_huge_pages();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    match std::env::var(ROLE).as_deref() {
        Ok("ceiling") => runtime.block_on(ceiling_client()),
        Ok("apiserver") => runtime.block_on(apiserver_process()),
        _ => runtime.block_on(bench()),
    }
}

// ---------------------------------------------------------------------------------------
// Process figures from /proc.

fn proc_status_kib(pid: &str, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The process's proportional set size (kB): each page divided by how many times it is mapped.
/// VmRSS counts a page once per mapping, and an interpreter's warm pool slots each map the
/// pages of its snapshot they read (one copy, in memory and in the Pod's memory cgroup): PSS is
/// what the process holds.
fn pss_kib(pid: &str) -> u64 {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    rollup.lines().find(|l| l.starts_with("Pss:")).and_then(|l| l.split_whitespace().nth(1)).and_then(|n| n.parse().ok()).unwrap_or(0)
}

fn clock_ticks_per_sec() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// User plus system CPU time of a process so far, in seconds.
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) in parentheses.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the name.
    (ticks(11) + ticks(12)) / clock_ticks_per_sec()
}

/// Where a process's resident memory is, from /proc/PID/smaps (kB): the main malloc heap,
/// glibc's per-thread arenas (anonymous mappings of at most 64 MiB on a 64 MiB boundary),
/// wasmtime's pool (the one anonymous reservation of more than 1 GiB), other anonymous memory
/// (thread stacks, large allocations) and file-backed pages (the binary's code and data, libc).
fn memory_breakdown(pid: &str) -> String {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let (mut heap, mut arenas, mut pool, mut anon, mut file, mut code) = (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    let mut current: Option<(u64, u64, bool, bool, String)> = None;
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let first = fields.next().unwrap_or("");
        if let Some((start, end)) = first.split_once('-').filter(|(a, _)| u64::from_str_radix(a, 16).is_ok()) {
            let (start, end) = (u64::from_str_radix(start, 16).unwrap_or(0), u64::from_str_radix(end, 16).unwrap_or(0));
            let perms = fields.next().unwrap_or("");
            let path = fields.nth(3).unwrap_or("").to_string();
            current = Some((start, end - start, perms.contains('x'), path.starts_with('/'), path));
        } else if first == "Rss:" {
            let kb: u64 = fields.next().and_then(|n| n.parse().ok()).unwrap_or(0);
            let Some((start, size, exec, is_file, path)) = &current else { continue };
            if *is_file {
                file += kb;
                if *exec {
                    code += kb;
                }
            } else if path == "[heap]" {
                heap += kb;
            } else if *size > 1 << 30 {
                pool += kb;
            } else if *size <= 64 << 20 && start % (64 << 20) == 0 {
                arenas += kb;
            } else {
                anon += kb;
            }
        }
    }
    format!(
        "heap {:.1}, thread arenas {:.1}, wasm pool {:.1}, other anon {:.1}, file {:.1} (code {:.1}) MiB",
        mib(heap),
        mib(arenas),
        mib(pool),
        mib(anon),
        mib(file),
        mib(code)
    )
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

// ---------------------------------------------------------------------------------------
// What one run measured.

#[derive(Clone, Debug, Default)]
struct Run {
    name: String,
    words: u64,
    seconds: f64,
    /// (seconds since the first Hikawa was created, words said so far).
    samples: Vec<(f64, u64)>,
    rss_idle_kib: u64,
    rss_peak_kib: u64,
    rss_end_kib: u64,
    threads_end: u64,
    breakdown_idle: String,
    breakdown_end: String,
    /// PSS idle, the most sampled (every 250 ms while the songs run) and at the end, in kB.
    pss_kib: (u64, u64, u64),
    /// VmHWM when idle: the peak of the start (loading the module), in kB. `rss_peak_kib` is
    /// the peak after that, while the songs run.
    rss_start_peak_kib: u64,
    sizes: String,
    client_cpu_s: f64,
    server_cpu_s: f64,
    reconciles: u64,
    not_decided: Vec<(String, u64)>,
    requests: Vec<((String, String, String), u64)>,
    watch_events: u64,
    watch_bytes: u64,
}

impl Run {
    fn words_per_sec(&self) -> f64 {
        self.words as f64 / self.seconds
    }

    /// Words per second between 10% and 90% of the words (linear between samples).
    fn steady_words_per_sec(&self) -> f64 {
        let at = |fraction: f64| -> Option<f64> {
            let target = fraction * self.words as f64;
            let mut previous = (0.0, 0u64);
            for &(t, w) in &self.samples {
                if w as f64 >= target {
                    let (t0, w0) = previous;
                    let span = (w - w0) as f64;
                    return Some(if span > 0.0 { t0 + (t - t0) * (target - w0 as f64) / span } else { t });
                }
                previous = (t, w);
            }
            None
        };
        match (at(0.1), at(0.9)) {
            (Some(start), Some(end)) if end > start => 0.8 * self.words as f64 / (end - start),
            _ => self.words_per_sec(),
        }
    }

    fn requests_total(&self) -> u64 {
        self.requests.iter().map(|(_, n)| n).sum()
    }
}

// ---------------------------------------------------------------------------------------
// The local API server: a fresh process for every run (this benchmark re-run as
// `ZUNDOKO_BENCH_ROLE=apiserver`), so each run starts from the same state, heap included.

/// The API server process: serves until its stdin closes, then prints what it counted and its
/// CPU time (`requests verb/resource/subresource=count,...`, `watch EVENTS BYTES`, `cpu SECONDS`).
async fn apiserver_process() {
    let kubeconfig = PathBuf::from(std::env::var("ZUNDOKO_BENCH_KUBECONFIG").expect("ZUNDOKO_BENCH_KUBECONFIG"));
    // Watch resume needs the events since the last bookmark (10 s): ~3 writes a word.
    let config = ServerConfig { history_size: 100_000, kubeconfig_out: Some(kubeconfig), ..ServerConfig::default() };
    let server = ApiServer::start(config).await.expect("the local API server starts");
    let latency_ms: u64 = env_number("ZUNDOKO_BENCH_LATENCY_MS", 0);
    server.faults().set_latency(Duration::from_millis(latency_ms));
    println!("{}", server.url());
    // Serve until the benchmark closes our stdin.
    let _ = tokio::task::spawn_blocking(|| std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new())).await;
    let requests: Vec<String> = server.request_counts().into_iter().map(|((verb, resource, sub), n)| format!("{verb}/{resource}/{sub}={n}")).collect();
    let (events, bytes) = server.watch_events_sent();
    println!("requests {}", requests.join(","));
    println!("watch {events} {bytes}");
    println!("cpu {:.3}", cpu_seconds("self"));
    std::process::exit(0);
}

struct Server {
    process: Child,
    pid: String,
    client: Client,
    kubeconfig: PathBuf,
    cpu_at_start: f64,
}

async fn fresh_server(latency_ms: u64) -> Server {
    use std::io::BufRead as _;
    let kubeconfig = std::env::temp_dir().join(format!("zundoko-bench-scale-{}-{}.kubeconfig", std::process::id(), rand::random::<u32>()));
    let mut process = Command::new(std::env::current_exe().expect("the benchmark's path"))
        .env(ROLE, "apiserver")
        .env("ZUNDOKO_BENCH_KUBECONFIG", &kubeconfig)
        .env("ZUNDOKO_BENCH_LATENCY_MS", latency_ms.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("starting the API server process");
    let mut url = String::new();
    std::io::BufReader::new(process.stdout.as_mut().unwrap()).read_line(&mut url).expect("the API server's address");
    let client = Client::try_from(kube::Config::new(url.trim().parse().expect("an address"))).unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for c in crd::all() {
        crds.create(&PostParams::default(), &c).await.expect("creating the CRDs");
    }
    let pid = process.id().to_string();
    Server { cpu_at_start: cpu_seconds(&pid), process, pid, client, kubeconfig }
}

impl Server {
    /// The API server's CPU time since the CRDs were created.
    fn cpu(&self) -> f64 {
        cpu_seconds(&self.pid) - self.cpu_at_start
    }

    /// Stop the server; its request and watch counts into `run`.
    async fn finish(mut self, run: &mut Run) {
        drop(self.process.stdin.take());
        let output = tokio::task::spawn_blocking(move || self.process.wait_with_output()).await.unwrap().expect("the API server's counts");
        let text = String::from_utf8_lossy(&output.stdout);
        for line in text.lines() {
            let (what, rest) = line.split_once(' ').unwrap_or((line, ""));
            match what {
                "requests" => {
                    run.requests = rest
                        .split(',')
                        .filter_map(|r| {
                            let (key, n) = r.rsplit_once('=')?;
                            let mut parts = key.splitn(3, '/');
                            let key = (parts.next()?.to_string(), parts.next()?.to_string(), parts.next().unwrap_or("").to_string());
                            Some((key, n.parse().ok()?))
                        })
                        .collect()
                }
                "watch" => {
                    let mut n = rest.split(' ').filter_map(|x| x.parse().ok());
                    (run.watch_events, run.watch_bytes) = (n.next().unwrap_or(0), n.next().unwrap_or(0));
                }
                _ => {}
            }
        }
        let _ = std::fs::remove_file(&self.kubeconfig);
    }
}

fn hikawa(i: usize) -> Hikawa {
    let mut h = Hikawa::new(&format!("bench-{i:05}"), HikawaSpec { interval_millis: 0, ..HikawaSpec::default() });
    h.metadata.namespace = Some(NAMESPACE.into());
    h
}

/// Create N Hikawas, `CREATE_CONCURRENCY` at once; `created` gets each as the server returns it.
async fn create_hikawas(client: Client, n: usize, created: impl Fn(Hikawa)) {
    let api: Api<Hikawa> = Api::namespaced(client, NAMESPACE);
    let mut creates = futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &hikawa(i)).await.expect("creating a Hikawa") }
        })
        .buffer_unordered(CREATE_CONCURRENCY);
    while let Some(h) = creates.next().await {
        created(h);
    }
}

// ---------------------------------------------------------------------------------------
// The ceiling: the operator's writes without the operator.

/// One Hikawa's song as the ceiling client sings it: what the operator would observe.
struct Song {
    hikawa: Hikawa,
    observed: Observed,
}

/// The ceiling client (a process of its own, like the operator). Prints one line:
/// `words seconds cpu_s rss_peak_kib rss_end_kib threads t:w,t:w,...`.
async fn ceiling_client() {
    let n: usize = env_number("ZUNDOKO_BENCH_N", 1000);
    let concurrency: usize = env_number("ZUNDOKO_BENCH_CONCURRENCY", 16);
    let mut config = kube::Config::infer().await.expect("a kubeconfig");
    config.headers.push((http::header::USER_AGENT, http::HeaderValue::from_static("zundoko-operator/bench-ceiling")));
    let client = Client::try_from(config).expect("a client");
    let rules: Arc<dyn Rules> = Arc::new(NativeRules::new(zundoko_rules::classic()));
    // One process, every shard: the operator without election.
    let shards = ShardTable::all(32, "bench-ceiling", client.clone());
    let ctx = Arc::new(Context {
        client: client.clone(),
        writers: Writer::per_shard(&shards, "bench-ceiling"),
        shards,
        rules: Arc::new(RulesSlot::new(rules.clone())),
        // No rule sets: the ceiling sings with the default rules only.
        rulesets: Arc::new(RuleSets::new().0),
        metrics: Arc::new(Metrics::new()),
        plan_limits: PlanLimits::default(),
        children: Arc::new(ChildIndex::default()),
        pace: Pace::new(PaceSettings::default()),
        entropy: zundoko_operator::controllers::hikawa::entropy::Entropy::new(None),
    });
    let queue: Arc<std::sync::Mutex<VecDeque<Song>>> = Arc::default();
    let ready = Arc::new(tokio::sync::Notify::new());
    let remaining = Arc::new(AtomicUsize::new(n));
    let words = Arc::new(AtomicU64::new(0));
    let started = Instant::now();

    let creator = {
        let (queue, ready, client) = (queue.clone(), ready.clone(), client.clone());
        tokio::spawn(async move {
            create_hikawas(client, n, |h| {
                let observed = Observed { hikawa: zundoko_operator::controllers::hikawa::observe::hikawa_view(&h), ..Observed::default() };
                queue.lock().unwrap().push_back(Song { hikawa: h, observed });
                ready.notify_one();
            })
            .await
        })
    };
    let samples: Arc<std::sync::Mutex<Vec<(f64, u64)>>> = Arc::default();
    let sampler = {
        let (words, samples) = (words.clone(), samples.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(250)).await;
                samples.lock().unwrap().push((started.elapsed().as_secs_f64(), words.load(Ordering::Relaxed)));
            }
        })
    };
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (queue, ready, remaining, words, ctx, rules) = (queue.clone(), ready.clone(), remaining.clone(), words.clone(), ctx.clone(), rules.clone());
            tokio::spawn(async move {
                while remaining.load(Ordering::Acquire) > 0 {
                    let next = queue.lock().unwrap().pop_front();
                    let Some(mut song) = next else {
                        // Nothing to sing now: wait for a Hikawa (or look again soon).
                        let _ = tokio::time::timeout(Duration::from_millis(5), ready.notified()).await;
                        continue;
                    };
                    let mut observed = song.observed.clone();
                    observed.now = jiff::Timestamp::now().as_millisecond();
                    observed.entropy = rand::random();
                    let decision = decide(rules.as_ref(), &observed, &ctx.plan_limits);
                    let plan = decision.outcome.expect("the classic rules decide");
                    let applied = zundoko_operator::controllers::hikawa::apply::apply(&ctx, &ctx.writers[ctx.shards.shard_of(song.hikawa.metadata.uid.as_deref().unwrap_or_default()) as usize], &song.hikawa, &observed, &plan, &decision.module, Default::default())
                        .await
                        .expect("the API server takes the writes");
                    words.fetch_add(u64::from(applied.created), Ordering::Relaxed);
                    song.hikawa.status = Some(applied.status);
                    // The next status write's precondition: the Hikawa as this one left it.
                    if let Some(version) = applied.resource_version {
                        song.hikawa.metadata.resource_version = Some(version);
                    }
                    observed.apply(&plan);
                    song.observed = observed;
                    if applied.kiyoshi {
                        remaining.fetch_sub(1, Ordering::AcqRel);
                    } else {
                        queue.lock().unwrap().push_back(song);
                        ready.notify_one();
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.await.expect("a ceiling worker");
    }
    let seconds = started.elapsed().as_secs_f64();
    creator.await.expect("the creator");
    sampler.abort();
    let mut samples = std::mem::take(&mut *samples.lock().unwrap());
    let words = words.load(Ordering::Relaxed);
    samples.push((seconds, words));
    let samples: Vec<String> = samples.iter().map(|(t, w)| format!("{t:.3}:{w}")).collect();
    let me = std::process::id().to_string();
    println!(
        "{words} {seconds:.3} {:.3} {} {} {} {}",
        cpu_seconds(&me),
        proc_status_kib(&me, "VmHWM:"),
        proc_status_kib(&me, "VmRSS:"),
        proc_status_kib(&me, "Threads:"),
        samples.join(",")
    );
}

fn env_number<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

async fn run_ceiling(n: usize, concurrency: u16, latency_ms: u64) -> Run {
    let server = fresh_server(latency_ms).await;
    let server_cpu = server.cpu();
    let mut command = Command::new(std::env::current_exe().expect("the benchmark's path"));
    command
        .env(ROLE, "ceiling")
        .env("ZUNDOKO_BENCH_N", n.to_string())
        .env("ZUNDOKO_BENCH_CONCURRENCY", concurrency.to_string())
        .env("KUBECONFIG", &server.kubeconfig)
        .stderr(Stdio::inherit());
    let output = tokio::task::spawn_blocking(move || command.output()).await.unwrap().expect("running the ceiling client");
    let server_cpu = server.cpu() - server_cpu;
    assert!(output.status.success(), "the ceiling client failed");
    let line = String::from_utf8_lossy(&output.stdout).trim().to_string();
    let f: Vec<&str> = line.split(' ').collect();
    let number = |i: usize| f.get(i).and_then(|s| s.parse::<f64>().ok()).unwrap_or_else(|| panic!("ceiling output: {line}"));
    let samples = f
        .get(6)
        .map(|s| s.split(',').filter_map(|p| p.split_once(':')).filter_map(|(t, w)| Some((t.parse().ok()?, w.parse().ok()?))).collect())
        .unwrap_or_default();
    let mut run = Run {
        name: "ceiling".into(),
        words: number(0) as u64,
        seconds: number(1),
        client_cpu_s: number(2),
        rss_peak_kib: number(3) as u64,
        rss_end_kib: number(4) as u64,
        threads_end: number(5) as u64,
        samples,
        server_cpu_s: server_cpu,
        ..Run::default()
    };
    check_songs(&server.client, n, Some(run.words)).await;
    server.finish(&mut run).await;
    run
}

// ---------------------------------------------------------------------------------------
// The operator, as its own process.

/// A minimal HTTP/1.0 GET on 127.0.0.1: (status code, body). Blocking, off the runtime that
/// serves the API server.
async fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let path = path.to_string();
    tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes()).ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).ok()?;
        let code = response.split_whitespace().nth(1)?.parse().ok()?;
        let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
        Some((code, body))
    })
    .await
    .ok()?
}

/// The sum of the samples of one metric (lines starting with `prefix`).
fn metric(text: &str, prefix: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

/// `ZUNDOKO_BENCH_OPERATOR_ENV=K=V;K=V`: environment for the operator's process only (say,
/// `GLIBC_TUNABLES=...` to try the allocator's tunables).
fn operator_env() -> Vec<(String, String)> {
    std::env::var("ZUNDOKO_BENCH_OPERATOR_ENV")
        .unwrap_or_default()
        .split(';')
        .filter_map(|kv| kv.split_once('=').map(|(k, v)| (k.trim().to_string(), v.to_string())))
        .collect()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

async fn run_operator(name: &str, n: usize, concurrency: u16, latency_ms: u64, rules_args: &[&str], perf: Option<&str>) -> Run {
    let server = fresh_server(latency_ms).await;
    let port = free_port();
    let log = std::env::var("ZUNDOKO_BENCH_LOG").unwrap_or_else(|_| "info".into());
    let mut operator: Child = Command::new(env!("CARGO_BIN_EXE_zundoko-operator"))
        .arg("run")
        .args(rules_args)
        .args(["--http-addr", &format!("127.0.0.1:{port}"), "--concurrency", &concurrency.to_string()])
        .env("KUBECONFIG", &server.kubeconfig)
        .env("RUST_LOG", &log)
        .envs(operator_env())
        .env_remove("ZUNDOKO_CONCURRENCY")
        .stdout(Stdio::null())
        // A log at a level below warn is thrown away (what it costs is in the CPU per word).
        .stderr(if log == "warn" { Stdio::inherit() } else { Stdio::null() })
        .spawn()
        .expect("starting the operator");
    let pid = operator.id().to_string();
    // Idle: the module loaded, the caches synced (ready), then a moment to settle.
    let waiting = Instant::now();
    while http_get(port, "/readyz").await.map(|r| r.0) != Some(200) {
        assert!(operator.try_wait().unwrap().is_none(), "the operator exited");
        assert!(waiting.elapsed() < Duration::from_secs(60), "the operator is not ready after a minute");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_idle = proc_status_kib(&pid, "VmRSS:");
    let breakdown_idle = memory_breakdown(&pid);
    let pss_idle = pss_kib(&pid);
    let mut pss_peak = pss_idle;
    // The peak so far is the start's (a module read from the cache and loaded); from here on
    // VmHWM is the peak while the songs run ("5" resets it, Linux 4.0+).
    let start_peak = proc_status_kib(&pid, "VmHWM:");
    let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");

    // Profiling (dev tooling): perf attached to the operator for the songs only.
    let mut recording = perf.map(|file| {
        Command::new("perf")
            .args(["record", "-F", "997", "--call-graph", "dwarf,32768", "-o", file, "-p", &pid])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting perf record (apt-get install linux-perf)")
    });
    if recording.is_some() {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (server_cpu, client_cpu) = (server.cpu(), cpu_seconds(&pid));
    let started = Instant::now();
    let creator = tokio::spawn(create_hikawas(server.client.clone(), n, |_| {}));
    let mut samples = Vec::new();
    let metrics = loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert!(operator.try_wait().unwrap().is_none(), "the operator exited");
        pss_peak = pss_peak.max(pss_kib(&pid));
        let Some((200, text)) = http_get(port, "/metrics").await else { continue };
        let kiyoshis = metric(&text, "zundoko_words_total{kind=\"kiyoshi\"}");
        samples.push((started.elapsed().as_secs_f64(), metric(&text, "zundoko_words_total{")));
        if kiyoshis >= n as u64 {
            break text;
        }
    };
    let seconds = started.elapsed().as_secs_f64();
    let words = metric(&metrics, "zundoko_words_total{");
    creator.await.expect("creating the Hikawas");
    let client_cpu = cpu_seconds(&pid) - client_cpu;
    let server_cpu = server.cpu() - server_cpu;
    if let Some(mut perf) = recording.take() {
        let _ = Command::new("kill").args(["-INT", &perf.id().to_string()]).status();
        let _ = tokio::task::spawn_blocking(move || perf.wait()).await;
    }
    // The end: every song over; wait until the reconciles stop (at most 20 s).
    let mut reconciles = metric(&metrics, "zundoko_reconciles_total");
    let mut metrics = metrics;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if let Some((200, text)) = http_get(port, "/metrics").await {
            let now = metric(&text, "zundoko_reconciles_total");
            metrics = text;
            if now == reconciles {
                break;
            }
            reconciles = now;
        }
    }
    let mut run = Run {
        name: name.into(),
        words,
        seconds,
        samples,
        rss_idle_kib: rss_idle,
        rss_peak_kib: proc_status_kib(&pid, "VmHWM:"),
        rss_end_kib: proc_status_kib(&pid, "VmRSS:"),
        threads_end: proc_status_kib(&pid, "Threads:"),
        breakdown_idle,
        breakdown_end: memory_breakdown(&pid),
        pss_kib: (pss_idle, pss_peak, pss_kib(&pid)),
        rss_start_peak_kib: start_peak,
        client_cpu_s: client_cpu,
        server_cpu_s: server_cpu,
        reconciles: metric(&metrics, "zundoko_reconciles_total"),
        not_decided: ["catching-up", "unchanged", "throttled"]
            .iter()
            .map(|why| (why.to_string(), metric(&metrics, &format!("zundoko_reconciles_not_decided_total{{why=\"{why}\"}}"))))
            .collect(),
        ..Run::default()
    };
    let errors = metric(&metrics, "zundoko_reconcile_errors_total{");
    assert_eq!(errors, 0, "reconciles failed: {metrics}");
    operator.kill().expect("stopping the operator");
    operator.wait().expect("the operator stopped");
    check_songs(&server.client, n, Some(run.words)).await;
    run.sizes = object_sizes(&server.client).await;
    server.finish(&mut run).await;
    run
}

/// Every Hikawa kiyoshied, and the words said are the children counted.
async fn check_songs(client: &Client, n: usize, words: Option<u64>) {
    let list = Api::<Hikawa>::namespaced(client.clone(), NAMESPACE).list(&ListParams::default()).await.expect("listing the Hikawas");
    assert_eq!(list.items.len(), n);
    let kiyoshied = list.items.iter().filter(|h| h.status.as_ref().is_some_and(|s| s.kiyoshied)).count();
    assert_eq!(kiyoshied, n, "every Hikawa kiyoshied");
    let said: u64 = list.items.iter().map(|h| u64::from(h.status.as_ref().map_or(0, |s| s.num_zundokos_said)) + 1).sum();
    if let Some(words) = words {
        assert_eq!(said, words, "the words counted are the words in the statuses (Zundokos and the Kiyoshi)");
    }
}

/// The JSON sizes of what the operator wrote, as the API server returns them: a Zundoko, its
/// Event (events.k8s.io/v1) and a kiyoshied Hikawa, managedFields and all.
async fn object_sizes(client: &Client) -> String {
    let get = |path: String| {
        let client = client.clone();
        async move {
            let request = http::Request::get(path).body(Vec::new()).unwrap();
            client.request_text(request).await.map(|t| t.len()).unwrap_or(0)
        }
    };
    let group = "/apis/zundokokiyoshi.kaitoy.github.com/v1beta1/namespaces/default";
    let events = "/apis/events.k8s.io/v1/namespaces/default/events";
    let event_name = Api::<k8s_openapi::api::events::v1::Event>::namespaced(client.clone(), NAMESPACE)
        .list(&ListParams::default().limit(1))
        .await
        .ok()
        .and_then(|l| l.items.into_iter().next())
        .and_then(|e| e.metadata.name)
        .unwrap_or_default();
    format!(
        "object sizes (JSON as served): Zundoko {} B, Event {} B, Hikawa (kiyoshied) {} B",
        get(format!("{group}/zundokos/bench-00000-zundoko-001")).await,
        get(format!("{events}/{event_name}")).await,
        get(format!("{group}/hikawas/bench-00000")).await
    )
}

// ---------------------------------------------------------------------------------------
// The report.

fn print_runs(n: usize, concurrency: u16, latency_ms: u64, runs: &[Run]) {
    println!();
    println!("== {n} Hikawas, intervalMillis 0, concurrency {concurrency}, latency {latency_ms} ms per request ==");
    println!(
        "{:<8} {:>8} {:>8} {:>8} {:>8} | {:>8} {:>8} {:>8} {:>5} | {:>9} {:>9} | {:>10} {:>9} {:>9} {:>9}",
        "run", "words", "seconds", "words/s", "steady", "RSS idle", "peak", "end", "thr", "cpu/word", "server", "reconciles", "requests", "watch ev", "watch KB"
    );
    println!(
        "{:<8} {:>8} {:>8} {:>8} {:>8} | {:>8} {:>8} {:>8} {:>5} | {:>9} {:>9} | {:>10} {:>9} {:>9} {:>9}",
        "", "", "", "", "10-90%", "MiB", "MiB", "MiB", "", "client ms", "ms", "per word", "per word", "per word", "per word"
    );
    for r in runs {
        let per_word = |x: f64| x / r.words.max(1) as f64;
        let idle = if r.rss_idle_kib == 0 { "-".to_string() } else { format!("{:.1}", mib(r.rss_idle_kib)) };
        let reconciles = if r.reconciles == 0 { "-".to_string() } else { format!("{:.2}", per_word(r.reconciles as f64)) };
        println!(
            "{:<8} {:>8} {:>8.1} {:>8.0} {:>8.0} | {:>8} {:>8.1} {:>8.1} {:>5} | {:>9.3} {:>9.3} | {:>10} {:>9.2} {:>9.2} {:>9.2}",
            r.name,
            r.words,
            r.seconds,
            r.words_per_sec(),
            r.steady_words_per_sec(),
            idle,
            mib(r.rss_peak_kib),
            mib(r.rss_end_kib),
            r.threads_end,
            per_word(r.client_cpu_s * 1000.0),
            per_word(r.server_cpu_s * 1000.0),
            reconciles,
            per_word(r.requests_total() as f64),
            per_word(r.watch_events as f64),
            per_word(r.watch_bytes as f64 / 1024.0),
        );
    }
    for r in runs.iter().filter(|r| !r.not_decided.is_empty()) {
        let why: Vec<String> = r.not_decided.iter().map(|(w, c)| format!("{w} {:.2}", *c as f64 / r.words.max(1) as f64)).collect();
        let requests: Vec<String> = r
            .requests
            .iter()
            .filter(|(_, c)| *c as f64 / r.words.max(1) as f64 >= 0.005)
            .map(|((verb, resource, sub), c)| {
                let what = if sub.is_empty() { format!("{verb} {resource}") } else { format!("{verb} {resource}/{sub}") };
                format!("{what} {:.2}", *c as f64 / r.words.max(1) as f64)
            })
            .collect();
        println!("{:<8} per word: not decided: {}; requests: {}", r.name, why.join(", "), requests.join(", "));
    }
    for r in runs.iter().filter(|r| !r.breakdown_end.is_empty()) {
        println!("{:<8} RSS idle: {}", r.name, r.breakdown_idle);
        println!("{:<8} RSS end:  {}", r.name, r.breakdown_end);
        let (idle, peak, end) = r.pss_kib;
        println!(
            "{:<8} PSS idle {:.1}, peak (sampled) {:.1}, end {:.1} MiB; RSS peak of the start (loading the module) {:.1} MiB",
            r.name,
            mib(idle),
            mib(peak),
            mib(end),
            mib(r.rss_start_peak_kib)
        );
    }
    if let Some(r) = runs.iter().find(|r| !r.sizes.is_empty()) {
        println!("{}", r.sizes);
    }
    // Against the mean of the ceiling runs (measured before and after the operator's, so the
    // machine's other load weighs on both alike).
    let ceilings: Vec<&Run> = runs.iter().filter(|r| r.name.starts_with("ceiling")).collect();
    let find = |name: &str| runs.iter().find(|r| r.name == name);
    let ratio = |a: f64, b: f64| a / b;
    if !ceilings.is_empty() {
        let mean = |f: fn(&Run) -> f64| ceilings.iter().map(|r| f(r)).sum::<f64>() / ceilings.len() as f64;
        let (whole, steady) = (mean(Run::words_per_sec), mean(Run::steady_words_per_sec));
        if ceilings.len() > 1 {
            let spread = |f: fn(&Run) -> f64| {
                let v: Vec<f64> = ceilings.iter().map(|r| f(r)).collect();
                (v.iter().cloned().fold(f64::MAX, f64::min), v.iter().cloned().fold(0.0, f64::max))
            };
            let (lo, hi) = spread(Run::words_per_sec);
            println!("ceiling (mean of {} runs): {whole:.0} words/s ({lo:.0}..{hi:.0}), {steady:.0} steady", ceilings.len());
        }
        for r in runs.iter().filter(|r| !r.name.starts_with("ceiling")) {
            println!(
                "{} / ceiling words/s: {:.2} ({:.2} steady)",
                r.name,
                ratio(r.words_per_sec(), whole),
                ratio(r.steady_words_per_sec(), steady)
            );
        }
    }
    if let (Some(wasm), Some(native)) = (find("wasm"), find("native")) {
        println!(
            "wasm / native words/s: {:.2} ({:.2} steady)",
            ratio(wasm.words_per_sec(), native.words_per_sec()),
            ratio(wasm.steady_words_per_sec(), native.steady_words_per_sec())
        );
    }
}

async fn bench() {
    let sizes: Vec<usize> = std::env::var("ZUNDOKO_BENCH_SIZES")
        .unwrap_or_else(|_| "1000,10000".into())
        .split(',')
        .filter_map(|s| s.trim().replace('_', "").parse().ok())
        .collect();
    let latencies_set: Option<Vec<u64>> =
        std::env::var("ZUNDOKO_BENCH_LATENCIES").ok().map(|l| l.split(',').filter_map(|s| s.trim().parse().ok()).collect());
    let concurrency: u16 = env_number("ZUNDOKO_BENCH_CONCURRENCY", zundoko_operator::controllers::hikawa::controller::Settings::default().concurrency);
    let which = std::env::var("ZUNDOKO_BENCH_RUNS").ok();
    let perf = std::env::var("ZUNDOKO_BENCH_PERF").ok();
    let module = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/modules/zundoko-classic.wasm");
    assert!(Path::new(module).exists(), "run `make guest` first");
    println!("Scale: Hikawas with intervalMillis 0, from creation to every Kiyoshi; a fresh local API server process per run.");
    println!("ceiling: no operator; a client process with the operator's client stack and write path (per word: create the child, then");
    println!("         its Event and the status merge patch together), the classic rules called natively, one word per Hikawa at a time,");
    println!("         {concurrency} words in flight (the operator: {concurrency} reconciles at once, a reconcile is one word of one Hikawa).");
    println!("wasm:    zundoko-operator run --module zundoko-classic.wasm --concurrency {concurrency} (its own process); native: --native-rules classic.");
    println!("words = children (Zundokos and Kiyoshis), each a child, an Event and a status write; seconds from the first Hikawa created");
    println!("to the last Kiyoshi; RSS of the client process (idle: ready, before any Hikawa; peak: while the songs run; end: every song over); CPU per word of the");
    println!("client process (its own utime + stime) and of the API server process; requests and watch events (bytes the client");
    println!("decoded) per word. latency: what the API server waits before handling each request, for every client.");
    let total = Instant::now();
    let mut summary = Vec::new();
    let mut perf_taken = false;
    for n in sizes {
        let latencies = latencies_set.clone().unwrap_or_else(|| if n <= 1000 { vec![0, 5, 25] } else { vec![0] });
        for latency_ms in latencies {
            let default_runs = if latency_ms == 0 { "ceiling,wasm,native,ceiling" } else { "ceiling,wasm,ceiling" };
            let mut runs = Vec::new();
            for run in which.as_deref().unwrap_or(default_runs).split(',') {
                let started = Instant::now();
                let record = if perf_taken || run.trim() == "ceiling" { None } else { perf.as_deref() };
                perf_taken |= record.is_some();
                let mut r = match run.trim() {
                    "ceiling" => run_ceiling(n, concurrency, latency_ms).await,
                    "wasm" => run_operator("wasm", n, concurrency, latency_ms, &["--module", module], record).await,
                    "native" => run_operator("native", n, concurrency, latency_ms, &["--native-rules", "classic"], record).await,
                    // The classic rules in Python and JavaScript (make guest-langs), compiled once
                    // into a cache kept across runs (a cold compile takes tens of seconds).
                    lang @ ("python" | "js") => {
                        let file = if lang == "python" { "zundoko-classic-py.wasm" } else { "zundoko-classic-js.wasm" };
                        let module = format!("{}/../target/modules/{file}", env!("CARGO_MANIFEST_DIR"));
                        let cache = format!("{}/../target/tmp/bench-scale-cache", env!("CARGO_MANIFEST_DIR"));
                        run_operator(lang, n, concurrency, latency_ms, &["--module", &module, "--cache-dir", &cache], record).await
                    }
                    other => panic!("unknown run {other:?} in ZUNDOKO_BENCH_RUNS (ceiling, wasm, native, python, js)"),
                };
                let repeats = runs.iter().filter(|p: &&Run| p.name.split(' ').next() == Some(r.name.as_str())).count();
                if repeats > 0 {
                    r.name = format!("{} {}", r.name, repeats + 1);
                }
                eprintln!("  [{n} Hikawas, {latency_ms} ms, {}: {:.0} s]", r.name, started.elapsed().as_secs_f64());
                runs.push(r);
            }
            print_runs(n, concurrency, latency_ms, &runs);
            summary.push((n, latency_ms, runs));
        }
    }
    print_summary(concurrency, &summary);
    println!();
    println!("whole benchmark: {:.0} s", total.elapsed().as_secs_f64());
}

/// One line per size, latency and operator run: the operator beside the API server's ceiling.
fn print_summary(concurrency: u16, summary: &[(usize, u64, Vec<Run>)]) {
    println!();
    println!("== Summary: the operator against the API server's ceiling, concurrency {concurrency} ==");
    println!(
        "{:>8} {:>8} {:<8} | {:>8} {:>8} {:>6} {:>6} | {:>9} | {:>8} {:>8} {:>8}",
        "Hikawas", "latency", "run", "words/s", "ceiling", "ratio", "x wasm", "CPU/word", "RSS idle", "RSS peak", "RSS end"
    );
    println!(
        "{:>8} {:>8} {:<8} | {:>8} {:>8} {:>6} {:>6} | {:>9} | {:>8} {:>8} {:>8}",
        "", "ms", "", "", "words/s", "", "", "ms", "MiB", "MiB", "MiB"
    );
    for (n, latency_ms, runs) in summary {
        let ceilings: Vec<&Run> = runs.iter().filter(|r| r.name.starts_with("ceiling")).collect();
        let ceiling = (!ceilings.is_empty()).then(|| ceilings.iter().map(|r| r.words_per_sec()).sum::<f64>() / ceilings.len() as f64);
        // Python's and JavaScript's words/s against Rust's (the `wasm` run) in the same run.
        let wasm = runs.iter().find(|r| r.name == "wasm").map(|r| r.words_per_sec());
        for r in runs.iter().filter(|r| !r.name.starts_with("ceiling")) {
            let (ceiling_text, ratio) = match ceiling {
                Some(c) => (format!("{c:.0}"), format!("{:.2}", r.words_per_sec() / c)),
                None => ("-".into(), "-".into()),
            };
            let to_wasm = wasm.map_or("-".into(), |w| format!("{:.2}", r.words_per_sec() / w));
            let idle = if r.rss_idle_kib == 0 { "-".to_string() } else { format!("{:.1}", mib(r.rss_idle_kib)) };
            println!(
                "{:>8} {:>8} {:<8} | {:>8.0} {:>8} {:>6} {:>6} | {:>9.3} | {:>8} {:>8.1} {:>8.1}",
                n,
                latency_ms,
                r.name,
                r.words_per_sec(),
                ceiling_text,
                ratio,
                to_wasm,
                r.client_cpu_s * 1000.0 / r.words.max(1) as f64,
                idle,
                mib(r.rss_peak_kib),
                mib(r.rss_end_kib)
            );
        }
    }
}
