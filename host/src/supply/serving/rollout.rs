//! A candidate's rollout, as pure rules: which Hikawas it decides for (by uid, so every
//! replica and every restart agrees), when it has earned promotion, when it must be rolled back,
//! and how one process counts a candidate's decisions across the replicas ([`CandidateTally`]).
//! No I/O, no locks and no clock: [`RuleSets`](super::RuleSets) holds the tallies and acts on
//! what these rules say.

use std::collections::HashMap;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::crd::RolloutSpec;

/// Promotion waits this long when the spec names neither a time nor a number of decisions.
pub const DEFAULT_PROMOTE_AFTER: Duration = Duration::from_secs(300);

/// A Hikawa's place among 100 shares: the first 8 bytes of sha256(uid), big-endian, mod 100.
pub fn share(uid: &str) -> u8 {
    let hash = Sha256::digest(uid.as_bytes());
    let first = u64::from_be_bytes(hash[..8].try_into().expect("sha256 has 32 bytes"));
    (first % 100) as u8
}

/// Whether the candidate decides for this Hikawa at this percentage.
pub fn decides_for(uid: &str, percent: u8) -> bool {
    share(uid) < percent
}

/// Decisions a candidate made, and how many failed: what a replica's entry in the status
/// records too.
pub type Tally = crate::crd::Counted;

/// When a candidate is promoted or rolled back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thresholds {
    pub percent: u8,
    pub promote_after: Option<Duration>,
    pub promote_after_decisions: Option<u64>,
    pub max_failure_percent: u8,
}

impl From<&RolloutSpec> for Thresholds {
    fn from(spec: &RolloutSpec) -> Self {
        let promote_after = spec.promote_after_seconds.map(Duration::from_secs);
        let promote_after = match (promote_after, spec.promote_after_decisions) {
            (None, None) => Some(DEFAULT_PROMOTE_AFTER),
            (time, _) => time,
        };
        Thresholds {
            percent: spec.percent.min(100),
            promote_after,
            promote_after_decisions: spec.promote_after_decisions,
            max_failure_percent: spec.max_failure_percent.min(100),
        }
    }
}

impl Thresholds {
    /// Failures past the threshold: roll back. (At 0 %, the first failure.)
    pub fn failed_too_often(&self, tally: Tally) -> bool {
        tally.failures > 0 && u128::from(tally.failures) * 100 > u128::from(self.max_failure_percent) * u128::from(tally.decisions)
    }

    /// Served long enough, or decided often enough, within the failure threshold. A candidate
    /// that has not decided once has not shown anything: never promoted.
    pub fn due_for_promotion(&self, tally: Tally, serving_for: Duration) -> bool {
        tally.decisions > 0
            && !self.failed_too_often(tally)
            && (self.promote_after.is_some_and(|t| serving_for >= t) || self.promote_after_decisions.is_some_and(|n| tally.decisions >= n))
    }

    /// How long until promotion by time, if it comes by time.
    pub fn promotion_in(&self, serving_for: Duration) -> Option<Duration> {
        self.promote_after.map(|t| t.saturating_sub(serving_for))
    }
}

/// What this process counts of one rule set's candidate: its own decisions, the other
/// replicas' as their entries in the status say, and whether (and on which sum) it was
/// rolled back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CandidateTally {
    pub digest: String,
    /// This replica's own decisions.
    pub tally: Tally,
    /// The other replicas' decisions, as their entries in the status say.
    pub others: Tally,
    pub rolled_back: bool,
    /// The count the rollback was decided on, here or by another replica (what is counted
    /// after it does not change why).
    pub ended_with: Option<Tally>,
    /// Whether that judgement was this replica's own (it writes it into its entry).
    pub judged_here: bool,
}

/// What one decision counted means for the candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Rolled back already: the decision counts for nothing.
    Ignored,
    /// Past the failure threshold now: the candidate stops, at once.
    Stop,
    /// A failure to write down, or a promotion that may be due: the rule set is reconciled.
    Wake,
    /// Counted; nothing changes yet.
    Quiet,
}

impl CandidateTally {
    pub fn new(digest: &str, tally: Tally, rolled_back: bool) -> Self {
        CandidateTally { digest: digest.into(), tally, others: Tally::default(), rolled_back, ended_with: None, judged_here: false }
    }

    /// Every replica's decisions: the sum, or the one the rollback was decided on.
    pub fn total(&self) -> Tally {
        self.ended_with.unwrap_or(Tally { decisions: self.tally.decisions + self.others.decisions, failures: self.tally.failures + self.others.failures })
    }

    /// Judge the sum: past the failure threshold the candidate is rolled back on it (the
    /// caller stops it). Whether it was.
    pub fn judge(&mut self, thresholds: &Thresholds) -> bool {
        let total = self.total();
        if self.rolled_back || !thresholds.failed_too_often(total) {
            return false;
        }
        self.rolled_back = true;
        self.ended_with = Some(total);
        self.judged_here = true;
        true
    }

