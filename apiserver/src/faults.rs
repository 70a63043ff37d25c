//! Fault injection: per-verb error rates (500 InternalError, 503 ServiceUnavailable), a
//! conflict rate on writes (409 Conflict), added latency, dropping every open watch
//! periodically or on demand, and per-client faults: network partitions, dropped
//! connections, latency, API Priority and Fairness throttling (429) and refused credentials
//! (401 or 403).
//!
//! Clients are told apart by their User-Agent: a client match is a substring of it (`""` or
//! `*` match every client), e.g. `operator-a` for `zundoko-operator/0.1.0 (operator-a)`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rand::Rng;
use tokio::sync::{Notify, watch};

use crate::status::ApiError;

#[derive(Debug, Clone, Default)]
struct Config {
    error_rates: HashMap<String, f64>,
    /// verb (or verb/resource) -> (a 4xx code, rate)
    refusal_rates: HashMap<String, (u16, f64)>,
    unavailable_rates: HashMap<String, f64>,
    /// verb (or verb/resource) -> rate of connections cut before the request is processed.
    cut_rates: HashMap<String, f64>,
    conflict_rate: f64,
    latency: Duration,
    watch_drop_every: Option<Duration>,
    /// Client matches, in the order they were set.
    partitions: Vec<String>,
    /// Those of `partitions` whose held writes are delivered when they heal.
    late_partitions: Vec<String>,
    client_latency: Vec<(String, Duration)>,
    /// (client, rate, Retry-After seconds)
    throttles: Vec<(String, f64, u64)>,
    /// (client, 401 or 403)
    refusals: Vec<(String, u16)>,
}

/// Whether a client match (a User-Agent substring, `""` or `*` for all) matches a User-Agent.
fn matches(client: &str, user_agent: &str) -> bool {
    client.is_empty() || client == "*" || user_agent.contains(client)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One client connection, as the faults see it.
pub(crate) struct Conn {
    id: u64,
    /// The User-Agent of its latest request ("" before the first).
    user_agent: Mutex<String>,
    /// The User-Agent of its first request: the client it is counted for (`connections.rs`).
    first_user_agent: std::sync::OnceLock<String>,
    /// Partitioned: nothing more is written to it, and it is closed when the partition heals.
    /// Never reset, so a body that stopped for it need not be woken.
    held: AtomicBool,
    close: Notify,
}

impl Conn {
    pub(crate) fn set_user_agent(&self, ua: &str) {
        let mut cur = lock(&self.user_agent);
        if *cur != ua {
            *cur = ua.to_string();
        }
    }
    /// Records `ua` as the client of the connection if this is its first request; true then.
    pub(crate) fn first_request(&self, ua: &str) -> bool {
        self.first_user_agent.set(ua.to_string()).is_ok()
    }
    /// The User-Agent of its first request (`None` before one came).
    pub(crate) fn client(&self) -> Option<&str> {
        self.first_user_agent.get().map(String::as_str)
    }
    pub(crate) fn hold(&self) {
        self.held.store(true, Ordering::SeqCst);
    }
    pub(crate) fn held(&self) -> bool {
        self.held.load(Ordering::SeqCst)
    }
    /// Resolves once the connection is to be closed without another byte.
    pub(crate) async fn closing(&self) {
        self.close.notified().await
    }
    /// Close it at once, whatever it was answering (`Faults::cut`).
    pub(crate) fn cut(&self) {
        self.close();
    }
    fn close(&self) {
        // notify_one keeps a permit, so a close before the connection task waits still counts.
        self.close.notify_one();
    }
}

/// What a partition does with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hold {
    /// Not partitioned.
    No,
    /// Never processed.
    Forever,
    /// Processed when the partition heals (a write), its answer never sent.
    UntilHealed,
}

/// The fault knobs of a running server. Verbs are Kubernetes verbs (`get`, `list`, `watch`,
/// `create`, `update`, `patch`, `delete`, `deletecollection`) or `*` for all; a rate may also
/// be for one verb on one resource, `verb/resource` (`create/events`), which wins over the
/// verb's.
pub struct Faults {
    cfg: Mutex<Config>,
    drop_tx: watch::Sender<u64>,
    /// Raised at every heal: held writes waiting to be delivered late look again.
    heal_tx: watch::Sender<u64>,
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
    next_conn: AtomicU64,
}

