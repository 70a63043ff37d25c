//! Leader election through a coordination.k8s.io Lease, with client-go's semantics (see
//! `lock.rs`): of several replicas only the holder reconciles; a holder that has not renewed
//! within the renew deadline stops every write before any other replica may acquire
//! (`fence.rs`), and a standby takes over once the record has not changed for a lease
//! duration as it observes it (or at once after a graceful release).

pub mod fence;
pub mod lock;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::process::metrics::Metrics;
pub use fence::Fence;
pub use lock::{Durations, LeaseLock, Plan};

#[derive(Clone, Debug)]
pub struct LeaderSettings {
    pub namespace: String,
    pub lease_name: String,
    /// This replica's name in the Lease's `holderIdentity`.
    pub identity: String,
    pub durations: Durations,
}

/// What happened to this replica's term, for the operator to act on.
#[derive(Clone, Debug, PartialEq)]
pub enum Term {
    Standby,
    Leading,
    /// It stopped leading: why, for the log and the Pod's Event.
    Lost(String),
}

/// A running election: `term` says whether this replica leads now; `fence` permits writes
/// only while it surely does.
pub struct Election {
    pub term: watch::Receiver<Term>,
    pub fence: Arc<Fence>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Election {
    /// Start competing for the Lease. `client` must bound every request (`fence::guarded` with an open fence).
    pub fn start(client: Client, settings: &LeaderSettings, request_timeout: Duration, metrics: Arc<Metrics>) -> Election {
        let fence = Fence::closed(request_timeout);
        let (term_tx, term) = watch::channel(Term::Standby);
        let (stop, stopped) = watch::channel(false);
        let elector = Elector {
            api: Api::namespaced(client, &settings.namespace),
            lock: LeaseLock::new(&settings.namespace, &settings.lease_name, &settings.identity, &settings.durations),
            durations: settings.durations,
            fence: fence.clone(),
            metrics,
            term: term_tx,
            last_written: None,
        };
        let task = tokio::spawn(elector.run(stopped));
        Election { term, fence, stop, task }
    }

    /// Stop competing; the Lease is released if held (only the record this replica last
    /// wrote: a Lease someone else wrote since is left alone), so a standby takes over at once.
    pub async fn resign(self) {
        self.fence.close();
        let _ = self.stop.send(true);
        if tokio::time::timeout(Duration::from_secs(5), self.task).await.is_err() {
            warn!("releasing the leader Lease timed out; it expires on its own");
        }
    }
}

struct Elector {
    api: Api<Lease>,
    lock: LeaseLock,
    durations: Durations,
    fence: Arc<Fence>,
    metrics: Arc<Metrics>,
    term: watch::Sender<Term>,
    /// The Lease as this replica last wrote it while leading.
    last_written: Option<Lease>,
}

/// How one try ended.
enum Tried {
    Held,
    HeldByAnother(String),
    Failed(String),
}

impl Elector {
    fn leading(&self) -> bool {
        *self.term.borrow() == Term::Leading
    }

    async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let lease = format!("{}/{}", self.lock.namespace, self.lock.name);
        info!(%lease, identity = %self.lock.identity, "standing by for the leader Lease");
        // Start of the last successful renewal: the term lasts until it + renew deadline.
        let mut renewed_at: Option<Instant> = None;
        loop {
            let started = Instant::now();
            let deadline = renewed_at.filter(|_| self.leading()).map(|at| at + self.durations.renew_deadline);
            // A try never outlives the renew deadline: leadership ends at it, not when a
            // request finally fails.
            let budget = deadline.map_or(self.durations.renew_deadline, |d| d.saturating_duration_since(started));
            let tried = tokio::select! {
                tried = tokio::time::timeout(budget, self.try_acquire_or_renew(started)) => {
                    tried.unwrap_or_else(|_| Tried::Failed(format!("no answer within {budget:?}")))
                }
                _ = stop.wait_for(|s| *s) => break,
            };
            match tried {
                Tried::Held => {
                    renewed_at = Some(started);
                    self.fence.lead_until(started + self.durations.renew_deadline);
                    self.metrics.lease_renewed(jiff::Timestamp::now());
                    if !self.leading() {
                        info!(%lease, identity = %self.lock.identity, "acquired the leader Lease: reconciling");
                        self.term.send_replace(Term::Leading);
                    }
                }
                Tried::HeldByAnother(holder) => {
                    if self.leading() {
                        self.lose(format!("the Lease {lease} is held by {holder}"));
                    }
                }
                Tried::Failed(error) => {
                    if self.leading() {
                        self.metrics.lease_renew_failed();
                        warn!(%lease, %error, "could not renew the leader Lease");
                    } else {
                        info!(%lease, %error, "could not read or take the leader Lease; trying again");
                    }
                }
            }
            self.check_deadline(renewed_at, &lease);
            // Wake at the next try, or at the deadline if it comes first.
            let jitter = self.durations.retry.mul_f64(rand::random::<f64>() * 0.2);
            let mut next = started + self.durations.retry + jitter;
            if self.leading()
                && let Some(at) = renewed_at
            {
                next = next.min(at + self.durations.renew_deadline);
            }
            tokio::select! {
                _ = tokio::time::sleep_until(next.into()) => {}
                _ = stop.wait_for(|s| *s) => break,
            }
            self.check_deadline(renewed_at, &lease);
        }
        self.release().await;
    }

    /// Past the renew deadline without a renewal: the term ends now.
    fn check_deadline(&mut self, renewed_at: Option<Instant>, lease: &str) {
        if self.leading() && renewed_at.is_none_or(|at| Instant::now() >= at + self.durations.renew_deadline) {
            let secs = self.durations.renew_deadline.as_secs_f64();
            self.lose(format!("the Lease {lease} was not renewed within the renew deadline ({secs}s)"));
        }
    }

    fn lose(&mut self, why: String) {
        self.fence.close();
        self.last_written = None;
        warn!(identity = %self.lock.identity, "stopped leading: {why}; standing by");
        self.term.send_replace(Term::Lost(why));
    }

    /// One read and at most one write, client-go's tryAcquireOrRenew.
    async fn try_acquire_or_renew(&mut self, started: Instant) -> Tried {
        let read = match self.api.get_opt(&self.lock.name).await {
            Ok(read) => read,
            Err(error) => return Tried::Failed(error.to_string()),
        };
        let written = match self.lock.plan(read.as_ref(), Instant::now(), jiff::Timestamp::now()) {
            Plan::HeldByAnother { holder, .. } => return Tried::HeldByAnother(holder),
            Plan::Create(lease) => self.api.create(&PostParams::default(), &lease).await,
            Plan::Update(lease) => self.api.replace(&self.lock.name, &PostParams::default(), &lease).await,
        };
        match written {
            Ok(lease) => {
                // Observed from when the try started: the conservative end.
                self.lock.wrote(&lease, started);
                self.last_written = Some(lease);
                Tried::Held
            }
            // Someone else moved first (409), or created it (also 409): back off.
            Err(error) => Tried::Failed(error.to_string()),
        }
    }

    async fn release(&mut self) {
        let Some(last) = self.last_written.take() else { return };
        if !self.leading() {
            return;
        }
        self.fence.close();
        let Some(released) = self.lock.release(&last, jiff::Timestamp::now()) else { return };
        match self.api.replace(&self.lock.name, &PostParams::default(), &released).await {
            Ok(_) => info!("released the leader Lease"),
            Err(error) => warn!(%error, "could not release the leader Lease; it expires on its own"),
        }
        self.term.send_replace(Term::Standby);
    }
}
