//! Whose a rule set is. A `ZundokoRules` and the default module are the cluster's; a
//! `ZundokoNamespacedRules` is its namespace's, the tenant's. The tenant travels beside a rule
//! set's name wherever it is served, checked or loaded ([`RuleSetKey`], `SourceSpec::tenant`),
//! so what one tenant names never reaches another's. It is also whose share a call, a compile,
//! a pull or a cached file takes (`supply/shares.rs`): for a Hikawa's call, the owner of the
//! rules that decide, not the Hikawa's namespace, so a tenant with ten slow modules does not
//! get ten times the share of a tenant with one, whoever's Hikawas name them.

use std::fmt;

use crate::crd::{Hikawa, RulesKind};

/// Why the rule set a Hikawa names is refused before it is looked up (the serving table's
/// `RulesUnavailable` is made from it).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RefusedName {
    pub rules: String,
    pub reason: &'static str,
    pub message: String,
}

/// Who brought a rule set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tenant {
    /// A cluster administrator: a `ZundokoRules`, the default module.
    #[default]
    Cluster,
    /// The namespace of a `ZundokoNamespacedRules`.
    Namespace(String),
}

impl Tenant {
    /// The tenant of a rule set in `namespace` (`None`: cluster-scoped).
    pub fn of(namespace: Option<&str>) -> Tenant {
        match namespace {
            Some(namespace) if !namespace.is_empty() => Tenant::Namespace(namespace.to_owned()),
            _ => Tenant::Cluster,
        }
    }

    /// The tenant as metrics and logs label it: its namespace, or `_cluster` (no namespace
    /// name holds an underscore, so the two never meet; a namespace may be named `cluster`).
    pub fn label(&self) -> &str {
        match self {
            Tenant::Cluster => CLUSTER_LABEL,
            Tenant::Namespace(namespace) => namespace,
        }
    }

    /// The tenant a [`label`](Self::label) names, read strictly (a label from a file the
    /// operator wrote, `cache_shares.rs`): `_cluster`, or a namespace's name as Kubernetes
    /// allows it (a DNS label: 1 to 63 of `a-z`, `0-9`, `-`, a letter or digit at each end).
    pub fn from_label(label: &str) -> Option<Tenant> {
        if label == CLUSTER_LABEL {
            return Some(Tenant::Cluster);
        }
        crate::crd::names::is_dns_label(label).then(|| Tenant::Namespace(label.to_owned()))
    }

    pub fn namespace(&self) -> Option<&str> {
        match self {
            Tenant::Cluster => None,
            Tenant::Namespace(ns) => Some(ns),
        }
    }
}

tokio::task_local! {
    /// Whose pulls this task makes, while [`Tenant::pulling`] runs.
    static PULLING_FOR: Tenant;
}

impl Tenant {
    /// Run `work` (a rule set's resolves and pulls) with its pulls as this tenant's: the
    /// registry's permits read it (`oci/permits.rs`), so the registry's calls in between need
    /// not carry it. Outside, pulls are the cluster's (the default module's, the CLI's).
    pub async fn pulling<F: Future>(self, work: F) -> F::Output {
        PULLING_FOR.scope(self, work).await
    }

    /// Whose pulls this task makes now.
    pub fn pulling_now() -> Tenant {
        PULLING_FOR.try_with(Clone::clone).unwrap_or_default()
    }
}

/// Each tenant's use since the start, for the metrics (`process/tenant_metrics.rs`): call turns
/// given, decisions and their guest time, compile waits, pull tries and cache bytes, from what
/// counts them.
pub fn usage(
    turns: &[(Tenant, u64)],
    calls: &[(Tenant, u64, std::time::Duration)],
    compile_waits: &[(Tenant, std::time::Duration)],
    pulls: &[(Tenant, u64)],
    cache: &[(Tenant, u64)],
) -> Vec<crate::process::tenant_metrics::TenantUse> {
    let mut by_tenant = std::collections::BTreeMap::<&Tenant, crate::process::tenant_metrics::TenantUse>::new();
    for (tenant, given) in turns {
        by_tenant.entry(tenant).or_insert_with(|| named(tenant)).call_turns += given;
    }
    for (tenant, made, took) in calls {
        let used = by_tenant.entry(tenant).or_insert_with(|| named(tenant));
        (used.calls, used.call_seconds) = (used.calls + made, used.call_seconds + took.as_secs_f64());
    }
    for (tenant, waited) in compile_waits {
        by_tenant.entry(tenant).or_insert_with(|| named(tenant)).compile_wait_seconds += waited.as_secs_f64();
    }
    for (tenant, tries) in pulls {
        by_tenant.entry(tenant).or_insert_with(|| named(tenant)).pulls += tries;
    }
    for (tenant, bytes) in cache {
        by_tenant.entry(tenant).or_insert_with(|| named(tenant)).cache_bytes += bytes;
    }
    by_tenant.into_values().collect()
}

