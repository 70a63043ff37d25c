//! Fault injection: per-verb error rates (500 InternalError), a conflict rate on writes
//! (409 Conflict), added latency, and dropping every open watch periodically or on demand.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use rand::Rng;
use tokio::sync::watch;

use crate::status::ApiError;

#[derive(Debug, Clone, Default)]
struct Config {
    error_rates: HashMap<String, f64>,
    conflict_rate: f64,
    latency: Duration,
    watch_drop_every: Option<Duration>,
}

/// The fault knobs of a running server. Verbs are Kubernetes verbs (`get`, `list`, `watch`,
/// `create`, `update`, `patch`, `delete`, `deletecollection`) or `*` for all.
pub struct Faults {
    cfg: Mutex<Config>,
    drop_tx: watch::Sender<u64>,
}

pub const WRITE_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

impl Default for Faults {
    fn default() -> Self {
        Faults { cfg: Mutex::new(Config::default()), drop_tx: watch::channel(0).0 }
    }
}

impl Faults {
    fn cfg(&self) -> std::sync::MutexGuard<'_, Config> {
        self.cfg.lock().unwrap_or_else(|e| e.into_inner())
    }
    /// Fraction (0.0..=1.0) of requests with this verb answered with 500 InternalError.
    pub fn set_error_rate(&self, verb: &str, rate: f64) {
        self.cfg().error_rates.insert(verb.to_string(), rate.clamp(0.0, 1.0));
    }
    /// Fraction of write requests answered with 409 Conflict.
    pub fn set_conflict_rate(&self, rate: f64) {
        self.cfg().conflict_rate = rate.clamp(0.0, 1.0);
    }
    /// Latency added before every request is handled.
    pub fn set_latency(&self, latency: Duration) {
        self.cfg().latency = latency;
    }
    /// Close every open watch stream every `every` (None: never).
    pub fn set_watch_drop_every(&self, every: Option<Duration>) {
        self.cfg().watch_drop_every = every;
    }
    /// Removes every fault.
    pub fn clear(&self) {
        *self.cfg() = Config::default();
    }
    /// Closes every open watch stream now (cleanly, as at a timeout).
    pub fn drop_watches_now(&self) {
        self.drop_tx.send_modify(|g| *g += 1);
    }

    pub(crate) fn latency(&self) -> Duration {
        self.cfg().latency
    }
    pub(crate) fn watch_drop_every(&self) -> Option<Duration> {
        self.cfg().watch_drop_every
    }
    pub(crate) fn drops(&self) -> watch::Receiver<u64> {
        self.drop_tx.subscribe()
    }

    /// The injected error for a request, if the dice say so.
    pub(crate) fn roll(&self, verb: &str, group: &str, resource: &str, name: &str) -> Option<ApiError> {
        let (err_rate, conflict_rate) = {
            let c = self.cfg();
            let e = c.error_rates.get(verb).or_else(|| c.error_rates.get("*")).copied().unwrap_or(0.0);
            (e, if WRITE_VERBS.contains(&verb) { c.conflict_rate } else { 0.0 })
        };
        let mut rng = rand::rng();
        if err_rate > 0.0 && rng.random::<f64>() < err_rate {
            return Some(ApiError::internal(format!("injected fault for {verb}")));
        }
        if conflict_rate > 0.0 && rng.random::<f64>() < conflict_rate {
            return Some(ApiError::optimistic_lock(group, resource, name));
        }
        None
    }

    /// Drives `set_watch_drop_every`.
    pub(crate) async fn run_dropper(&self) {
        loop {
            match self.watch_drop_every() {
                Some(d) => {
                    tokio::time::sleep(d).await;
                    if self.watch_drop_every().is_some() {
                        self.drop_watches_now();
                    }
                }
                None => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }
}
