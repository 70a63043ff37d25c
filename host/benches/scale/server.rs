//! The local API server: a fresh process for every run (this benchmark re-run as
//! `ZUNDOKO_BENCH_ROLE=apiserver`), so each run starts from the same state, heap included.

use super::*;

/// The API server process: serves until its stdin closes, then prints what it counted and its
/// CPU time (`requests verb/resource/subresource=count,...`, `watch EVENTS BYTES`, `cpu SECONDS`).
pub(crate) async fn apiserver_process() {
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

pub(crate) struct Server {
    pub(crate) process: Child,
    pub(crate) pid: String,
    pub(crate) client: Client,
    pub(crate) kubeconfig: PathBuf,
    pub(crate) cpu_at_start: f64,
}

pub(crate) async fn fresh_server(latency_ms: u64) -> Server {
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
    pub(crate) fn cpu(&self) -> f64 {
        cpu_seconds(&self.pid) - self.cpu_at_start
    }

    /// Stop the server; its request and watch counts into `run`.
    pub(crate) async fn finish(mut self, run: &mut Run) {
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

pub(crate) fn hikawa(i: usize) -> Hikawa {
    let mut h = Hikawa::new(&format!("bench-{i:05}"), HikawaSpec { interval_millis: 0, ..HikawaSpec::default() });
    h.metadata.namespace = Some(NAMESPACE.into());
    h
}

/// Create N Hikawas, `CREATE_CONCURRENCY` at once; `created` gets each as the server returns it.
pub(crate) async fn create_hikawas(client: Client, n: usize, created: impl Fn(Hikawa)) {
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
