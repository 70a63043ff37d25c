//! The rule set controller's rollout rules, with no I/O and no clock of their own: the time is
//! passed in (`now` in milliseconds, how long ago something happened as a duration), so they
//! are tested on a fake clock, as `process/leader/lock.rs` holds the Lease's rules:
//!
//! - A rollout advances from what the status recorded (a restart resumes it) and what every
//!   replica counted: promoted once served long enough or decided often enough within the
//!   failure threshold, rolled back past it ([`advance`]).
//! - Each replica counts its own decisions in its own entry; the others' entries are summed
//!   ([`others`]), and the first judgement one of them wrote stops the candidate here too
//!   ([`stops_on`]). Only the status's writer advances the rollout ([`next`]).
//! - When a rule set is looked at again ([`requeue`]), when its status may be written again
//!   ([`write_wait`]), when a replica writes its own count ([`counts_own`]), how a followed
//!   tag and a failed reconcile back off ([`follow_wait`], [`error_backoff`]).
//!
//! [`CandidateTally`](crate::supply::serving::rollout::CandidateTally) holds the same rules for
//! one process's count, decision by decision.

use std::time::Duration;

use super::status::{PROGRESSING, PROMOTED, ROLLED_BACK};
use crate::controllers::writes::status::rfc3339_millis;
use crate::crd::{ReplicaCount, RolloutStatus};
use crate::supply::serving::rollout::{Tally, Thresholds};
use zundoko_rules::TimestampMs;

/// A rule set's status is written at most this often (a rollout's counts change with every
/// decision); a change of phase waits at most this long too.
pub const STATUS_EVERY: Duration = Duration::from_secs(1);
/// Without a rollout in progress, how often the count of Hikawas is refreshed.
pub const REFRESH_EVERY: Duration = Duration::from_secs(10);
/// After a registry failure that may pass, an artifact is tried again this long after.
pub const OCI_RETRY: Duration = Duration::from_secs(5);
/// How often a followed tag is resolved again, unless the rule set says.
pub const FOLLOW_EVERY: Duration = Duration::from_secs(60);

/// A candidate's rollout, advanced to now: from what the status recorded (a restart resumes
/// it) and what this process counted since.
pub fn advance(previous: Option<&RolloutStatus>, digest: &str, tally: Tally, rolled_back: bool, thresholds: &Thresholds, now: TimestampMs) -> RolloutStatus {
    let previous = previous.filter(|r| r.digest == digest);
    let started_at = previous.map_or_else(|| rfc3339_millis(now), |r| r.started_at.clone());
    let started_ms = started_at.parse::<jiff::Timestamp>().map_or(now, |t| t.as_millisecond());
    let serving_for = Duration::from_millis(now.saturating_sub(started_ms).max(0) as u64);
    let was = previous.map(|r| r.state.as_str());
    let state = if was == Some(PROMOTED) {
        PROMOTED
    } else if was == Some(ROLLED_BACK) || rolled_back || thresholds.failed_too_often(tally) {
        ROLLED_BACK
    } else if thresholds.due_for_promotion(tally, serving_for) {
        PROMOTED
    } else {
        PROGRESSING
    };
    // An ended rollout keeps the count it ended with: decisions other replicas made before
    // they heard of the end are in their own entries, not in the record of why it ended.
    let tally = match previous.filter(|_| matches!(was, Some(PROMOTED | ROLLED_BACK))) {
        Some(ended) => Tally { decisions: ended.decisions, failures: ended.failures },
        None => tally,
    };
    let ended_at = match (state, previous.and_then(|r| r.ended_at.clone())) {
        (PROGRESSING, _) => None,
        (_, Some(at)) if was == Some(state) => Some(at),
        _ => Some(rfc3339_millis(now)),
    };
    RolloutStatus {
        digest: digest.into(),
        state: state.into(),
        started_at,
        ended_at,
        decisions: tally.decisions,
        failures: tally.failures,
        replicas: previous.map(|r| r.replicas.clone()).unwrap_or_default(),
    }
}

