//! A rule set's status and the Events that go with it, from what its reconcile found. Pure:
//! computed every time, written only when it differs; Events come from comparing the status
//! written before with the one to write, so a restarted operator repeats none.

use crate::supply::sources::rulesets::Problem;
use crate::crd::{ModuleStatus, RolloutStatus, ZundokoRulesStatus};
use crate::supply::sandbox::ModuleIdentity;
use crate::controllers::writes::status::set_condition;
use zundoko_rules::TimestampMs;

pub const PENDING: &str = "Pending";
pub const ACTIVE: &str = "Active";
pub const REJECTED: &str = "Rejected";
pub const ROLLING_OUT: &str = "RollingOut";
pub const ROLLED_BACK: &str = "RolledBack";

pub const PROGRESSING: &str = "Progressing";
pub const PROMOTED: &str = "Promoted";

pub fn module_status(identity: &ModuleIdentity) -> ModuleStatus {
    ModuleStatus { name: identity.info.name.clone(), version: identity.info.version.clone(), digest: identity.digest.clone(), reference: None, resolved_from: None }
}

/// A module's status with where it came from: the artifact pinned, the tag resolved.
fn with_origin(identity: &ModuleIdentity, origin: Option<&Origin>) -> ModuleStatus {
    let (reference, resolved_from) = origin.cloned().map_or((None, None), |(r, t)| (Some(r), t));
    ModuleStatus { reference, resolved_from, ..module_status(identity) }
}

/// A module's registry origin: the artifact pinned (`REGISTRY/REPOSITORY@sha256:...`) and
/// the tag it was resolved from, if it was.
pub type Origin = (String, Option<String>);

/// Everything the status is made of.
pub struct Findings<'a> {
    pub generation: i64,
    /// The module serving the Hikawas outside the candidate's share (after a promotion: the
    /// candidate's).
    pub serving: Option<&'a ModuleIdentity>,
    pub serving_origin: Option<Origin>,
    pub candidate_origin: Option<Origin>,
    /// Why the source gives no (new) module, if it does not.
    pub source_problem: Option<&'a Problem>,
    /// The candidate module, once checked and accepted.
    pub candidate: Option<&'a ModuleIdentity>,
    pub candidate_problem: Option<&'a Problem>,
    pub rollout: Option<&'a RolloutStatus>,
    pub checked_at: Option<String>,
    pub hikawas: u32,
    pub candidate_hikawas: Option<u32>,
    pub now: TimestampMs,
}

pub fn desired(current: Option<&ZundokoRulesStatus>, f: &Findings) -> ZundokoRulesStatus {
    let rollout_state = f.rollout.map(|r| r.state.as_str());
    let phase = match (f.serving, rollout_state) {
        (None, _) if f.source_problem.is_none_or(|p| p.pending) => PENDING,
        (None, _) => REJECTED,
        (Some(_), Some(PROGRESSING)) => ROLLING_OUT,
        (Some(_), Some(ROLLED_BACK)) => ROLLED_BACK,
        (Some(_), _) => ACTIVE,
    };
    let rollback = f.rollout.filter(|r| r.state == ROLLED_BACK).map(|r| Problem {
        reason: "FailureRateExceeded".into(),
        message: format!(
            "the candidate {} failed {} of its {} decisions, past the rollout's maxFailurePercent: rolled back, every Hikawa decided by {}",
            r.digest,
            r.failures,
            r.decisions,
            f.serving.map_or("no module", |m| m.digest.as_str())
        ),
        pending: false,
    });
    let problem = f.source_problem.or(rollback.as_ref()).or(f.candidate_problem);
    let mut status = current.cloned().unwrap_or_default();
    status.phase = Some(phase.into());
    status.observed_generation = Some(f.generation);
    status.module = f.serving.map(|m| with_origin(m, f.serving_origin.as_ref()));
    status.candidate = f.candidate.map(|m| with_origin(m, f.candidate_origin.as_ref()));
    status.rollout = f.rollout.cloned();
    status.reason = problem.map(|p| p.reason.clone());
    status.message = problem.map(|p| p.message.clone());
    status.checked_at = f.checked_at.clone().or(status.checked_at);
    status.hikawas = f.hikawas;
    status.candidate_hikawas = f.candidate_hikawas;
    let ready = match (f.serving, f.source_problem) {
        (Some(m), None) => ("True", "Serving".to_string(), format!("serving {} {} ({})", m.info.name, m.info.version, m.digest)),
        (Some(m), Some(p)) if p.pending => ("True", "Serving".to_string(), format!("serving {} {} ({}); the source cannot be read now: {}", m.info.name, m.info.version, m.digest, p.message)),
        (Some(m), Some(p)) => ("True", "Serving".to_string(), format!("serving {} {} ({}); the source's module is refused: {}", m.info.name, m.info.version, m.digest, p.message)),
        (None, Some(p)) => ("False", p.reason.clone(), p.message.clone()),
        (None, None) => ("False", "Checking".to_string(), "the source has not been checked yet".to_string()),
    };
    set_condition(&mut status.conditions, "Ready", ready.0, &ready.1, &ready.2, f.generation, f.now);
    let rollout = match (f.rollout, f.candidate_problem) {
        (Some(r), _) if r.state == ROLLED_BACK => Some(("False", "RolledBack".to_string(), rollback.as_ref().map(|p| p.message.clone()).unwrap_or_default())),
        (Some(r), _) => Some(("True", r.state.clone(), format!("{} of {} decisions failed", r.failures, r.decisions))),
        (None, Some(p)) => Some(("False", p.reason.clone(), p.message.clone())),
        (None, None) if f.candidate.is_some() => Some(("False", "Waiting".to_string(), "the candidate waits for a module to serve beside it".to_string())),
        (None, None) => None,
    };
    match rollout {
        Some((value, reason, message)) => set_condition(&mut status.conditions, "Rollout", value, &reason, &message, f.generation, f.now),
        None => status.conditions.retain(|c| c.type_ != "Rollout"),
    }
    status
}

