//! The third step of a rule set's reconcile: the module that serves, and the candidate's
//! rollout advanced from what the status recorded (a restart resumes it) and what every
//! replica counted. The rules are [`tally`](super::tally)'s; this step reads and tells the
//! count this process keeps ([`RuleSets`](crate::supply::serving::RuleSets)).

use std::sync::Arc;

use super::check::Sources;
use super::controller::{Context, now_ms};
use super::resolve::Resolved;
use super::status::{PROGRESSING, PROMOTED};
use super::tally::{self, Counts};
use crate::crd::{RolloutStatus, ZundokoRules};
use crate::supply::sandbox::RulesModule;
use crate::supply::serving::rollout::Thresholds;
use zundoko_rules::TimestampMs;

/// What the roll-out step hands the others.
pub(super) struct RolledOut {
    /// The source's module (or the one it gave last while a newer one is refused).
    pub(super) stable_module: Option<Arc<RulesModule>>,
    pub(super) candidate_module: Option<Arc<RulesModule>>,
    /// The candidate's rollout as this replica records it.
    pub(super) rollout: Option<RolloutStatus>,
    /// The time of this reconcile's decisions.
    pub(super) now: TimestampMs,
}

impl RolledOut {
    pub(super) fn state(&self) -> Option<&str> {
        self.rollout.as_ref().map(|r| r.state.as_str())
    }

    pub(super) fn promoted(&self) -> bool {
        self.state() == Some(PROMOTED)
    }

    pub(super) fn progressing(&self) -> bool {
        self.state() == Some(PROGRESSING)
    }

    /// The module serving the Hikawas outside the candidate's share (after a promotion: the
    /// candidate's).
    pub(super) fn serving_module(&self) -> Option<&Arc<RulesModule>> {
        if self.promoted() { self.candidate_module.as_ref() } else { self.stable_module.as_ref() }
    }
}

/// The modules, and the candidate's rollout.
pub(super) fn roll_out(zr: &ZundokoRules, ctx: &Context, at: &Resolved, sources: &Sources) -> RolledOut {
    // The source's module, or the one it gave last while a newer one is refused: if the pin,
    // which may have changed since, allows it, and it was checked under exactly the keys
    // trusted now (a module a removed key verified serves no more, and neither does one
    // accepted with no key at all once keys are added: it was never verified by them);
    // never after a verdict of trust (fail closed).
    let pinned = |m: &Arc<RulesModule>| sources.spec.pin.as_ref().is_none_or(|pin| *pin == m.identity().digest);
    let stable_module = match &sources.stable.outcome {
        Ok(module) => Some(module.clone()),
        Err(problem) if problem.distrusts() => None,
        Err(_) => ctx
            .with_memo(&at.uid, |m| m.last_stable.clone())
            .filter(|(module, trust)| pinned(module) && *trust == sources.stable.trust)
            .map(|(module, _)| module),
    };
    let candidate_module = sources.candidate.as_ref().and_then(|c| c.outcome.as_ref().ok().cloned());
    let now = now_ms();
    let rollout = match (&candidate_module, &sources.thresholds) {
        (Some(module), Some(thresholds)) => tally_candidate(zr, ctx, at, &module.identity().digest, thresholds, stable_module.is_some(), now),
        _ => None,
    };
    RolledOut { stable_module, candidate_module, rollout, now }
}

/// The candidate `digest`'s rollout: from the status (so a restart resumes it) and what was
/// counted here. Replicas count their own decisions: this one's entry, and the others' as the
/// cache shows them (fresher than this replica's last write). `None` while it waits for a
/// module to serve beside it.
fn tally_candidate(zr: &ZundokoRules, ctx: &Context, at: &Resolved, digest: &str, thresholds: &Thresholds, stable_serves: bool, now: TimestampMs) -> Option<RolloutStatus> {
    let (name, me) = (at.name.clone(), at.me.as_str());
    let recorded = at.before.as_ref().and_then(|s| s.rollout.as_ref());
    let previous = recorded.filter(|r| r.digest == digest);
    if let Some(p) = previous {
        let (mine, rolled_back) = tally::resumed(p, me, digest);
        ctx.sets.resume(&name, digest, mine, rolled_back);
    }
    let cached = zr.status.as_ref().and_then(|s| s.rollout.as_ref()).filter(|r| r.digest == digest);
    let (others, judged) = cached.map(|r| tally::others(r, me, digest)).unwrap_or_default();
    ctx.sets.others_counted(&name, digest, others);
    // Another replica found the candidate failing too often: it stops here too, and the
    // writer records the rollback on the sum that replica judged.
    if let Some(on) = tally::stops_on(judged, previous) {
        ctx.sets.roll_back(&name, digest, on);
    }
    if !tally::rolls_out(stable_serves, previous) {
        return None;
    }
    let (total, rolled_back) = ctx.sets.tally(&name, digest).unwrap_or_default();
    let own = ctx.sets.own_tally(&name, digest).unwrap_or_default();
    let counts = Counts { total, rolled_back, own, judged_here: ctx.sets.failed_too_often(&name, digest) };
    Some(tally::next(previous, cached, digest, me, at.writes, &counts, thresholds, now))
}