/// What the other replicas' entries of `rollout` say of the candidate `digest`: the sum of
/// their counts, and the first sum on which one of them found it failing too often.
pub fn others(rollout: &RolloutStatus, me: &str, digest: &str) -> (Tally, Option<Tally>) {
    let others = rollout.replicas.iter().filter(|(replica, c)| replica.as_str() != me && c.digest == digest);
    others.fold((Tally::default(), None), |(sum, judged), (_, c)| {
        let sum = Tally { decisions: sum.decisions + c.decisions, failures: sum.failures + c.failures };
        (sum, judged.or(c.failed_too_often))
    })
}

/// What a restarted process counts from, for the candidate's rollout `previous` records: this
/// replica's entry (a status written before replicas counted apart: its whole count), and
/// whether it was rolled back.
pub fn resumed(previous: &RolloutStatus, me: &str, digest: &str) -> (Tally, bool) {
    let mine = match previous.replicas.get(me) {
        Some(c) if c.digest == digest => Tally { decisions: c.decisions, failures: c.failures },
        _ if previous.replicas.is_empty() => Tally { decisions: previous.decisions, failures: previous.failures },
        _ => Tally::default(),
    };
    (mine, previous.state == ROLLED_BACK)
}

/// Another replica found the candidate failing too often (on the sum `judged`): it stops here
/// too, and the writer records the rollback on that sum, unless the recorded rollout ended.
pub fn stops_on(judged: Option<Tally>, previous: Option<&RolloutStatus>) -> Option<Tally> {
    judged.filter(|_| previous.is_none_or(|r| r.state == PROGRESSING))
}

/// A candidate rolls out beside a module that serves; once promoted it is that module.
pub fn rolls_out(stable_serves: bool, previous: Option<&RolloutStatus>) -> bool {
    stable_serves || previous.is_some_and(|r| r.state == PROMOTED)
}

/// What this process counted of the candidate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Every replica's decisions (or the sum the rollback was decided on), and whether the
    /// candidate was rolled back.
    pub total: Tally,
    pub rolled_back: bool,
    /// This replica's own decisions.
    pub own: Tally,
    /// The sum on which this replica found it failing too often, if it did.
    pub judged_here: Option<Tally>,
}

/// The rollout of the candidate `digest` as this replica would record it. Only the writer
/// advances the rollout; the others follow its record (and progress until there is one), but
/// a candidate judged failing too often stops at once wherever it was judged. The other
/// replicas' entries are theirs (as `cached` has them); this replica's own is its count, once
/// it counted anything.
#[allow(clippy::too_many_arguments)]
pub fn next(previous: Option<&RolloutStatus>, cached: Option<&RolloutStatus>, digest: &str, me: &str, writes: bool, counts: &Counts, thresholds: &Thresholds, now: TimestampMs) -> RolloutStatus {
    let Counts { total, rolled_back, own, judged_here } = *counts;
    let mut advanced = match previous {
        _ if writes => advance(previous, digest, total, rolled_back, thresholds, now),
        Some(recorded) if !rolled_back => recorded.clone(),
        _ => advance(previous, digest, if rolled_back { total } else { Tally::default() }, rolled_back, thresholds, now),
    };
    if let Some(cached) = cached {
        advanced.replicas.extend(cached.replicas.iter().filter(|(r, _)| r.as_str() != me).map(|(r, c)| (r.clone(), c.clone())));
    }
    if own.decisions > 0 || advanced.replicas.contains_key(me) {
        let count = ReplicaCount { digest: digest.into(), decisions: own.decisions, failures: own.failures, failed_too_often: judged_here };
        advanced.replicas.insert(me.into(), count);
    }
    advanced
}

/// What decides when a rule set is looked at again.
#[derive(Clone, Copy, Debug, Default)]
pub struct Pacing<'a> {
    /// The rollout as this reconcile found it, and as the status recorded it before.
    pub rollout: Option<&'a RolloutStatus>,
    pub recorded: Option<&'a RolloutStatus>,
    pub thresholds: Option<&'a Thresholds>,
    /// Whether this replica writes the rule set's status.
    pub writes: bool,
    /// A registry failed in a way that may pass, or a followed tag could not be resolved.
    pub registry_retry: bool,
    /// A followed tag's poll interval.
    pub follow_every: Option<Duration>,
}