    /// Count one of this replica's decisions (`ok`: it did not fail), judged on every
    /// replica's decisions, as the status will be.
    pub fn count(&mut self, ok: bool, thresholds: &Thresholds) -> Verdict {
        if self.rolled_back {
            return Verdict::Ignored;
        }
        self.tally.decisions += 1;
        self.tally.failures += u64::from(!ok);
        let total = self.total();
        if self.judge(thresholds) {
            Verdict::Stop
        } else if !ok || thresholds.promote_after_decisions.is_some_and(|n| total.decisions >= n) {
            Verdict::Wake
        } else {
            Verdict::Quiet
        }
    }

    /// Another replica found the candidate failing too often on the sum `on`: rolled back on
    /// that sum, unless it was judged already (the first judgement stands). Whether it stops
    /// now.
    pub fn roll_back(&mut self, on: Tally) -> bool {
        if self.ended_with.is_some() {
            return false;
        }
        self.rolled_back = true;
        self.ended_with = Some(on);
        true
    }

    /// The other replicas' decisions for the candidate `digest`, as the status has them
    /// (ignored if this tally counts other bytes), judged as a decision is (when the
    /// candidate's `thresholds` are known). Whether it stops now.
    pub fn others_counted(&mut self, digest: &str, others: Tally, thresholds: Option<&Thresholds>) -> bool {
        if self.digest != digest {
            return false;
        }
        self.others = others;
        thresholds.is_some_and(|t| self.judge(t))
    }
}

