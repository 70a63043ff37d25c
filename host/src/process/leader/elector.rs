//! One Lease, competed for with client-go's semantics (see `lock.rs`): a holder that has not
//! renewed within the renew deadline stops every write before any other replica may acquire
//! (`fence.rs`), and another replica takes over once the record has not changed for a lease
//! duration as it observes it (or at once after a graceful release). Whether this replica
//! takes the Lease when it may, keeps it, or hands it back is the balancer's call
//! ([`Control`]); what it saw of the Lease goes back to it ([`Seen`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::fence::Fence;
use super::lock::{Durations, LeaseLock, Plan};
use crate::process::metrics::Metrics;

/// What the balancer wants of one Lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// Take it when it is free or expired; keep it.
    Take,
    /// Keep it if held; take it only from a holder whose Lease expired.
    Keep,
    /// Hand it back if held (its writes are drained); do not take it.
    Release,
}

/// The Lease as this replica last read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Not read yet, or the last read failed.
    Unknown,
    /// Held by this replica.
    Mine,
    /// Free or released: whoever wants it may take it.
    Takeable,
    /// Held by another replica that has not renewed it for a lease duration, as observed
    /// here: that replica is gone or cut off, and its work waits.
    Expired,
    /// Held by another replica, not expired as observed here.
    HeldBy(String),
}

/// What happened to this replica's term, for the operator to act on.
#[derive(Clone, Debug, PartialEq)]
pub enum Term {
    Standby,
    Leading,
    /// It stopped leading: why, for the log and the Pod's Event.
    Lost(String),
}

