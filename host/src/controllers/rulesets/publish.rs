//! The fourth step of a rule set's reconcile: what serves, published at once
//! ([`RuleSets::publish`](crate::supply::serving::RuleSets::publish)) for the Hikawa
//! controller's `choose`, and the status it calls for ([`status::desired`]).

use std::sync::Arc;

use kube::ResourceExt;

use super::check::Sources;
use super::controller::Context;
use super::resolve::Resolved;
use super::roll_out::RolledOut;
use super::status::{self, Findings, Origin};
use crate::crd::{ZundokoRules, ZundokoRulesStatus};
use crate::supply::contract::rules::Rules;
use crate::supply::serving::rollout::{self, Thresholds};
use crate::supply::serving::{Candidate, Serving, Unavailable};
use crate::supply::sources::rulesets::{Checked, Problem};
use crate::supply::tenant::key_of_hikawa;

/// Publish what serves; the status to write.
pub(super) fn publish(zr: &ZundokoRules, ctx: &Context, at: &Resolved, sources: &Sources, rolled: &RolledOut) -> ZundokoRulesStatus {
    let (serving_origin, candidate_origin) = origins(at, sources, rolled);
    // A followed tag's artifact promoted: it is the source's module from now on.
    if sources.follows
        && rolled.promoted()
        && let (Some(written), Some(digest)) = (&at.tag, sources.candidate.as_ref().and_then(|c| c.pinned.as_ref()).and_then(|p| p.digest.clone()))
    {
        ctx.with_memo(&at.uid, |m| m.pinned = Some((written.clone(), digest)));
    }
    let progressing = rolled.progressing();
    let (hikawas, in_share) = served(ctx, &at.name, sources.thresholds.as_ref(), progressing);
    let (serving_module, candidate_module) = (rolled.serving_module(), rolled.candidate_module.as_ref());
    let source_problem = sources.stable.outcome.as_ref().err().or(sources.follow_problem.as_ref());
    let findings = Findings {
        generation: zr.metadata.generation.unwrap_or(0),
        serving: serving_module.map(|m| m.identity().as_ref()),
        serving_origin,
        candidate_origin,
        source_problem,
        candidate: candidate_module.map(|m| m.identity().as_ref()),
        candidate_problem: sources.candidate.as_ref().and_then(|c| c.outcome.as_ref().err()),
        rollout: rolled.rollout.as_ref(),
        checked_at: ctx.with_memo(&at.uid, |m| m.checked_at.clone()),
        hikawas,
        candidate_hikawas: progressing.then_some(in_share),
        now: rolled.now,
    };
    let desired = status::desired(at.before.as_ref(), &findings);

    // What serves, at once; the status follows.
    let stable_rules = serving_module.cloned().map(|m| m as Arc<dyn Rules>).ok_or_else(|| unavailable(&desired, source_problem));
    let candidate_serving = match (progressing, candidate_module, sources.thresholds) {
        (true, Some(module), Some(thresholds)) => Some(Candidate { rules: module.clone() as Arc<dyn Rules>, thresholds }),
        _ => None,
    };
    ctx.sets.publish(&at.name, Serving { stable: stable_rules, candidate: candidate_serving });
    ctx.metrics.ruleset_serving(&at.name, serving_module.map(|m| m.identity().label()), progressing.then(|| candidate_module.map(|m| m.identity().label())).flatten());
    desired
}

/// Where what serves and the candidate came from, for the status: the artifact pinned, and
/// the tag it was resolved from.
fn origins(at: &Resolved, sources: &Sources, rolled: &RolledOut) -> (Option<Origin>, Option<Origin>) {
    let origin = |checked: Option<&Checked>| {
        checked.and_then(|c| {
            let tag = c.spec.oci().and_then(|o| o.reference.as_ref().ok()).filter(|r| r.is_tag()).map(|r| r.to_string());
            c.pinned.as_ref().map(|p| (p.to_string(), tag))
        })
    };
    let (stable, stable_module) = (&sources.stable, rolled.stable_module.as_ref());
    let stable_origin = origin(Some(stable)).filter(|_| stable.outcome.is_ok() || stable_module.is_none());
    let candidate_origin = origin(sources.candidate.as_ref());
    // The module that served last, while a newer one is refused: the origin the status gave it.
    let recorded = || {
        let module = at.before.as_ref().and_then(|b| b.module.as_ref());
        let same = module.filter(|m| Some(&m.digest) == stable_module.map(|s| &s.identity().digest));
        same.and_then(|m| m.reference.clone().map(|r| (r, m.resolved_from.clone())))
    };
    let serving_origin = if rolled.promoted() { candidate_origin.clone() } else { stable_origin.or_else(recorded) };
    (serving_origin, candidate_origin)
}

/// Who the rule set serves: the Hikawas naming it, and how many of them are in the
/// candidate's share while it progresses.
fn served(ctx: &Context, name: &str, thresholds: Option<&Thresholds>, progressing: bool) -> (u32, u32) {
    let (mut hikawas, mut in_share) = (0u32, 0u32);
    for hikawa in ctx.hikawas.state() {
        if key_of_hikawa(&hikawa).as_deref() == Some(name) {
            hikawas += 1;
            let share = thresholds.map_or(0, |t| t.percent);
            in_share += u32::from(progressing && rollout::decides_for(&hikawa.uid().unwrap_or_default(), share));
        }
    }
    (hikawas, in_share)
}

/// Why the rule set serves nothing, as its Hikawas hear it.
fn unavailable(status: &ZundokoRulesStatus, problem: Option<&Problem>) -> Unavailable {
    Unavailable {
        phase: status.phase.clone().unwrap_or_else(|| status::PENDING.into()),
        reason: problem.map_or_else(|| "Checking".into(), |p| p.reason.clone()),
        message: problem.map_or_else(|| "its source has not been checked yet".into(), |p| p.message.clone()),
    }
}
