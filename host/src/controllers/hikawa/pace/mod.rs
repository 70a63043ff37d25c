//! Pacing: what this process remembers of each Hikawa between reconciles, one part per job
//! (this file: whether and when to decide; `own_writes.rs`: the answers to its own writes;
//! `unsaid.rs`: Said Events owed; `warnings.rs`: the last Warning Event). Never an input to a
//! decision (decisions come from the cluster alone, SPEC 2); only what decides *whether and
//! when* to decide, so that no module and no input can make the operator loop or flood:
//!
//! - Expectations: after a decision is applied, the next one waits until the caches show its
//!   own writes (the new child, the status as written), so a word is decided once, never
//!   twice from a stale cache. If they never show up (say, the child was deleted at once),
//!   the wait ends after `cache_wait`.
//! - Own writes wake nothing by themselves: a reconcile that finds the Hikawa and its children
//!   exactly as the last decision left them decides again only when that decision's
//!   [`NextCall`] is due (the one definition `simulate` and `test` share: after the plan's
//!   `requeue-after`; else at once if the plan changed what the rules observe, a word or the
//!   status; else never, until something else changes). A status message that changes on every
//!   call writes once (the rules do not observe the message).
//! - Idle decisions are budgeted: a decision that says no word spends a token (a bucket of
//!   `idle_burst`, refilled at `idle_per_sec`, plus one per word said); without a token the
//!   Hikawa is throttled until one is there, and reported. A requeue asked without a word is
//!   at least `requeue_floor`.
//! - Failures back off exponentially per Hikawa.
//! - Own writes are read back from their answers: after a decision is applied, the Hikawa as
//!   the API server answered its status write (resourceVersion and status; a status write
//!   changes nothing else, and its precondition was the Hikawa decided from) and the children
//!   it created stand in for what the caches do not show yet ([`OwnWrites::read`]), so the next
//!   decision waits for no watch. They are what the cluster answered, not memory of a decision:
//!   the Hikawa's stands in only for an object it supersedes, and a child only until the caches
//!   show it (or for `cache_wait` at most).
//!
//! So, beyond its song (per word: the child, its Event, one status write), a Hikawa costs at
//! most `idle_burst + idle_per_sec * t` decisions in any `t` seconds, each writing at most one
//! status and one Event.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use zundoko_rules::NextCall;

use crate::crd::HikawaStatus;

mod own_writes;
mod unsaid;
mod warnings;

pub use own_writes::OwnWrites;
pub use unsaid::Unsaid;
pub use warnings::{WarningSeries, Warnings};

#[derive(Clone, Debug, PartialEq)]
pub struct PaceSettings {
    /// Shortest requeue after a plan that says no word.
    pub requeue_floor: Duration,
    /// Idle decisions (no word said) allowed in a burst...
    pub idle_burst: u32,
    /// ...and per second after it.
    pub idle_per_sec: f64,
    /// Longest wait for the caches to show this process's own writes.
    pub cache_wait: Duration,
    /// First retry delay after a failure, doubled per failure in a row up to `backoff_max`.
    pub backoff_base: Duration,
    pub backoff_max: Duration,
}

impl PaceSettings {
    /// The delay after the `failures`-th failure in a row (1 for the first).
    fn backoff(&self, failures: u32) -> Duration {
        self.backoff_base.saturating_mul(1 << failures.saturating_sub(1).min(20)).min(self.backoff_max)
    }
}

impl Default for PaceSettings {
    fn default() -> Self {
        PaceSettings {
            requeue_floor: Duration::from_millis(100),
            idle_burst: 10,
            idle_per_sec: 1.0,
            cache_wait: Duration::from_secs(15),
            backoff_base: Duration::from_millis(250),
            backoff_max: Duration::from_secs(60),
        }
    }
}

/// A Hikawa and its children as far as pacing cares: what a decision left behind, or what
/// the caches show now.
#[derive(Clone, Debug, PartialEq)]
pub struct Footprint {
    pub generation: i64,
    pub zundokos: u32,
    pub kiyoshi: bool,
    pub status: Option<HikawaStatus>,
    /// The module that decided (or would decide): a swap is a reason to decide again.
    pub module: String,
}

impl Footprint {
    /// Do the caches (`self`) show at least what `left` left behind?
    fn shows(&self, left: &Footprint) -> bool {
        self.zundokos >= left.zundokos && (self.kiyoshi || !left.kiyoshi) && self.status == left.status
    }
}

