//! Generic object storage: JSON objects keyed by (group, resource, namespace, name), one
//! global monotonically increasing resourceVersion (as etcd revisions), and a bounded
//! history of change events for watch resume.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use serde_json::Value;
use tokio::sync::{Notify, watch};

use crate::registry::{GroupResource, Registry};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

#[derive(Debug, Clone)]
pub struct HistEvent {
    pub rv: u64,
    pub typ: EventType,
    pub gr: GroupResource,
    /// The object after the change (for DELETED: the last state, stamped with the deletion revision).
    pub object: Value,
    /// The object before the change (MODIFIED), for selector transitions.
    pub prev: Option<Value>,
}

pub type ObjKey = (String, String);

pub struct State {
    pub objects: HashMap<GroupResource, BTreeMap<ObjKey, Value>>,
    pub rv: u64,
    pub history: VecDeque<HistEvent>,
    pub history_cap: usize,
    /// The revision of the newest event dropped from the history (0: none dropped).
    pub compacted_rv: u64,
    pub registry: Registry,
}

pub fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata").and_then(|m| m.get(field)).and_then(Value::as_str).unwrap_or("")
}

pub fn obj_key(obj: &Value) -> ObjKey {
    (meta_str(obj, "namespace").to_string(), meta_str(obj, "name").to_string())
}

impl State {
    pub fn new(history_cap: usize) -> Self {
        State { objects: HashMap::new(), rv: 1, history: VecDeque::new(), history_cap, compacted_rv: 0, registry: Registry::with_builtins() }
    }

    pub fn get(&self, gr: &GroupResource, ns: &str, name: &str) -> Option<&Value> {
        self.objects.get(gr)?.get(&(ns.to_string(), name.to_string()))
    }

    pub fn list<'a>(&'a self, gr: &GroupResource, ns: Option<&'a str>) -> impl Iterator<Item = &'a Value> + 'a {
        self.objects.get(gr).into_iter().flat_map(move |m| m.iter().filter(move |((n, _), _)| ns.is_none_or(|x| x == n)).map(|(_, v)| v))
    }

    fn push(&mut self, ev: HistEvent) {
        self.history.push_back(ev);
        while self.history.len() > self.history_cap {
            if let Some(old) = self.history.pop_front() {
                self.compacted_rv = old.rv;
            }
        }
    }

    /// Stores `obj` at a new revision (ADDED or MODIFIED) and returns the stored object.
    pub fn put(&mut self, gr: &GroupResource, mut obj: Value) -> Value {
        self.rv += 1;
        let rv = self.rv;
        obj["metadata"]["resourceVersion"] = rv.to_string().into();
        let key = obj_key(&obj);
        let prev = self.objects.entry(gr.clone()).or_default().insert(key.clone(), obj.clone());
        let typ = if prev.is_some() { EventType::Modified } else { EventType::Added };
        self.push(HistEvent { rv, typ, gr: gr.clone(), object: obj.clone(), prev });
        obj
    }

    /// Removes an object (DELETED) and returns its last state stamped with the deletion revision.
    pub fn remove(&mut self, gr: &GroupResource, ns: &str, name: &str) -> Option<Value> {
        let mut obj = self.objects.get_mut(gr)?.remove(&(ns.to_string(), name.to_string()))?;
        self.rv += 1;
        let rv = self.rv;
        obj["metadata"]["resourceVersion"] = rv.to_string().into();
        self.push(HistEvent { rv, typ: EventType::Deleted, gr: gr.clone(), object: obj.clone(), prev: None });
        Some(obj)
    }

    /// Events newer than `after`, or Err(compacted) if `after` is older than the history.
    pub fn events_after(&self, after: u64) -> Result<impl Iterator<Item = &HistEvent>, u64> {
        if after < self.compacted_rv {
            return Err(self.compacted_rv);
        }
        let start = self.history.partition_point(|e| e.rv <= after);
        Ok(self.history.range(start..))
    }

    /// All objects, for GC and controllers.
    pub fn all(&self) -> impl Iterator<Item = (&GroupResource, &Value)> {
        self.objects.iter().flat_map(|(gr, m)| m.values().map(move |v| (gr, v)))
    }
}

pub struct Store {
    state: Mutex<State>,
    /// The newest revision, for watchers.
    pub rv_tx: watch::Sender<u64>,
    /// Wakes the garbage collector and other controllers.
    pub controllers: Notify,
    /// Watch events sent to every watcher so far (bookmarks and errors included), and their
    /// bytes: what the clients had to decode (for benchmarks).
    pub watch_events_sent: AtomicU64,
    pub watch_bytes_sent: AtomicU64,
    /// Open watches by stored resource: the watchers a write fans out to (`cost.rs`).
    watchers: Mutex<HashMap<GroupResource, usize>>,
}

/// One open watch of a resource, counted while it lives.
pub struct Watching {
    store: std::sync::Arc<Store>,
    gr: GroupResource,
}

impl Watching {
    pub fn new(store: std::sync::Arc<Store>, gr: GroupResource) -> Watching {
        *store.watchers.lock().unwrap_or_else(|e| e.into_inner()).entry(gr.clone()).or_default() += 1;
        Watching { store, gr }
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        if let Some(n) = self.store.watchers.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&self.gr) {
            *n = n.saturating_sub(1);
        }
    }
}

impl Store {
    pub fn new(history_cap: usize) -> Self {
        let (rv_tx, _) = watch::channel(1);
        Store {
            state: Mutex::new(State::new(history_cap)),
            rv_tx,
            controllers: Notify::new(),
            watch_events_sent: AtomicU64::new(0),
            watch_bytes_sent: AtomicU64::new(0),
            watchers: Mutex::new(HashMap::new()),
        }
    }

    /// Counts one watch event line sent to a watcher.
    pub fn watch_sent(&self, bytes: usize) {
        self.watch_events_sent.fetch_add(1, Ordering::Relaxed);
        self.watch_bytes_sent.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Open watches of this stored resource now.
    pub fn watchers(&self, gr: &GroupResource) -> usize {
        self.watchers.lock().unwrap_or_else(|e| e.into_inner()).get(gr).copied().unwrap_or(0)
    }

    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publishes the newest revision to watchers and wakes the controllers.
    pub fn changed(&self, rv: u64) {
        self.rv_tx.send_if_modified(|cur| {
            if *cur != rv {
                *cur = rv;
                true
            } else {
                false
            }
        });
        self.controllers.notify_one();
    }
}
