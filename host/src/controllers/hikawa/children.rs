//! The children the operator knows of, kept small: per child only what a decision reads (its
//! index, word, millisecond time and controlling owner), fed by a watch. A full object is
//! kilobytes with its metadata; this is 32 bytes (the word shared, the owner's uid held once
//! per song), so a cluster with 10,000 Hikawas and their songs fits in a few tens of MiB.
//!
//! Children are found by name, never by label: `<hikawa>-zundoko-NNN` and `<hikawa>-kiyoshi`
//! say which Hikawa and which index, whatever else the object carries. Whether a child
//! belongs to a Hikawa is decided by its controller owner reference (the Hikawa's uid).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::pin::Pin;
use std::sync::{Arc, RwLock};

use futures::{Stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::runtime::watcher::Event;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch as signal;
use zundoko_rules::naming::{kiyoshi_name, zundoko_index};
use zundoko_rules::{Said, TimestampMs};

use crate::crd::SAID_AT;
use crate::crd::{Kiyoshi, Zundoko};
use crate::process::leader::assign;
use crate::controllers::hikawa::lean::LeanChild;

/// Which Hikawa a child belongs to by its name: namespace and Hikawa name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct SongKey {
    namespace: Arc<str>,
    hikawa: Box<str>,
}

/// One child, as little as a decision needs: 32 bytes (the word is shared, the owner is held
/// once per song).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Word {
    word: Arc<str>,
    /// Milliseconds, or [`NO_TIME`].
    said_at: TimestampMs,
    /// The controller owner reference's uid as an index into [`Song::owners`], or [`NO_OWNER`].
    owner: u32,
}

const NO_TIME: TimestampMs = TimestampMs::MIN;
const NO_OWNER: u32 = u32::MAX;

/// The children named after one Hikawa: Zundokos by index, or the Kiyoshi at index 0.
#[derive(Clone, Debug, Default)]
struct Song {
    /// The controllers' uids these children name (one, nearly always).
    owners: Vec<Arc<str>>,
    words: BTreeMap<u32, Word>,
}

impl Song {
    fn insert(&mut self, index: u32, word: Arc<str>, said_at: Option<TimestampMs>, owner: Option<&str>) {
        let owner = match owner {
            None => NO_OWNER,
            Some(uid) => match self.owners.iter().position(|o| &**o == uid) {
                Some(i) => i as u32,
                None => {
                    self.owners.push(Arc::from(uid));
                    (self.owners.len() - 1) as u32
                }
            },
        };
        self.words.insert(index, Word { word, said_at: said_at.unwrap_or(NO_TIME), owner });
    }

    /// The index in `owners` of `uid`, if any child names it.
    fn owner_index(&self, uid: &str) -> Option<u32> {
        self.owners.iter().position(|o| &**o == uid).map(|i| i as u32)
    }
}

impl Word {
    fn said_at(&self) -> Option<TimestampMs> {
        (self.said_at != NO_TIME).then_some(self.said_at)
    }
}

type Songs = HashMap<SongKey, Song>;

/// One kind of child, mirrored from its watch the way kube-runtime's reflector does it:
/// a relist (`Init` .. `InitDone`) is built aside and replaces the whole state at once.
#[derive(Default)]
struct KindIndex {
    songs: RwLock<Songs>,
    relisting: std::sync::Mutex<Option<Songs>>,
}

/// Small strings seen over and over (words, namespaces) shared, not copied.
/// Bounded: past the bound a string is simply allocated.
#[derive(Default)]
struct Interner(std::sync::Mutex<HashSet<Arc<str>>>);

const INTERNED_MAX: usize = 4096;

impl Interner {
    fn get(&self, s: &str) -> Arc<str> {
        let mut set = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(found) = set.get(s) {
            return found.clone();
        }
        let new: Arc<str> = Arc::from(s);
        if set.len() < INTERNED_MAX {
            set.insert(new.clone());
        }
        new
    }
}

/// The operator's view of every child it watches.
pub struct ChildIndex {
    zundokos: KindIndex,
    kiyoshis: KindIndex,
    words: Interner,
    namespaces: Interner,
    synced: signal::Sender<(bool, bool)>,
    /// The shards whose children each kind's last full list covered: Zundokos, Kiyoshis.
    covered: RwLock<(BTreeSet<u16>, BTreeSet<u16>)>,
    /// The shards both kinds cover (what [`covers`](Self::covers) reads), and the signal that
    /// wakes the Hikawas that waited for them.
    coverage: signal::Sender<BTreeSet<u16>>,
}

