//! A candidate's rollout, as pure rules: which Hikawas it decides for (by uid, so every
//! replica and every restart agrees), when it has earned promotion, when it must be rolled back.

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
}