/// Whether to decide now.
#[derive(Clone, Debug, PartialEq)]
pub enum Gate {
    Decide,
    /// The caches do not show this process's last writes yet: look again then (the watch
    /// event that shows them comes sooner, normally).
    CatchingUp { retry_in: Duration },
    /// Nothing changed but what this process wrote itself. Decide again after `due`, if the
    /// last decision's [`NextCall`] says when; otherwise (it changed nothing the rules observe
    /// and asked for no callback) only when something else changes.
    Unchanged { due: Option<Duration> },
    /// Too many idle decisions in a row: not before then. `report` is true once per minute.
    Throttled { retry_in: Duration, report: bool },
}

struct Entry {
    left: Option<Footprint>,
    decided_at: Instant,
    due: Option<Instant>,
    tokens: f64,
    refilled: Instant,
    failures: u32,
    throttle_reported: Option<Instant>,
}

/// Per-Hikawa pacing state, keyed by uid, one part per job. Forgotten when the Hikawa is
/// deleted.
pub struct Pace {
    settings: PaceSettings,
    /// Whether and when to decide: expectations, the idle budget, backoff.
    entries: Mutex<HashMap<String, Entry>>,
    /// The answers to this process's own writes, standing in for the caches.
    pub own: OwnWrites,
    /// Said Events owed.
    pub unsaid: Unsaid,
    /// The last Warning Event of each Hikawa, for counting repeats on it.
    pub warnings: Warnings,
}

impl Pace {
    pub fn new(settings: PaceSettings) -> Self {
        let own = OwnWrites::new(settings.cache_wait);
        Pace { settings, entries: Mutex::default(), own, unsaid: Unsaid::default(), warnings: Warnings::default() }
    }

    pub fn settings(&self) -> &PaceSettings {
        &self.settings
    }

    fn with<R>(&self, uid: &str, now: Instant, f: impl FnOnce(&mut Entry, &PaceSettings) -> R) -> R {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let entry = entries.entry(uid.to_string()).or_insert_with(|| Entry {
            left: None,
            decided_at: now,
            due: None,
            tokens: f64::from(self.settings.idle_burst),
            refilled: now,
            failures: 0,
            throttle_reported: None,
        });
        f(entry, &self.settings)
    }

    /// Whether a reconcile that sees `seen` should decide.
    pub fn gate(&self, uid: &str, seen: &Footprint, now: Instant) -> Gate {
        self.with(uid, now, |e, s| {
            if let Some(left) = &e.left {
                // Whatever else changed (a spec edit, a swap), deciding from caches that lag
                // would decide a word already said.
                if !seen.shows(left) && now < e.decided_at + s.cache_wait {
                    return Gate::CatchingUp { retry_in: e.decided_at + s.cache_wait - now };
                }
                if seen == left {
                    match e.due {
                        Some(due) if due > now => return Gate::Unchanged { due: Some(due - now) },
                        Some(_) => {}
                        None => return Gate::Unchanged { due: None },
                    }
                }
            }
            e.refill(s, now);
            if e.tokens < 1.0 {
                let retry_in = Duration::from_secs_f64((1.0 - e.tokens) / s.idle_per_sec.max(1e-3));
                let report = e.throttle_reported.is_none_or(|at| now.duration_since(at) >= Duration::from_secs(60));
                if report {
                    e.throttle_reported = Some(now);
                }
                return Gate::Throttled { retry_in, report };
            }
            Gate::Decide
        })
    }

    /// A decision was applied. `next`: when the rules are called again after it
    /// ([`Plan::next_call`](zundoko_rules::Plan::next_call)); `words`: words it said.
    /// Returns the delay to requeue with (the floor applied to idle plans), `None` to wait for
    /// a change.
    pub fn decided(&self, uid: &str, left: Footprint, next: NextCall, words: u32, now: Instant) -> Option<Duration> {
        let requeue = match next {
            NextCall::After(ms) => Some(Duration::from_millis(ms)),
            NextCall::WhenSomethingChanges => None,
        };
        self.with(uid, now, |e, s| {
            e.refill(s, now);
            if words == 0 {
                e.tokens -= 1.0;
            } else {
                e.tokens = (e.tokens + f64::from(words)).min(f64::from(s.idle_burst));
            }
            let requeue = requeue.map(|d| if words == 0 { d.max(s.requeue_floor) } else { d });
            e.left = Some(left);
            e.decided_at = now;
            e.due = requeue.map(|d| now + d);
            e.failures = 0;
            requeue
        })
    }

