//! The second step of a rule set's reconcile: its sources checked (a module per digest,
//! compiled once), a followed tag resolved again, and the candidate, if there is one (the
//! spec's, or what a followed tag moved to).

use std::time::{Duration, Instant};

use tracing::{info, warn};

use super::controller::{Context, Error, Followed, now_ms};
use super::policy;
use super::resolve::Resolved;
use super::tally::{self, OCI_RETRY, follow_every, follow_wait};
use crate::controllers::writes::status::rfc3339_millis;
use crate::crd::{RolloutSpec, ZundokoRules};
use crate::supply::serving::rollout::Thresholds;
use crate::supply::sources::rulesets::{Checked, Problem, SourceSpec};
use crate::supply::tenant::Tenant;
use crate::supply::tenant_bounds::TenantBounds;

/// A source's ConfigMap is read (and a new module compiled) at most this often per rule set:
/// a ConfigMap rewritten in a loop costs at most one compile a second.
const READ_EVERY: Duration = Duration::from_secs(1);

/// What the check step hands the others.
pub(super) struct Sources {
    /// The source as checked (its pin).
    pub(super) spec: SourceSpec,
    pub(super) stable: Checked,
    /// Why a followed tag could not be resolved again, if it could not.
    pub(super) follow_problem: Option<Problem>,
    /// The candidate, checked, and its rollout's thresholds.
    pub(super) candidate: Option<Checked>,
    pub(super) thresholds: Option<Thresholds>,
    /// The candidate is what a followed tag moved to (not the spec's).
    pub(super) follows: bool,
    /// When to look again, whatever else the pacing says: its namespace could not be read, the
    /// backoff after that many tries.
    pub(super) retry_in: Option<Duration>,
}

/// Check the sources. `Err(retry_in)` when a source is to be checked again first.
pub(super) async fn check(zr: &ZundokoRules, ctx: &Context, at: &Resolved) -> Result<Result<Sources, Duration>, Error> {
    // A tenant's rule set: held to the policy selecting its namespace, or refused by it.
    // Not judged yet (the lists not done, or refused): looked at again with
    // backoff (a list done wakes every tenant's rule set at once).
    let unjudged = || ctx.with_memo(&at.uid, |m| {
        m.unjudged = m.unjudged.saturating_add(1);
        m.unjudged
    });
    let bounds = match &at.tenant {
        Tenant::Cluster => None,
        Tenant::Namespace(ns) => match ctx.tenancy.judge(zr, ns, ctx.sources.min_poll()) {
            None => return Ok(Err(tally::error_backoff(unjudged()))),
            Some(Err(problem)) if policy::unreadable(&problem.reason) => {
                let retry_in = tally::error_backoff(unjudged());
                return Ok(Ok(Sources { retry_in: Some(retry_in), ..refused_by_policy(zr, ctx, at, problem) }));
            }
            Some(judged) => {
                ctx.with_memo(&at.uid, |m| m.unjudged = 0);
                match judged {
                    Ok(bounds) => Some(bounds),
                    Err(problem) => return Ok(Ok(refused_by_policy(zr, ctx, at, problem))),
                }
            }
        },
    };
    let bounds = bounds.as_ref();
    // The sources: the module of each, or why there is none.
    let spec = SourceSpec::new(&zr.spec.source, zr.spec.sha256.as_deref(), at.pinned_digest.clone()).of(&at.tenant).bounded(bounds);
    let stable = match ctx.check_source(&at.uid, &spec, false, "spec.sha256").await? {
        Ok(checked) => checked,
        Err(retry_in) => return Ok(Err(retry_in)),
    };
    let stable_digest = stable.pinned.as_ref().and_then(|p| p.digest.clone());
    if let (Some(written), Some(digest), Ok(_)) = (&at.tag, &stable_digest, &stable.outcome) {
        ctx.with_memo(&at.uid, |m| m.pinned = Some((written.clone(), digest.clone())));
    }
    let (follow_problem, followed) = match follow_tag(zr, ctx, at, &spec, &stable, stable_digest.as_ref(), bounds).await {
        Ok(found) => found,
        Err(retry_in) => return Ok(Err(retry_in)),
    };
    let candidate_source = match (&zr.spec.candidate, followed) {
        (Some(c), _) => Some((SourceSpec::new(&c.source, c.sha256.as_deref(), None).of(&at.tenant).bounded(bounds), c.rollout.clone(), "spec.candidate.sha256")),
        (None, Some((spec, rollout))) => Some((spec, rollout, "spec.sha256")),
        (None, None) => None,
    };
    let follows = zr.spec.candidate.is_none() && candidate_source.is_some();
    let candidate = match &candidate_source {
        Some((spec, _, pinned_by)) => match ctx.check_source(&at.uid, spec, true, pinned_by).await? {
            Ok(checked) => Some(checked),
            Err(retry_in) => return Ok(Err(retry_in)),
        },
        None => {
            // No candidate: one added later (even the same bytes again) starts afresh.
            ctx.with_memo(&at.uid, |m| m.candidate = None);
            ctx.sets.forget_candidate(&at.name);
            None
        }
    };
    let thresholds = candidate_source.as_ref().map(|(_, rollout, _)| Thresholds::from(rollout));
    Ok(Ok(Sources { spec, stable, follow_problem, candidate, thresholds, follows, retry_in: None }))
}