/// The children of one Hikawa that it owns, in index order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Owned {
    pub zundokos: Vec<Said>,
    pub kiyoshi: Option<Said>,
}

impl Default for ChildIndex {
    fn default() -> Self {
        ChildIndex {
            zundokos: KindIndex::default(),
            kiyoshis: KindIndex::default(),
            words: Interner::default(),
            namespaces: Interner::default(),
            synced: signal::Sender::new((false, false)),
            covered: RwLock::default(),
            coverage: signal::Sender::new(BTreeSet::new()),
        }
    }
}

/// A child's time: the annotation, else its creationTimestamp.
pub fn said_at(meta: &ObjectMeta) -> Option<TimestampMs> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(SAID_AT))
        .and_then(|s| s.parse::<jiff::Timestamp>().ok())
        .or_else(|| meta.creation_timestamp.as_ref().map(|t| t.0))
        .map(|t| t.as_millisecond())
}

fn controller_uid(meta: &ObjectMeta) -> Option<&str> {
    meta.owner_references.iter().flatten().find(|r| r.controller == Some(true)).map(|r| r.uid.as_str())
}

/// `<hikawa>-kiyoshi` -> `<hikawa>`.
fn kiyoshi_owner_name(child: &str) -> Option<&str> {
    child.strip_suffix("-kiyoshi").filter(|h| !h.is_empty())
}

/// `<hikawa>-zundoko-NNN` -> (`<hikawa>`, NNN), only for canonical names.
fn zundoko_owner_name(child: &str) -> Option<(&str, u32)> {
    let (hikawa, _) = child.rsplit_once("-zundoko-")?;
    Some((hikawa, zundoko_index(hikawa, child)?))
}

impl ChildIndex {
    /// Which children one Hikawa owns: its Zundokos from index 1 up to the first gap past
    /// `claimed` (so a gap left by a deleted child is seen, not skipped), and its Kiyoshi.
    pub fn owned(&self, namespace: &str, hikawa: &str, uid: &str, claimed: u32) -> Owned {
        let key = SongKey { namespace: Arc::from(namespace), hikawa: Box::from(hikawa) };
        let mut owned = Owned::default();
        {
            let songs = self.zundokos.songs.read().unwrap_or_else(|p| p.into_inner());
            let song = songs.get(&key);
            let mine = song.and_then(|s| s.owner_index(uid));
            let mut index = 1u32;
            loop {
                match song.and_then(|s| s.words.get(&index)).filter(|w| Some(w.owner) == mine) {
                    Some(w) => owned.zundokos.push(Said {
                        name: zundoko_rules::naming::zundoko_name(hikawa, index),
                        index,
                        word: w.word.to_string(),
                        said_at: w.said_at(),
                    }),
                    None if index > claimed => break,
                    None => {}
                }
                index += 1;
            }
        }
        let songs = self.kiyoshis.songs.read().unwrap_or_else(|p| p.into_inner());
        let song = songs.get(&key);
        let mine = song.and_then(|s| s.owner_index(uid));
        owned.kiyoshi = song.and_then(|s| s.words.get(&0)).filter(|w| Some(w.owner) == mine).map(|w| Said {
            name: kiyoshi_name(hikawa),
            index: owned.zundokos.len() as u32 + 1,
            word: w.word.to_string(),
            said_at: w.said_at(),
        });
        owned
    }

    /// How many Zundokos [`owned`](Self::owned) would give, and whether a Kiyoshi: the same
    /// walk without building the list (a reconcile that decides nothing needs only these).
    pub fn counts(&self, namespace: &str, hikawa: &str, uid: &str, claimed: u32) -> (u32, bool) {
        let key = SongKey { namespace: Arc::from(namespace), hikawa: Box::from(hikawa) };
        let mut zundokos = 0;
        {
            let songs = self.zundokos.songs.read().unwrap_or_else(|p| p.into_inner());
            if let Some(song) = songs.get(&key) {
                let mine = song.owner_index(uid);
                let mut index = 1u32;
                loop {
                    match song.words.get(&index).filter(|w| Some(w.owner) == mine) {
                        Some(_) => zundokos += 1,
                        None if index > claimed => break,
                        None => {}
                    }
                    index += 1;
                }
            }
        }
        let songs = self.kiyoshis.songs.read().unwrap_or_else(|p| p.into_inner());
        let kiyoshi = songs.get(&key).is_some_and(|s| s.words.get(&0).is_some_and(|w| Some(w.owner) == s.owner_index(uid)));
        (zundokos, kiyoshi)
    }

