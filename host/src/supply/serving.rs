//! Which module serves which rule set: `ZundokoRules` resources, each serving a module (and
//! maybe a candidate in a staged rollout) to the Hikawas that name it in `spec.rules`. The
//! rule-set controller (`controllers/rulesets/`) turns each resource into a [`Serving`]
//! published here; each Hikawa reconcile asks here which module decides for it
//! ([`RuleSets::choose`]) and reports a candidate's decisions back ([`RuleSets::record`]),
//! which rolls a failing candidate back at once, for every Hikawa. The rollout's tally and
//! thresholds are pure rules in [`rollout`].

pub mod rollout;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use tokio::sync::mpsc;

use crate::supply::contract::rules::Rules;
use crate::supply::tenant::RuleSetKey;
use rollout::{CandidateTally, Tally, Thresholds, Verdict, counting};

/// Why a rule set serves nothing: its phase, and the reason and message its status gives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unavailable {
    pub phase: String,
    pub reason: String,
    pub message: String,
}

/// A candidate deciding for its share of a rule set's Hikawas.
#[derive(Clone)]
pub struct Candidate {
    pub rules: Arc<dyn Rules>,
    pub thresholds: Thresholds,
}

/// One rule set as the Hikawas see it.
#[derive(Clone)]
pub struct Serving {
    pub stable: Result<Arc<dyn Rules>, Unavailable>,
    pub candidate: Option<Candidate>,
}

impl Serving {
    /// What the Hikawas would notice: the modules serving, and the candidate's share.
    fn fingerprint(&self) -> (Option<String>, Option<(String, u8)>) {
        (
            self.stable.as_ref().ok().map(|r| r.identity().digest.clone()),
            self.candidate.as_ref().map(|c| (c.rules.identity().digest.clone(), c.thresholds.percent)),
        )
    }
}

/// A decision by a candidate, to be counted toward its rollout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CandidateDecision {
    pub rules: String,
    pub digest: String,
}

/// Why the rules a Hikawa names cannot decide for it (they do not exist, or serve no module):
/// plain values; the reconcile error converts from it (`controllers/error.rs`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RulesUnavailable {
    pub rules: String,
    pub reason: &'static str,
    pub message: String,
}

impl From<crate::supply::tenant::RefusedName> for RulesUnavailable {
    fn from(refused: crate::supply::tenant::RefusedName) -> Self {
        RulesUnavailable { rules: refused.rules, reason: refused.reason, message: refused.message }
    }
}

impl RulesUnavailable {
    pub fn reason(&self) -> &'static str {
        self.reason
    }
}

/// Which module decides for a Hikawa. `E` is what an unavailable choice is told as: a
/// [`RulesUnavailable`], or any error made from one (the Hikawa controller's).
pub enum Choice<E = RulesUnavailable> {
    Decide { rules: Arc<dyn Rules>, candidate: Option<CandidateDecision> },
    /// The rule sets have not been listed yet: not known whether these rules exist.
    CatchingUp,
    Unavailable(E),
}

/// What the rule set controller and the Hikawa controller hear from [`RuleSets`].
pub struct Signals {
    /// Rule sets whose serving modules changed: their Hikawas are reconciled.
    pub changed: mpsc::UnboundedReceiver<String>,
    /// Rule sets to reconcile now: a rollback to record, a failure to write down, a
    /// promotion that may be due.
    pub wake: mpsc::UnboundedReceiver<String>,
}

pub struct RuleSets {
    serving: RwLock<HashMap<String, Arc<Serving>>>,
    /// Rule sets that exist, published or not yet (their first check still running).
    known: Mutex<HashSet<String>>,
    synced: AtomicBool,
    /// Why the rule sets cannot be listed, while they cannot (RBAC, say).
    unlistable: Mutex<Option<String>>,
    tallies: Mutex<HashMap<String, CandidateTally>>,
    /// The rule set each Hikawa (by uid) names, so a rule set hears at once when one joins
    /// or leaves it (its status counts them).
    members: Mutex<HashMap<String, String>>,
    changed: mpsc::UnboundedSender<String>,
    wake: mpsc::UnboundedSender<String>,
}

