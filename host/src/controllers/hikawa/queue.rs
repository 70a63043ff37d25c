//! The controller's queue as controller-runtime's users read it (`workqueue_depth`,
//! `workqueue_queue_duration_seconds`): kube-runtime's Controller keeps its scheduler to itself,
//! so the queue is followed from outside it. A Hikawa is due from the moment something asks
//! for its reconcile (a watch event of it or of a child, a wake-up: the trigger streams pass
//! here first) or its requeue comes (the reconcile said when, through `requeue`), whichever is
//! first, as the scheduler keeps one entry per object at its earliest time; it stops being due
//! when its reconcile starts. The wait is from due to start: the time a reconcile spent
//! waiting for one of the controller's slots, or behind its own reconcile still running. The
//! depth is how many are due and not started.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::runtime::controller::Action;

use crate::crd::Hikawa;

/// A Hikawa's place in the queue: (namespace, name), as the scheduler tells objects apart.
pub type Key = (String, String);

pub fn key_of(hikawa: &impl ResourceExt) -> Key {
    (hikawa.namespace().unwrap_or_default(), hikawa.name_any())
}

/// When each Hikawa that waits for a reconcile is (or will be) due.
#[derive(Default)]
pub struct Queue {
    due: Mutex<HashMap<Key, Instant>>,
}

impl Queue {
    fn due_map(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Instant>> {
        self.due.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Something asked for this Hikawa's reconcile at `at` (an earlier ask stands).
    pub fn due(&self, key: Key, at: Instant) {
        self.due_map().entry(key).and_modify(|due| *due = (*due).min(at)).or_insert(at);
    }

    /// The reconcile's answer to come back after `after`: due then (unless asked for sooner).
    pub fn requeue(&self, hikawa: &Hikawa, after: Duration) -> Action {
        self.due(key_of(hikawa), Instant::now() + after);
        Action::requeue(after)
    }

    /// Its reconcile starts at `now`: no longer queued. Returns how long it waited, if it was due
    /// (a reconcile never asked for, or started before its requeue, waited for nothing).
    pub fn started(&self, key: &Key, now: Instant) -> Option<Duration> {
        let due = self.due_map().remove(key)?;
        (due <= now).then(|| now - due)
    }

    /// A Hikawa that is gone is not waiting (kube-runtime drops its reconcile).
    pub fn forget(&self, key: &Key) {
        self.due_map().remove(key);
    }

    /// How many are due at `now` and not started.
    pub fn depth(&self, now: Instant) -> usize {
        self.due_map().values().filter(|due| **due <= now).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Key {
        ("default".into(), name.into())
    }

    #[test]
    fn a_reconcile_waits_from_its_first_ask_to_its_start() {
        let (queue, t0, ms) = (Queue::default(), Instant::now(), Duration::from_millis(1));
        queue.due(key("a"), t0);
        queue.due(key("a"), t0 + 5 * ms);
        assert_eq!(queue.depth(t0 + 5 * ms), 1, "asked twice, queued once");
        assert_eq!(queue.started(&key("a"), t0 + 7 * ms), Some(7 * ms), "from the first ask");
        assert_eq!(queue.depth(t0 + 7 * ms), 0);
        assert_eq!(queue.started(&key("a"), t0 + 8 * ms), None, "never asked again: waited for nothing");
    }

    #[test]
    fn a_requeue_is_due_when_it_comes_unless_asked_sooner() {
        let (queue, t0, ms) = (Queue::default(), Instant::now(), Duration::from_millis(1));
        queue.due(key("later"), t0 + 100 * ms);
        assert_eq!(queue.depth(t0), 0, "not due yet");
        assert_eq!(queue.depth(t0 + 100 * ms), 1);
        queue.due(key("later"), t0 + 10 * ms);
        assert_eq!(queue.started(&key("later"), t0 + 30 * ms), Some(20 * ms), "a watch event before the requeue: due from it");
        queue.due(key("early"), t0 + 50 * ms);
        assert_eq!(queue.started(&key("early"), t0 + 40 * ms), None, "started before its requeue by an ask not seen here");
        queue.due(key("gone"), t0);
        queue.forget(&key("gone"));
        assert_eq!(queue.depth(t0 + 1000 * ms), 0);
    }
}
