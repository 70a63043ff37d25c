//! Shards: every replica works. Hikawas fall into a fixed number of shards (`assign.rs`);
//! each shard is a Lease held with the leader election's guarantee (`elector.rs`: renew
//! deadline, fence, expiry as observed here); a replica decides only for the shards it
//! holds. The balancer aims each replica at its fair share of the live members
//! (`members.rs`): it takes free or expired shards up to it and hands back one shard at a
//! time above it, by draining (no new decisions for the shard, the ones in flight finish)
//! and then releasing the Lease, so the taker starts only after the last write.
//!
//! [`ShardTable`] is what the reconcile path sees: whether a shard is held, a guard counting
//! its decisions in flight, and the shard's fenced client (a write for a shard goes through
//! that shard's fence, whatever path it takes).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kube::Client;
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::assign::{self, Moves};
use super::elector::{Control, Election, Seen, Term};
use super::fence::{self, Fence};
use super::lock::{Durations, LeaseLock};
use super::members::{self, Membership};
use crate::process::metrics::Metrics;

/// How a replica competes for shards.
#[derive(Clone, Debug)]
pub struct ShardSettings {
    pub namespace: String,
    /// Leases are `<prefix>-shard-NN` and `<prefix>-members`.
    pub lease_prefix: String,
    /// This replica's name in the Leases.
    pub identity: String,
    pub durations: Durations,
    pub count: u16,
}

const IDLE: u8 = 0;
const ACTIVE: u8 = 1;
const DRAINING: u8 = 2;

struct Slot {
    state: AtomicU8,
    in_flight: AtomicUsize,
    /// Writes for this shard: fenced by its Lease.
    client: Client,
    fence: Arc<Fence>,
}

/// The shards as the reconcile path sees them.
pub struct ShardTable {
    pub count: u16,
    /// This replica's name (in the Leases and in each Hikawa's status).
    pub identity: String,
    slots: Vec<Slot>,
    held: watch::Sender<BTreeSet<u16>>,
    taken: broadcast::Sender<u16>,
}

/// Whether a decision for a shard may start.
pub enum Entered {
    Decide(InFlight),
    /// Another replica's shard (or one being handed over): not decided here.
    NotHeld,
    /// Held, but its Lease's renewal is late: its writes would be refused. Soon again.
    NotNow,
}

