//! What a request costs a real kube-apiserver, charged as time. A fixed latency (`faults`)
//! makes every client wait alike; a real server's time goes into work that grows with what is
//! written: it decodes the body, serialises the object, computes its managedFields, writes it
//! to etcd and encodes it once more for every watcher it fans out to. And it has few cores: a
//! request waits for one while others work. So a request here costs
//!
//!   base + per_object_kib × object + per_body_kib × body + per_managed_fields_kib × managedFields
//!        + watchers × (per_watcher + per_watcher_kib × object)
//!
//! (object: the JSON answered, managedFields included; body: what the client sent; watchers:
//! the open watches of the written resource), and is served on one of `lanes` lanes (the
//! server's cores), first come first served: it waits until a lane is free, then holds it for
//! its cost. Its answer is sent when its lane lets it go. The lanes are bookkeeping, not
//! threads: `Lanes::book` computes when a request ends from the time it came and the lanes'
//! bookings, so the model is tested with a clock of its own (tests/cost.rs).
//!
//! Calibrated against kube-apiserver v1.32 (`KUBE_APISERVER_1_32`; docs/benchmarks.md says
//! how close it comes): see `zundoko-apiserver --cost-model`.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// A request's price list. Times per KiB are of JSON bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostModel {
    /// Requests served at once (the server's cores); at least 1.
    pub lanes: usize,
    /// What every request costs: authentication, routing, admission, the etcd round trip.
    pub base: Duration,
    /// Serialising the object answered (and, for a write, stored).
    pub per_object_kib: Duration,
    /// Decoding the body the client sent (a patch: applying it too).
    pub per_body_kib: Duration,
    /// Computing and storing managedFields (writes only).
    pub per_managed_fields_kib: Duration,
    /// Every open watch of the written resource gets the change (writes only).
    pub per_watcher: Duration,
    /// ... encoded for it.
    pub per_watcher_kib: Duration,
}

/// kube-apiserver v1.32, etcd embedded, on 2 cores shared with its client: calibrated on the
/// writes of ../shared/measured/real-apiserver-write-latency.json (docs/benchmarks.md).
pub const KUBE_APISERVER_1_32: CostModel = CostModel {
    lanes: 2,
    base: Duration::from_micros(1_160),
    per_object_kib: Duration::from_micros(400),
    per_body_kib: Duration::from_micros(300),
    per_managed_fields_kib: Duration::from_micros(1_000),
    per_watcher: Duration::from_micros(350),
    per_watcher_kib: Duration::from_micros(100),
};

/// Nothing charged, on one lane: what the --cost-* flags start from without a preset.
pub const FREE: CostModel = CostModel {
    lanes: 1,
    base: Duration::ZERO,
    per_object_kib: Duration::ZERO,
    per_body_kib: Duration::ZERO,
    per_managed_fields_kib: Duration::ZERO,
    per_watcher: Duration::ZERO,
    per_watcher_kib: Duration::ZERO,
};

/// The requests of one kind so far: how many were answered, their durations' sum and their
/// facts' sums (the means say what the model charged them for).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub answered: u64,
    pub duration: Duration,
    pub facts: Facts,
}

impl Tally {
    pub fn add(&mut self, duration: Duration, f: &Facts) {
        self.merge(&Tally { answered: 1, duration, facts: *f });
    }

    /// This and `other` together.
    pub fn merge(&mut self, other: &Tally) {
        self.answered += other.answered;
        self.duration += other.duration;
        self.facts.object_bytes += other.facts.object_bytes;
        self.facts.body_bytes += other.facts.body_bytes;
        self.facts.managed_fields_bytes += other.facts.managed_fields_bytes;
        self.facts.watchers += other.facts.watchers;
    }
}

/// What the model needs to know of one request, once it was handled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Facts {
    /// Bytes of the object answered (a list: all of it).
    pub object_bytes: usize,
    /// Bytes of the request's body.
    pub body_bytes: usize,
    /// Bytes of the written object's `metadata.managedFields` (0 for a read).
    pub managed_fields_bytes: usize,
    /// Open watches of the written resource (0 for a read).
    pub watchers: usize,
}

fn times_kib(per_kib: Duration, bytes: usize) -> Duration {
    per_kib.mul_f64(bytes as f64 / 1024.0)
}

impl CostModel {
    /// How long a lane works on a request with these facts.
    pub fn cost(&self, f: &Facts) -> Duration {
        self.base
            + times_kib(self.per_object_kib, f.object_bytes)
            + times_kib(self.per_body_kib, f.body_bytes)
            + times_kib(self.per_managed_fields_kib, f.managed_fields_bytes)
            + (self.per_watcher + times_kib(self.per_watcher_kib, f.object_bytes)) * f.watchers as u32
    }
}

/// When each lane is next free.
#[derive(Debug, Clone)]
pub struct Lanes {
    free_at: Vec<Instant>,
}

impl Lanes {
    pub fn new(lanes: usize, now: Instant) -> Lanes {
        Lanes { free_at: vec![now; lanes.max(1)] }
    }

    /// Books a request that came at `now` and costs `cost` on the lane free first; returns when
    /// it is done (`now + cost` if a lane was free, later if every lane was busy).
    pub fn book(&mut self, now: Instant, cost: Duration) -> Instant {
        let Some(lane) = self.free_at.iter_mut().min() else { return now + cost };
        let done = (*lane).max(now) + cost;
        *lane = done;
        done
    }
}

/// The model of a running server: none (no charge) until one is set.
#[derive(Default)]
pub struct Cost {
    charging: Mutex<Option<(CostModel, Lanes)>>,
}

impl Cost {
    /// Charges every request after this by `model` (`None`: nothing, as before).
    pub fn set_model(&self, model: Option<CostModel>) {
        *self.charging.lock().unwrap_or_else(|e| e.into_inner()) = model.map(|m| (m, Lanes::new(m.lanes, Instant::now())));
    }

    pub fn model(&self) -> Option<CostModel> {
        self.charging.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|(m, _)| *m)
    }

    /// Waits until the request's lane lets it go (at once without a model).
    pub async fn charge(&self, facts: &Facts) {
        let done = {
            let mut charging = self.charging.lock().unwrap_or_else(|e| e.into_inner());
            let Some((model, lanes)) = charging.as_mut() else { return };
            lanes.book(Instant::now(), model.cost(facts))
        };
        tokio::time::sleep_until(done).await;
    }
}

/// Bytes of an object's `metadata.managedFields` as JSON (0 without).
pub fn managed_fields_bytes(object: &serde_json::Value) -> usize {
    object.pointer("/metadata/managedFields").map_or(0, |mf| serde_json::to_vec(mf).map_or(0, |b| b.len()))
}