    /// Resolves once both kinds have had their first full list.
    pub async fn synced(&self) {
        let mut rx = self.synced.subscribe();
        let _ = rx.wait_for(|(z, k)| *z && *k).await;
    }

    /// Whether the children of `shard` have been listed (both kinds) since the watch began
    /// to cover it: only then may a decision for its Hikawas read them.
    pub fn covers(&self, shard: u16) -> bool {
        self.coverage.borrow().contains(&shard)
    }

    /// The shards both kinds cover, changing as lists complete: a Hikawa that found its shard
    /// not covered waits for this instead of polling.
    pub fn coverage(&self) -> signal::Receiver<BTreeSet<u16>> {
        self.coverage.subscribe()
    }

    fn listed(&self, kiyoshis: bool, shards: &BTreeSet<u16>) {
        let mut covered = self.covered.write().unwrap_or_else(|p| p.into_inner());
        if kiyoshis { covered.1 = shards.clone() } else { covered.0 = shards.clone() }
        let both: BTreeSet<u16> = covered.0.intersection(&covered.1).copied().collect();
        self.coverage.send_if_modified(|now| {
            let changed = *now != both;
            *now = both;
            changed
        });
    }

    pub fn is_synced(&self) -> bool {
        let (z, k) = *self.synced.borrow();
        z && k
    }