impl RuleSets {
    pub fn new() -> (RuleSets, Signals) {
        let (changed, changed_rx) = mpsc::unbounded_channel();
        let (wake, wake_rx) = mpsc::unbounded_channel();
        let sets = RuleSets {
            serving: RwLock::default(),
            known: Mutex::default(),
            synced: AtomicBool::new(false),
            unlistable: Mutex::default(),
            tallies: Mutex::default(),
            members: Mutex::default(),
            changed,
            wake,
        };
        (sets, Signals { changed: changed_rx, wake: wake_rx })
    }

    /// The module that decides for the Hikawa with this uid naming the rule set `name`.
    pub fn choose<E: From<RulesUnavailable>>(&self, name: &str, uid: &str) -> Choice<E> {
        let serving = self.serving.read().unwrap_or_else(|p| p.into_inner()).get(name).cloned();
        let Some(serving) = serving else {
            let known = self.known.lock().unwrap_or_else(|p| p.into_inner()).contains(name);
            if !known
                && !self.synced.load(Ordering::SeqCst)
                && let Some(why) = self.unlistable.lock().unwrap_or_else(|p| p.into_inner()).clone()
            {
                return Choice::Unavailable(E::from(RulesUnavailable {
                    rules: name.into(),
                    reason: "RulesUnreadable",
                    message: format!("the operator cannot list the rule sets, so it cannot tell whether {} exists: {why}", RuleSetKey::parse(name).describe()),
                }));
            }
            if known || !self.synced.load(Ordering::SeqCst) {
                return Choice::CatchingUp;
            }
            return Choice::Unavailable(E::from(RulesUnavailable {
                rules: name.into(),
                reason: "RulesNotFound",
                message: format!("there is no {}", RuleSetKey::parse(name).describe()),
            }));
        };
        if let Some(candidate) = &serving.candidate
            && rollout::decides_for(uid, candidate.thresholds.percent)
        {
            let digest = candidate.rules.identity().digest.clone();
            return Choice::Decide { rules: candidate.rules.clone(), candidate: Some(CandidateDecision { rules: name.into(), digest }) };
        }
        match &serving.stable {
            Ok(rules) => Choice::Decide { rules: rules.clone(), candidate: None },
            Err(why) => Choice::Unavailable(E::from(RulesUnavailable {
                rules: name.into(),
                reason: "RulesNotActive",
                message: format!("{} serves no module: it is {} ({}: {})", RuleSetKey::parse(name).describe(), why.phase, why.reason, why.message),
            })),
        }
    }

    /// Count a candidate's decision. Past the failure threshold (over every replica's count:
    /// this one's and the others' entries as last read) the candidate stops here at once:
    /// every Hikawa of the rule set is reconciled with the stable module, and the controller
    /// records the rollback on that sum (the rule set's writer), or writes it into this
    /// replica's entry for the writer to record (any other replica). Every replica judges
    /// each of its decisions as one replica would: a sum of counts that were all really made,
    /// however the replicas' writes interleave, so a rollout ends as it would with one.
    pub fn record(&self, decision: &CandidateDecision, ok: bool) {
        let serving = self.serving.read().unwrap_or_else(|p| p.into_inner()).get(&decision.rules).cloned();
        let Some(candidate) = serving.as_ref().and_then(|s| s.candidate.clone()) else { return };
        if candidate.rules.identity().digest != decision.digest {
            return; // decided by a candidate that has since been replaced
        }
        let mut tallies = self.tallies.lock().unwrap_or_else(|p| p.into_inner());
        let verdict = counting(&mut tallies, &decision.rules, &decision.digest).count(ok, &candidate.thresholds);
        drop(tallies);
        match verdict {
            Verdict::Stop => self.stop_candidate(&decision.rules, &decision.digest),
            Verdict::Wake => {
                let _ = self.wake.send(decision.rules.clone());
            }
            Verdict::Quiet | Verdict::Ignored => {}
        }
    }