/// A running election for one Lease: `term` says whether this replica holds it now; `fence`
/// permits writes only while it surely does; `seen` is the Lease as last read.
pub struct Election {
    pub term: watch::Receiver<Term>,
    pub seen: watch::Receiver<Seen>,
    pub fence: Arc<Fence>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Election {
    /// Start competing for `lock`'s Lease, as `control` says. `client` must bound every
    /// request (`fence::guarded` with an open fence).
    pub fn start(client: Client, lock: LeaseLock, durations: Durations, request_timeout: Duration, metrics: Arc<Metrics>, control: watch::Receiver<Control>) -> Election {
        let fence = Fence::closed(request_timeout);
        let (term_tx, term) = watch::channel(Term::Standby);
        let (seen_tx, seen) = watch::channel(Seen::Unknown);
        let (stop, stopped) = watch::channel(false);
        let elector = Elector {
            api: Api::namespaced(client, &lock.namespace),
            lock,
            durations,
            fence: fence.clone(),
            metrics,
            term: term_tx,
            seen: seen_tx,
            control,
            last_written: None,
            renew_blind: false,
        };
        let task = tokio::spawn(elector.run(stopped));
        Election { term, seen, fence, stop, task }
    }

    /// Stop competing; the Lease is released if held (only the record this replica last
    /// wrote: a Lease someone else wrote since is left alone), so a standby takes over at once.
    pub async fn resign(self) {
        self.fence.close();
        let _ = self.stop.send(true);
        // The release waits out the writes in flight (a request timeout at most), then one PUT.
        if tokio::time::timeout(self.fence.request_timeout() + Duration::from_secs(5), self.task).await.is_err() {
            warn!("releasing a Lease timed out; it expires on its own");
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
    seen: watch::Sender<Seen>,
    control: watch::Receiver<Control>,
    /// The Lease as this replica last wrote it while leading.
    last_written: Option<Lease>,
    /// The last write succeeded: the next renewal needs no read.
    renew_blind: bool,
}

/// How one try ended.
enum Tried {
    Held,
    HeldByAnother { holder: String, expires_in: Duration },
    /// Free or expired, and not wanted.
    Left { expired: bool },
    Failed(String),
}

impl Elector {
    fn leading(&self) -> bool {
        *self.term.borrow() == Term::Leading
    }

    async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let lease = format!("{}/{}", self.lock.namespace, self.lock.name);
        tracing::debug!(%lease, identity = %self.lock.identity, "watching the Lease");
        // Start of the last successful renewal: the term lasts until it + renew deadline.
        let mut renewed_at: Option<Instant> = None;
        loop {
            if *self.control.borrow_and_update() == Control::Release && self.leading() {
                self.release().await;
                renewed_at = None;
            }
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
            // Another's Lease that expires before the next try: try right then.
            let mut expires_at = None;
            match tried {
                Tried::Held => {
                    renewed_at = Some(started);
                    self.fence.lead_until(started + self.durations.renew_deadline);
                    self.metrics.lease_renewed(jiff::Timestamp::now());
                    self.seen.send_replace(Seen::Mine);
                    if !self.leading() {
                        info!(%lease, identity = %self.lock.identity, "acquired the Lease");
                        self.term.send_replace(Term::Leading);
                    }
                }
                Tried::HeldByAnother { holder, expires_in } => {
                    expires_at = Some(Instant::now() + expires_in + Duration::from_millis(10));
                    self.seen.send_replace(Seen::HeldBy(holder.clone()));
                    if self.leading() {
                        self.lose(format!("the Lease {lease} is held by {holder}"));
                    }
                }
                Tried::Left { expired } => {
                    self.seen.send_replace(if expired { Seen::Expired } else { Seen::Takeable });
                }
                Tried::Failed(error) => {
                    self.seen.send_replace(Seen::Unknown);
                    if self.leading() {
                        self.metrics.lease_renew_failed();
                        warn!(%lease, %error, "could not renew the Lease");
                    } else {
                        tracing::debug!(%lease, %error, "could not read or take the Lease; trying again");
                    }
                }
            }
            self.check_deadline(renewed_at, &lease);
            // Wake at the next try, or at the deadline if it comes first.
            let jitter = self.durations.retry.mul_f64(rand::random::<f64>() * 0.2);
            let mut next = started + self.durations.retry + jitter;
            if let Some(at) = expires_at {
                next = next.min(at);
            }
            if self.leading()
                && let Some(at) = renewed_at
            {
                next = next.min(at + self.durations.renew_deadline);
            }
            // The balancer's call wakes it early: a Lease to take or to hand back.
            let mut control = self.control.clone();
            tokio::select! {
                _ = tokio::time::sleep_until(next.into()) => {}
                _ = control.changed() => {}
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
    /// (A holder whose last renewal succeeded renews from the record it wrote, without
    /// reading it first: the update carries that resourceVersion, so it fails with a
    /// conflict if anyone wrote since, and the next try reads. Half the requests per shard.)
    async fn try_acquire_or_renew(&mut self, started: Instant) -> Tried {
        let read = match self.last_written.clone().filter(|_| self.leading() && self.renew_blind) {
            Some(own) => Some(own),
            None => match self.api.get_opt(&self.lock.name).await {
                Ok(read) => read,
                Err(error) => return Tried::Failed(error.to_string()),
            },
        };
        // Only a renewal that succeeds earns the next one without a read.
        self.renew_blind = false;
        let plan = self.lock.plan(read.as_ref(), Instant::now(), jiff::Timestamp::now());
        if !matches!(plan, Plan::HeldByAnother { .. }) && !self.leading() {
            let holder = read.as_ref().and_then(|l| l.spec.as_ref()?.holder_identity.clone()).filter(|h| !h.is_empty());
            let expired = holder.is_some_and(|h| h != self.lock.identity);
            // Another replica's Lease that expired is taken at once unless it is being handed
            // back: its holder is gone or cut off, and its Hikawas wait (the balancer hands
            // back what exceeds the share afterwards). A free one only when the balancer says.
            let take = match *self.control.borrow() {
                Control::Take => true,
                Control::Keep => expired,
                Control::Release => false,
            };
            if !take {
                return Tried::Left { expired };
            }
        }
        let written = match plan {
            Plan::HeldByAnother { holder, expires_in } => return Tried::HeldByAnother { holder, expires_in },
            Plan::Create(lease) => self.api.create(&PostParams::default(), &lease).await,
            Plan::Update(lease) => self.api.replace(&self.lock.name, &PostParams::default(), &lease).await,
        };
        match written {
            Ok(lease) => {
                // Observed from when the try started: the conservative end.
                self.lock.wrote(&lease, started);
                self.last_written = Some(lease);
                self.renew_blind = true;
                Tried::Held
            }
            // Someone else moved first (409), or created it (also 409): back off.
            Err(error) => Tried::Failed(error.to_string()),
        }
    }

    /// Hand the Lease back: only the record this replica last wrote (if anyone wrote since,
    /// the update is refused and the Lease expires on its own). The fence closes first.
    async fn release(&mut self) {
        if !self.leading() {
            return;
        }
        self.fence.close();
        // The taker starts at once: every write this term let through must have ended first
        // (a drained shard has none left; one whose decisions outlived the drain, or a rule
        // set's status, may). Each ends within the request timeout.
        self.fence.quiet().await;
        let last = self.last_written.take();
        if let Some(released) = last.and_then(|last| self.lock.release(&last, jiff::Timestamp::now())) {
            let lease = format!("{}/{}", self.lock.namespace, self.lock.name);
            match self.api.replace(&self.lock.name, &PostParams::default(), &released).await {
                Ok(_) => info!(%lease, "released the Lease"),
                Err(error) => warn!(%lease, %error, "could not release the Lease; it expires on its own"),
            }
        }
        self.seen.send_replace(Seen::Unknown);
        self.term.send_replace(Term::Standby);
    }
}
