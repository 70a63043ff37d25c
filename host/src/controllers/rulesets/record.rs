//! The last step of a rule set's reconcile: the status written with the Events its change
//! calls for (by the holder of its shard), or this replica's own count of the candidate's
//! decisions (by any other), and when to look again ([`tally::requeue`]).

use std::time::Instant;

use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use tracing::{info, warn};

use super::check::Sources;
use super::controller::{Context, Error, as_namespaced};
use super::resolve::Resolved;
use super::roll_out::RolledOut;
use super::status;
use super::tally::{self, Pacing};
use super::usage;
use crate::controllers::writes::events::EventType;
use crate::crd::{RolloutStatus, ZundokoNamespacedRules, ZundokoRules, ZundokoRulesStatus};
use crate::supply::tenant::Tenant;

/// How often a tenant's ConfigMap source is read again (it is not watched).
pub(super) const TENANT_CONFIGMAP_POLL: std::time::Duration = std::time::Duration::from_secs(5);

/// Record what the reconcile found; the requeue.
pub(super) async fn record(zr: &ZundokoRules, ctx: &Context, at: &Resolved, sources: &Sources, rolled: &RolledOut, mut desired: ZundokoRulesStatus) -> Result<Action, Error> {
    let mut requeue = tally::requeue(&pacing(zr, at, sources, rolled, ctx.sources.min_poll()), rolled.now);
    // A tenant's ConfigMap is not watched (the operator may read only it, by name): read again.
    let reads_configmap = [Some(&sources.stable), sources.candidate.as_ref()].into_iter().flatten().any(|c| c.spec.oci().is_none());
    if at.tenant != Tenant::Cluster && reads_configmap {
        requeue = requeue.min(TENANT_CONFIGMAP_POLL);
    }
    if let Some(retry_in) = sources.retry_in {
        requeue = retry_in;
    }
    if !at.writes {
        // Its count is written again at the next reconcile: a failure here fails nothing else.
        if let Err(error) = count_own(ctx, zr, &at.uid, &at.me, rolled.rollout.as_ref()).await {
            warn!(rules = %at.name, %error, "could not write this replica's count of the candidate's decisions");
        }
    } else {
        // This tenant's use, folded into this write (usage.rs): taken at most every USAGE_EVERY.
        let before = at.before.as_ref().and_then(|b| b.usage.as_ref());
        let looked = ctx.with_memo(&at.uid, |m| m.usage_looked);
        let mut took = false;
        desired.usage = usage::refreshed(before, looked, rolled.now, || {
            took = true;
            usage::take(ctx, &at.tenant, &at.me, rolled.now)
        });
        // Looked and nothing moved: not looked at again for USAGE_EVERY (what moved is written,
        // or looked at again at the next reconcile if the write must wait).
        if took && desired.usage.as_ref() == before {
            ctx.with_memo(&at.uid, |m| m.usage_looked = Some(rolled.now));
        }
    }
    if at.writes && at.before.as_ref() != Some(&desired) {
        let since_last_write = ctx.with_memo(&at.uid, |m| m.written.as_ref().map(|w| w.1.elapsed()));
        if let Some(wait) = tally::write_wait(since_last_write) {
            return Ok(Action::requeue(wait));
        }
        tell(zr, ctx, at, &desired).await;
        let patch = status_patch(at.before.as_ref(), &desired, zr.status.as_ref(), &at.me);
        patch_status(ctx.shards.client(at.shard).clone(), zr, &patch).await?;
        ctx.with_memo(&at.uid, |m| m.written = Some((desired, Instant::now())));
    }
    ctx.with_memo(&at.uid, |m| m.failures = 0);
    Ok(Action::requeue(requeue))
}

/// A merge patch of the rule set's status, through the API of its kind (a tenant's rule set,
/// seen as a `ZundokoRules` with its namespace, is written as the `ZundokoNamespacedRules` it is).
async fn patch_status(client: kube::Client, zr: &ZundokoRules, patch: &serde_json::Value) -> Result<(), kube::Error> {
    let params = PatchParams::default();
    match zr.namespace() {
        None => Api::<ZundokoRules>::all(client).patch_status(&zr.name_any(), &params, &Patch::Merge(patch)).await.map(drop),
        Some(ns) => Api::<ZundokoNamespacedRules>::namespaced(client, &ns).patch_status(&zr.name_any(), &params, &Patch::Merge(patch)).await.map(drop),
    }
}

/// What the requeue is chosen on.
fn pacing<'a>(zr: &'a ZundokoRules, at: &'a Resolved, sources: &'a Sources, rolled: &'a RolledOut, min_poll: std::time::Duration) -> Pacing<'a> {
    // A registry that failed in a way that may pass is tried again soon; a followed tag is
    // resolved again at its interval.
    let checked = [Some(&sources.stable), sources.candidate.as_ref()].into_iter().flatten();
    let waiting_on_registry = checked.into_iter().any(|c| c.spec.oci().is_some() && c.outcome.as_ref().is_err_and(|p| p.pending));
    Pacing {
        rollout: rolled.rollout.as_ref(),
        recorded: at.before.as_ref().and_then(|b| b.rollout.as_ref()),
        thresholds: sources.thresholds.as_ref(),
        writes: at.writes,
        registry_retry: waiting_on_registry || sources.follow_problem.is_some(),
        follow_every: zr.spec.source.oci.as_ref().filter(|o| o.follow).map(|o| tally::follow_every(o.poll_seconds, min_poll)),
    }
}