    /// A decision or its application failed. Returns the backoff delay and how many failures
    /// in a row this is.
    pub fn failed(&self, uid: &str, left: Footprint, now: Instant) -> (Duration, u32) {
        self.with(uid, now, |e, s| {
            e.refill(s, now);
            e.tokens -= 1.0;
            e.failures = e.failures.saturating_add(1);
            let delay = s.backoff(e.failures);
            e.left = Some(left);
            e.decided_at = now;
            e.due = Some(now + delay);
            (delay, e.failures)
        })
    }

    /// The backoff the next failure will get, and how many failures in a row it will be (what
    /// [`Pace::failed`] then returns): recorded before it, on the failure's Warning Event.
    pub fn next_failure(&self, uid: &str) -> (Duration, u32) {
        let failures = self.failures(uid).saturating_add(1);
        (self.settings.backoff(failures), failures)
    }

    /// How long until the next decision is due (after a failure: the backoff).
    pub fn retry_in(&self, uid: &str, now: Instant) -> Duration {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.get(uid).and_then(|e| e.due).map_or(self.settings.backoff_base, |due| due.saturating_duration_since(now))
    }

    /// Keep only the Hikawas for which `alive` holds (after a relist: the others are gone).
    pub fn retain(&self, alive: impl Fn(&str) -> bool) {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).retain(|uid, _| alive(uid));
        self.own.retain(&alive);
        self.unsaid.retain(&alive);
        self.warnings.retain(&alive);
    }

    /// Failures in a row so far.
    pub fn failures(&self, uid: &str) -> u32 {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).get(uid).map_or(0, |e| e.failures)
    }

    /// Whether the caches show children this process's last decision did not leave: it
    /// remembers no decision for the Hikawa (after a start, or its shard just taken), or
    /// another replica said them, or a create of its own that timed out landed after all.
    pub fn said_elsewhere(&self, uid: &str, seen: &Footprint) -> bool {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.get(uid).and_then(|e| e.left.as_ref()).is_none_or(|left| seen.zundokos > left.zundokos || (seen.kiyoshi && !left.kiyoshi))
    }

    /// The Hikawa is gone: forget it.
    pub fn forget(&self, uid: &str) {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).remove(uid);
        self.own.forget(uid);
        self.unsaid.forget(uid);
        self.warnings.forget(uid);
    }

    /// Hikawas remembered (for tests).
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Entry {
    fn refill(&mut self, s: &PaceSettings, now: Instant) {
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + elapsed * s.idle_per_sec).min(f64::from(s.idle_burst));
        self.refilled = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(zundokos: u32, message: &str) -> Footprint {
        let status = HikawaStatus { num_zundokos_said: zundokos, message: Some(message.into()), ..HikawaStatus::default() };
        Footprint { generation: 1, zundokos, kiyoshi: false, status: Some(status), module: "m".into() }
    }

    fn settings() -> PaceSettings {
        PaceSettings { idle_burst: 3, idle_per_sec: 2.0, ..PaceSettings::default() }
    }

    #[test]
    fn waits_for_its_own_writes_then_decides_once_when_due() {
        let pace = Pace::new(settings());
        let t0 = Instant::now();
        assert_eq!(pace.gate("u", &fp(0, ""), t0), Gate::Decide, "first sight");
        // Said word 1, asked to be called back at once.
        assert_eq!(pace.decided("u", fp(1, "1 word"), NextCall::After(0), 1, t0), Some(Duration::ZERO));
        // The caches still show the old state: wait, do not decide word 1 again.
        assert!(matches!(pace.gate("u", &fp(0, ""), t0), Gate::CatchingUp { .. }));
        // Child there, status not yet.
        assert!(matches!(pace.gate("u", &fp(1, ""), t0), Gate::CatchingUp { .. }));
        // Both there, and the callback is due: decide.
        assert_eq!(pace.gate("u", &fp(1, "1 word"), t0), Gate::Decide);
        // If the caches never catch up, decide anyway after the wait.
        pace.decided("u", fp(2, "2 words"), NextCall::WhenSomethingChanges, 1, t0);
        assert_eq!(pace.gate("u", &fp(1, "1 word"), t0 + Duration::from_secs(16)), Gate::Decide);
    }

    #[test]
    fn own_writes_wake_nothing_but_a_change_or_the_callback_does() {
        let pace = Pace::new(settings());
        let t0 = Instant::now();
        pace.decided("u", fp(1, "now 1"), NextCall::WhenSomethingChanges, 0, t0);
        assert_eq!(pace.gate("u", &fp(1, "now 1"), t0), Gate::Unchanged { due: None });
        // Someone else edits the spec: decide.
        let mut edited = fp(1, "now 1");
        edited.generation = 2;
        assert_eq!(pace.gate("u", &edited, t0), Gate::Decide);
        // A callback in 500 ms.
        pace.decided("u", fp(1, "now 1"), NextCall::After(500), 0, t0);
        assert_eq!(pace.gate("u", &fp(1, "now 1"), t0), Gate::Unchanged { due: Some(Duration::from_millis(500)) });
        assert_eq!(pace.gate("u", &fp(1, "now 1"), t0 + Duration::from_millis(500)), Gate::Decide);
    }

    #[test]
    fn idle_decisions_are_budgeted_and_words_refill_the_budget() {
        let pace = Pace::new(settings());
        let t0 = Instant::now();
        // A module that asks to be called back at once and says nothing: floored...
        assert_eq!(pace.decided("u", fp(0, ""), NextCall::After(0), 0, t0), Some(Duration::from_millis(100)));
        pace.decided("u", fp(0, ""), NextCall::After(0), 0, t0);
        pace.decided("u", fp(0, ""), NextCall::After(0), 0, t0);
        // ...and after the burst of 3, throttled until a token is back (2 per second).
        let later = t0 + Duration::from_millis(100);
        match pace.gate("u", &fp(0, ""), later) {
            Gate::Throttled { retry_in, report } => {
                assert!(retry_in > Duration::from_millis(250) && retry_in <= Duration::from_millis(400), "{retry_in:?}");
                assert!(report);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(pace.gate("u", &fp(0, ""), later), Gate::Throttled { report: false, .. }), "reported once");
        assert_eq!(pace.gate("u", &fp(0, ""), t0 + Duration::from_secs(2)), Gate::Decide);
        // Words refill it: a song never runs dry.
        let pace = Pace::new(settings());
        for i in 0..100 {
            pace.decided("s", fp(i, ""), NextCall::After(0), 0, t0);
            pace.decided("s", fp(i + 1, ""), NextCall::After(0), 1, t0);
        }
        assert_eq!(pace.gate("s", &fp(100, ""), t0), Gate::Decide);
    }

    #[test]
    fn words_it_did_not_leave_itself_are_said_elsewhere() {
        let pace = Pace::new(settings());
        let t0 = Instant::now();
        assert!(pace.said_elsewhere("u", &fp(3, "a")), "nothing remembered: a start, or a shard just taken");
        pace.decided("u", fp(4, "a"), NextCall::WhenSomethingChanges, 1, t0);
        assert!(!pace.said_elsewhere("u", &fp(3, "a")), "its own word not in the caches yet");
        assert!(!pace.said_elsewhere("u", &fp(4, "a")), "its own word");
        assert!(pace.said_elsewhere("u", &fp(5, "a")), "a word it did not say (a write of its own landed late, or another replica)");
        let kiyoshi = Footprint { kiyoshi: true, ..fp(4, "a") };
        assert!(pace.said_elsewhere("u", &kiyoshi));
        pace.failed("u", fp(4, "a"), t0);
        assert!(pace.said_elsewhere("u", &fp(5, "a")), "a create that failed here and landed after all");
        pace.forget("u");
        assert!(pace.said_elsewhere("u", &fp(4, "a")));
    }

    #[test]
    fn failures_back_off_and_reset() {
        let pace = Pace::new(PaceSettings { idle_burst: 100, ..PaceSettings::default() });
        let t0 = Instant::now();
        let delays: Vec<u128> = (0..4).map(|_| pace.failed("u", fp(0, "x"), t0).0.as_millis()).collect();
        assert_eq!(delays, [250, 500, 1000, 2000]);
        // What the next failure will get, told before it (for its Warning Event), is what it gets.
        let told = pace.next_failure("u");
        assert_eq!((told.0.as_millis(), told.1), (4000, 5));
        assert_eq!(pace.failed("u", fp(0, "x"), t0), told);
        assert_eq!(pace.failures("u"), 5);
        assert_eq!(pace.gate("u", &fp(0, "x"), t0), Gate::Unchanged { due: Some(Duration::from_millis(4000)) });
        pace.decided("u", fp(1, "x"), NextCall::WhenSomethingChanges, 1, t0);
        assert_eq!(pace.failures("u"), 0);
        pace.forget("u");
        assert!(pace.is_empty());
    }
}
