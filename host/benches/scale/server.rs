//! The local API server: a fresh process for every run (started as `common/cluster.rs` does),
//! with an injected latency, counting its requests, watch events and CPU.

use super::*;

/// The API server process: serves until its stdin closes, then prints what it counted and its
/// CPU time (`requests verb/resource/subresource=count,...`, `watch EVENTS BYTES`, `cpu SECONDS`,
/// `connections TOTAL`, then `connection ACCEPTED MOST_OPEN USER-AGENT` per client).
pub(crate) async fn apiserver_process() {
    let server = serve().await;
    let latency_ms: u64 = env_number("ZUNDOKO_BENCH_LATENCY_MS", 0);
    server.faults().set_latency(Duration::from_millis(latency_ms));
    server.cost().set_model(cost_model());
    until_stdin_closes().await;
    let requests: Vec<String> = server.request_counts().into_iter().map(|((verb, resource, sub), n)| format!("{verb}/{resource}/{sub}={n}")).collect();
    let (events, bytes) = server.watch_events_sent();
    println!("requests {}", requests.join(","));
    println!("watch {events} {bytes}");
    let durations: Vec<String> =
        server.request_durations().into_iter().map(|((verb, resource, sub), t)| {
            let f = t.facts;
            format!("{verb}/{resource}/{sub}={}:{:.6}:{}:{}:{}:{}", t.answered, t.duration.as_secs_f64(), f.object_bytes, f.body_bytes, f.managed_fields_bytes, f.watchers)
        }).collect();
    println!("durations {}", durations.join(","));
    println!("cpu {:.3}", cpu_seconds("self"));
    let (total, clients) = server.connections();
    println!("connections {total}");
    for (agent, c) in clients {
        // The User-Agent last: it may hold spaces.
        println!("connection {} {} {agent}", c.accepted, c.most_open);
    }
    std::process::exit(0);
}

/// `ZUNDOKO_BENCH_COST`: the API server's cost model (`kube-1.32`, the calibrated one, or
/// `none`, the default: every request free but for the injected latency).
pub(crate) fn cost_model() -> Option<zundoko_apiserver::cost::CostModel> {
    match std::env::var("ZUNDOKO_BENCH_COST").as_deref() {
        Ok("kube-1.32") => Some(zundoko_apiserver::cost::KUBE_APISERVER_1_32),
        Ok("none") | Ok("") | Err(_) => None,
        Ok(other) => panic!("ZUNDOKO_BENCH_COST={other}: none or kube-1.32"),
    }
}

pub(crate) struct Server {
    pub(crate) process: Child,
    pub(crate) pid: String,
    pub(crate) client: Client,
    pub(crate) kubeconfig: PathBuf,
    pub(crate) cpu_at_start: f64,
}

pub(crate) async fn fresh_server(latency_ms: u64) -> Server {
    let ServerProcess { process, pid, client, kubeconfig } = start_server("scale", &[("ZUNDOKO_BENCH_LATENCY_MS", latency_ms.to_string())]).await;
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
                "durations" => {
                    run.durations = rest
                        .split(',')
                        .filter_map(|r| {
                            let (key, figures) = r.rsplit_once('=')?;
                            let mut figures = figures.split(':');
                            let n: u64 = figures.next()?.parse().ok()?;
                            let sum: f64 = figures.next()?.parse().ok()?;
                            // The facts' sums: object, body, managedFields bytes and watchers.
                            let facts: Vec<f64> = figures.filter_map(|x| x.parse().ok()).collect();
                            let mut parts = key.splitn(3, '/');
                            let key = (parts.next()?.to_string(), parts.next()?.to_string(), parts.next().unwrap_or("").to_string());
                            Some((key, n, sum, facts))
                        })
                        .collect()
                }
                "connections" => run.connections_total = rest.trim().parse().unwrap_or(0),
                "connection" => {
                    let mut fields = rest.splitn(3, ' ');
                    let (accepted, most_open) = (fields.next().and_then(|x| x.parse().ok()), fields.next().and_then(|x| x.parse().ok()));
                    if let (Some(accepted), Some(most_open)) = (accepted, most_open) {
                        run.connections.push((fields.next().unwrap_or("").to_string(), accepted, most_open));
                    }
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
