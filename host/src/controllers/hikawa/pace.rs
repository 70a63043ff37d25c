//! Pacing: what this process remembers of each Hikawa between reconciles. Never an input to a
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
//!   it created stand in for what the caches do not show yet ([`Pace::read_own`]), so the next
//!   decision waits for no watch. They are what the cluster answered, not memory of a decision:
//!   the Hikawa's stands in only for an object it supersedes, and a child only until the caches
//!   show it (or for `cache_wait` at most).
//!
//! So, beyond its song (per word: the child, its Event, one status write), a Hikawa costs at
//! most `idle_burst + idle_per_sec * t` decisions in any `t` seconds, each writing at most one
//! status and one Event.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zundoko_rules::{NextCall, Said};

use crate::crd::{Hikawa, HikawaStatus};
use crate::controllers::hikawa::children::Owned;

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

/// A Warning Event already published for a Hikawa, so a repeat becomes a count on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WarningSeries {
    pub reason: String,
    pub note: String,
    pub name: String,
    pub count: i32,
}

struct Entry {
    left: Option<Footprint>,
    decided_at: Instant,
    due: Option<Instant>,
    tokens: f64,
    refilled: Instant,
    failures: u32,
    throttle_reported: Option<Instant>,
    warning: Option<WarningSeries>,
    /// Words said whose Said Event could not be published yet: (word, child).
    unsaid: Vec<(String, k8s_openapi::api::core::v1::ObjectReference)>,
    /// What this process's own writes left, as the API server answered them.
    own: Own,
}

/// The answers to this process's own last writes for a Hikawa, until the caches show them.
#[derive(Default)]
struct Own {
    /// The Hikawa as the last status write left it...
    hikawa: Option<Arc<Hikawa>>,
    /// ...and the resourceVersions it supersedes (the objects the writes were decided from).
    superseded: Vec<String>,
    /// Children created (or found there, controlled by the Hikawa) since the caches last showed
    /// all of them: Zundokos by index, and the Kiyoshi.
    zundokos: Vec<Said>,
    kiyoshi: Option<Said>,
    /// When the last of them was written.
    at: Option<Instant>,
}

/// A bound on the resourceVersions remembered as superseded (the caches show the Hikawa's
/// writes within a few at most; past this the caches are waited for).
const SUPERSEDED_MAX: usize = 64;

/// Per-Hikawa pacing state, keyed by uid. Forgotten when the Hikawa is deleted.
pub struct Pace {
    settings: PaceSettings,
    entries: Mutex<HashMap<String, Entry>>,
}

