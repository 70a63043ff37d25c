//! Scale: N Hikawas with `intervalMillis: 0`, from creation to every Kiyoshi, against the
//! local API server, at 1,000 and 10,000 Hikawas. For each size, in one run, each on a fresh
//! API server process (this benchmark re-run as `ZUNDOKO_BENCH_ROLE=apiserver`):
//!
//! - `ceiling`: the API server's own ceiling for the operator's writes. No operator: a client
//!   process (this benchmark re-run as `ZUNDOKO_BENCH_ROLE=ceiling`) with the operator's own
//!   client stack and write path (`apply::apply`: create the child, then its Event, then the
//!   status merge patch) sings the same songs (the classic rules, called natively),
//!   one word per Hikawa at a time, `concurrency` words in flight: the operator's structure
//!   (a reconcile is one word of one Hikawa, `concurrency` reconciles at once) without its
//!   watches, caches and reconciles.
//! - `wasm`: `zundoko-operator run --module zundoko-classic.wasm` as its own process.
//! - `native`: the same with `--native-rules classic` (no sandbox).
//! - `bare` (when named in `ZUNDOKO_BENCH_RUNS`): issue 55's bare client (bare.rs), the three
//!   writes of a word as a client that is not the operator makes them, one after the other.
//!
//! `ZUNDOKO_BENCH_KUBECONFIG=FILE` (`make bench-real KUBECONFIG=FILE`): the runs sing on the API
//! server that kubeconfig names instead (real.rs, issue 55's held-out check on a real
//! kube-apiserver), each in a fresh namespace of its own (`zundoko-bench-<run>-<n>-<id>`,
//! `ZUNDOKO_BENCH_RUN_ID` the id, random by default; refused if it exists) deleted after the run;
//! the CRDs applied if missing; the operator confined to the namespace (`--namespace`). The
//! server's apiserver_request_duration_seconds is read from its `/metrics` before and after each
//! run; what only a local server tells (its CPU, cost model, connections, watch events) is left
//! out, and requests per word are the client's own count. Default runs `bare,wasm,bare`, size
//! 1000, no latency or cost model (a real server has its own).
//!
//! `ZUNDOKO_BENCH_COST=kube-1.32`: the API server charges every request as the calibrated cost
//! model says (apiserver/src/cost.rs); each run then prints the server's mean ms per write kind
//! and the facts it was charged for.
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
//! elsewhere on the machine weighs on both alike; the ratios are against their mean; `python`
//! and `js` are the classic rules in those languages, `module=FILE` any module, named by its
//! file: `wasm,module=target/modules/my-rules.wasm` puts a rule set of yours beside Rust's;
//! `bin=FILE` is the `wasm` run by another build of the operator, named by its file, so a
//! change is measured before and after in one run: `bare,bin=/tmp/before,bare,wasm`),
//! `ZUNDOKO_BENCH_PERF=FILE` (records the operator's first run with `perf record --call-graph
//! dwarf` into FILE, from its first Hikawa to its last Kiyoshi; dev tooling, needs linux-perf),
//! `ZUNDOKO_BENCH_LOG` (the operator's log filter, default `info` as the operator's own, with
//! its per-word `decided` line, written to /dev/null as a Pod's stderr is taken by the node; at
//! `warn` the operator's warnings reach this terminal), `ZUNDOKO_BENCH_OPERATOR_ENV` (`K=V;K=V`, for the
//! operator's process only).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kube::api::ListParams;
use kube::{Api, Client};
use zundoko_operator::crd::Hikawa;
use zundoko_operator::supply::contract::rules::{NativeRules, Rules, RulesSlot, decide};
use zundoko_operator::supply::serving::RuleSets;
use zundoko_operator::process::metrics::Metrics;
use zundoko_operator::controllers::hikawa::children::ChildIndex;
use zundoko_operator::process::leader::ShardTable;
use zundoko_operator::controllers::hikawa::context::{Context, Writer};
use zundoko_operator::controllers::hikawa::pace::{Pace, PaceSettings};
use zundoko_operator::supply::contract::plan_check::PlanLimits;
use zundoko_rules::Observed;