pub const WRITE_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

impl Default for Faults {
    fn default() -> Self {
        Faults { cfg: Mutex::new(Config::default()), drop_tx: watch::channel(0).0, heal_tx: watch::channel(0).0, conns: Mutex::new(HashMap::new()), next_conn: AtomicU64::new(0) }
    }
}

impl Faults {
    fn cfg(&self) -> MutexGuard<'_, Config> {
        lock(&self.cfg)
    }
    /// Fraction (0.0..=1.0) of requests with this verb (or `verb/resource`) answered with 500
    /// InternalError.
    pub fn set_error_rate(&self, verb: &str, rate: f64) {
        self.cfg().error_rates.insert(verb.to_string(), rate.clamp(0.0, 1.0));
    }
    /// Fraction (0.0..=1.0) of requests with this verb (or `verb/resource`) refused with
    /// `code`, a 4xx: 403 Forbidden, 409 Conflict, 422 Invalid, any other as 400 BadRequest's
    /// Status with that code. A rate of 0 ends it.
    pub fn set_refusal_rate(&self, verb: &str, code: u16, rate: f64) {
        let mut c = self.cfg();
        if rate > 0.0 {
            c.refusal_rates.insert(verb.to_string(), (code.clamp(400, 499), rate.clamp(0.0, 1.0)));
        } else {
            c.refusal_rates.remove(verb);
        }
    }
    /// Fraction (0.0..=1.0) of requests with this verb (or `verb/resource`) whose connection is
    /// cut once the request is read, before it is processed and without an answer: what a
    /// reset, a dying proxy or a node going away does. The client sees the connection end
    /// mid-request; nothing was written. A rate of 0 ends it.
    pub fn set_cut_rate(&self, verb: &str, rate: f64) {
        let mut c = self.cfg();
        if rate > 0.0 {
            c.cut_rates.insert(verb.to_string(), rate.clamp(0.0, 1.0));
        } else {
            c.cut_rates.remove(verb);
        }
    }
    /// Whether to cut this request's connection (`set_cut_rate`), if the dice say so.
    pub(crate) fn cut(&self, verb: &str, resource: &str) -> bool {
        let rate = {
            let c = self.cfg();
            c.cut_rates.get(&format!("{verb}/{resource}")).or_else(|| c.cut_rates.get(verb)).or_else(|| c.cut_rates.get("*")).copied().unwrap_or(0.0)
        };
        rate > 0.0 && rand::rng().random::<f64>() < rate
    }
    /// Fraction (0.0..=1.0) of requests with this verb answered with 503 ServiceUnavailable.
    pub fn set_unavailable_rate(&self, verb: &str, rate: f64) {
        self.cfg().unavailable_rates.insert(verb.to_string(), rate.clamp(0.0, 1.0));
    }
    /// Fraction of write requests answered with 409 Conflict.
    pub fn set_conflict_rate(&self, rate: f64) {
        self.cfg().conflict_rate = rate.clamp(0.0, 1.0);
    }
    /// Latency added before every request is handled.
    pub fn set_latency(&self, latency: Duration) {
        self.cfg().latency = latency;
    }
    /// Latency added before the requests of matching clients are handled, on top of
    /// `set_latency` (the largest of several matches counts). Zero removes it.
    pub fn set_client_latency(&self, client: &str, latency: Duration) {
        let mut c = self.cfg();
        c.client_latency.retain(|(m, _)| m != client);
        if !latency.is_zero() {
            c.client_latency.push((client.to_string(), latency));
        }
    }
    /// As API Priority and Fairness rejecting: this fraction of the matching clients'
    /// requests (watches included) is answered 429 with `Retry-After: retry_after_secs`.
    /// A rate of 0 ends it.
    pub fn set_throttle(&self, client: &str, rate: f64, retry_after_secs: u64) {
        let mut c = self.cfg();
        c.throttles.retain(|(m, _, _)| m != client);
        if rate > 0.0 {
            c.throttles.push((client.to_string(), rate.clamp(0.0, 1.0), retry_after_secs));
        }
    }
    /// Refuses the matching clients' credentials: every request of theirs, discovery and
    /// `/version` included, is answered as kube-apiserver's authentication (`Some(401)`,
    /// Unauthorized: the credentials are not valid) or authorization (`Some(403)`, Forbidden:
    /// valid, but allowed nothing) would. `None` ends it; any other code is taken as 403.
    pub fn set_refused_credentials(&self, client: &str, code: Option<u16>) {
        let mut c = self.cfg();
        c.refusals.retain(|(m, _)| m != client);
        if let Some(code) = code {
            c.refusals.push((client.to_string(), if code == 401 { 401 } else { 403 }));
        }
    }
    /// Close every open watch stream every `every` (None: never).
    pub fn set_watch_drop_every(&self, every: Option<Duration>) {
        self.cfg().watch_drop_every = every;
    }
    /// Removes every fault and heals every partition.
    pub fn clear(&self) {
        *self.cfg() = Config::default();
        self.close_healed();
    }
    /// Closes every open watch stream now (cleanly, as at a timeout).
    pub fn drop_watches_now(&self) {
        self.drop_tx.send_modify(|g| *g += 1);
    }

    /// Partitions matching clients off, as a network that accepts and never answers: their
    /// new requests are held (logged with code 0, never processed, never answered) and their
    /// open connections, watches included, get no further byte. Until `heal`.
    pub fn partition(&self, client: &str) {
        {
            let mut c = self.cfg();
            if !c.partitions.iter().any(|m| m == client) {
                c.partitions.push(client.to_string());
            }
        }
        for conn in lock(&self.conns).values() {
            if matches(client, &lock(&conn.user_agent)) {
                conn.hold();
            }
        }
    }
    /// A partition whose writes land late: as `partition`, but when it heals every write it
    /// held (create, update, patch, delete) is processed then, in no particular order, and
    /// its answer still never sent, as a network that held packets and delivers them at last.
    /// Reads it held are dropped (their answer would go nowhere). Each late write is logged
    /// again, with its code and `late`.
    pub fn partition_late(&self, client: &str) {
        {
            let mut c = self.cfg();
            if !c.late_partitions.iter().any(|m| m == client) {
                c.late_partitions.push(client.to_string());
            }
        }
        self.partition(client);
    }
    /// Ends `partition(client)` (`""` or `*`: every partition): every connection held by it
    /// is closed without an answer, and its held requests are dropped, never processed (or,
    /// after `partition_late`, its held writes are processed now).
    pub fn heal(&self, client: &str) {
        {
            let mut c = self.cfg();
            let healed = |m: &String| client.is_empty() || client == "*" || m == client;
            c.partitions.retain(|m| !healed(m));
            c.late_partitions.retain(|m| !healed(m));
        }
        self.heal_tx.send_modify(|g| *g += 1);
        self.close_healed();
    }
    /// Resolves once no partition holds this User-Agent any more.
    pub(crate) async fn healed(&self, user_agent: &str) {
        let mut heals = self.heal_tx.subscribe();
        let _ = heals.wait_for(|_| !self.partitioned(user_agent)).await;
    }
    /// Whether a request with this User-Agent would be held by a partition now.
    pub fn partitioned(&self, user_agent: &str) -> bool {
        self.cfg().partitions.iter().any(|m| matches(m, user_agent))
    }
    /// Closes every open connection of matching clients now, without an answer to anything in
    /// flight (watch streams end abruptly). The server keeps serving.
    pub fn drop_connections(&self, client: &str) {
        for conn in lock(&self.conns).values() {
            if matches(client, &lock(&conn.user_agent)) {
                conn.close();
            }
        }
    }

    fn close_healed(&self) {
        let conns: Vec<Arc<Conn>> = lock(&self.conns).values().filter(|c| c.held()).cloned().collect();
        for conn in conns {
            let ua = lock(&conn.user_agent).clone();
            if !self.partitioned(&ua) {
                conn.close();
            }
        }
    }

    /// Registers a new connection.
    pub(crate) fn connect(&self) -> Arc<Conn> {
        let id = self.next_conn.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn { id, user_agent: Mutex::new(String::new()), first_user_agent: std::sync::OnceLock::new(), held: AtomicBool::new(false), close: Notify::new() });
        lock(&self.conns).insert(id, conn.clone());
        conn
    }
    pub(crate) fn disconnect(&self, conn: &Conn) {
        lock(&self.conns).remove(&conn.id);
    }

    /// Holds the connection if a partition matches the request's User-Agent. Under the
    /// config lock, so a `heal` either comes before (not held) or finds it held (closed).
    pub(crate) fn hold_if_partitioned(&self, conn: &Conn, user_agent: &str) -> Hold {
        let c = self.cfg();
        if !c.partitions.iter().any(|m| matches(m, user_agent)) {
            return Hold::No;
        }
        conn.hold();
        if c.late_partitions.iter().any(|m| matches(m, user_agent)) { Hold::UntilHealed } else { Hold::Forever }
    }

    /// The latency to add for a request from this User-Agent.
    pub(crate) fn latency(&self, user_agent: &str) -> Duration {
        let c = self.cfg();
        let client = c.client_latency.iter().filter(|(m, _)| matches(m, user_agent)).map(|(_, d)| *d).max();
        c.latency + client.unwrap_or_default()
    }
    pub(crate) fn watch_drop_every(&self) -> Option<Duration> {
        self.cfg().watch_drop_every
    }
    pub(crate) fn drops(&self) -> watch::Receiver<u64> {
        self.drop_tx.subscribe()
    }

    /// The refusal of a request from this User-Agent, if its credentials are refused: the
    /// Status kube-apiserver sends (for 403, the one of a non-resource URL, `verb` being the
    /// request's verb).
    pub(crate) fn refusal(&self, user_agent: &str, verb: &str, path: &str) -> Option<ApiError> {
        let code = self.cfg().refusals.iter().find(|(m, _)| matches(m, user_agent)).map(|(_, code)| *code)?;
        Some(match code {
            401 => ApiError::new(401, "Unauthorized", "Unauthorized", None),
            _ => ApiError::new(
                403,
                "Forbidden",
                format!("forbidden: User \"system:anonymous\" cannot {verb} path {}", crate::goquote::Quoted(path)),
                Some(serde_json::json!({})),
            ),
        })
    }

    /// The Retry-After seconds of a 429 for a request from this User-Agent, if the dice say so.
    pub(crate) fn throttle(&self, user_agent: &str) -> Option<u64> {
        let (rate, secs) = self.cfg().throttles.iter().find(|(m, _, _)| matches(m, user_agent)).map(|(_, r, s)| (*r, *s))?;
        (rand::rng().random::<f64>() < rate).then_some(secs)
    }

    /// The injected error for a request, if the dice say so.
    pub(crate) fn roll(&self, verb: &str, group: &str, resource: &str, name: &str) -> Option<ApiError> {
        let (refusal, err_rate, unavailable_rate, conflict_rate) = {
            let c = self.cfg();
            let one = format!("{verb}/{resource}");
            let rate = |m: &HashMap<String, f64>| m.get(&one).or_else(|| m.get(verb)).or_else(|| m.get("*")).copied().unwrap_or(0.0);
            let refusal = c.refusal_rates.get(&one).or_else(|| c.refusal_rates.get(verb)).or_else(|| c.refusal_rates.get("*")).copied();
            (refusal, rate(&c.error_rates), rate(&c.unavailable_rates), if WRITE_VERBS.contains(&verb) { c.conflict_rate } else { 0.0 })
        };
        let mut rng = rand::rng();
        if let Some((code, rate)) = refusal
            && rng.random::<f64>() < rate
        {
            let what = crate::status::qualified(group, resource);
            return Some(match code {
                403 => ApiError::new(
                    403,
                    "Forbidden",
                    format!("{what} is forbidden: injected fault for {verb}"),
                    Some(serde_json::json!({"group": group, "kind": resource})),
                ),
                409 => ApiError::conflict(group, resource, name, "injected fault"),
                422 => ApiError::new(422, "Invalid", format!("{what} {} is invalid: injected fault for {verb}", crate::goquote::Quoted(name)), Some(serde_json::json!({"group": group, "kind": resource}))),
                _ => ApiError::new(code, "BadRequest", format!("injected fault for {verb}"), None),
            });
        }
        if err_rate > 0.0 && rng.random::<f64>() < err_rate {
            return Some(ApiError::internal(format!("injected fault for {verb}")));
        }
        if unavailable_rate > 0.0 && rng.random::<f64>() < unavailable_rate {
            return Some(ApiError::service_unavailable(format!("injected fault for {verb}")));
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