/// What a followed tag gives: why it could not be resolved again (if it could not), and what
/// it moved to, as a candidate source and its rollout. `Err(retry_in)` when nothing serves
/// and the tag moved: what it points at now is checked as the source's module first.
async fn follow_tag(
    zr: &ZundokoRules,
    ctx: &Context,
    at: &Resolved,
    spec: &SourceSpec,
    stable: &Checked,
    stable_digest: Option<&String>,
    bounds: Option<&TenantBounds>,
) -> Result<(Option<Problem>, Option<(SourceSpec, RolloutSpec)>), Duration> {
    // A followed tag that moved: its artifact is the candidate (unless the spec names one).
    let mut follow_problem = None;
    let mut followed = None;
    let oci = zr.spec.source.oci.as_ref();
    if let (Some(o), Some(written)) = (oci.filter(|o| o.follow && zr.spec.candidate.is_none()), &at.tag) {
        // A tenant's policy may poll less often than the operator's --min-poll-secs.
        let min_poll = bounds.and_then(|b| b.min_poll).map_or(ctx.sources.min_poll(), |p| p.max(ctx.sources.min_poll()));
        let (digest, problem) = ctx.follow(&at.uid, spec, written, follow_every(o.poll_seconds, min_poll)).await;
        follow_problem = problem;
        if let Some(digest) = digest.filter(|d| Some(d) != stable_digest) {
            if stable.outcome.is_err() && ctx.with_memo(&at.uid, |m| m.last_stable.is_none()) {
                // Nothing serves: what the tag points at now is simply the source's module.
                info!(reference = %written, %digest, "the followed tag moved while nothing serves: checking what it points at");
                ctx.with_memo(&at.uid, |m| m.pinned = Some((written.clone(), digest)));
                return Err(Duration::from_millis(10));
            }
            followed = Some((SourceSpec::new(&zr.spec.source, zr.spec.sha256.as_deref(), Some(digest)).of(&at.tenant).bounded(bounds), o.rollout.clone().unwrap_or_default()));
        }
    }
    Ok((follow_problem, followed))
}

/// A tenant's rule set its policy refuses: nothing of it serves (what served before neither:
/// fail closed), no candidate, and the status says which policy and field refused it.
fn refused_by_policy(zr: &ZundokoRules, ctx: &Context, at: &Resolved, problem: Problem) -> Sources {
    let spec = SourceSpec::new(&zr.spec.source, zr.spec.sha256.as_deref(), None).of(&at.tenant);
    let stable = Checked { spec: spec.clone(), resource_version: None, outcome: Err(problem), pinned: None, tried_at: Instant::now(), trust: None };
    ctx.with_memo(&at.uid, |m| {
        if m.stable.as_ref().is_none_or(|s| s.outcome.as_ref().err() != stable.outcome.as_ref().err()) {
            m.checked_at = Some(rfc3339_millis(now_ms()));
        }
        (m.last_stable, m.candidate, m.stable) = (None, None, Some(stable.clone()));
    });
    ctx.sets.forget_candidate(&at.name);
    Sources { spec, stable, follow_problem: None, candidate: None, thresholds: None, follows: false, retry_in: None }
}

