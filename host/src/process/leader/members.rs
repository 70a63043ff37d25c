//! Which replicas are alive, so each knows its fair share of the shards. The shard Leases
//! alone cannot tell: a replica that holds none (a new one) is invisible in them. So every
//! replica beats in one more Lease, `<lease-name>-members`: an annotation mapping each
//! replica's identity to a counter it raises every retry period. A member is alive while its
//! counter changes: judged, like a Lease's expiry, from when *this* replica observed the
//! change (its own monotonic clock), never from another replica's clock. The name is fixed,
//! so the Role names it (`resourceNames`) like the shard Leases.
//!
//! Writes carry the resourceVersion read; of two replicas beating at once one gets a
//! conflict and beats again next period (a member lives for a whole lease duration, several
//! periods). A member unseen for a lease duration is dropped from the record by whoever
//! writes next; a live one dropped by mistake puts itself back at its next beat.
//!
//! Beside its beat each member keeps a record of the default module it serves
//! ([`DEFAULT_MODULES_ANNOTATION`]), for `explain`: read from the cluster, with the operator down.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use tokio::sync::watch;
use tracing::{debug, info, warn};

/// The annotation holding the beats: a JSON object, identity -> counter.
pub const MEMBERS_ANNOTATION: &str = "zundokokiyoshi.kaitoy.github.com/members";

/// Beats as recorded: identity -> counter.
pub type Beats = BTreeMap<String, u64>;

/// The annotation where each member keeps the record of the default module it serves
/// (identity -> a JSON value this file does not read: `supply/sources/recorded.rs` defines
/// it), so `explain` finds that module from the cluster. It goes with the beats: no request
/// of its own.
pub const DEFAULT_MODULES_ANNOTATION: &str = "zundokokiyoshi.kaitoy.github.com/default-modules";

/// This replica's record now (`None`: no default module serves, or none is recorded).
pub type Record = Arc<dyn Fn() -> Option<serde_json::Value> + Send + Sync>;

/// One replica's view of the members.
#[derive(Debug)]
pub struct Membership {
    identity: String,
    lease: Duration,
    /// Per member: its counter as last seen changing, and when.
    seen: HashMap<String, (u64, Instant)>,
}

impl Membership {
    pub fn new(identity: &str, lease: Duration) -> Self {
        Membership { identity: identity.into(), lease, seen: HashMap::new() }
    }

    /// The beats read at `now`: a counter that changed (or a member first seen) is alive from now.
    pub fn observe(&mut self, beats: &Beats, now: Instant) {
        for (member, &beat) in beats {
            match self.seen.get(member) {
                Some(&(last, _)) if last == beat => {}
                _ => {
                    self.seen.insert(member.clone(), (beat, now));
                }
            }
        }
        self.seen.retain(|member, _| beats.contains_key(member));
    }

    fn alive(&self, member: &str, now: Instant) -> bool {
        member == self.identity || self.seen.get(member).is_some_and(|&(_, at)| now.saturating_duration_since(at) < self.lease)
    }

    /// The live members, this replica always among them.
    pub fn live(&self, now: Instant) -> BTreeSet<String> {
        let mut live: BTreeSet<String> = self.seen.keys().filter(|m| self.alive(m, now)).cloned().collect();
        live.insert(self.identity.clone());
        live
    }

    /// The record to write over `beats`: this replica's counter raised, members unseen for a
    /// lease duration dropped.
    pub fn beat(&self, beats: &Beats, now: Instant) -> Beats {
        let mut next: Beats = beats.iter().filter(|(m, _)| self.alive(m, now)).map(|(m, b)| (m.clone(), *b)).collect();
        let mine = beats.get(&self.identity).copied().unwrap_or(0);
        next.insert(self.identity.clone(), mine.wrapping_add(1));
        next
    }

    /// The record without this replica (it is leaving).
    pub fn leave(&self, beats: &Beats) -> Beats {
        let mut next = beats.clone();
        next.remove(&self.identity);
        next
    }
}

/// The beats a Lease records (none if the annotation is missing or not a map of counters).
pub fn beats_of(lease: &Lease) -> Beats {
    lease.metadata.annotations.as_ref().and_then(|a| a.get(MEMBERS_ANNOTATION)).and_then(|json| serde_json::from_str(json).ok()).unwrap_or_default()
}