/// The Events the change of status calls for, and the metrics they count.
async fn tell(zr: &ZundokoRules, ctx: &Context, at: &Resolved, desired: &ZundokoRulesStatus) {
    for (type_, reason, note) in status::events(at.before.as_ref(), desired) {
        let type_ = if type_ == "Warning" { EventType::Warning } else { EventType::Normal };
        match reason.as_str() {
            "Promoted" => ctx.metrics.rollout_ended("promoted"),
            "RolledBack" => ctx.metrics.rollout_ended("rolled-back"),
            // Every other Warning is a problem the status now names (a module refused, a
            // source unreadable).
            _ if type_ == EventType::Warning => ctx.metrics.ruleset_rejected(&at.name, &reason),
            _ => {}
        }
        info!(reason, note, "rule set");
        let (note, events) = (crate::text::printable(&note, 1024), &ctx.events[at.shard as usize]);
        // On the rule set itself: a tenant's Events stay in its own namespace.
        match at.tenant {
            Tenant::Cluster => events.publish(zr, type_, &reason, &note, "Serve", None).await,
            Tenant::Namespace(_) => events.publish(&as_namespaced(zr), type_, &reason, &note, "Serve", None).await,
        };
    }
}

/// The merge patch from the status `before` (as last written) to `desired`. Fields neither it
/// nor the `cached` one should keep become null. The other replicas' counts are theirs: only
/// this replica's entry (`me`) is written, and the entries of another candidate's rollout
/// removed.
fn status_patch(before: Option<&ZundokoRulesStatus>, desired: &ZundokoRulesStatus, cached: Option<&ZundokoRulesStatus>, me: &str) -> serde_json::Value {
    let mut fields = crate::controllers::writes::status::replacing_patch(before, desired);
    if let (Some(fields), Ok(serde_json::Value::Object(cached))) = (fields.as_object_mut(), serde_json::to_value(cached)) {
        for key in cached.keys() {
            fields.entry(key.clone()).or_insert(serde_json::Value::Null);
        }
    }
    if let Some(rollout) = fields.get_mut("rollout").and_then(|r| r.as_object_mut()) {
        let mut replicas = serde_json::Map::new();
        let stale = before.and_then(|b| b.rollout.as_ref()).filter(|r| Some(&r.digest) != desired.rollout.as_ref().map(|d| &d.digest));
        for replica in stale.map(|r| r.replicas.keys().cloned().collect::<Vec<_>>()).unwrap_or_default() {
            replicas.insert(replica, serde_json::Value::Null);
        }
        if let Some(own) = desired.rollout.as_ref().and_then(|r| r.replicas.get(me)) {
            replicas.insert(me.into(), serde_json::to_value(own).expect("a count serializes"));
        }
        rollout.insert("replicas".into(), serde_json::Value::Object(replicas));
    }
    serde_json::json!({ "status": fields })
}

/// A replica that does not write the rule set's status writes its own count of the
/// candidate's decisions into it (its entry only: a merge patch leaves the others'), when
/// [`tally::counts_own`] says. Through the plain client: the entry is this replica's alone, so
/// a late write cannot overwrite anyone else's.
async fn count_own(ctx: &Context, zr: &ZundokoRules, uid: &str, me: &str, rollout: Option<&RolloutStatus>) -> Result<(), Error> {
    let Some(own) = rollout.and_then(|r| r.replicas.get(me)) else { return Ok(()) };
    let recorded = zr.status.as_ref().and_then(|s| s.rollout.as_ref());
    let last = ctx.with_memo(uid, |m| m.counted.as_ref().map(|(count, at)| (count.clone(), at.elapsed())));
    if !tally::counts_own(recorded, own, me, last.as_ref().map(|(count, age)| (count, *age))) {
        return Ok(());
    }
    let patch = serde_json::json!({ "status": { "rollout": { "replicas": { me: own } } } });
    patch_status(ctx.client.clone(), zr, &patch).await?;
    ctx.with_memo(uid, |m| m.counted = Some((own.clone(), Instant::now())));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::ReplicaCount;

    fn rollout(digest: &str, replicas: &[(&str, u64)]) -> RolloutStatus {
        let count = |d| ReplicaCount { digest: digest.into(), decisions: d, failures: 0, failed_too_often: None };
        RolloutStatus { digest: digest.into(), state: "Progressing".into(), started_at: "1970-01-01T00:00:01.000Z".into(), replicas: replicas.iter().map(|(r, d)| (r.to_string(), count(*d))).collect(), ..RolloutStatus::default() }
    }

    #[test]
    fn the_status_patch_writes_only_this_replicas_entry_and_clears_a_stale_rollouts() {
        let before = ZundokoRulesStatus { rollout: Some(rollout("sha256:c", &[("me", 1), ("b", 2)])), ..ZundokoRulesStatus::default() };
        let desired = ZundokoRulesStatus { rollout: Some(rollout("sha256:c", &[("me", 3), ("b", 2)])), hikawas: 2, ..ZundokoRulesStatus::default() };
        let patch = status_patch(Some(&before), &desired, Some(&before), "me");
        assert_eq!(patch["status"]["rollout"]["replicas"], serde_json::json!({ "me": { "digest": "sha256:c", "decisions": 3, "failures": 0 } }));
        // Another candidate: the old rollout's entries removed.
        let next = ZundokoRulesStatus { rollout: Some(rollout("sha256:d", &[])), ..ZundokoRulesStatus::default() };
        let patch = status_patch(Some(&before), &next, None, "me");
        assert_eq!(patch["status"]["rollout"]["replicas"], serde_json::json!({ "me": null, "b": null }));
    }
}