fn named(tenant: &Tenant) -> crate::process::tenant_metrics::TenantUse {
    crate::process::tenant_metrics::TenantUse { namespace: tenant.label().to_owned(), ..Default::default() }
}

/// The cluster tenant's metrics label.
pub const CLUSTER_LABEL: &str = "_cluster";

impl fmt::Display for Tenant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tenant::Cluster => f.write_str("the cluster"),
            Tenant::Namespace(namespace) => write!(f, "namespace {namespace}"),
        }
    }
}

/// A rule set as the serving table, the wake-ups and the metrics know it: `NAME` for a
/// `ZundokoRules`, `NAMESPACE/NAME` for a `ZundokoNamespacedRules`. A Kubernetes name has no
/// `/`, so the two never meet: a Hikawa's `spec.rules: a/b` names no rule set at all
/// ([`of_hikawa`]), never namespace `a`'s `b`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleSetKey {
    pub tenant: Tenant,
    pub name: String,
}

impl RuleSetKey {
    pub fn cluster(name: &str) -> Self {
        RuleSetKey { tenant: Tenant::Cluster, name: name.into() }
    }

    pub fn namespaced(namespace: &str, name: &str) -> Self {
        RuleSetKey { tenant: Tenant::Namespace(namespace.into()), name: name.into() }
    }

    /// The key as [`Display`](fmt::Display) writes it.
    pub fn parse(key: &str) -> Self {
        match key.split_once('/') {
            Some((ns, name)) => RuleSetKey::namespaced(ns, name),
            None => RuleSetKey::cluster(key),
        }
    }

    /// `ZundokoRules NAME`, or `ZundokoNamespacedRules NAME in namespace NS`: for messages.
    pub fn describe(&self) -> String {
        match &self.tenant {
            Tenant::Cluster => format!("ZundokoRules {}", self.name),
            Tenant::Namespace(ns) => format!("ZundokoNamespacedRules {} in namespace {ns}", self.name),
        }
    }
}

impl fmt::Display for RuleSetKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.tenant {
            Tenant::Cluster => write!(f, "{}", self.name),
            Tenant::Namespace(ns) => write!(f, "{ns}/{}", self.name),
        }
    }
}

/// The rule set a Hikawa names (`None`: the default module), or why what it names is refused:
/// a `rules` or `rulesRef` name with a `/`, a `ZundokoNamespacedRules` in another namespace.
pub fn of_hikawa(hikawa: &Hikawa) -> Result<Option<RuleSetKey>, RefusedName> {
    let own = hikawa.metadata.namespace.as_deref().unwrap_or("default");
    let refused = |rules: String, reason: &'static str, message: String| RefusedName { rules, reason, message };
    let no_slash = |name: &str, field: &str| {
        if name.contains('/') {
            return Err(refused(name.into(), "RulesNotFound", format!("{field} {name:?} names no rule set: a rule set's name has no '/' (a rule set in this namespace is named by spec.rulesRef)")));
        }
        Ok(())
    };
    match (&hikawa.spec.rules, &hikawa.spec.rules_ref) {
        (None, None) => Ok(None),
        (Some(_), Some(_)) => Err(refused(String::new(), "RulesAmbiguous", "the Hikawa names its rules twice: set spec.rules (a ZundokoRules) or spec.rulesRef, not both".into())),
        (Some(name), None) => no_slash(name, "spec.rules").map(|()| Some(RuleSetKey::cluster(name))),
        (None, Some(r)) => {
            no_slash(&r.name, "spec.rulesRef.name")?;
            match (r.kind, r.namespace.as_deref()) {
                (RulesKind::ZundokoRules, None) => Ok(Some(RuleSetKey::cluster(&r.name))),
                (RulesKind::ZundokoRules, Some(ns)) => Err(refused(
                    r.name.clone(),
                    "RulesInOtherNamespace",
                    format!("spec.rulesRef names ZundokoRules {} in namespace {ns}, but a ZundokoRules is cluster-scoped: leave rulesRef.namespace out", r.name),
                )),
                (RulesKind::ZundokoNamespacedRules, Some(ns)) if ns != own => Err(refused(
                    format!("{ns}/{}", r.name),
                    "RulesInOtherNamespace",
                    format!("spec.rulesRef names ZundokoNamespacedRules {} in namespace {ns}: a Hikawa may name only a rule set in its own namespace ({own}) or a cluster-scoped ZundokoRules", r.name),
                )),
                (RulesKind::ZundokoNamespacedRules, _) => Ok(Some(RuleSetKey::namespaced(own, &r.name))),
            }
        }
    }
}