/// The count of rule set `name`'s candidate `digest`: a new one if another candidate's was
/// counted.
pub fn counting<'a>(tallies: &'a mut HashMap<String, CandidateTally>, name: &str, digest: &str) -> &'a mut CandidateTally {
    let entry = tallies.entry(name.into()).or_insert_with(|| CandidateTally::new(digest, Tally::default(), false));
    if entry.digest != digest {
        *entry = CandidateTally::new(digest, Tally::default(), false);
    }
    entry
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(percent: u8, seconds: Option<u64>, decisions: Option<u64>, max_failure_percent: u8) -> Thresholds {
        Thresholds::from(&RolloutSpec { percent, promote_after_seconds: seconds, promote_after_decisions: decisions, max_failure_percent })
    }

    #[test]
    fn shares_follow_the_documented_rule_and_spread_evenly() {
        // sha256("a") = ca978112ca1bbdca...: 0xca978112ca1bbdca % 100.
        assert_eq!(share("a"), (0xca97_8112_ca1b_bdca_u64 % 100) as u8);
        let uids: Vec<String> = (0..10_000).map(|i| format!("00000000-0000-0000-0000-{i:012}")).collect();
        let half = uids.iter().filter(|u| decides_for(u, 50)).count();
        assert!((4_700..=5_300).contains(&half), "{half} of 10,000 at 50 %");
        assert!(uids.iter().all(|u| !decides_for(u, 0)) && uids.iter().all(|u| decides_for(u, 100)));
        // Raising the percentage only adds Hikawas: those at 10 % stay at 20 %.
        assert!(uids.iter().filter(|u| decides_for(u, 10)).all(|u| decides_for(u, 20)));
    }

    #[test]
    fn rolls_back_past_the_failure_rate() {
        let strict = spec(50, None, Some(10), 0);
        assert!(!strict.failed_too_often(Tally { decisions: 100, failures: 0 }));
        assert!(strict.failed_too_often(Tally { decisions: 100, failures: 1 }), "0 %: the first failure");
        let tolerant = spec(50, None, Some(10), 20);
        assert!(!tolerant.failed_too_often(Tally { decisions: 10, failures: 2 }), "20 % is within");
        assert!(tolerant.failed_too_often(Tally { decisions: 10, failures: 3 }));
        assert!(tolerant.failed_too_often(Tally { decisions: 1, failures: 1 }), "one failure in one decision is 100 %");
    }

    #[test]
    fn promotes_after_time_or_decisions_within_the_threshold() {
        let by_count = spec(50, None, Some(10), 0);
        assert_eq!(by_count.promote_after, None, "a count alone sets no time");
        assert!(!by_count.due_for_promotion(Tally { decisions: 9, failures: 0 }, Duration::from_secs(3600)));
        assert!(by_count.due_for_promotion(Tally { decisions: 10, failures: 0 }, Duration::ZERO));
        assert!(!by_count.due_for_promotion(Tally { decisions: 10, failures: 1 }, Duration::ZERO));
        let by_time = spec(50, Some(30), None, 0);
        assert!(!by_time.due_for_promotion(Tally { decisions: 5, failures: 0 }, Duration::from_secs(29)));
        assert!(by_time.due_for_promotion(Tally { decisions: 5, failures: 0 }, Duration::from_secs(30)));
        assert!(!by_time.due_for_promotion(Tally::default(), Duration::from_secs(30)), "never decided: nothing shown");
        assert_eq!(by_time.promotion_in(Duration::from_secs(10)), Some(Duration::from_secs(20)));
        let default = spec(10, None, None, 0);
        assert_eq!(default.promote_after, Some(DEFAULT_PROMOTE_AFTER));
    }

    #[test]
    fn a_tally_rolls_back_past_the_threshold_summed_over_replicas() {
        let t = spec(100, None, Some(20), 25);
        let mut tally = CandidateTally::new("sha256:c", Tally::default(), false);
        // The others counted 4 decisions, one failed: 25 %, within.
        assert!(!tally.others_counted("sha256:c", Tally { decisions: 4, failures: 1 }, Some(&t)));
        assert_eq!(tally.count(true, &t), Verdict::Quiet, "1 in 5");
        assert_eq!(tally.count(false, &t), Verdict::Stop, "2 in 6: past 25 %");
        assert_eq!((tally.total(), tally.ended_with, tally.judged_here), (Tally { decisions: 6, failures: 2 }, Some(Tally { decisions: 6, failures: 2 }), true));
        // Decisions still in flight count for nothing; the sum it ended on stands.
        assert_eq!(tally.count(false, &t), Verdict::Ignored);
        assert!(!tally.others_counted("sha256:c", Tally { decisions: 50, failures: 50 }, Some(&t)));
        assert_eq!(tally.total(), Tally { decisions: 6, failures: 2 });
        // The others' counts alone can put it past: judged as a decision is (here at 20 %).
        let t20 = spec(100, None, Some(20), 20);
        let mut tally = CandidateTally::new("sha256:c", Tally { decisions: 10, failures: 0 }, false);
        assert!(!tally.others_counted("sha256:c", Tally { decisions: 3, failures: 2 }, Some(&t20)), "2 in 13");
        assert!(tally.others_counted("sha256:c", Tally { decisions: 6, failures: 4 }, Some(&t20)), "4 in 16");
        assert_eq!(tally.ended_with, Some(Tally { decisions: 16, failures: 4 }));
        // Without the candidate's thresholds (not published yet), counted but not judged; and
        // another candidate's counts are not this one's.
        let mut tally = CandidateTally::new("sha256:c", Tally::default(), false);
        assert!(!tally.others_counted("sha256:c", Tally { decisions: 1, failures: 1 }, None));
        assert!(!tally.others_counted("sha256:d", Tally { decisions: 7, failures: 0 }, Some(&t)));
        assert_eq!((tally.others, tally.rolled_back), (Tally { decisions: 1, failures: 1 }, false));
    }

    #[test]
    fn a_tally_wakes_the_rule_set_on_a_failure_and_when_promotion_by_count_may_be_due() {
        let t = spec(100, None, Some(3), 50);
        let mut tally = CandidateTally::new("sha256:c", Tally::default(), false);
        assert_eq!(tally.count(true, &t), Verdict::Quiet);
        assert_eq!(tally.count(false, &t), Verdict::Wake, "1 in 2 is within 50 %: a failure to write down");
        assert_eq!(tally.count(true, &t), Verdict::Wake, "the third decision may promote");
        let by_time = spec(100, Some(60), None, 50);
        assert_eq!(CandidateTally::new("sha256:c", Tally::default(), false).count(true, &by_time), Verdict::Quiet, "promotion by time: the requeue comes for it");
    }

    #[test]
    fn a_tally_stops_on_another_replicas_judgement_and_the_first_one_stands() {
        let t = spec(100, None, Some(100), 25);
        let mut tally = CandidateTally::new("sha256:c", Tally::default(), false);
        for _ in 0..10 {
            assert_eq!(tally.count(true, &t), Verdict::Quiet);
        }
        assert!(tally.roll_back(Tally { decisions: 4, failures: 2 }), "stops here at once");
        assert_eq!((tally.total(), tally.rolled_back, tally.judged_here), (Tally { decisions: 4, failures: 2 }, true, false));
        assert!(!tally.roll_back(Tally { decisions: 9, failures: 9 }), "the first judgement stands");
        assert_eq!(tally.count(false, &t), Verdict::Ignored);
        assert_eq!(tally.total(), Tally { decisions: 4, failures: 2 });
    }

    #[test]
    fn a_tally_resumed_from_the_status_goes_on_from_its_count_and_a_new_candidate_starts_afresh() {
        let t = spec(100, None, Some(5), 0);
        let mut tallies = HashMap::new();
        tallies.insert("r".to_string(), CandidateTally::new("sha256:c", Tally { decisions: 4, failures: 0 }, false));
        assert_eq!(counting(&mut tallies, "r", "sha256:c").count(true, &t), Verdict::Wake, "the fifth decision may promote");
        assert_eq!(tallies["r"].total(), Tally { decisions: 5, failures: 0 });
        // Resumed rolled back: nothing more counts.
        let mut ended = CandidateTally::new("sha256:c", Tally { decisions: 3, failures: 1 }, true);
        assert_eq!(ended.count(true, &t), Verdict::Ignored);
        // Other bytes: a new count.
        let fresh = counting(&mut tallies, "r", "sha256:d");
        assert_eq!((fresh.digest.as_str(), fresh.total()), ("sha256:d", Tally::default()));
    }
}