/// An Event to publish: type (`Normal` or `Warning`), reason, note.
pub type Note = (&'static str, String, String);

/// The Events a change of status calls for.
pub fn events(before: Option<&ZundokoRulesStatus>, after: &ZundokoRulesStatus) -> Vec<Note> {
    let mut notes = Vec::new();
    fn was<T>(before: Option<&ZundokoRulesStatus>, f: impl Fn(&ZundokoRulesStatus) -> Option<T>) -> Option<T> {
        before.and_then(f)
    }
    let digest = |s: &ZundokoRulesStatus| s.module.as_ref().map(|m| m.digest.clone());
    if digest(after).is_some() && was(before, digest) != digest(after) {
        let m = after.module.as_ref().expect("checked");
        let note = match before.and_then(|b| b.module.as_ref()) {
            Some(old) => format!("now serving {} {} ({}), replacing {} {} ({})", m.name, m.version, m.digest, old.name, old.version, old.digest),
            None => format!("now serving {} {} ({})", m.name, m.version, m.digest),
        };
        notes.push(("Normal", "ModuleServing".into(), note));
    }
    let problem = |s: &ZundokoRulesStatus| s.reason.clone().zip(s.message.clone());
    if let Some((reason, message)) = problem(after)
        && was(before, problem) != problem(after)
        && reason != "FailureRateExceeded"
    {
        notes.push(("Warning", reason, message));
    }
    let rollout = |s: &ZundokoRulesStatus| s.rollout.as_ref().map(|r| (r.digest.clone(), r.state.clone()));
    if let Some((digest, state)) = rollout(after)
        && was(before, rollout) != rollout(after)
    {
        let r = after.rollout.as_ref().expect("checked");
        let name = after.candidate.as_ref().map_or_else(|| digest.clone(), |c| format!("{} {} ({})", c.name, c.version, c.digest));
        // A rollout that began and ended between two status writes still gets its start told.
        let started = was(before, |s| s.rollout.as_ref().map(|r| r.digest.clone())).as_ref() == Some(&digest);
        if !started || state == PROGRESSING {
            let share = after.candidate_hikawas.map_or_else(String::new, |n| format!(" ({n} of {})", after.hikawas));
            notes.push(("Normal", "RolloutStarted".into(), format!("candidate {name} decides for its share of the Hikawas{share}")));
        }
        match state.as_str() {
            PROGRESSING => {}
            PROMOTED => notes.push(("Normal", "Promoted".into(), format!("candidate {name} promoted after {} decisions ({} failed): it decides for every Hikawa", r.decisions, r.failures))),
            _ => notes.push(("Warning", "RolledBack".into(), after.message.clone().unwrap_or_else(|| format!("candidate {name} rolled back")))),
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::tally::{advance, others};
    use crate::crd::{ReplicaCount, RolloutSpec};
    use crate::supply::serving::rollout::{Tally, Thresholds};
    use zundoko_rules::ModuleInfo;

    fn identity(name: &str, digest: &str) -> ModuleIdentity {
        ModuleIdentity { info: ModuleInfo { name: name.into(), version: "1.0.0".into(), description: String::new() }, digest: digest.into(), size: 1 }
    }

    fn thresholds(decisions: u64) -> Thresholds {
        Thresholds::from(&RolloutSpec { percent: 50, promote_after_decisions: Some(decisions), ..RolloutSpec::default() })
    }

    fn findings<'a>(serving: Option<&'a ModuleIdentity>, candidate: Option<&'a ModuleIdentity>, rollout: Option<&'a RolloutStatus>) -> Findings<'a> {
        Findings {
            generation: 1,
            serving,
            serving_origin: None,
            candidate_origin: None,
            source_problem: None,
            candidate,
            candidate_problem: None,
            rollout,
            checked_at: Some("2026-11-23T00:00:00.000Z".into()),
            hikawas: 4,
            candidate_hikawas: candidate.map(|_| 2),
            now: 1_000,
        }
    }

    #[test]
    fn a_rollout_progresses_then_is_promoted_or_rolled_back_and_stays_so() {
        let t = thresholds(3);
        let started = advance(None, "sha256:c", Tally::default(), false, &t, 1_000);
        assert_eq!((started.state.as_str(), started.started_at.as_str()), (PROGRESSING, "1970-01-01T00:00:01.000Z"));
        let going = advance(Some(&started), "sha256:c", Tally { decisions: 2, failures: 0 }, false, &t, 5_000);
        assert_eq!((going.state.as_str(), going.started_at.as_str(), going.decisions), (PROGRESSING, started.started_at.as_str(), 2));
        let promoted = advance(Some(&going), "sha256:c", Tally { decisions: 3, failures: 0 }, false, &t, 6_000);
        assert_eq!((promoted.state.as_str(), promoted.ended_at.as_deref()), (PROMOTED, Some("1970-01-01T00:00:06.000Z")));
        assert_eq!(advance(Some(&promoted), "sha256:c", Tally { decisions: 3, failures: 0 }, false, &t, 9_000), promoted, "stays promoted");
        let failed = advance(Some(&going), "sha256:c", Tally { decisions: 3, failures: 1 }, false, &t, 7_000);
        assert_eq!(failed.state, ROLLED_BACK);
        assert_eq!(advance(Some(&failed), "sha256:c", Tally { decisions: 3, failures: 1 }, false, &t, 9_000), failed, "stays rolled back");
        // Decisions other replicas made before they heard of the end: not in its record.
        assert_eq!(advance(Some(&failed), "sha256:c", Tally { decisions: 9, failures: 1 }, false, &t, 9_000), failed, "its count kept");
        assert_eq!(advance(Some(&promoted), "sha256:c", Tally { decisions: 7, failures: 0 }, false, &t, 9_000).decisions, 3);
        // New bytes: a new rollout.
        assert_eq!(advance(Some(&failed), "sha256:d", Tally::default(), false, &t, 9_000).state, PROGRESSING);
    }

    #[test]
    fn the_other_replicas_entries_are_summed_and_their_first_judgement_read() {
        let count = |digest: &str, decisions, failures, judged: Option<(u64, u64)>| ReplicaCount {
            digest: digest.into(),
            decisions,
            failures,
            failed_too_often: judged.map(|(decisions, failures)| Tally { decisions, failures }),
        };
        let mut rollout = advance(None, "sha256:c", Tally::default(), false, &thresholds(100), 1_000);
        rollout.replicas.insert("a".into(), count("sha256:c", 5, 0, None));
        rollout.replicas.insert("b".into(), count("sha256:c", 3, 2, Some((6, 2))));
        rollout.replicas.insert("c".into(), count("sha256:old", 50, 50, Some((50, 50))));
        rollout.replicas.insert("me".into(), count("sha256:c", 100, 100, Some((1, 1))));
        // Not this replica's own entry, not another candidate's.
        assert_eq!(others(&rollout, "me", "sha256:c"), (Tally { decisions: 8, failures: 2 }, Some(Tally { decisions: 6, failures: 2 })));
        assert_eq!(others(&rollout, "b", "sha256:c"), (Tally { decisions: 105, failures: 100 }, Some(Tally { decisions: 1, failures: 1 })));
        rollout.replicas.remove("me");
        assert_eq!(others(&rollout, "b", "sha256:c"), (Tally { decisions: 5, failures: 0 }, None));
        // A rollback on another replica's judgement records that sum.
        let failed = advance(Some(&rollout), "sha256:c", Tally { decisions: 6, failures: 2 }, true, &thresholds(100), 2_000);
        assert_eq!((failed.state.as_str(), failed.decisions, failed.failures), (ROLLED_BACK, 6, 2));
    }

    #[test]
    fn phases_conditions_and_events_tell_the_story() {
        let stable = identity("zundoko-classic", "sha256:a");
        let candidate = identity("zundoko-classic", "sha256:c");
        let pending = Problem { reason: "SourceNotFound".into(), message: "no ConfigMap".into(), pending: true };
        let mut f = findings(None, None, None);
        f.source_problem = Some(&pending);
        let s0 = desired(None, &f);
        assert_eq!((s0.phase.as_deref(), s0.reason.as_deref()), (Some(PENDING), Some("SourceNotFound")));
        assert_eq!(events(None, &s0), vec![("Warning", "SourceNotFound".to_string(), "no ConfigMap".to_string())]);
        let s1 = desired(Some(&s0), &findings(Some(&stable), None, None));
        assert_eq!((s1.phase.as_deref(), s1.reason.as_deref()), (Some(ACTIVE), None));
        assert_eq!(s1.conditions.iter().find(|c| c.type_ == "Ready").unwrap().status, "True");
        assert_eq!(events(Some(&s0), &s1)[0].1, "ModuleServing");
        assert!(events(Some(&s1), &desired(Some(&s1), &findings(Some(&stable), None, None))).is_empty(), "nothing new, no Event");
        let rollout = advance(None, "sha256:c", Tally::default(), false, &thresholds(3), 1_000);
        let s2 = desired(Some(&s1), &findings(Some(&stable), Some(&candidate), Some(&rollout)));
        assert_eq!((s2.phase.as_deref(), s2.candidate_hikawas), (Some(ROLLING_OUT), Some(2)));
        assert_eq!(events(Some(&s1), &s2).iter().map(|e| e.1.as_str()).collect::<Vec<_>>(), ["RolloutStarted"]);
        let failed = advance(Some(&rollout), "sha256:c", Tally { decisions: 2, failures: 1 }, true, &thresholds(3), 2_000);
        let s3 = desired(Some(&s2), &findings(Some(&stable), Some(&candidate), Some(&failed)));
        assert_eq!((s3.phase.as_deref(), s3.reason.as_deref()), (Some(ROLLED_BACK), Some("FailureRateExceeded")));
        assert!(s3.message.as_deref().unwrap().contains("failed 1 of its 2 decisions"), "{:?}", s3.message);
        assert_eq!(events(Some(&s2), &s3).iter().map(|e| (e.0, e.1.as_str())).collect::<Vec<_>>(), [("Warning", "RolledBack")]);
        // Started and rolled back between two writes: both told.
        assert_eq!(events(Some(&s1), &s3).iter().map(|e| e.1.as_str()).collect::<Vec<_>>(), ["RolloutStarted", "RolledBack"]);
        let rollout_condition = s3.conditions.iter().find(|c| c.type_ == "Rollout").unwrap();
        assert_eq!((rollout_condition.status.as_str(), rollout_condition.reason.as_str()), ("False", "RolledBack"));
        // A refused new source while the old module serves: Active, and the reason shown.
        let refused = Problem { reason: "ModulePinMismatch".into(), message: "not the pin".into(), pending: false };
        let mut f = findings(Some(&stable), None, None);
        f.source_problem = Some(&refused);
        let s4 = desired(Some(&s1), &f);
        assert_eq!((s4.phase.as_deref(), s4.reason.as_deref()), (Some(ACTIVE), Some("ModulePinMismatch")));
        assert_eq!(events(Some(&s1), &s4), vec![("Warning", "ModulePinMismatch".to_string(), "not the pin".to_string())]);
    }
}
