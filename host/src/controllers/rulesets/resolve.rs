//! The first step of a rule set's reconcile: who writes its status, the status as last
//! written, and the digest a tag in a registry is pinned to.

use kube::ResourceExt;

use super::controller::{Context, key_of};
use crate::supply::tenant::Tenant;
use crate::crd::{ZundokoRules, ZundokoRulesStatus};
use crate::process::leader::assign;

/// What the resolve step hands the others.
pub(super) struct Resolved {
    /// The rule set's key in the serving table (`NAME`, or `NAMESPACE/NAME` for a tenant's).
    pub(super) name: String,
    /// Whose it is: the cluster's, or its namespace's (what it may read, what bounds it).
    pub(super) tenant: Tenant,
    pub(super) uid: String,
    /// The shard of the rule set, and whether this replica holds it (writes its status).
    pub(super) shard: u16,
    pub(super) writes: bool,
    /// This replica's name (its entry in a rollout's counts).
    pub(super) me: String,
    /// The status as last written: this process's last write if the cache does not show it yet.
    pub(super) before: Option<ZundokoRulesStatus>,
    /// The source's tag in a registry as written (normalized), if it names a tag.
    pub(super) tag: Option<String>,
    /// The digest that tag serves, once resolved.
    pub(super) pinned_digest: Option<String>,
}

/// Resolve who writes, the status before, and a tag's pin.
pub(super) fn resolve(zr: &ZundokoRules, ctx: &Context) -> Resolved {
    let key = key_of(zr);
    let (name, uid, tenant) = (key.to_string(), zr.uid().unwrap_or_default(), key.tenant);
    // The status as last written: this process's last write if the cache does not show it yet.
    // One writer per rule set: the holder of its shard. The others serve as its status says,
    // and write only their own count. A writer's own last write counts until the cache
    // shows it; a replica that does not write (or no longer does) goes by the cache alone.
    let shard = assign::shard_of_rules(&name, ctx.shards.count);
    let writes = ctx.shards.holds(shard);
    if !writes {
        ctx.with_memo(&uid, |m| m.written = None);
    }
    let before = ctx.with_memo(&uid, |m| m.written.as_ref().map(|w| w.0.clone())).or_else(|| zr.status.clone());

    // A tag in a registry is resolved once: the digest the status records for it (this
    // replica's last write, another's, or a process's before a restart) serves again.
    let oci = zr.spec.source.oci.as_ref();
    let tag = oci.and_then(|o| o.reference.parse::<crate::supply::oci::ModuleRef>().ok()).filter(|r| r.is_tag()).map(|r| r.to_string());
    let pinned_digest = tag.as_ref().and_then(|written| {
        let recorded = before.as_ref().and_then(|s| s.module.as_ref()).filter(|m| m.resolved_from.as_deref() == Some(written.as_str()));
        recorded
            .and_then(|m| m.reference.as_deref().and_then(digest_of))
            .or_else(|| ctx.with_memo(&uid, |m| m.pinned.clone()).filter(|(w, _)| w == written).map(|(_, d)| d))
    });
    Resolved { name, tenant, uid, shard, writes, me: ctx.shards.identity.clone(), before, tag, pinned_digest }
}

/// The digest of a pinned reference `REGISTRY/REPOSITORY@sha256:...`.
fn digest_of(reference: &str) -> Option<String> {
    reference.rsplit_once('@').map(|(_, d)| d.to_string())
}
