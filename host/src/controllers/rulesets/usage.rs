//! A tenant's use of the operator in its rule set's status (`status.usage`): the figures the
//! metrics show by namespace (`supply/tenant.rs`, `usage`), of this rule set's tenant only, as
//! this replica counts them. Written by the replica that writes the rule set's status, folded
//! into that write: the figures are taken again at most every [`USAGE_EVERY`], and only a
//! figure that moved changes the status, so a busy tenant costs at most one status write per
//! rule set per [`USAGE_EVERY`], never one per call.

use std::time::Duration;

use super::controller::Context;
use crate::controllers::writes::status::rfc3339_millis;
use crate::crd::TenantUsage;
use crate::supply::tenant::Tenant;
use zundoko_rules::TimestampMs;

/// How often the figures are taken again (and so at most how often they change the status).
pub const USAGE_EVERY: Duration = Duration::from_secs(30);

/// The usage the status should carry at `now`: what it carries (`before`) until that, or this
/// replica's last look (`looked`, which found nothing moved), was [`USAGE_EVERY`] ago; then the
/// figures `take` gives if any of them moved. `take` is called only then (it scans the cache's
/// folders).
pub fn refreshed(before: Option<&TenantUsage>, looked: Option<TimestampMs>, now: TimestampMs, take: impl FnOnce() -> TenantUsage) -> Option<TenantUsage> {
    let taken = before.and_then(|b| b.taken_at.parse::<jiff::Timestamp>().ok()).map(|t| t.as_millisecond());
    let last = taken.filter(|t| *t <= now).max(looked.filter(|t| *t <= now));
    let due = taken.is_none() || last.is_none_or(|t| now - t >= USAGE_EVERY.as_millis() as i64);
    if !due {
        return before.cloned();
    }
    let fresh = take();
    let figures = |u: &TenantUsage| (u.tenant.clone(), u.call_turns, u.calls, u.call_millis, u.compile_wait_millis, u.pulls, u.cache_bytes, u.replica.clone());
    match before {
        Some(before) if taken.is_some() && figures(before) == figures(&fresh) => Some(before.clone()),
        _ => Some(fresh),
    }
}

/// `tenant`'s figures now, as this replica (`me`) counts them: only `tenant`'s, whatever the
/// others used.
pub fn take(ctx: &Context, tenant: &Tenant, me: &str, now: TimestampMs) -> TenantUsage {
    let engine = ctx.modules.engine();
    let cache = engine.compiled_cache().map(|c| c.disk().usage()).unwrap_or_default();
    let all = crate::supply::tenant::usage(&engine.call_shares().given(), &engine.tenant_calls().counted(), &crate::supply::sandbox::COMPILES.waited(), &ctx.registry.pulls_by_tenant(), &cache);
    let own = all.into_iter().find(|used| used.namespace == tenant.label()).unwrap_or_default();
    TenantUsage {
        tenant: tenant.label().to_owned(),
        call_turns: own.call_turns,
        calls: own.calls,
        call_millis: (own.call_seconds * 1000.0) as u64,
        compile_wait_millis: (own.compile_wait_seconds * 1000.0) as u64,
        pulls: own.pulls,
        cache_bytes: own.cache_bytes,
        taken_at: rfc3339_millis(now),
        replica: me.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: TimestampMs = 1_700_000_000_000;

    fn used(turns: u64, at: TimestampMs) -> TenantUsage {
        TenantUsage { tenant: "team-a".into(), call_turns: turns, cache_bytes: 10, taken_at: rfc3339_millis(at), replica: "r".into(), ..TenantUsage::default() }
    }

    #[test]
    fn usage_is_taken_at_most_every_30_s_and_changes_the_status_only_when_a_figure_moved() {
        // None yet: taken now.
        assert_eq!(refreshed(None, None, T0, || used(1, T0)), Some(used(1, T0)));
        // Within 30 s: not taken at all, even though the calls went on.
        let before = used(1, T0);
        let within = refreshed(Some(&before), None, T0 + 29_999, || panic!("taken within {USAGE_EVERY:?}"));
        assert_eq!(within, Some(before.clone()));
        // Due, nothing moved: the status as it was (its time too: no write).
        assert_eq!(refreshed(Some(&before), None, T0 + 30_000, || used(1, T0 + 30_000)), Some(before.clone()));
        // Looked 10 s ago and found nothing moved: not looked at again before 30 s more.
        assert_eq!(refreshed(Some(&before), Some(T0 + 30_000), T0 + 40_000, || panic!("looked again within {USAGE_EVERY:?}")), Some(before.clone()));
        // Due, a figure moved: the new figures and their time.
        assert_eq!(refreshed(Some(&before), None, T0 + 30_000, || used(5, T0 + 30_000)), Some(used(5, T0 + 30_000)));
        // A Rust module's calls move no turn: its calls, or their time, alone are a figure moved.
        for moved in [TenantUsage { calls: 3, ..used(1, T0 + 30_000) }, TenantUsage { call_millis: 2, ..used(1, T0 + 30_000) }] {
            assert_eq!(refreshed(Some(&before), None, T0 + 30_000, || moved.clone()), Some(moved.clone()));
        }
        // A time that does not parse, or one ahead of this replica's clock: taken again.
        let odd = TenantUsage { taken_at: "yesterday".into(), ..before.clone() };
        assert_eq!(refreshed(Some(&odd), None, T0, || used(1, T0)), Some(used(1, T0)));
        assert_eq!(refreshed(Some(&used(1, T0 + 60_000)), None, T0, || used(2, T0)), Some(used(2, T0)));
    }
}