// A file per part: the processes' figures from /proc, what a run measured, the API server's
// process, the ceiling's client, the operator's process, the report; the API server's process
// and the Hikawas to sing are shared with the replica benchmark (common/cluster.rs).
mod bare;
mod ceiling;
#[path = "../common/cluster.rs"]
mod cluster;
#[path = "../common/processes.rs"]
mod processes;
mod operator;
mod procfs;
// Read by host/tests/bench_real.rs's test of the format too.
pub(crate) mod promtext;
pub(crate) mod real;
mod report;
mod run;
mod server;
mod target;
use bare::*;
use ceiling::*;
use cluster::*;
use operator::*;
use processes::*;
use procfs::*;
use promtext::*;
use real::*;
use report::*;
use run::*;
use server::*;
use target::*;

/// The operator's allocator (main.rs) in every role, so that the ceiling's client differs from
/// the operator only by what the operator does beyond its writes.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The arguments this binary is re-run with for a role (none for the benchmark; a test that
/// includes it names itself, so that libtest runs that test only).
pub(crate) static OWN_ARGS: OnceLock<Vec<String>> = OnceLock::new();

/// This binary, to be re-run in a role (`ZUNDOKO_BENCH_ROLE`).
pub(crate) fn own_process() -> Command {
    let mut command = Command::new(std::env::current_exe().expect("the benchmark's path"));
    command.args(OWN_ARGS.get().map_or(&[][..], Vec::as_slice));
    command
}

pub(crate) fn main() {
    // As the operator's main does, so that RSS compares.
    zundoko_operator::process::memory::no_transparent_huge_pages();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    match std::env::var(ROLE).as_deref() {
        Ok("ceiling") => runtime.block_on(ceiling_client()),
        Ok("apiserver") => runtime.block_on(apiserver_process()),
        _ => runtime.block_on(bench()),
    }
}

