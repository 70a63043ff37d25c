//! The operator, as its own process.

use super::*;

/// How long a GET of the operator's endpoints waits for its answer.
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);
/// A run in which no word is said for this long has stalled (the module's songs stop short).
const STALLED: Duration = Duration::from_secs(60);

/// The sum of the samples of one metric (lines starting with `prefix`).
pub(crate) fn metric(text: &str, prefix: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

/// `ZUNDOKO_BENCH_OPERATOR_ENV=K=V;K=V`: environment for the operator's process only (say,
/// `GLIBC_TUNABLES=...` to try the allocator's tunables).
pub(crate) fn operator_env() -> Vec<(String, String)> {
    std::env::var("ZUNDOKO_BENCH_OPERATOR_ENV")
        .unwrap_or_default()
        .split(';')
        .filter_map(|kv| kv.split_once('=').map(|(k, v)| (k.trim().to_string(), v.to_string())))
        .collect()
}

/// The operator this benchmark was built with.
pub(crate) const OPERATOR: &str = env!("CARGO_BIN_EXE_zundoko-operator");

/// A child process, killed when dropped (a panic), so no operator is left singing.
pub(crate) struct Killed(pub(crate) Child);

impl Killed {
    pub(crate) fn new(child: Child) -> Killed {
        child_started(child.id());
        Killed(child)
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        child_ended(self.0.id());
    }
}

/// A run of the operator's process `binary`, named `name`.
pub(crate) async fn run_operator(binary: &str, name: &str, n: usize, concurrency: u16, latency_ms: u64, rules_args: &[&str], perf: Option<&str>) -> Run {
    let mut server = Target::fresh(name, latency_ms).await;
    let port = free_port();
    let log = std::env::var("ZUNDOKO_BENCH_LOG").unwrap_or_else(|_| "info".into());
    let operator = Command::new(binary)
        .arg("run")
        .args(rules_args)
        .args(["--http-addr", &format!("127.0.0.1:{port}"), "--concurrency", &concurrency.to_string()])
        .args(server.operator_args())
        .env("KUBECONFIG", server.kubeconfig())
        .env("RUST_LOG", &log)
        .envs(operator_env())
        .env_remove("ZUNDOKO_CONCURRENCY")
        .stdout(Stdio::null())
        // A log at a level below warn is thrown away (what it costs is in the CPU per word).
        .stderr(if log == "warn" { Stdio::inherit() } else { Stdio::null() })
        .spawn()
        .expect("starting the operator");
    let mut operator = Killed::new(operator);
    let operator = &mut operator.0;
    let pid = operator.id().to_string();
    // Idle: the module loaded, the caches synced (ready), then a moment to settle.
    let waiting = Instant::now();
    while http_get(port, "/readyz", HTTP_TIMEOUT).await.map(|r| r.0) != Some(200) {
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
    server.songs_start().await;
    let (server_cpu, client_cpu) = (server.cpu(), cpu_seconds(&pid));
    let started = Instant::now();
    let creator = tokio::spawn(create_hikawas(server.client().clone(), server.namespace().to_string(), n, |_| {}));
    let mut samples = Vec::new();
    // A module whose songs stop short of their Kiyoshi (a rule set that refuses these Hikawas,
    // or never ends a song) would keep this loop waiting: no word for this long ends the run.
    let (mut last_words, mut last_word_at) = (0, Instant::now());
    let metrics = loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert!(operator.try_wait().unwrap().is_none(), "the operator exited");
        pss_peak = pss_peak.max(pss_kib(&pid));
        let Some((200, text)) = http_get(port, "/metrics", HTTP_TIMEOUT).await else { continue };
        let kiyoshis = metric(&text, "zundoko_words_total{kind=\"kiyoshi\"}");
        let words = metric(&text, "zundoko_words_total{");
        samples.push((started.elapsed().as_secs_f64(), words));
        if kiyoshis >= n as u64 {
            break text;
        }
        if words > last_words {
            (last_words, last_word_at) = (words, Instant::now());
        }
        assert!(
            last_word_at.elapsed() < STALLED,
            "{name}: no word for {STALLED:?}, with {kiyoshis} of {n} songs over ({words} words): do its songs end in a Kiyoshi with no params? See the Hikawas' status"
        );
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
        if let Some((200, text)) = http_get(port, "/metrics", HTTP_TIMEOUT).await {
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
        not_decided: ["catching-up", "unchanged", "throttled", "module-busy"]
            .iter()
            .map(|why| (why.to_string(), metric(&metrics, &format!("zundoko_reconciles_not_decided_total{{why=\"{why}\"}}"))))
            .collect(),
        // As the operator counted them (a remote server's counts cannot be told apart by client;
        // the local server's replace these in `finish`).
        requests: client_requests(&metrics),
        ..Run::default()
    };
    let errors = metric(&metrics, "zundoko_reconcile_errors_total{");
    assert_eq!(errors, 0, "reconciles failed: {metrics}");
    operator.kill().expect("stopping the operator");
    operator.wait().expect("the operator stopped");
    check_songs(server.client(), server.namespace(), n, Some(run.words)).await;
    run.sizes = object_sizes(server.client(), server.namespace()).await;
    server.finish(&mut run).await;
    run
}

/// Every Hikawa kiyoshied, and the words said are the children counted.
pub(crate) async fn check_songs(client: &Client, namespace: &str, n: usize, words: Option<u64>) {
    let list = Api::<Hikawa>::namespaced(client.clone(), namespace).list(&ListParams::default()).await.expect("listing the Hikawas");
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
pub(crate) async fn object_sizes(client: &Client, namespace: &str) -> String {
    let get = |path: String| {
        let client = client.clone();
        async move {
            let request = http::Request::get(path).body(Vec::new()).unwrap();
            client.request_text(request).await.map(|t| t.len()).unwrap_or(0)
        }
    };
    let group = format!("/apis/zundokokiyoshi.kaitoy.github.com/v1beta1/namespaces/{namespace}");
    let events = format!("/apis/events.k8s.io/v1/namespaces/{namespace}/events");
    let event_name = Api::<k8s_openapi::api::events::v1::Event>::namespaced(client.clone(), namespace)
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