    /// The candidate `digest` of rule set `name` stops deciding, now.
    fn stop_candidate(&self, name: &str, digest: &str) {
        let mut serving = self.serving.write().unwrap_or_else(|p| p.into_inner());
        if let Some(current) = serving.get(name)
            && current.candidate.as_ref().is_some_and(|c| c.rules.identity().digest == digest)
        {
            let stopped = Serving { stable: current.stable.clone(), candidate: None };
            serving.insert(name.into(), Arc::new(stopped));
            let _ = self.changed.send(name.into());
        }
        drop(serving);
        let _ = self.wake.send(name.into());
    }

    /// The candidate's decisions so far, and whether it was rolled back; `None` if this
    /// process has counted none for these bytes.
    pub fn tally(&self, name: &str, digest: &str) -> Option<(Tally, bool)> {
        let tallies = self.tallies.lock().unwrap_or_else(|p| p.into_inner());
        tallies.get(name).filter(|t| t.digest == digest).map(|t| (t.total(), t.rolled_back))
    }

    /// The sum on which this replica found the candidate failing too often, if it did (not
    /// another replica's judgement, see [`roll_back`](Self::roll_back)).
    pub fn failed_too_often(&self, name: &str, digest: &str) -> Option<Tally> {
        let tallies = self.tallies.lock().unwrap_or_else(|p| p.into_inner());
        tallies.get(name).filter(|t| t.digest == digest && t.judged_here).and_then(|t| t.ended_with)
    }

    /// Another replica found the candidate `digest` failing too often on the sum `on`: it
    /// stops here too, at once, and the rollback is recorded on that sum.
    pub fn roll_back(&self, name: &str, digest: &str, on: Tally) {
        let mut tallies = self.tallies.lock().unwrap_or_else(|p| p.into_inner());
        let stops = counting(&mut tallies, name, digest).roll_back(on);
        drop(tallies);
        if stops {
            self.stop_candidate(name, digest);
        }
    }

    /// This replica's own share of [`tally`](Self::tally).
    pub fn own_tally(&self, name: &str, digest: &str) -> Option<Tally> {
        let tallies = self.tallies.lock().unwrap_or_else(|p| p.into_inner());
        tallies.get(name).filter(|t| t.digest == digest).map(|t| t.tally)
    }

    /// The other replicas' decisions for the candidate `digest`, as the status has them.
    /// Judged as a decision is: past the failure threshold, the candidate stops here.
    pub fn others_counted(&self, name: &str, digest: &str, others: Tally) {
        let thresholds = self.serving(name).and_then(|s| s.candidate.clone()).filter(|c| c.rules.identity().digest == digest).map(|c| c.thresholds);
        let mut tallies = self.tallies.lock().unwrap_or_else(|p| p.into_inner());
        let entry = tallies.entry(name.into()).or_insert_with(|| CandidateTally::new(digest, Tally::default(), false));
        let stops = entry.others_counted(digest, others, thresholds.as_ref());
        drop(tallies);
        if stops {
            self.stop_candidate(name, digest);
        }
    }

    /// Start counting a candidate's decisions from what its status says (a restarted
    /// operator resumes a rollout), unless this process already counts them.
    pub fn resume(&self, name: &str, digest: &str, tally: Tally, rolled_back: bool) {
        let mut tallies = self.tallies.lock().unwrap_or_else(|p| p.into_inner());
        match tallies.get(name) {
            Some(t) if t.digest == digest => {}
            _ => {
                tallies.insert(name.into(), CandidateTally::new(digest, tally, rolled_back));
            }
        }
    }

    /// The rule set has no candidate any more: one added again starts a new count.
    pub fn forget_candidate(&self, name: &str) {
        self.tallies.lock().unwrap_or_else(|p| p.into_inner()).remove(name);
    }

    /// Make `serving` what rule set `name` serves; its Hikawas are reconciled if that changes
    /// anything they would notice.
    pub fn publish(&self, name: &str, serving: Serving) {
        let mut sets = self.serving.write().unwrap_or_else(|p| p.into_inner());
        let changed = sets.get(name).is_none_or(|old| old.fingerprint() != serving.fingerprint() || old.stable.is_err() != serving.stable.is_err());
        sets.insert(name.into(), Arc::new(serving));
        drop(sets);
        if changed {
            let _ = self.changed.send(name.into());
        }
    }

