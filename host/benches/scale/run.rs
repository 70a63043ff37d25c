//! What one run measured.

/// One kind of request (verb, resource, subresource) as the API server tallied it: answered,
/// seconds in all, and the sums of its facts.
pub(crate) type Tallied = ((String, String, String), u64, f64, Vec<f64>);

#[derive(Clone, Debug, Default)]
pub(crate) struct Run {
    pub(crate) name: String,
    pub(crate) words: u64,
    pub(crate) seconds: f64,
    /// (seconds since the first Hikawa was created, words said so far).
    pub(crate) samples: Vec<(f64, u64)>,
    pub(crate) rss_idle_kib: u64,
    pub(crate) rss_peak_kib: u64,
    pub(crate) rss_end_kib: u64,
    pub(crate) threads_end: u64,
    pub(crate) breakdown_idle: String,
    pub(crate) breakdown_end: String,
    /// PSS idle, the most sampled (every 250 ms while the songs run) and at the end, in kB.
    pub(crate) pss_kib: (u64, u64, u64),
    /// VmHWM when idle: the peak of the start (loading the module), in kB. `rss_peak_kib` is
    /// the peak after that, while the songs run.
    pub(crate) rss_start_peak_kib: u64,
    pub(crate) sizes: String,
    pub(crate) client_cpu_s: f64,
    pub(crate) server_cpu_s: f64,
    pub(crate) reconciles: u64,
    pub(crate) not_decided: Vec<(String, u64)>,
    pub(crate) requests: Vec<((String, String, String), u64)>,
    /// The API server's answered requests, their durations' sum in seconds and the sums of
    /// what the cost model charged them for (object, body and managedFields bytes, watchers),
    /// by (verb, resource, subresource): apiserver_request_duration_seconds.
    pub(crate) durations: Vec<Tallied>,
    /// The TCP connections the API server accepted: in all, and per client (its User-Agent,
    /// connections accepted, the most open at once).
    pub(crate) connections_total: u64,
    pub(crate) connections: Vec<(String, u64, u64)>,
    pub(crate) watch_events: u64,
    pub(crate) watch_bytes: u64,
    /// Against a remote API server (`ZUNDOKO_BENCH_KUBECONFIG`): its process, cost model,
    /// connections and watch events are not ours to read, and `requests` are the client's count.
    pub(crate) remote: bool,
    /// Why a remote server's request durations could not be read (its /metrics Forbidden...).
    pub(crate) durations_unread: Option<String>,
}

impl Run {
    pub(crate) fn words_per_sec(&self) -> f64 {
        self.words as f64 / self.seconds
    }

    /// Words per second between 10% and 90% of the words (linear between samples).
    pub(crate) fn steady_words_per_sec(&self) -> f64 {
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

    pub(crate) fn requests_total(&self) -> u64 {
        self.requests.iter().map(|(_, n)| n).sum()
    }

    /// The server's mean duration in ms of one kind of request (`None`: none made).
    pub(crate) fn mean_ms(&self, verb: &str, resource: &str, sub: &str) -> Option<f64> {
        self.durations.iter().find(|((v, r, s), ..)| v == verb && r == resource && s == sub).filter(|(_, n, ..)| *n > 0).map(|(_, n, sum, _)| sum * 1000.0 / *n as f64)
    }

    /// The mean facts of one kind of request, as `object/body/managedFields bytes, watchers`.
    pub(crate) fn mean_facts(&self, verb: &str, resource: &str, sub: &str) -> String {
        let Some((_, n, _, facts)) = self.durations.iter().find(|((v, r, s), ..)| v == verb && r == resource && s == sub).filter(|(_, n, ..)| *n > 0) else {
            return "-".into();
        };
        let mean: Vec<f64> = facts.iter().map(|f| f / *n as f64).collect();
        match mean.as_slice() {
            [object, body, managed, watchers] => format!("{object:.0}/{body:.0}/{managed:.0} B, {watchers:.1} watchers"),
            _ => "-".into(),
        }
    }
}