    /// Children cached, both kinds (for tests and metrics).
    pub fn len(&self) -> usize {
        let count = |k: &KindIndex| k.songs.read().unwrap_or_else(|p| p.into_inner()).values().map(|s| s.words.len()).sum::<usize>();
        count(&self.zundokos) + count(&self.kiyoshis)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Where a child goes: its song's key and its index.
    fn place(&self, meta: &ObjectMeta, place: Option<(&str, u32)>) -> Option<(SongKey, u32)> {
        let (hikawa, index) = place?;
        Some((SongKey { namespace: self.namespaces.get(meta.namespace.as_deref()?), hikawa: Box::from(hikawa) }, index))
    }

    fn insert(&self, songs: &mut Songs, key: SongKey, index: u32, meta: &ObjectMeta, word: &str) {
        songs.entry(key).or_default().insert(index, self.words.get(word), said_at(meta), controller_uid(meta));
    }

    fn apply<K>(&self, kind: &KindIndex, event: &Event<K>, place: impl Fn(&str) -> Option<(&str, u32)>, word: impl Fn(&K) -> &str)
    where
        K: kube::Resource,
    {
        let located = |object: &K| {
            let name = object.meta().name.as_deref()?;
            self.place(object.meta(), place(name))
        };
        match event {
            Event::Apply(object) => {
                if let Some((key, index)) = located(object) {
                    let mut songs = kind.songs.write().unwrap_or_else(|p| p.into_inner());
                    self.insert(&mut songs, key, index, object.meta(), word(object));
                }
            }
            Event::Delete(object) => {
                if let Some((key, index)) = located(object) {
                    let mut songs = kind.songs.write().unwrap_or_else(|p| p.into_inner());
                    if let Some(song) = songs.get_mut(&key) {
                        song.words.remove(&index);
                        if song.words.is_empty() {
                            songs.remove(&key);
                        }
                    }
                }
            }
            Event::Init => *kind.relisting.lock().unwrap_or_else(|p| p.into_inner()) = Some(Songs::new()),
            Event::InitApply(object) => {
                if let (Some((key, index)), Some(buffer)) = (located(object), kind.relisting.lock().unwrap_or_else(|p| p.into_inner()).as_mut()) {
                    self.insert(buffer, key, index, object.meta(), word(object));
                }
            }
            Event::InitDone => {
                if let Some(fresh) = kind.relisting.lock().unwrap_or_else(|p| p.into_inner()).take() {
                    *kind.songs.write().unwrap_or_else(|p| p.into_inner()) = fresh;
                }
            }
        }
    }

    fn apply_zundoko(&self, event: &Event<LeanChild<Zundoko>>) {
        self.apply(&self.zundokos, event, zundoko_owner_name, |z| &z.spec.say);
        if matches!(event, Event::InitDone) {
            self.synced.send_modify(|(z, _)| *z = true);
        }
    }

    fn apply_kiyoshi(&self, event: &Event<LeanChild<Kiyoshi>>) {
        self.apply(&self.kiyoshis, event, |name| kiyoshi_owner_name(name).map(|h| (h, 0)), |k| &k.spec.say);
        if matches!(event, Event::InitDone) {
            self.synced.send_modify(|(_, k)| *k = true);
        }
    }
}

/// The watch of the Zundokos of the shards `held`: keeps the index current and yields each
/// changed child, so the controller reconciles its owner.
pub fn zundoko_stream(
    api: Api<LeanChild<Zundoko>>,
    label: &str,
    held: signal::Receiver<BTreeSet<u16>>,
    count: u16,
    index: Arc<ChildIndex>,
) -> impl Stream<Item = Result<LeanChild<Zundoko>, watcher::Error>> + Send {
    child_stream(api, label, held, count, index, false, |index, event| index.apply_zundoko(event))
}

/// The watch of the Kiyoshis, as [`zundoko_stream`].
pub fn kiyoshi_stream(
    api: Api<LeanChild<Kiyoshi>>,
    label: &str,
    held: signal::Receiver<BTreeSet<u16>>,
    count: u16,
    index: Arc<ChildIndex>,
) -> impl Stream<Item = Result<LeanChild<Kiyoshi>, watcher::Error>> + Send {
    child_stream(api, label, held, count, index, true, |index, event| index.apply_kiyoshi(event))
}

type Watch<K> = Pin<Box<dyn Stream<Item = Result<Event<LeanChild<K>>, watcher::Error>> + Send>>;

/// The watch of one kind of child, each event handed to `index` first. Only children
/// carrying the operator's label and in a shard held here are watched (`assign::
/// children_selector`); when this replica takes a shard the watch does not cover, it starts
/// again with the new selector, and the index is replaced by its full list (a shard's
/// children count as listed only from then). A shard handed back changes nothing. With no shard held nothing is watched and the index is empty. Children
/// are decoded leanly (`lean::LeanChild`): their managedFields, labels and other annotations
/// are never allocated.
fn child_stream<K>(
    api: Api<LeanChild<K>>,
    label: &str,
    held: signal::Receiver<BTreeSet<u16>>,
    count: u16,
    index: Arc<ChildIndex>,
    kiyoshis: bool,
    apply: impl Fn(&ChildIndex, &Event<LeanChild<K>>) + Send + Sync + 'static,
) -> impl Stream<Item = Result<LeanChild<K>, watcher::Error>> + Send
where
    K: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
{
    let label = label.to_string();
    let watch_for = move |shards: &BTreeSet<u16>| -> Option<Watch<K>> {
        let selector = assign::children_selector(&label, shards, count)?;
        Some(watcher(api.clone(), watcher::Config::default().labels(&selector)).default_backoff().boxed())
    };
    let state = (held, None::<(BTreeSet<u16>, Watch<K>)>, watch_for, index, apply);
    futures::stream::unfold(state, move |(mut held, mut current, watch_for, index, apply)| async move {
        loop {
            if current.is_none() {
                let shards = held.borrow_and_update().clone();
                match watch_for(&shards) {
                    Some(watch) => current = Some((shards, watch)),
                    None => {
                        // Nothing held: nothing cached, and nothing to wait for.
                        apply(&index, &Event::Init);
                        apply(&index, &Event::InitDone);
                        index.listed(kiyoshis, &shards);
                        if held.changed().await.is_err() {
                            return None;
                        }
                        continue;
                    }
                }
            }
            let (shards, watch) = current.as_mut().expect("set above");
            tokio::select! {
                event = watch.next() => {
                    let event = event?;
                    if let Ok(event) = &event {
                        apply(&index, event);
                        if matches!(event, Event::InitDone) {
                            index.listed(kiyoshis, shards);
                        }
                    }
                    return Some((event, (held, current, watch_for, index, apply)));
                }
                changed = held.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                    // Only a shard the watch does not cover yet needs a new one: the children
                    // of a shard handed back may stay cached until then (never read).
                    if !held.borrow_and_update().is_subset(shards) {
                        current = None;
                    }
                }
            }
        }
    })
    .touched_objects()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    /// A Zundoko as its watch delivers it: serialized as the API server sends it, decoded leanly.
    fn zundoko(ns: &str, name: &str, word: &str, owner: Option<&str>) -> LeanChild<Zundoko> {
        let mut z = Zundoko::new(name, crate::crd::ZundokoSpec { say: word.into() });
        z.metadata.namespace = Some(ns.into());
        z.metadata.annotations = Some([(SAID_AT.to_string(), "2026-01-01T00:00:00.250Z".to_string())].into());
        z.metadata.owner_references = owner.map(|uid| {
            vec![OwnerReference { controller: Some(true), uid: uid.into(), name: "h".into(), kind: "Hikawa".into(), api_version: "v".into(), ..Default::default() }]
        });
        serde_json::from_value(serde_json::to_value(&z).unwrap()).unwrap()
    }