fn with_beats(mut lease: Lease, beats: &Beats) -> Lease {
    let json = serde_json::to_string(beats).expect("beats serialize");
    lease.metadata.annotations.get_or_insert_with(Default::default).insert(MEMBERS_ANNOTATION.into(), json);
    lease
}

/// The default module records a Lease holds: identity -> record.
pub fn records_of(lease: &Lease) -> BTreeMap<String, serde_json::Value> {
    lease.metadata.annotations.as_ref().and_then(|a| a.get(DEFAULT_MODULES_ANNOTATION)).and_then(|json| serde_json::from_str(json).ok()).unwrap_or_default()
}

/// `lease` with `mine` (an identity and its record, `None` to remove it) written, and the
/// records of members not in `beats` dropped; unless no member is left: then the last to leave
/// keeps its record, so the cluster still names the default module with every replica gone.
fn with_records(mut lease: Lease, beats: &Beats, mine: Option<(&str, Option<serde_json::Value>)>) -> Lease {
    let mut records = records_of(&lease);
    match mine {
        Some((identity, Some(record))) => {
            records.insert(identity.into(), record);
        }
        Some((identity, None)) => {
            records.remove(identity);
        }
        None => {}
    }
    if !beats.is_empty() {
        records.retain(|member, _| beats.contains_key(member));
    }
    let annotations = lease.metadata.annotations.get_or_insert_with(Default::default);
    match records.is_empty() {
        true => annotations.remove(DEFAULT_MODULES_ANNOTATION),
        false => annotations.insert(DEFAULT_MODULES_ANNOTATION.into(), serde_json::to_string(&records).expect("records serialize")),
    };
    lease
}

/// Beat every `every` until `stop`, publishing the live members' count and keeping `record`
/// in the Lease; then leave.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    client: Client,
    namespace: String,
    name: String,
    mut membership: Membership,
    every: Duration,
    record: Record,
    live: watch::Sender<usize>,
    mut stop: watch::Receiver<bool>,
) {
    let api: Api<Lease> = Api::namespaced(client, &namespace);
    loop {
        let now = Instant::now();
        match beat_once(&api, &name, &mut membership, record(), now).await {
            Ok(count) => {
                if *live.borrow() != count {
                    info!(members = count, "replicas alive changed");
                }
                live.send_replace(count);
            }
            // Nothing to do but try again: the count stays as it was, so the shares do too.
            Err(error) => debug!(%error, "could not beat in the members Lease"),
        }
        let jitter = every.mul_f64(rand::random::<f64>() * 0.2);
        tokio::select! {
            _ = tokio::time::sleep(every + jitter) => {}
            _ = stop.wait_for(|s| *s) => break,
        }
    }
    // Leaving: the others see one member less at once, not a lease duration later (until
    // then their fair share is still of this replica too, and the shards it hands back wait).
    // The others beat every period, so a write may meet a conflict: read and try again.
    for attempt in 1..=LEAVE_TRIES {
        match leave_once(&api, &name, &membership).await {
            Ok(()) => return info!("left the members Lease"),
            Err(kube::Error::Api(status)) if status.code == 409 && attempt < LEAVE_TRIES => continue,
            Err(error) => return warn!(%error, "could not leave the members Lease; this replica expires from it after a lease duration"),
        }
    }
}

/// How often leaving is tried against the others' beats.
const LEAVE_TRIES: u32 = 5;

async fn leave_once(api: &Api<Lease>, name: &str, membership: &Membership) -> kube::Result<()> {
    let Some(lease) = api.get_opt(name).await? else { return Ok(()) };
    let beats = beats_of(&lease);
    if !beats.contains_key(&membership.identity) {
        return Ok(());
    }
    let left = membership.leave(&beats);
    api.replace(name, &PostParams::default(), &with_records(with_beats(lease, &left), &left, None)).await.map(drop)
}