    /// The rule set exists: until its first check is published, its Hikawas wait for it
    /// (not a failure).
    pub fn announce(&self, name: &str) {
        self.known.lock().unwrap_or_else(|p| p.into_inner()).insert(name.into());
    }

    /// The rule set is gone.
    pub fn remove(&self, name: &str) {
        self.known.lock().unwrap_or_else(|p| p.into_inner()).remove(name);
        let removed = self.serving.write().unwrap_or_else(|p| p.into_inner()).remove(name).is_some();
        self.tallies.lock().unwrap_or_else(|p| p.into_inner()).remove(name);
        if removed {
            let _ = self.changed.send(name.into());
        }
    }

    /// Keep only the rule sets for which `alive` holds (after a relist).
    pub fn retain(&self, alive: impl Fn(&str) -> bool) {
        self.known.lock().unwrap_or_else(|p| p.into_inner()).retain(|n| alive(n));
        let gone: Vec<String> = self.serving.read().unwrap_or_else(|p| p.into_inner()).keys().filter(|n| !alive(n)).cloned().collect();
        for name in gone {
            self.remove(&name);
        }
    }

    /// The Hikawa `uid` names `rules` (or none): the rule sets it joins or leaves hear of it.
    pub fn member(&self, uid: &str, rules: Option<&str>) {
        let mut members = self.members.lock().unwrap_or_else(|p| p.into_inner());
        if members.get(uid).map(String::as_str) == rules {
            return;
        }
        let old = match rules {
            Some(name) => members.insert(uid.into(), name.into()),
            None => members.remove(uid),
        };
        drop(members);
        for name in old.iter().map(String::as_str).chain(rules) {
            let _ = self.wake.send(name.into());
        }
    }

    /// The Hikawa `uid` is gone.
    pub fn forget_member(&self, uid: &str) {
        self.member(uid, None);
    }

    /// Keep only the Hikawas for which `alive` holds (after a relist).
    pub fn retain_members(&self, alive: impl Fn(&str) -> bool) {
        let mut members = self.members.lock().unwrap_or_else(|p| p.into_inner());
        let mut left = Vec::new();
        members.retain(|uid, name| alive(uid) || {
            left.push(name.clone());
            false
        });
        drop(members);
        for name in left {
            let _ = self.wake.send(name);
        }
    }

    /// The rule sets have been listed once: a name not found now is not there.
    pub fn set_synced(&self) {
        if self.synced.swap(true, Ordering::SeqCst) {
            return;
        }
        *self.unlistable.lock().unwrap_or_else(|p| p.into_inner()) = None;
        // The Hikawas that found the rule sets not listed yet wait without polling: the rule
        // sets they name are `changed` now (a Hikawa counted as a member after this saw them
        // listed: `member` comes before `choose`).
        let named: HashSet<String> = self.members.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
        for name in named {
            let _ = self.changed.send(name);
        }
    }