impl Context {
    /// Check a source, remembering what was found. `Err(retry_in)` until its namespace is
    /// listed, or while it was read less than `READ_EVERY` ago and must be read again.
    async fn check_source(&self, uid: &str, spec: &SourceSpec, candidate: bool, pinned_by: &'static str) -> Result<Result<Checked, Duration>, Error> {
        let (last, read_at) = self.with_memo(uid, |m| (if candidate { m.candidate.clone() } else { m.stable.clone() }, m.read_at[usize::from(candidate)]));
        let wait = read_at.map(|at| READ_EVERY.saturating_sub(at.elapsed())).filter(|d| !d.is_zero());
        let Some(checked) = self.sources.check(uid, spec, last.as_ref(), pinned_by, wait.is_some(), OCI_RETRY).await? else {
            return Ok(Err(wait.unwrap_or(Duration::from_millis(200))));
        };
        let fresh = last.as_ref().is_none_or(|l| l.spec != checked.spec || l.resource_version != checked.resource_version);
        self.with_memo(uid, |m| {
            if fresh {
                m.checked_at = Some(rfc3339_millis(now_ms()));
                m.read_at[usize::from(candidate)] = Some(Instant::now());
            }
            if candidate {
                m.candidate = Some(checked.clone());
            } else {
                match &checked.outcome {
                    Ok(module) => m.last_stable = Some((module.clone(), checked.trust.clone())),
                    // Not trusted now: what the source gave before is not either (fail closed).
                    Err(problem) if problem.distrusts() => m.last_stable = None,
                    Err(_) => {}
                }
                m.stable = Some(checked.clone());
            }
        });
        if fresh {
            self.metrics.modules_compiled(self.modules.footprint());
        }
        Ok(Ok(checked))
    }

    /// What a followed tag points at: resolved again once `poll` has passed since the last
    /// try (sooner after a failure, with backoff); meanwhile what it pointed at last. The
    /// problem, if the last try failed.
    async fn follow(&self, uid: &str, spec: &SourceSpec, written: &str, poll: Duration) -> (Option<String>, Option<Problem>) {
        let Some(oci) = spec.oci() else { return (None, None) };
        let due = self.with_memo(uid, |m| match m.followed.as_ref().filter(|f| f.written == written) {
            None => None,
            Some(f) => {
                let poll = tally::slowed_poll(f.moved_at.len(), poll).unwrap_or(poll);
                (f.tried_at.elapsed() < follow_wait(f.failures, poll)).then(|| (f.digest.clone(), f.problem.clone()))
            }
        });
        if let Some(known) = due {
            return known;
        }
        let resolved = self.sources.resolve(oci, &spec.tenant).await;
        self.with_memo(uid, |m| {
            let last = m.followed.take().filter(|f| f.written == written);
            let mut moved_at = last.as_ref().map(|l| l.moved_at.clone()).unwrap_or_default();
            tally::moves_in_hour(&mut moved_at, Instant::now());
            let followed = match resolved {
                Ok(digest) => {
                    if last.as_ref().and_then(|l| l.digest.as_ref()).is_some_and(|before| *before != digest) {
                        moved_at.push(Instant::now());
                    }
                    // Past the hour's allowance: resolved less often, and the status says so.
                    let problem = tally::slowed_poll(moved_at.len(), poll).map(|every| {
                        let message = format!(
                            "the followed tag {written} moved to {} new artifacts in the last hour, more than {}: it is resolved again every {} s until fewer moves fall in the hour (each new artifact is pulled, compiled and kept)",
                            moved_at.len(),
                            tally::MOVES_AN_HOUR,
                            every.as_secs()
                        );
                        Problem::new("FollowSlowedDown", message, true)
                    });
                    Followed { written: written.into(), digest: Some(digest), tried_at: Instant::now(), failures: 0, problem, moved_at }
                }
                Err(problem) => {
                    warn!(reference = written, reason = %problem.reason, message = %problem.message, "cannot resolve the followed tag; what serves keeps serving");
                    Followed {
                        written: written.into(),
                        digest: last.as_ref().and_then(|l| l.digest.clone()),
                        tried_at: Instant::now(),
                        failures: last.map_or(1, |l| l.failures.saturating_add(1)),
                        problem: Some(problem),
                        moved_at,
                    }
                }
            };
            let known = (followed.digest.clone(), followed.problem.clone());
            m.followed = Some(followed);
            known
        })
    }
}
