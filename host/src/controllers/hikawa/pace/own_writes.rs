//! The operator's own writes read back from their answers: after a decision is applied, the
//! Hikawa as the API server answered its status write (resourceVersion and status; a status
//! write changes nothing else, and its precondition was the Hikawa decided from) and the
//! children it created stand in for what the caches do not show yet, so the next decision waits
//! for no watch. They are what the cluster answered, not memory of a decision: the Hikawa's
//! stands in only for an object it supersedes, and a child only until the caches show it (or for
//! `cache_wait` at most).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use zundoko_rules::Said;

use crate::controllers::hikawa::children::Owned;
use crate::crd::Hikawa;

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

/// By Hikawa uid.
pub struct OwnWrites {
    /// Longest a child the caches never show stands in.
    cache_wait: Duration,
    entries: Mutex<HashMap<String, Own>>,
}

impl OwnWrites {
    pub fn new(cache_wait: Duration) -> Self {
        OwnWrites { cache_wait, entries: Mutex::default() }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Own>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The newest of what the caches show (`cached`, its children in `children`) and what this
    /// process's own writes answered. Returns the Hikawa to decide from: the one the last status
    /// write answered, if `cached` is an object it supersedes, else `cached`. Children the
    /// caches do not show yet are added to `children` (in index order); those they show, and
    /// all after `cache_wait`, are forgotten.
    pub fn read(&self, uid: &str, cached: &Arc<Hikawa>, now: Instant) -> Option<Arc<Hikawa>> {
        let mut entries = self.lock();
        let own = entries.get_mut(uid)?;
        if own.at.is_some_and(|at| now >= at + self.cache_wait) {
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

    /// Whether own children are waiting for the caches (then [`merge_children`] is worth the
    /// children's list).
    ///
    /// [`merge_children`]: Self::merge_children
    pub fn has_children(&self, uid: &str) -> bool {
        self.lock().get(uid).is_some_and(|own| !own.zundokos.is_empty() || own.kiyoshi.is_some())
    }

    /// Add to `children` (from the caches) the children this process's writes created that the
    /// caches do not show yet; forget those they show.
    pub fn merge_children(&self, uid: &str, children: &mut Owned) {
        let mut entries = self.lock();
        let Some(own) = entries.get_mut(uid) else { return };
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
    pub fn wrote(&self, uid: &str, from: &Hikawa, written: Option<Hikawa>, zundokos: Vec<Said>, kiyoshi: Option<Said>, now: Instant) {
        let mut entries = self.lock();
        let own = entries.entry(uid.to_string()).or_default();
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
    }

    /// Forget the answers to own writes (after a failure: decide from the caches again).
    pub fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    pub(super) fn retain(&self, alive: &impl Fn(&str) -> bool) {
        self.lock().retain(|uid, _| alive(uid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::HikawaStatus;

    #[test]
    fn own_writes_stand_in_for_what_the_caches_do_not_show_yet_and_no_longer() {
        let own = OwnWrites::new(Duration::from_secs(15));
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
        assert!(own.read("u", &hikawa("1", 0), t0).is_none());
        assert!(!own.has_children("u"));
        // Word 1 decided from version 1, its status written as version 2.
        own.wrote("u", &hikawa("1", 0), Some(Hikawa::clone(&hikawa("2", 1))), vec![said(1)], None, t0);
        let read = own.read("u", &hikawa("1", 0), t0).expect("the answer supersedes the cached version 1");
        assert_eq!(read.metadata.resource_version.as_deref(), Some("2"));
        let mut owned = Owned::default();
        own.merge_children("u", &mut owned);
        assert_eq!(zundokos(&owned), [1], "the child created stands in");
        // Word 2 decided from the answer (version 2), written as 3: the caches still at 1 or 2.
        own.wrote("u", &read, Some(Hikawa::clone(&hikawa("3", 2))), vec![said(2)], None, t0);
        for cached in ["1", "2"] {
            assert_eq!(own.read("u", &hikawa(cached, 0), t0).unwrap().metadata.resource_version.as_deref(), Some("3"));
        }
        // The child index shows word 1: only word 2 stands in, in index order.
        let mut owned = Owned { zundokos: vec![said(1)], kiyoshi: None };
        own.merge_children("u", &mut owned);
        assert_eq!(zundokos(&owned), [1, 2]);
        // The caches show version 3, or anything the answers do not supersede (someone else's
        // write): they are the newest, and what was written is forgotten.
        assert!(own.read("u", &hikawa("3", 2), t0).is_none());
        assert!(own.read("u", &hikawa("1", 0), t0).is_none(), "version 1 again: not trusted any more than the caches");
        // A child the caches never show stands in no longer than cache_wait.
        own.wrote("u", &hikawa("3", 2), None, vec![said(3)], None, t0);
        assert!(own.has_children("u"));
        assert!(own.read("u", &hikawa("3", 2), t0 + Duration::from_secs(16)).is_none());
        assert!(!own.has_children("u"));
        // A Kiyoshi stands in after the Zundokos; a failure forgets everything.
        own.wrote("u", &hikawa("3", 2), None, Vec::new(), Some(Said { name: "h-kiyoshi".into(), index: 0, word: "Kiyoshi".into(), said_at: Some(1) }), t0);
        let mut owned = Owned { zundokos: vec![said(1), said(2)], kiyoshi: None };
        own.merge_children("u", &mut owned);
        assert_eq!(owned.kiyoshi.as_ref().map(|k| k.index), Some(3));
        own.forget("u");
        assert!(!own.has_children("u"));
    }

}