/// Read, observe, write this replica's beat. Returns the live members' count.
async fn beat_once(api: &Api<Lease>, name: &str, membership: &mut Membership, record: Option<serde_json::Value>, now: Instant) -> kube::Result<usize> {
    let identity = membership.identity.clone();
    let mine = Some((identity.as_str(), record));
    match api.get_opt(name).await? {
        Some(lease) => {
            let beats = beats_of(&lease);
            membership.observe(&beats, now);
            let next = membership.beat(&beats, now);
            api.replace(name, &PostParams::default(), &with_records(with_beats(lease, &next), &next, mine)).await?;
        }
        None => {
            let lease = Lease { metadata: ObjectMeta { name: Some(name.into()), ..ObjectMeta::default() }, spec: None };
            let next = membership.beat(&Beats::new(), now);
            api.create(&PostParams::default(), &with_records(with_beats(lease, &next), &next, mine)).await?;
        }
    }
    Ok(membership.live(now).len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beats(entries: &[(&str, u64)]) -> Beats {
        entries.iter().map(|(m, b)| (m.to_string(), *b)).collect()
    }

    #[test]
    fn a_member_lives_while_its_counter_changes_as_observed_here() {
        let t0 = Instant::now();
        let lease = Duration::from_secs(15);
        let mut me = Membership::new("a", lease);
        me.observe(&beats(&[("a", 3), ("b", 7)]), t0);
        assert_eq!(me.live(t0).len(), 2, "a member first seen counts as alive");
        // b beats at 10 s; at 24 s it is alive (14 s since its change), at 25 s dead.
        me.observe(&beats(&[("a", 4), ("b", 8)]), t0 + Duration::from_secs(10));
        me.observe(&beats(&[("a", 5), ("b", 8)]), t0 + Duration::from_secs(24));
        assert!(me.live(t0 + Duration::from_secs(24)).contains("b"));
        assert_eq!(me.live(t0 + Duration::from_secs(25)).into_iter().collect::<Vec<_>>(), ["a"]);
        // Its stale entry is dropped by the next write; this replica's counter goes up.
        assert_eq!(me.beat(&beats(&[("a", 5), ("b", 8)]), t0 + Duration::from_secs(25)), beats(&[("a", 6)]));
        // It comes back: alive again.
        me.observe(&beats(&[("a", 6), ("b", 9)]), t0 + Duration::from_secs(26));
        assert!(me.live(t0 + Duration::from_secs(26)).contains("b"));
    }

    #[test]
    fn this_replica_is_always_a_member_and_leaving_removes_only_it() {
        let t0 = Instant::now();
        let me = Membership::new("a", Duration::from_secs(15));
        assert_eq!(me.live(t0).len(), 1, "alone before the first read");
        assert_eq!(me.beat(&Beats::new(), t0), beats(&[("a", 1)]));
        assert_eq!(me.leave(&beats(&[("a", 1), ("b", 2)])), beats(&[("b", 2)]));
    }

    #[test]
    fn each_member_keeps_its_record_and_the_last_to_leave_keeps_its_own() {
        let record = |digest: &str| Some(serde_json::json!({ "digest": digest }));
        let lease = with_records(Lease::default(), &beats(&[("a", 1), ("b", 1)]), Some(("a", record("x"))));
        let lease = with_records(lease, &beats(&[("a", 1), ("b", 2)]), Some(("b", record("y"))));
        assert_eq!(records_of(&lease).len(), 2);
        // b gone from the beats: its record goes at the next write; a's is replaced.
        let lease = with_records(lease, &beats(&[("a", 2)]), Some(("a", record("z"))));
        assert_eq!(records_of(&lease), [("a".to_string(), record("z").unwrap())].into());
        // a leaves last: its record stays (no member left to say otherwise).
        let lease = with_records(lease, &Beats::new(), None);
        assert_eq!(records_of(&lease).len(), 1, "kept with every replica gone");
        // A member with nothing serving removes its record; none left, no annotation.
        let lease = with_records(lease, &beats(&[("a", 3)]), Some(("a", None)));
        assert!(!lease.metadata.annotations.unwrap().contains_key(DEFAULT_MODULES_ANNOTATION));
    }

    #[test]
    fn an_unreadable_annotation_is_no_members() {
        let mut lease = Lease::default();
        lease.metadata.annotations = Some([(MEMBERS_ANNOTATION.to_string(), "not json".to_string())].into());
        assert!(beats_of(&lease).is_empty());
        let lease = with_beats(Lease::default(), &beats(&[("x", 1)]));
        assert_eq!(beats_of(&lease), beats(&[("x", 1)]));
    }
}