/// [`of_hikawa`]'s key as the serving table writes it; `None` for the default module or a
/// refused name.
pub fn key_of_hikawa(hikawa: &Hikawa) -> Option<String> {
    of_hikawa(hikawa).ok().flatten().map(|key| key.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{HikawaSpec, RulesRef};

    fn hikawa(ns: &str, rules: Option<&str>, rules_ref: Option<(RulesKind, &str, Option<&str>)>) -> Hikawa {
        let rules_ref = rules_ref.map(|(kind, name, namespace)| RulesRef { kind, name: name.into(), namespace: namespace.map(Into::into) });
        let mut h = Hikawa::new("h", HikawaSpec { rules: rules.map(Into::into), rules_ref, ..HikawaSpec::default() });
        h.metadata.namespace = Some(ns.into());
        h
    }

    #[test]
    fn a_hikawa_names_a_cluster_rule_set_by_rules_and_its_own_namespaces_by_rules_ref() {
        assert_eq!(of_hikawa(&hikawa("a", None, None)), Ok(None));
        assert_eq!(of_hikawa(&hikawa("a", Some("classic"), None)), Ok(Some(RuleSetKey::cluster("classic"))));
        assert_eq!(of_hikawa(&hikawa("a", None, Some((RulesKind::ZundokoRules, "classic", None)))), Ok(Some(RuleSetKey::cluster("classic"))));
        assert_eq!(of_hikawa(&hikawa("a", None, Some((RulesKind::ZundokoNamespacedRules, "mine", None)))), Ok(Some(RuleSetKey::namespaced("a", "mine"))));
        assert_eq!(of_hikawa(&hikawa("a", None, Some((RulesKind::ZundokoNamespacedRules, "mine", Some("a"))))), Ok(Some(RuleSetKey::namespaced("a", "mine"))));
        assert_eq!(RuleSetKey::namespaced("a", "mine").to_string(), "a/mine");
        assert_eq!(RuleSetKey::parse("a/mine"), RuleSetKey::namespaced("a", "mine"));
        assert_eq!(RuleSetKey::parse("classic"), RuleSetKey::cluster("classic"));
    }

    #[test]
    fn a_hikawa_cannot_name_another_namespaces_rule_set_in_any_spelling() {
        let other = of_hikawa(&hikawa("b", None, Some((RulesKind::ZundokoNamespacedRules, "mine", Some("a"))))).unwrap_err();
        assert_eq!(other.reason, "RulesInOtherNamespace");
        assert!(other.message.contains("own namespace (b)"), "{}", other.message);
        // The serving table's spelling of a's rule set, written as a cluster name: no rule set.
        assert_eq!(of_hikawa(&hikawa("b", Some("a/mine"), None)).unwrap_err().reason, "RulesNotFound");
        assert_eq!(of_hikawa(&hikawa("b", None, Some((RulesKind::ZundokoNamespacedRules, "a/mine", None)))).unwrap_err().reason, "RulesNotFound");
        assert_eq!(of_hikawa(&hikawa("b", None, Some((RulesKind::ZundokoRules, "x", Some("a"))))).unwrap_err().reason, "RulesInOtherNamespace");
        assert_eq!(of_hikawa(&hikawa("b", Some("x"), Some((RulesKind::ZundokoRules, "x", None)))).unwrap_err().reason, "RulesAmbiguous");
    }

}