    /// Listing the rule sets failed (before they were ever listed): Hikawas naming one are told
    /// why, instead of waiting in silence.
    pub fn set_unlistable(&self, why: String) {
        if !self.is_synced() {
            *self.unlistable.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
        }
    }

    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::SeqCst)
    }

    /// What rule set `name` serves now.
    pub fn serving(&self, name: &str) -> Option<Arc<Serving>> {
        self.serving.read().unwrap_or_else(|p| p.into_inner()).get(name).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::RolloutSpec;
    use crate::supply::contract::rules::NativeRules;

    fn rules(name: &'static str) -> Arc<dyn Rules> {
        let mut set = zundoko_rules::classic();
        set.info.name = name;
        Arc::new(NativeRules::new(set))
    }

    fn candidate(percent: u8, max_failure_percent: u8) -> Candidate {
        let spec = RolloutSpec { percent, promote_after_decisions: Some(5), max_failure_percent, ..RolloutSpec::default() };
        Candidate { rules: rules("candidate"), thresholds: Thresholds::from(&spec) }
    }

    fn digest_of(choice: &Choice) -> String {
        match choice {
            Choice::Decide { rules, .. } => rules.identity().digest.clone(),
            Choice::CatchingUp => "catching-up".into(),
            Choice::Unavailable(e) => e.reason().into(),
        }
    }

    #[test]
    fn chooses_by_name_and_share_and_says_why_not() {
        let (sets, mut signals) = RuleSets::new();
        assert_eq!(digest_of(&sets.choose("r", "u")), "catching-up");
        sets.set_synced();
        assert_eq!(digest_of(&sets.choose("r", "u")), "RulesNotFound");
        let unavailable = Unavailable { phase: "Pending".into(), reason: "SourceNotFound".into(), message: "no ConfigMap".into() };
        sets.publish("r", Serving { stable: Err(unavailable), candidate: None });
        assert_eq!(signals.changed.try_recv().unwrap(), "r");
        match sets.choose::<RulesUnavailable>("r", "u") {
            Choice::Unavailable(e) => assert!(e.to_string().contains("Pending (SourceNotFound: no ConfigMap)"), "{e}"),
            _ => panic!("not unavailable"),
        }
        sets.publish("r", Serving { stable: Ok(rules("stable")), candidate: Some(candidate(50, 0)) });
        let uids: Vec<String> = (0..200).map(|i| format!("uid-{i}")).collect();
        for uid in &uids {
            let expected = if rollout::decides_for(uid, 50) { "native:candidate" } else { "native:stable" };
            assert_eq!(digest_of(&sets.choose("r", uid)), expected, "{uid}");
        }
        // Publishing the same again wakes no Hikawa.
        while signals.changed.try_recv().is_ok() {}
        sets.publish("r", Serving { stable: Ok(rules("stable")), candidate: Some(candidate(50, 0)) });
        assert!(signals.changed.try_recv().is_err());
        sets.remove("r");
        assert_eq!(digest_of(&sets.choose("r", "u")), "RulesNotFound");
        // Never listed, and listing fails: said so, not waited for in silence.
        let (unlisted, _signals) = RuleSets::new();
        unlisted.set_unlistable("403 Forbidden".into());
        match unlisted.choose::<RulesUnavailable>("r", "u") {
            Choice::Unavailable(e) => assert!(e.reason() == "RulesUnreadable" && e.to_string().contains("403 Forbidden"), "{e}"),
            _ => panic!("not unavailable"),
        }
        unlisted.set_synced();
        assert_eq!(digest_of(&unlisted.choose("r", "u")), "RulesNotFound");
    }

    #[test]
    fn a_failing_candidate_stops_at_once_for_every_hikawa() {
        let (sets, mut signals) = RuleSets::new();
        sets.set_synced();
        sets.publish("r", Serving { stable: Ok(rules("stable")), candidate: Some(candidate(100, 25)) });
        let decision = CandidateDecision { rules: "r".into(), digest: "native:candidate".into() };
        for _ in 0..3 {
            sets.record(&decision, true);
        }
        assert_eq!(sets.tally("r", "native:candidate"), Some((Tally { decisions: 3, failures: 0 }, false)));
        sets.record(&decision, false); // 1 in 4: 25 %, within
        assert_eq!(signals.wake.try_recv().unwrap(), "r", "a failure is written down at once");
        assert_eq!(digest_of(&sets.choose("r", "any")), "native:candidate");
        while signals.changed.try_recv().is_ok() {}
        sets.record(&decision, false); // 2 in 5: 40 %
        assert_eq!(sets.tally("r", "native:candidate"), Some((Tally { decisions: 5, failures: 2 }, true)));
        assert_eq!(digest_of(&sets.choose("r", "any")), "native:stable", "rolled back for everyone");
        assert_eq!(signals.changed.try_recv().unwrap(), "r");
        assert_eq!(sets.failed_too_often("r", "native:candidate"), Some(Tally { decisions: 5, failures: 2 }), "judged here: written into its entry");
        // Decisions still in flight for the old candidate count for nothing.
        sets.record(&decision, false);
        assert_eq!(sets.tally("r", "native:candidate"), Some((Tally { decisions: 5, failures: 2 }, true)));
    }

    /// Every replica judges its decisions on the sum, and stops on another's judgement.
    #[test]
    fn a_replica_judges_on_every_replicas_count_and_stops_on_anothers_judgement() {
        let (sets, _signals) = RuleSets::new();
        sets.set_synced();
        sets.publish("r", Serving { stable: Ok(rules("stable")), candidate: Some(candidate(100, 25)) });
        let decision = CandidateDecision { rules: "r".into(), digest: "native:candidate".into() };
        // The others counted 4 decisions, one failed (25 %, within): this replica's good
        // decision makes 1 in 5, its failure 2 in 6 (past), judged on that sum.
        sets.others_counted("r", "native:candidate", Tally { decisions: 4, failures: 1 });
        sets.record(&decision, true);
        assert_eq!(digest_of(&sets.choose("r", "any")), "native:candidate");
        sets.record(&decision, false);
        assert_eq!(sets.failed_too_often("r", "native:candidate"), Some(Tally { decisions: 6, failures: 2 }));
        assert_eq!(digest_of(&sets.choose("r", "any")), "native:stable");

        // Another replica's judgement: stopped here at once, recorded on its sum, not written
        // into this replica's entry; the first judgement stands.
        let (sets, mut signals2) = RuleSets::new();
        sets.set_synced();
        sets.publish("r", Serving { stable: Ok(rules("stable")), candidate: Some(candidate(100, 25)) });
        for _ in 0..10 {
            sets.record(&decision, true);
        }
        while signals2.changed.try_recv().is_ok() {}
        sets.roll_back("r", "native:candidate", Tally { decisions: 4, failures: 2 });
        assert_eq!(digest_of(&sets.choose("r", "any")), "native:stable");
        assert_eq!(signals2.changed.try_recv().unwrap(), "r", "its Hikawas reconciled with the stable module");
        assert_eq!(sets.tally("r", "native:candidate"), Some((Tally { decisions: 4, failures: 2 }, true)));
        assert_eq!(sets.failed_too_often("r", "native:candidate"), None);
        sets.roll_back("r", "native:candidate", Tally { decisions: 9, failures: 9 });
        sets.record(&decision, false);
        assert_eq!(sets.tally("r", "native:candidate"), Some((Tally { decisions: 4, failures: 2 }, true)));

        // The others' counts as read, judged as a decision is: 10 good here and 2 of their 3
        // failed make 2 in 13 (within), 4 of their 6 make 4 in 16 (past).
        let (sets, _signals3) = RuleSets::new();
        sets.publish("r", Serving { stable: Ok(rules("stable")), candidate: Some(candidate(100, 20)) });
        for _ in 0..10 {
            sets.record(&decision, true);
        }
        sets.others_counted("r", "native:candidate", Tally { decisions: 3, failures: 2 });
        assert_eq!(sets.tally("r", "native:candidate"), Some((Tally { decisions: 13, failures: 2 }, false)));
        sets.others_counted("r", "native:candidate", Tally { decisions: 6, failures: 4 });
        assert_eq!(sets.failed_too_often("r", "native:candidate"), Some(Tally { decisions: 16, failures: 4 }));
        assert_eq!(digest_of(&sets.choose("r", "any")), "native:stable");
    }

    #[test]
    fn a_restart_resumes_the_count_from_the_status() {
        let (sets, mut signals) = RuleSets::new();
        sets.publish("r", Serving { stable: Ok(rules("stable")), candidate: Some(candidate(100, 0)) });
        sets.resume("r", "native:candidate", Tally { decisions: 4, failures: 0 }, false);
        sets.resume("r", "native:candidate", Tally { decisions: 1, failures: 0 }, false);
        assert_eq!(sets.tally("r", "native:candidate"), Some((Tally { decisions: 4, failures: 0 }, false)), "counted here already");
        while signals.wake.try_recv().is_ok() {}
        sets.record(&CandidateDecision { rules: "r".into(), digest: "native:candidate".into() }, true);
        assert_eq!(signals.wake.try_recv().unwrap(), "r", "the fifth decision may promote");
    }
}