impl Pace {
    pub fn new(settings: PaceSettings) -> Self {
        Pace { settings, entries: Mutex::default() }
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
            warning: None,
            unsaid: Vec::new(),
            own: Own::default(),
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
            let delay = s.backoff_base.saturating_mul(1 << (e.failures - 1).min(20)).min(s.backoff_max);
            e.left = Some(left);
            e.decided_at = now;
            e.due = Some(now + delay);
            (delay, e.failures)
        })
    }

    /// How long until the next decision is due (after a failure: the backoff).
    pub fn retry_in(&self, uid: &str, now: Instant) -> Duration {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.get(uid).and_then(|e| e.due).map_or(self.settings.backoff_base, |due| due.saturating_duration_since(now))
    }

    /// Keep only the Hikawas for which `alive` holds (after a relist: the others are gone).
    pub fn retain(&self, alive: impl Fn(&str) -> bool) {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).retain(|uid, _| alive(uid));
    }

    /// Failures in a row so far.
    pub fn failures(&self, uid: &str) -> u32 {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).get(uid).map_or(0, |e| e.failures)
    }

    /// The Warning Event last published for this Hikawa, if it had this reason and note.
    pub fn repeated_warning(&self, uid: &str, reason: &str, note: &str) -> Option<WarningSeries> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.get(uid)?.warning.clone().filter(|w| w.reason == reason && w.note == note)
    }

    pub fn warned(&self, uid: &str, series: WarningSeries) {
        self.with(uid, Instant::now(), |e, _| e.warning = Some(series));
    }

    /// A word's Said Event could not be published (its connection failed twice): it is
    /// published at the Hikawa's next reconcile (its name makes a second copy impossible).
    pub fn unsaid(&self, uid: &str, word: String, child: k8s_openapi::api::core::v1::ObjectReference) {
        self.with(uid, Instant::now(), |e, _| e.unsaid.push((word, child)));
    }

    /// Whether the caches show children this process's last decision did not leave: it
    /// remembers no decision for the Hikawa (after a start, or its shard just taken), or
    /// another replica said them, or a create of its own that timed out landed after all.
    pub fn said_elsewhere(&self, uid: &str, seen: &Footprint) -> bool {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.get(uid).and_then(|e| e.left.as_ref()).is_none_or(|left| seen.zundokos > left.zundokos || (seen.kiyoshi && !left.kiyoshi))
    }

    pub fn has_unsaid(&self, uid: &str) -> bool {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).get(uid).is_some_and(|e| !e.unsaid.is_empty())
    }

    /// The Said Events still to publish for a Hikawa, taken.
    pub fn take_unsaid(&self, uid: &str) -> Vec<(String, k8s_openapi::api::core::v1::ObjectReference)> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.get_mut(uid).map(|e| std::mem::take(&mut e.unsaid)).unwrap_or_default()
    }

    /// The newest of what the caches show (`cached`, its children in `children`) and what this
    /// process's own writes answered. Returns the Hikawa to decide from: the one the last status
    /// write answered, if `cached` is an object it supersedes, else `cached`. Children the
    /// caches do not show yet are added to `children` (in index order); those they show, and
    /// all after `cache_wait`, are forgotten.
    pub fn read_own(&self, uid: &str, cached: &Arc<Hikawa>, now: Instant) -> Option<Arc<Hikawa>> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let own = &mut entries.get_mut(uid)?.own;
        if own.at.is_some_and(|at| now >= at + self.settings.cache_wait) {
            *own = Own::default();
            return None;
        }
        let version = cached.metadata.resource_version.as_deref()?;
        match &own.hikawa {
            Some(newer) if own.superseded.iter().any(|v| v == version) => Some(newer.clone()),
            _ => {
                // The caches show that write, or a later one: they are as new.
                own.hikawa = None;
                own.superseded.clear();
                None
            }
        }
    }

    /// Whether own children are waiting for the caches (then [`merge_own_children`] is worth
    /// the children's list).
    ///
    /// [`merge_own_children`]: Self::merge_own_children
    pub fn has_own_children(&self, uid: &str) -> bool {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.get(uid).is_some_and(|e| !e.own.zundokos.is_empty() || e.own.kiyoshi.is_some())
    }

    /// Add to `children` (from the caches) the children this process's writes created that the
    /// caches do not show yet; forget those they show.
    pub fn merge_own_children(&self, uid: &str, children: &mut Owned) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let Some(entry) = entries.get_mut(uid) else { return };
        let own = &mut entry.own;
        own.zundokos.retain(|z| !children.zundokos.iter().any(|c| c.index == z.index));
        for z in &own.zundokos {
            let at = children.zundokos.partition_point(|c| c.index < z.index);
            children.zundokos.insert(at, z.clone());
        }
        if children.kiyoshi.is_some() {
            own.kiyoshi = None;
        }
        if let Some(k) = &own.kiyoshi {
            children.kiyoshi = Some(Said { index: children.zundokos.len() as u32 + 1, ..k.clone() });
        }
    }

    /// A decision was applied: `from` is the Hikawa it was decided from, `written` the Hikawa
    /// as its status write left it (if it wrote one), and `zundokos` and `kiyoshi` the children
    /// it said.
    pub fn wrote_own(&self, uid: &str, from: &Hikawa, written: Option<Hikawa>, zundokos: Vec<Said>, kiyoshi: Option<Said>, now: Instant) {
        self.with(uid, now, |e, _| {
            let own = &mut e.own;
            if let Some(written) = written {
                if let Some(version) = from.metadata.resource_version.clone()
                    && own.superseded.len() < SUPERSEDED_MAX
                {
                    own.superseded.push(version);
                    own.hikawa = Some(Arc::new(written));
                } else {
                    own.hikawa = None;
                    own.superseded.clear();
                }
            }
            if !zundokos.is_empty() || kiyoshi.is_some() {
                own.zundokos.extend(zundokos);
                own.kiyoshi = kiyoshi.or(own.kiyoshi.take());
                own.at = Some(now);
            }
        })
    }

    /// Forget the answers to own writes (after a failure: decide from the caches again).
    pub fn forget_own(&self, uid: &str) {
        if let Some(e) = self.entries.lock().unwrap_or_else(|p| p.into_inner()).get_mut(uid) {
            e.own = Own::default();
        }
    }

    /// The Hikawa is gone: forget it.
    pub fn forget(&self, uid: &str) {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).remove(uid);
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
    fn own_writes_stand_in_for_what_the_caches_do_not_show_yet_and_no_longer() {
        let pace = Pace::new(settings());
        let t0 = Instant::now();
        let hikawa = |version: &str, said: u32| {
            let mut h = Hikawa::new("h", crate::crd::HikawaSpec::default());
            h.metadata.resource_version = Some(version.into());
            h.status = Some(HikawaStatus { num_zundokos_said: said, ..HikawaStatus::default() });
            Arc::new(h)
        };
        let said = |index: u32| Said { name: format!("h-zundoko-{index:03}"), index, word: "Zun".into(), said_at: Some(1) };
        let zundokos = |owned: &Owned| owned.zundokos.iter().map(|z| z.index).collect::<Vec<_>>();
        // Nothing written yet: the caches alone.
        assert!(pace.read_own("u", &hikawa("1", 0), t0).is_none());
        assert!(!pace.has_own_children("u"));
        // Word 1 decided from version 1, its status written as version 2.
        pace.wrote_own("u", &hikawa("1", 0), Some(Hikawa::clone(&hikawa("2", 1))), vec![said(1)], None, t0);
        let read = pace.read_own("u", &hikawa("1", 0), t0).expect("the answer supersedes the cached version 1");
        assert_eq!(read.metadata.resource_version.as_deref(), Some("2"));
        let mut owned = Owned::default();
        pace.merge_own_children("u", &mut owned);
        assert_eq!(zundokos(&owned), [1], "the child created stands in");
        // Word 2 decided from the answer (version 2), written as 3: the caches still at 1 or 2.
        pace.wrote_own("u", &read, Some(Hikawa::clone(&hikawa("3", 2))), vec![said(2)], None, t0);
        for cached in ["1", "2"] {
            assert_eq!(pace.read_own("u", &hikawa(cached, 0), t0).unwrap().metadata.resource_version.as_deref(), Some("3"));
        }
        // The child index shows word 1: only word 2 stands in, in index order.
        let mut owned = Owned { zundokos: vec![said(1)], kiyoshi: None };
        pace.merge_own_children("u", &mut owned);
        assert_eq!(zundokos(&owned), [1, 2]);
        // The caches show version 3, or anything the answers do not supersede (someone else's
        // write): they are the newest, and what was written is forgotten.
        assert!(pace.read_own("u", &hikawa("3", 2), t0).is_none());
        assert!(pace.read_own("u", &hikawa("1", 0), t0).is_none(), "version 1 again: not trusted any more than the caches");
        // A child the caches never show stands in no longer than cache_wait.
        pace.wrote_own("u", &hikawa("3", 2), None, vec![said(3)], None, t0);
        assert!(pace.has_own_children("u"));
        assert!(pace.read_own("u", &hikawa("3", 2), t0 + Duration::from_secs(16)).is_none());
        assert!(!pace.has_own_children("u"));
        // A Kiyoshi stands in after the Zundokos; a failure forgets everything.
        pace.wrote_own("u", &hikawa("3", 2), None, Vec::new(), Some(Said { name: "h-kiyoshi".into(), index: 0, word: "Kiyoshi".into(), said_at: Some(1) }), t0);
        let mut owned = Owned { zundokos: vec![said(1), said(2)], kiyoshi: None };
        pace.merge_own_children("u", &mut owned);
        assert_eq!(owned.kiyoshi.as_ref().map(|k| k.index), Some(3));
        pace.forget_own("u");
        assert!(!pace.has_own_children("u"));
    }

    #[test]
    fn failures_back_off_and_reset() {
        let pace = Pace::new(PaceSettings { idle_burst: 100, ..PaceSettings::default() });
        let t0 = Instant::now();
        let delays: Vec<u128> = (0..4).map(|_| pace.failed("u", fp(0, "x"), t0).0.as_millis()).collect();
        assert_eq!(delays, [250, 500, 1000, 2000]);
        assert_eq!(pace.failures("u"), 4);
        assert_eq!(pace.gate("u", &fp(0, "x"), t0), Gate::Unchanged { due: Some(Duration::from_millis(2000)) });
        pace.decided("u", fp(1, "x"), NextCall::WhenSomethingChanges, 1, t0);
        assert_eq!(pace.failures("u"), 0);
        pace.forget("u");
        assert!(pace.is_empty());
    }
}
