//! A tenant's rule set (`ZundokoNamespacedRules`), its modules had as `run` has them, through
//! the operator's own code rather than a copy: the cluster policy selecting its namespace read
//! once and judged by `Tenancy::judge` (the spec's fields, then the bounds its module is held
//! to: `requiredKeys`, the ceilings), and each source checked by `Sources::check` (the
//! ConfigMap and the pull secret read from the rule set's own namespace only, an artifact served
//! from the cache only once its registry answers the tenant's own credentials, the required
//! keys, the ceilings, the compile and the smoke test). What `run` refuses is named as `run`
//! names it, and not replayed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::ListParams;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use crate::controllers::rulesets::policy::Tenancy;
use crate::crd::{ModuleSource, ZundokoNamespacedRules, ZundokoRules, ZundokoTenantPolicy};
use crate::supply::ModuleLoader;
use crate::supply::oci::{ModuleRef, Registry};
use crate::supply::sandbox::RulesModule;
use crate::supply::sources::rulesets::{SourceRef, SourceSpec, Sources};
use crate::supply::tenant::Tenant;
use crate::supply::tenant_bounds::TenantBounds;

/// The most policies, or rule sets of one namespace, read: past it, nothing is judged.
const MAX_LISTED: u32 = 1000;

/// A module the rule set names, checked and loaded, and where it came from.
pub struct Checked {
    pub module: Arc<RulesModule>,
    pub origin: String,
}

/// Every module the tenant's rule set `zr` (of namespace `ns`, read as the cluster kind) names
/// now, by digest, as `run` checks it; and what each source that gave none said.
pub async fn modules(client: &Client, ns: &str, zr: &ZundokoRules, loader: Arc<ModuleLoader>, registry: Arc<Registry>) -> (HashMap<String, Checked>, Vec<String>) {
    let (mut found, mut problems) = (HashMap::new(), Vec::new());
    let bounds = match judge(client, ns, zr, registry.settings().min_poll).await {
        Ok(bounds) => bounds,
        Err(why) => {
            problems.push(why);
            return (found, problems);
        }
    };
    let tenant = Tenant::Namespace(ns.to_owned());
    let sources = Sources::for_tenants(client, loader, registry);
    let uid = zr.metadata.uid.clone().unwrap_or_default();
    let status = zr.status.as_ref();
    // Each source as written (a tag: what it names now) and as its status pinned it.
    let mut specs: Vec<(SourceSpec, &'static str)> = Vec::new();
    let mut add = |source: &ModuleSource, pin: Option<&str>, pinned: Option<&str>, pinned_by: &'static str| {
        let pinned = pinned.and_then(|r| r.parse::<ModuleRef>().ok()).and_then(|r| r.digest);
        for digest in [None, pinned] {
            let spec = SourceSpec::new(source, pin, digest).of(&tenant).bounded(Some(&bounds));
            if !specs.iter().any(|(s, _)| *s == spec) {
                specs.push((spec, pinned_by));
            }
        }
    };
    add(&zr.spec.source, zr.spec.sha256.as_deref(), status.and_then(|s| s.module.as_ref()?.reference.as_deref()), "spec.sha256");
    if let Some(candidate) = &zr.spec.candidate {
        add(&candidate.source, candidate.sha256.as_deref(), status.and_then(|s| s.candidate.as_ref()?.reference.as_deref()), "spec.candidate.sha256");
    }
    for (spec, pinned_by) in specs {
        // Checked afresh (nothing remembered), now (no deferral), tried once.
        match sources.check(&uid, &spec, None, pinned_by, false, Duration::ZERO).await {
            Ok(Some(checked)) => {
                let origin = origin(&spec, checked.pinned.as_ref());
                match checked.outcome {
                    Ok(module) => {
                        found.insert(module.identity().digest.clone(), Checked { module, origin });
                    }
                    Err(problem) => problems.push(format!("{origin}: {} ({})", problem.message, problem.reason)),
                }
            }
            Ok(None) => problems.push(format!("{}: not checked (deferred)", origin(&spec, None))),
            Err(error) => problems.push(format!("{}: {error}", origin(&spec, None))),
        }
    }
    (found, problems)
}

/// Where a source's module comes from, as the fetch path names it.
fn origin(spec: &SourceSpec, pinned: Option<&ModuleRef>) -> String {
    match (&spec.source, pinned) {
        (SourceRef::ConfigMap(cm), _) => format!("ConfigMap {}/{} key {}", cm.namespace, cm.name, cm.key),
        (SourceRef::Oci(_), Some(pinned)) => format!("registry {pinned}"),
        (SourceRef::Oci(oci), None) => match &oci.reference {
            Ok(reference) => format!("registry {}", oci.digest.as_deref().map_or_else(|| reference.clone(), |d| reference.pinned(d))),
            Err(why) => format!("registry reference ({why})"),
        },
    }
}

/// The bounds the policy selecting namespace `ns` holds `zr` to, as `run` judges them; or the
/// refusal, naming the policy and its field, or what could not be read.
async fn judge(client: &Client, ns: &str, zr: &ZundokoRules, min_poll: Duration) -> Result<TenantBounds, String> {
    let unread = |what: &str, error: String| {
        format!(
            "cannot read {what} ({error}): a tenant's module is replayed only as `run` checks it, under the ZundokoTenantPolicy selecting its namespace (its requiredKeys and ceilings); explain with credentials that may list zundokotenantpolicies, get namespaces and list zundokonamespacedrules in {ns}, or give --module FILE"
        )
    };
    let policies = listed(Api::<ZundokoTenantPolicy>::all(client.clone())).await.map_err(|e| unread("the ZundokoTenantPolicies", e))?;
    let namespace = Api::<Namespace>::all(client.clone()).get_metadata(ns).await.map_err(|e| unread(&format!("namespace {ns}"), e.to_string()))?;
    let rule_sets = listed(Api::<ZundokoNamespacedRules>::namespaced(client.clone(), ns)).await.map_err(|e| unread(&format!("the ZundokoNamespacedRules of {ns}"), e))?;
    match Tenancy::listed_once(policies, namespace, rule_sets).judge(zr, ns, min_poll) {
        Some(Ok(bounds)) => Ok(bounds),
        Some(Err(problem)) => Err(format!("refused as `run` refuses it: {} ({})", problem.message, problem.reason)),
        None => Err("the tenant policies could not be judged".into()),
    }
}

/// Every object `api` lists, at most [`MAX_LISTED`].
async fn listed<K>(api: Api<K>) -> Result<Vec<K>, String>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let list = api.list(&ListParams::default().limit(MAX_LISTED)).await.map_err(|e| e.to_string())?;
    if list.metadata.continue_.as_deref().is_some_and(|c| !c.is_empty()) {
        return Err(format!("more than {MAX_LISTED} {}: not read further", K::plural(&())));
    }
    Ok(list.items)
}