/// Every size, at every latency, every run: each measured, then the report.
pub(crate) async fn bench() {
    let real = match connect().await {
        Ok(real) => real,
        Err(e) => {
            eprintln!("bench: {e}");
            std::process::exit(2)
        }
    };
    if real.is_some() {
        // A real server has its own latency and costs: neither is injected there.
        let injected = std::env::var("ZUNDOKO_BENCH_LATENCIES").is_ok_and(|l| l.split(',').any(|ms| ms.trim() != "0"));
        if injected || cost_model().is_some() {
            eprintln!("bench: ZUNDOKO_BENCH_LATENCIES and ZUNDOKO_BENCH_COST are the local API server's; with {REAL_KUBECONFIG} leave them unset");
            std::process::exit(2)
        }
    }
    let sizes: Vec<usize> = std::env::var("ZUNDOKO_BENCH_SIZES")
        .unwrap_or_else(|_| if real.is_some() { "1000".into() } else { "1000,10000".into() })
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
    match real {
        Some(cluster) => {
            println!("Scale: Hikawas with intervalMillis 0, from creation to every Kiyoshi, on the API server {REAL_KUBECONFIG}={} names;", cluster.kubeconfig.display());
            println!("each run in a fresh namespace of its own (zundoko-bench-<run>-<n>-<id>), deleted after it; the operator with --namespace that namespace.");
        }
        None => println!("Scale: Hikawas with intervalMillis 0, from creation to every Kiyoshi; a fresh local API server process per run."),
    }
    println!("ceiling: no operator; a client process with the operator's client stack and write path (per word: create the child, then");
    println!("         its Event, then the status merge patch), the classic rules called natively, one word per Hikawa at a time,");
    println!("         {concurrency} words in flight (the operator: {concurrency} reconciles at once, a reconcile is one word of one Hikawa).");
    println!("wasm:    zundoko-operator run --module zundoko-classic.wasm --concurrency {concurrency} (its own process); native: --native-rules classic.");
    println!("words = children (Zundokos and Kiyoshis), each a child, an Event and a status write; seconds from the first Hikawa created");
    println!("to the last Kiyoshi; RSS of the client process (idle: ready, before any Hikawa; peak: while the songs run; end: every song over); CPU per word of the");
    println!("client process (its own utime + stime) and of the API server process; requests and watch events (bytes the client");
    println!("decoded) per word. latency: what the API server waits before handling each request, for every client.");
    match cost_model().filter(|_| real.is_none()) {
        Some(m) => println!("cost model (ZUNDOKO_BENCH_COST): every request charged as a real server would be, {m:?}"),
        None if real.is_none() => println!("cost model: none (ZUNDOKO_BENCH_COST=kube-1.32 charges each request as kube-apiserver v1.32 would)"),
        None => {}
    }
    let total = Instant::now();
    let mut summary = Vec::new();
    let mut perf_taken = false;
    // Where the Python, JavaScript and other modules' runs keep their compiled code across runs
    // (a cold compile of an interpreter takes tens of seconds).
    let cache = format!("{}/../target/tmp/bench-scale-cache", env!("CARGO_MANIFEST_DIR"));
    for n in sizes {
        let latencies = match &latencies_set {
            _ if real.is_some() => vec![0],
            Some(set) => set.clone(),
            None if n <= 1000 => vec![0, 5, 25],
            None => vec![0],
        };
        for latency_ms in latencies {
            let default_runs = match (real, latency_ms) {
                // Issue 55's held-out check: the bare client before and after the operator.
                (Some(_), _) => "bare,wasm,bare",
                (None, 0) => "ceiling,wasm,native,ceiling",
                (None, _) => "ceiling,wasm,ceiling",
            };
            let mut runs = Vec::new();
            for run in which.as_deref().unwrap_or(default_runs).split(',') {
                let started = Instant::now();
                let record = if perf_taken || run.trim() == "ceiling" { None } else { perf.as_deref() };
                perf_taken |= record.is_some();
                let mut r = match run.trim() {
                    "ceiling" => run_ceiling(n, concurrency, latency_ms, false).await,
                    "bare" => run_ceiling(n, concurrency, latency_ms, true).await,
                    "wasm" => run_operator(OPERATOR, "wasm", n, concurrency, latency_ms, &["--module", module], record).await,
                    "native" => run_operator(OPERATOR, "native", n, concurrency, latency_ms, &["--native-rules", "classic"], record).await,
                    // The classic rules in Python and JavaScript (make guest-langs).
                    lang @ ("python" | "js") => {
                        let file = if lang == "python" { "zundoko-classic-py.wasm" } else { "zundoko-classic-js.wasm" };
                        let module = format!("{}/../target/modules/{file}", env!("CARGO_MANIFEST_DIR"));
                        run_operator(OPERATOR, lang, n, concurrency, latency_ms, &["--module", &module, "--cache-dir", &cache], record).await
                    }
                    // Any module, say one of your own rule sets (`module=target/modules/my-rules.wasm`),
                    // named by its file; its songs must end in a Kiyoshi with no params.
                    other if other.starts_with("module=") => {
                        let given = &other["module=".len()..];
                        // `cargo bench` runs in host/; a path from the repository's root works too.
                        let from_root = format!("{}/../{given}", env!("CARGO_MANIFEST_DIR"));
                        let module = if Path::new(given).is_file() { given } else { from_root.as_str() };
                        assert!(Path::new(module).is_file(), "ZUNDOKO_BENCH_RUNS: no module file {given:?}");
                        let name = Path::new(module).file_stem().map_or("module".into(), |stem| stem.to_string_lossy().into_owned());
                        run_operator(OPERATOR, &name, n, concurrency, latency_ms, &["--module", module, "--cache-dir", &cache], record).await
                    }
                    // Another build of the operator (say main's, copied aside), singing the
                    // classic module as `wasm` does, named by its file: before and after a
                    // change in one run, `bare,bin=/tmp/before,bare,wasm`.
                    other if other.starts_with("bin=") => {
                        let binary = &other["bin=".len()..];
                        assert!(Path::new(binary).is_file(), "ZUNDOKO_BENCH_RUNS: no operator binary {binary:?}");
                        let name = Path::new(binary).file_name().map_or("bin".into(), |f| f.to_string_lossy().into_owned());
                        run_operator(binary, &name, n, concurrency, latency_ms, &["--module", module], record).await
                    }
                    other => panic!("unknown run {other:?} in ZUNDOKO_BENCH_RUNS (ceiling, bare, wasm, native, python, js, module=FILE, bin=FILE)"),
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