    #[test]
    fn owned_children_by_name_and_owner_uid_with_gaps_seen() {
        let index = ChildIndex::default();
        for (name, word, owner) in [
            ("h-zundoko-001", "Zun", Some("u1")),
            ("h-zundoko-002", "Doko", Some("someone-else")),
            ("h-zundoko-003", "Zun", Some("u1")),
            ("h-zundoko-0004", "Zun", Some("u1")), // not a canonical name: not a child
            ("hh-zundoko-001", "Zun", Some("u1")),
        ] {
            index.apply_zundoko(&Event::Apply(zundoko("ns", name, word, owner)));
        }
        let owned = index.owned("ns", "h", "u1", 3);
        let got: Vec<(u32, &str)> = owned.zundokos.iter().map(|s| (s.index, s.word.as_str())).collect();
        assert_eq!(got, [(1, "Zun"), (3, "Zun")], "index 2 belongs to someone else: a gap");
        assert_eq!(owned.zundokos[0].name, "h-zundoko-001");
        assert_eq!(owned.zundokos[0].said_at, Some(1_767_225_600_250));
        // Without a claim past 1, the search stops at the first gap.
        assert_eq!(index.owned("ns", "h", "u1", 0).zundokos.len(), 1);
        assert!(index.owned("other", "h", "u1", 3).zundokos.is_empty());
        // The counts are the list's, without the list.
        for (ns, claimed) in [("ns", 3), ("ns", 0), ("other", 3)] {
            let owned = index.owned(ns, "h", "u1", claimed);
            assert_eq!(index.counts(ns, "h", "u1", claimed), (owned.zundokos.len() as u32, owned.kiyoshi.is_some()));
        }
    }

    #[test]
    fn a_child_is_32_bytes_and_its_owner_is_held_once_per_song() {
        assert_eq!(std::mem::size_of::<Word>(), 32);
        let index = ChildIndex::default();
        for i in 1..=100 {
            index.apply_zundoko(&Event::Apply(zundoko("ns", &zundoko_rules::naming::zundoko_name("h", i), "Zun", Some("u1"))));
        }
        index.apply_zundoko(&Event::Apply(zundoko("ns", "h-zundoko-101", "Doko", Some("u2"))));
        let mut bare = zundoko("ns", "h-zundoko-102", "Zun", None);
        bare.metadata.annotations = None;
        index.apply_zundoko(&Event::Apply(bare));
        {
            let songs = index.zundokos.songs.read().unwrap();
            let song = songs.values().next().unwrap();
            assert_eq!(song.owners.len(), 2, "one uid per distinct owner, not per child");
            assert_eq!(song.words.len(), 102);
        }
        assert_eq!(index.owned("ns", "h", "u1", 100).zundokos.len(), 100);
        assert!(index.owned("ns", "h", "u1", 100).zundokos.iter().all(|s| s.said_at == Some(1_767_225_600_250)));
        // 101 is u2's, 102 nobody's: not u1's, and u2 owns no song from index 1.
        assert_eq!(index.owned("ns", "h", "u1", 102).zundokos.len(), 100);
        assert!(index.owned("ns", "h", "u2", 0).zundokos.is_empty());
        assert_eq!(index.owned("ns", "h", "u2", 101).zundokos.iter().map(|s| s.index).collect::<Vec<_>>(), [101]);
    }

    #[test]
    fn relist_replaces_and_delete_removes() {
        let index = ChildIndex::default();
        index.apply_zundoko(&Event::Apply(zundoko("ns", "h-zundoko-001", "Zun", Some("u"))));
        index.apply_zundoko(&Event::Apply(zundoko("ns", "h-zundoko-002", "Zun", Some("u"))));
        index.apply_zundoko(&Event::Delete(zundoko("ns", "h-zundoko-002", "Zun", Some("u"))));
        assert_eq!(index.len(), 1);
        index.apply_zundoko(&Event::Init);
        index.apply_zundoko(&Event::InitApply(zundoko("ns", "g-zundoko-001", "Doko", Some("v"))));
        assert_eq!(index.owned("ns", "h", "u", 1).zundokos.len(), 1, "the old state serves until the relist is done");
        index.apply_zundoko(&Event::InitDone);
        assert!(index.owned("ns", "h", "u", 1).zundokos.is_empty());
        assert_eq!(index.owned("ns", "g", "v", 0).zundokos[0].word, "Doko");
        // An owner reference removed (orphaned): no longer this Hikawa's.
        index.apply_zundoko(&Event::Apply(zundoko("ns", "g-zundoko-001", "Doko", None)));
        assert!(index.owned("ns", "g", "v", 1).zundokos.is_empty());
    }
}