/// When to reconcile the rule set again: while a rollout progresses, at the latest when its
/// promotion by time is due (and every [`STATUS_EVERY`] for its counts); a replica stopped on
/// a judgement the writer has not recorded yet, soon (its entry carries it until it does);
/// otherwise every [`REFRESH_EVERY`]. A registry that failed in a way that may pass is tried
/// again within [`OCI_RETRY`]; a followed tag is resolved again at its interval.
pub fn requeue(p: &Pacing, now: TimestampMs) -> Duration {
    fn state(r: Option<&RolloutStatus>) -> Option<&str> {
        r.map(|r| r.state.as_str())
    }
    let delay = match (state(p.rollout) == Some(PROGRESSING), p.thresholds) {
        (true, Some(t)) => {
            let started = p.rollout.and_then(|r| r.started_at.parse::<jiff::Timestamp>().ok()).map_or(now, |t| t.as_millisecond());
            let serving_for = Duration::from_millis((now - started).max(0) as u64);
            t.promotion_in(serving_for).map_or(STATUS_EVERY, |d| d.clamp(Duration::from_millis(10), STATUS_EVERY))
        }
        _ if !p.writes && state(p.recorded) == Some(PROGRESSING) && state(p.rollout) == Some(ROLLED_BACK) => STATUS_EVERY,
        _ => REFRESH_EVERY,
    };
    let delay = if p.registry_retry { delay.min(OCI_RETRY) } else { delay };
    p.follow_every.map_or(delay, |every| delay.min(every))
}

/// New artifacts a followed tag may bring in an hour before it is resolved less often.
pub const MOVES_AN_HOUR: usize = 6;
const HOUR: Duration = Duration::from_secs(3600);

/// A followed tag's interval once it moved `moves` times in the last hour: `None` while
/// within [`MOVES_AN_HOUR`]; past it, an hour shared by that many (10 min), or `poll` if longer.
/// Each new artifact is pulled, compiled and kept: a tag that mints one at every poll is
/// slowed down, and its status says so.
pub fn slowed_poll(moves: usize, poll: Duration) -> Option<Duration> {
    (moves > MOVES_AN_HOUR).then(|| poll.max(HOUR / MOVES_AN_HOUR as u32))
}

/// The times a tag moved that are within the last hour, now `now`.
pub fn moves_in_hour(moved_at: &mut Vec<std::time::Instant>, now: std::time::Instant) {
    moved_at.retain(|at| now.saturating_duration_since(*at) < HOUR);
}

/// A followed tag's interval: as the rule set says, or [`FOLLOW_EVERY`]; never under `floor`
/// (`--min-poll-secs`: each new artifact a poll finds is pulled, compiled and kept).
pub fn follow_every(poll_seconds: Option<u64>, floor: Duration) -> Duration {
    poll_seconds.map_or(FOLLOW_EVERY, Duration::from_secs).max(floor)
}

/// How long a changed status waits, its last write `since_last_write` ago: `None` if it may be
/// written now.
pub fn write_wait(since_last_write: Option<Duration>) -> Option<Duration> {
    since_last_write.filter(|age| *age < STATUS_EVERY).map(|age| STATUS_EVERY - age)
}

/// Whether a replica that does not write the rule set's status writes its own count `own`
/// into it now: while the rollout `recorded` is of the same candidate and still going on, and
/// its entry there differs; at most once every [`STATUS_EVERY`] (its last write: `last`, that
/// long ago), but at once when it has found the candidate failing too often and that write
/// did not say so.
pub fn counts_own(recorded: Option<&RolloutStatus>, own: &ReplicaCount, me: &str, last: Option<(&ReplicaCount, Duration)>) -> bool {
    let current = recorded.is_some_and(|r| r.digest == own.digest && r.state == PROGRESSING);
    let written = recorded.and_then(|r| r.replicas.get(me));
    if !current || written == Some(own) {
        return false;
    }
    let judged = |c: &ReplicaCount| c.failed_too_often.is_some();
    !last.is_some_and(|(last, age)| age < STATUS_EVERY && (judged(last) || !judged(own)))
}

/// How long after its last try a followed tag is resolved again: its interval, or after
/// `failures` tries in a row that failed, [`OCI_RETRY`] doubled for each (at most the interval).
pub fn follow_wait(failures: u32, poll: Duration) -> Duration {
    if failures == 0 { poll } else { (OCI_RETRY * (1 << (failures - 1).min(4))).min(poll) }
}