/// One decision in flight for a shard: the shard is handed over only once none is left.
pub struct InFlight {
    table: Arc<ShardTable>,
    shard: u16,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.table.slots[self.shard as usize].in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl ShardTable {
    fn new(count: u16, identity: &str, fences: Vec<Arc<Fence>>, client: impl Fn(&Arc<Fence>) -> Client, state: u8) -> Arc<Self> {
        let count = count.clamp(1, assign::MAX_SHARDS);
        let slots = fences
            .into_iter()
            .take(count as usize)
            .map(|fence| Slot { state: AtomicU8::new(state), in_flight: AtomicUsize::new(0), client: client(&fence), fence })
            .collect();
        let held = if state == ACTIVE { (0..count).collect() } else { BTreeSet::new() };
        Arc::new(ShardTable {
            count,
            identity: identity.into(),
            slots,
            held: watch::Sender::new(held),
            taken: broadcast::Sender::new(4 * assign::MAX_SHARDS as usize),
        })
    }

    /// One process without election: it holds every shard, always.
    pub fn all(count: u16, identity: &str, client: Client) -> Arc<Self> {
        let count = count.clamp(1, assign::MAX_SHARDS);
        let fences = (0..count).map(|_| Fence::open(Duration::ZERO)).collect();
        Self::new(count, identity, fences, |_| client.clone(), ACTIVE)
    }

    pub fn shard_of(&self, uid: &str) -> u16 {
        assign::shard_of(uid, self.count)
    }

    /// The shard label's value for children of `shard`.
    pub fn label(&self, shard: u16) -> String {
        assign::label_value(shard, self.count)
    }

    /// Whether this replica decides for `shard` now (held, not being handed over).
    pub fn holds(&self, shard: u16) -> bool {
        self.slots.get(shard as usize).is_some_and(|s| s.state.load(Ordering::SeqCst) == ACTIVE)
    }

    /// Start a decision for `shard`, if this replica decides for it.
    pub fn enter(self: &Arc<Self>, shard: u16) -> Entered {
        let Some(slot) = self.slots.get(shard as usize) else { return Entered::NotHeld };
        slot.in_flight.fetch_add(1, Ordering::SeqCst);
        // Counted first, checked after: a drain that starts in between sees this one.
        let guard = InFlight { table: self.clone(), shard };
        if slot.state.load(Ordering::SeqCst) != ACTIVE {
            return Entered::NotHeld;
        }
        // Held, but its writes would be refused now (a renewal is late): deciding now would
        // only waste the decision.
        if !slot.fence.permits(Instant::now()) {
            return Entered::NotNow;
        }
        Entered::Decide(guard)
    }

    /// The client for `shard`'s writes (refused unless its Lease is surely held).
    pub fn client(&self, shard: u16) -> &Client {
        &self.slots[shard as usize].client
    }

    /// The shards held (deciding or draining), as they change: the children watched.
    pub fn held(&self) -> watch::Receiver<BTreeSet<u16>> {
        self.held.subscribe()
    }

    /// Shards as they are taken, from now on: their Hikawas are decided from the API server's
    /// state, their rule sets' status is written. Ends when the table does.
    pub fn taken(&self) -> impl futures::Stream<Item = u16> + Send + use<> {
        futures::stream::unfold(self.taken.subscribe(), |mut rx| async move {
            loop {
                match rx.recv().await {
                    Ok(shard) => return Some((shard, rx)),
                    // Some were overwritten unread; the newer ones follow.
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        })
    }

    pub fn held_count(&self) -> usize {
        self.slots.iter().filter(|s| s.state.load(Ordering::SeqCst) != IDLE).count()
    }

    fn set(&self, shard: u16, state: u8) {
        self.slots[shard as usize].state.store(state, Ordering::SeqCst);
        let held: BTreeSet<u16> = (0..self.count).filter(|&s| self.slots[s as usize].state.load(Ordering::SeqCst) != IDLE).collect();
        self.held.send_if_modified(|h| {
            let changed = *h != held;
            *h = held;
            changed
        });
    }

    fn in_flight(&self, shard: u16) -> usize {
        self.slots[shard as usize].in_flight.load(Ordering::SeqCst)
    }
}

/// A replica competing for shards.
pub struct Sharding {
    pub table: Arc<ShardTable>,
    /// Why shards were lost (past their renew deadline), for an Event on the Pod.
    pub lost: mpsc::UnboundedReceiver<String>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
    /// The members' beat; it leaves the members Lease once stopped.
    beat: JoinHandle<()>,
}

impl Sharding {
    /// Start: one election per shard, the members' beat and the balancer. `raw` is what each
    /// shard's fenced client wraps; `client` bounds every request (the Leases' own).
    /// `record`: this replica's default module record, kept with its beat (`members.rs`).
    pub fn start(raw: Client, client: Client, settings: &ShardSettings, request_timeout: Duration, metrics: Arc<Metrics>, record: members::Record) -> Sharding {
        let count = settings.count.clamp(1, assign::MAX_SHARDS);
        let mut elections = Vec::new();
        let mut controls = Vec::new();
        for shard in 0..count {
            let (control, controlled) = watch::channel(Control::Keep);
            let name = assign::lease_name(&settings.lease_prefix, shard, count);
            let lock = LeaseLock::new(&settings.namespace, &name, &settings.identity, &settings.durations);
            elections.push(Election::start(client.clone(), lock, settings.durations, request_timeout, metrics.clone(), controlled));
            controls.push(control);
        }
        let fences: Vec<Arc<Fence>> = elections.iter().map(|e| e.fence.clone()).collect();
        let table = ShardTable::new(count, &settings.identity, fences, |fence| fence::guarded(raw.clone(), fence.clone()), IDLE);
        let (live_tx, live) = watch::channel(1usize);
        let (stop, stopped) = watch::channel(false);
        let beat = tokio::spawn(members::run(
            client,
            settings.namespace.clone(),
            assign::members_lease_name(&settings.lease_prefix),
            Membership::new(&settings.identity, settings.durations.lease),
            settings.durations.retry,
            record,
            live_tx,
            stopped.clone(),
        ));
        let (lost_tx, lost) = mpsc::unbounded_channel();
        metrics.set_shards(count, 0);
        let balancer = Balancer {
            table: table.clone(),
            elections,
            controls,
            live,
            durations: settings.durations,
            metrics,
            lost: lost_tx,
            terms: vec![Term::Standby; count as usize],
            releasing: None,
        };
        let task = tokio::spawn(balancer.run(stopped));
        Sharding { table, lost, stop, task, beat }
    }

    /// Hand every shard back (drained first) and leave the members, so the others take over
    /// at once rather than a lease duration later.
    pub async fn resign(self) {
        let _ = self.stop.send(true);
        // Drain (5 s at most), then each release waits out its writes in flight (a request
        // timeout at most) before one PUT: well within the pod's 30 s grace period.
        // Meanwhile the beat leaves the members (a few requests).
        if tokio::time::timeout(Duration::from_secs(20), async { futures::join!(self.task, self.beat) }).await.is_err() {
            warn!("handing the shards back timed out; their Leases expire on their own");
        }
    }
}

struct Balancer {
    table: Arc<ShardTable>,
    elections: Vec<Election>,
    controls: Vec<watch::Sender<Control>>,
    live: watch::Receiver<usize>,
    durations: Durations,
    metrics: Arc<Metrics>,
    lost: mpsc::UnboundedSender<String>,
    /// Each shard's term as last seen.
    terms: Vec<Term>,
    /// The shard being handed over, and since when.
    releasing: Option<(u16, Instant)>,
}

impl Balancer {
    async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let tick = (self.durations.retry / 4).clamp(Duration::from_millis(20), Duration::from_millis(250));
        loop {
            self.follow_terms();
            self.rebalance();
            tokio::select! {
                _ = tokio::time::sleep(tick) => {}
                _ = stop.wait_for(|s| *s) => break,
            }
        }
        self.hand_everything_back().await;
    }

    fn control(&self, shard: u16, control: Control) {
        self.controls[shard as usize].send_if_modified(|c| std::mem::replace(c, control) != control);
    }

    /// Each shard's term: taken, lost, handed back.
    fn follow_terms(&mut self) {
        let mut lost = Vec::new();
        for shard in 0..self.table.count {
            let term = self.elections[shard as usize].term.borrow().clone();
            let was = std::mem::replace(&mut self.terms[shard as usize], term.clone());
            if was == term {
                continue;
            }
            match (&was, &term) {
                (_, Term::Leading) => {
                    self.table.set(shard, ACTIVE);
                    self.metrics.shard_handover("taken");
                    let _ = self.table.taken.send(shard);
                }
                (Term::Leading, Term::Lost(why)) => {
                    self.table.set(shard, IDLE);
                    self.metrics.shard_handover("lost");
                    self.control(shard, Control::Keep);
                    if self.releasing.is_some_and(|(s, _)| s == shard) {
                        self.releasing = None;
                    }
                    lost.push(format!("shard {shard}: {why}"));
                }
                (Term::Leading, Term::Standby) => {
                    self.table.set(shard, IDLE);
                    self.metrics.shard_handover("released");
                    self.control(shard, Control::Keep);
                    if self.releasing.is_some_and(|(s, _)| s == shard) {
                        self.releasing = None;
                    }
                }
                _ => {}
            }
        }
        self.metrics.set_shards(self.table.count, self.table.held_count());
        if !lost.is_empty() {
            let why = lost.join("; ");
            warn!(shards = lost.len(), "stopped deciding for shards past their renew deadline: {why}");
            let _ = self.lost.send(why);
        }
    }

    fn rebalance(&mut self) {
        let count = self.table.count;
        let fair = assign::fair_share(count, *self.live.borrow());
        let mut held = BTreeSet::new();
        let mut taking = BTreeSet::new();
        let mut takeable = BTreeSet::new();
        for shard in 0..count {
            let i = shard as usize;
            let leading = self.terms[i] == Term::Leading;
            let seen = self.elections[i].seen.borrow().clone();
            let control = *self.controls[i].borrow();
            if leading && self.table.slots[i].state.load(Ordering::SeqCst) == ACTIVE {
                held.insert(shard);
            } else if !leading && control == Control::Take {
                if matches!(seen, Seen::HeldBy(_)) {
                    // Someone else was quicker: stop trying for it.
                    self.control(shard, Control::Keep);
                } else {
                    taking.insert(shard);
                }
            }
            if !leading && seen == Seen::Takeable {
                takeable.insert(shard);
            }
        }
        let Moves { take, release } = assign::balance(&held, &taking, &takeable, fair, self.releasing.is_some());
        for shard in take {
            self.control(shard, Control::Take);
        }
        if let Some(shard) = release {
            info!(shard, fair_share = fair, held = held.len(), "handing a shard back: draining its decisions first");
            self.table.set(shard, DRAINING);
            self.releasing = Some((shard, Instant::now()));
        }
        // Drained (or its decisions outlived the renew deadline: their writes are fenced
        // anyway): let the Lease go.
        if let Some((shard, since)) = self.releasing
            && (self.table.in_flight(shard) == 0 || since.elapsed() >= self.durations.renew_deadline)
        {
            self.control(shard, Control::Release);
        }
    }

    /// Shutting down: no new decisions, the ones in flight finish, every Lease released.
    async fn hand_everything_back(mut self) {
        for shard in 0..self.table.count {
            if self.table.slots[shard as usize].state.load(Ordering::SeqCst) == ACTIVE {
                self.table.set(shard, DRAINING);
            }
        }
        let started = Instant::now();
        while (0..self.table.count).any(|s| self.table.in_flight(s) > 0) && started.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let held = self.table.held_count();
        let elections = std::mem::take(&mut self.elections);
        futures::future::join_all(elections.into_iter().map(Election::resign)).await;
        for shard in 0..self.table.count {
            self.table.set(shard, IDLE);
        }
        if held > 0 {
            info!(shards = held, "handed every shard back");
        }
        self.metrics.set_shards(self.table.count, 0);
    }
}