/// The backoff after `failures` (at least 1) reconciles in a row that failed: 250 ms doubled,
/// at most 30 s.
pub fn error_backoff(failures: u32) -> Duration {
    Duration::from_millis(250).saturating_mul(1 << (failures.max(1) - 1).min(7)).min(Duration::from_secs(30))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::RolloutSpec;
    use crate::supply::serving::rollout::{CandidateTally, Verdict};

    /// The fake clock: milliseconds since the epoch, as plain values.
    const T0: TimestampMs = 1_000;
    const SECOND: TimestampMs = 1_000;

    fn thresholds(seconds: Option<u64>, decisions: Option<u64>, max_failure_percent: u8) -> Thresholds {
        Thresholds::from(&RolloutSpec { percent: 50, promote_after_seconds: seconds, promote_after_decisions: decisions, max_failure_percent })
    }

    fn tally(decisions: u64, failures: u64) -> Tally {
        Tally { decisions, failures }
    }

    fn count(digest: &str, decisions: u64, failures: u64, judged: Option<Tally>) -> ReplicaCount {
        ReplicaCount { digest: digest.into(), decisions, failures, failed_too_often: judged }
    }

    /// What the writer records on this process's counts.
    fn written(previous: Option<&RolloutStatus>, counts: &Counts, t: &Thresholds, now: TimestampMs) -> RolloutStatus {
        next(previous, previous, "sha256:c", "me", true, counts, t, now)
    }

    #[test]
    fn promoted_once_served_the_set_time_with_a_decision_and_not_before() {
        let t = thresholds(Some(30), None, 0);
        let decided = Counts { total: tally(1, 0), ..Counts::default() };
        let started = written(None, &Counts::default(), &t, T0);
        assert_eq!((started.state.as_str(), started.started_at.as_str()), (PROGRESSING, "1970-01-01T00:00:01.000Z"));
        let waiting = written(Some(&started), &Counts::default(), &t, T0 + 60 * SECOND);
        assert_eq!(waiting.state, PROGRESSING, "never decided: nothing shown, not promoted however long");
        assert_eq!(written(Some(&started), &decided, &t, T0 + 30 * SECOND - 1).state, PROGRESSING);
        let promoted = written(Some(&started), &decided, &t, T0 + 30 * SECOND);
        assert_eq!((promoted.state.as_str(), promoted.ended_at.as_deref()), (PROMOTED, Some("1970-01-01T00:00:31.000Z")));
        assert_eq!(promoted.started_at, started.started_at, "the start is the first record's");
        // Ended: it stays so, with the count it ended with and its end time.
        let later = written(Some(&promoted), &Counts { total: tally(9, 9), ..Counts::default() }, &t, T0 + 99 * SECOND);
        assert_eq!(later, promoted);
    }

    #[test]
    fn promoted_after_the_set_decisions_within_the_threshold() {
        let t = thresholds(None, Some(5), 20);
        let started = written(None, &Counts::default(), &t, T0);
        assert_eq!(written(Some(&started), &Counts { total: tally(4, 0), ..Counts::default() }, &t, T0 + SECOND).state, PROGRESSING);
        assert_eq!(written(Some(&started), &Counts { total: tally(5, 1), ..Counts::default() }, &t, T0 + SECOND).state, PROMOTED, "1 in 5 is 20 %, within");
        assert_eq!(written(Some(&started), &Counts { total: tally(5, 2), ..Counts::default() }, &t, T0 + SECOND).state, ROLLED_BACK);
    }

    #[test]
    fn rolled_back_past_the_failure_threshold_summed_over_replicas() {
        let t = thresholds(None, Some(100), 25);
        let mut status = written(None, &Counts::default(), &t, T0);
        status.replicas.insert("a".into(), count("sha256:c", 5, 0, None));
        status.replicas.insert("b".into(), count("sha256:c", 3, 2, None));
        status.replicas.insert("old".into(), count("sha256:old", 50, 50, None));
        // Not this replica's own entry, not another candidate's: 8 decisions, 2 failed.
        let (sum, judged) = others(&status, "me", "sha256:c");
        assert_eq!((sum, judged), (tally(8, 2), None));
        // This process: 2 good decisions (2 in 10, within), then a failure (3 in 11, past).
        let mut here = CandidateTally::new("sha256:c", Tally::default(), false);
        assert!(!here.others_counted("sha256:c", sum, Some(&t)));
        assert_eq!((here.count(true, &t), here.count(true, &t), here.count(false, &t)), (Verdict::Quiet, Verdict::Quiet, Verdict::Stop));
        let counts = Counts { total: here.total(), rolled_back: here.rolled_back, own: here.tally, judged_here: here.ended_with.filter(|_| here.judged_here) };
        let failed = written(Some(&status), &counts, &t, T0 + 2 * SECOND);
        assert_eq!((failed.state.as_str(), failed.decisions, failed.failures), (ROLLED_BACK, 11, 3));
        assert_eq!(failed.ended_at.as_deref(), Some("1970-01-01T00:00:03.000Z"));
        // Its own entry says it judged, on which sum; the others' entries stay theirs.
        assert_eq!(failed.replicas["me"], count("sha256:c", 3, 1, Some(tally(11, 3))));
        assert_eq!(failed.replicas["a"], status.replicas["a"]);
    }

    #[test]
    fn a_restart_resumes_from_the_recorded_status() {
        let t = thresholds(Some(30), Some(5), 0);
        let mut recorded = written(None, &Counts::default(), &t, T0);
        recorded.replicas.insert("me".into(), count("sha256:c", 4, 0, None));
        recorded.replicas.insert("b".into(), count("sha256:c", 7, 0, None));
        assert_eq!(resumed(&recorded, "me", "sha256:c"), (tally(4, 0), false), "its own entry");
        assert_eq!(resumed(&recorded, "new", "sha256:c"), (Tally::default(), false), "a new replica starts from none");
        // A status written before replicas counted apart: its whole count is this replica's.
        let legacy = RolloutStatus { decisions: 3, failures: 0, replicas: Default::default(), ..recorded.clone() };
        assert_eq!(resumed(&legacy, "me", "sha256:c"), (tally(3, 0), false));
        let mut other_bytes = recorded.clone();
        other_bytes.replicas.insert("me".into(), count("sha256:old", 9, 9, None));
        assert_eq!(resumed(&other_bytes, "me", "sha256:c").0, Tally::default(), "another candidate's entry");
        // Resumed after 10 s down, at 4 + 7 decisions: the start time kept, promoted.
        let (mine, rolled_back) = resumed(&recorded, "me", "sha256:c");
        let mut here = CandidateTally::new("sha256:c", mine, rolled_back);
        here.others_counted("sha256:c", others(&recorded, "me", "sha256:c").0, Some(&t));
        let counts = Counts { total: here.total(), own: here.tally, ..Counts::default() };
        let after = written(Some(&recorded), &counts, &t, T0 + 10 * SECOND);
        assert_eq!((after.state.as_str(), after.started_at.as_str(), after.decisions), (PROMOTED, recorded.started_at.as_str(), 11));
        // Resumed rolled back: it stays so.
        let ended = RolloutStatus { state: ROLLED_BACK.into(), ended_at: Some("1970-01-01T00:00:02.000Z".into()), ..recorded.clone() };
        let (mine, rolled_back) = resumed(&ended, "me", "sha256:c");
        assert!(rolled_back);
        let counts = Counts { total: CandidateTally::new("sha256:c", mine, true).total(), rolled_back, own: mine, judged_here: None };
        assert_eq!(written(Some(&ended), &counts, &t, T0 + 20 * SECOND).state, ROLLED_BACK);
    }

    #[test]
    fn another_replicas_judgement_stops_the_candidate_here() {
        let t = thresholds(None, Some(100), 25);
        let mut cached = written(None, &Counts::default(), &t, T0);
        cached.replicas.insert("a".into(), count("sha256:c", 2, 0, None));
        cached.replicas.insert("b".into(), count("sha256:c", 4, 2, Some(tally(6, 2))));
        let (sum, judged) = others(&cached, "me", "sha256:c");
        assert_eq!((sum, judged), (tally(6, 2), Some(tally(6, 2))));
        // While the recorded rollout goes on, the judgement stops it here, on that sum.
        let on = stops_on(judged, Some(&cached)).expect("stops");
        assert_eq!(stops_on(judged, None), Some(on), "nothing recorded yet");
        let promoted = RolloutStatus { state: PROMOTED.into(), ..cached.clone() };
        assert_eq!(stops_on(judged, Some(&promoted)), None, "ended already: the record stands");
        let mut here = CandidateTally::new("sha256:c", tally(10, 0), false);
        assert!(here.roll_back(on));
        let counts = Counts { total: here.total(), rolled_back: true, own: here.tally, judged_here: None };
        // Not the writer: stopped here at once, its own count kept in its entry (no judgement
        // of its own); the writer records the rollback on the judged sum.
        let follower = next(Some(&cached), Some(&cached), "sha256:c", "me", false, &counts, &t, T0 + SECOND);
        assert_eq!((follower.state.as_str(), follower.decisions, follower.failures), (ROLLED_BACK, 6, 2));
        assert_eq!(follower.replicas["me"], count("sha256:c", 10, 0, None));
        let writer = written(Some(&cached), &counts, &t, T0 + SECOND);
        assert_eq!((writer.state.as_str(), writer.decisions, writer.failures), (ROLLED_BACK, 6, 2));
        // Without a judgement a follower follows the record as it is.
        let going = Counts { total: tally(12, 0), own: tally(10, 0), ..Counts::default() };
        let followed = next(Some(&cached), Some(&cached), "sha256:c", "me", false, &going, &t, T0 + SECOND);
        assert_eq!((followed.state.as_str(), followed.decisions), (PROGRESSING, cached.decisions));
    }

    #[test]
    fn the_candidate_rolls_out_beside_a_serving_module_or_once_promoted() {
        let t = thresholds(None, Some(1), 0);
        let recorded = written(None, &Counts::default(), &t, T0);
        assert!(rolls_out(true, None) && rolls_out(true, Some(&recorded)));
        assert!(!rolls_out(false, None) && !rolls_out(false, Some(&recorded)));
        assert!(rolls_out(false, Some(&RolloutStatus { state: PROMOTED.into(), ..recorded })));
    }

    #[test]
    fn the_requeue_delay_follows_promotion_by_time_the_registry_and_the_followed_tag() {
        let by_time = thresholds(Some(30), None, 0);
        let going = written(None, &Counts::default(), &by_time, T0);
        let at = |now: TimestampMs, p: Pacing| requeue(&p, now);
        let rolling = Pacing { rollout: Some(&going), recorded: Some(&going), thresholds: Some(&by_time), writes: true, ..Pacing::default() };
        assert_eq!(at(T0 + 10 * SECOND, rolling), STATUS_EVERY, "20 s to go: the counts every second");
        assert_eq!(at(T0 + 29 * SECOND + 500, rolling), Duration::from_millis(500), "at the promotion");
        assert_eq!(at(T0 + 30 * SECOND - 3, rolling), Duration::from_millis(10), "no sooner than 10 ms");
        assert_eq!(at(T0 + 40 * SECOND, rolling), Duration::from_millis(10), "overdue");
        let by_count = thresholds(None, Some(5), 0);
        assert_eq!(at(T0, Pacing { thresholds: Some(&by_count), ..rolling }), STATUS_EVERY);
        // No rollout going on: the count of Hikawas refreshed.
        assert_eq!(at(T0, Pacing::default()), REFRESH_EVERY);
        let promoted = RolloutStatus { state: PROMOTED.into(), ..going.clone() };
        assert_eq!(at(T0, Pacing { rollout: Some(&promoted), ..rolling }), REFRESH_EVERY);
        // Stopped here on a judgement the writer has not recorded yet: soon.
        let stopped = RolloutStatus { state: ROLLED_BACK.into(), ..going.clone() };
        let follower = Pacing { rollout: Some(&stopped), recorded: Some(&going), thresholds: Some(&by_time), writes: false, ..Pacing::default() };
        assert_eq!(at(T0, follower), STATUS_EVERY);
        assert_eq!(at(T0, Pacing { writes: true, ..follower }), REFRESH_EVERY, "the writer records it at once");
        assert_eq!(at(T0, Pacing { recorded: Some(&stopped), ..follower }), REFRESH_EVERY, "recorded already");
        // A registry to try again, a followed tag to resolve again: whichever comes first.
        assert_eq!(at(T0, Pacing { registry_retry: true, ..Pacing::default() }), OCI_RETRY);
        assert_eq!(at(T0 + 10 * SECOND, Pacing { registry_retry: true, ..rolling }), STATUS_EVERY);
        assert_eq!(at(T0, Pacing { follow_every: Some(follow_every(Some(3), Duration::from_secs(1))), ..Pacing::default() }), Duration::from_secs(3));
        assert_eq!(at(T0, Pacing { follow_every: Some(follow_every(None, Duration::from_secs(1))), ..Pacing::default() }), REFRESH_EVERY);
        assert_eq!(follow_every(None, Duration::from_secs(30)), FOLLOW_EVERY);
        // A tag that moved more than MOVES_AN_HOUR times in the last hour: every 10 minutes.
        assert_eq!(slowed_poll(MOVES_AN_HOUR, Duration::from_secs(30)), None);
        assert_eq!(slowed_poll(MOVES_AN_HOUR + 1, Duration::from_secs(30)), Some(Duration::from_secs(600)));
        assert_eq!(slowed_poll(MOVES_AN_HOUR + 1, Duration::from_secs(3600)), Some(Duration::from_secs(3600)));
        let now = std::time::Instant::now() + HOUR * 2;
        let mut moved = vec![now - HOUR - Duration::from_secs(1), now - Duration::from_secs(60), now];
        moves_in_hour(&mut moved, now);
        assert_eq!(moved.len(), 2, "an hour ago and more is forgotten");
        // pollSeconds under the floor (--min-poll-secs) is read as the floor.
        assert_eq!(follow_every(Some(1), Duration::from_secs(30)), Duration::from_secs(30));
        assert_eq!(follow_every(Some(45), Duration::from_secs(30)), Duration::from_secs(45));
    }

    #[test]
    fn status_writes_own_counts_and_retries_are_paced() {
        assert_eq!(write_wait(None), None, "never written");
        assert_eq!(write_wait(Some(Duration::from_millis(300))), Some(Duration::from_millis(700)));
        assert_eq!(write_wait(Some(STATUS_EVERY)), None);
        // A replica's own count: written while the recorded rollout goes on and says otherwise.
        let t = thresholds(None, Some(100), 25);
        let mut recorded = written(None, &Counts::default(), &t, T0);
        let own = count("sha256:c", 3, 0, None);
        assert!(counts_own(Some(&recorded), &own, "me", None));
        assert!(!counts_own(None, &own, "me", None), "nothing recorded");
        assert!(!counts_own(Some(&recorded), &count("sha256:d", 3, 0, None), "me", None), "another candidate's");
        let last = count("sha256:c", 2, 0, None);
        assert!(!counts_own(Some(&recorded), &own, "me", Some((&last, Duration::from_millis(999)))), "at most once a second");
        assert!(counts_own(Some(&recorded), &own, "me", Some((&last, STATUS_EVERY))));
        let judged = count("sha256:c", 3, 1, Some(tally(4, 1)));
        assert!(counts_own(Some(&recorded), &judged, "me", Some((&last, Duration::ZERO))), "a judgement goes out at once");
        assert!(!counts_own(Some(&recorded), &judged, "me", Some((&judged, Duration::ZERO))), "said already");
        recorded.replicas.insert("me".into(), own.clone());
        assert!(!counts_own(Some(&recorded), &own, "me", None), "the status has it");
        recorded.state = ROLLED_BACK.into();
        assert!(!counts_own(Some(&recorded), &judged, "me", None), "ended");
        // Backoffs.
        let poll = Duration::from_secs(60);
        assert_eq!([0, 1, 2, 5, 9].map(|f| follow_wait(f, poll).as_secs()), [60, 5, 10, 60, 60]);
        assert_eq!(follow_wait(3, Duration::from_secs(300)), Duration::from_secs(20));
        assert_eq!([1, 2, 8, 20].map(|f| error_backoff(f).as_millis()), [250, 500, 30_000, 30_000]);
        assert_eq!(error_backoff(7), Duration::from_millis(16_000));
    }
}
