//! Whose share a call, a compile, a pull or a cached file takes: the owner of the rules it is
//! for. A namespaced rule set's tenant is its namespace; cluster-scoped rule sets and the
//! default module (`--module`, `--module-oci`) are the cluster's, one tenant among the others.
//! For a Hikawa's call that is the owner of the rules that decide, not the Hikawa's namespace:
//! a tenant with ten slow modules must not get ten times the share of a tenant with one,
//! whoever's Hikawas name them.

use std::fmt;

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tenant {
    /// Cluster-scoped rule sets and the default module.
    #[default]
    Cluster,
    /// A namespaced rule set's namespace.
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

    /// The tenant as the metrics label it: its namespace, or `_cluster` (no namespace name
    /// holds an underscore, so the two never meet).
    pub fn label(&self) -> &str {
        match self {
            Tenant::Cluster => CLUSTER_LABEL,
            Tenant::Namespace(namespace) => namespace,
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
/// given, compile waits, pull tries and cache bytes, from what counts them.
pub fn usage(
    calls: &[(Tenant, u64)],
    compile_waits: &[(Tenant, std::time::Duration)],
    pulls: &[(Tenant, u64)],
    cache: &[(Tenant, u64)],
) -> Vec<crate::process::tenant_metrics::TenantUse> {
    let mut by_tenant = std::collections::BTreeMap::<&Tenant, crate::process::tenant_metrics::TenantUse>::new();
    for (tenant, turns) in calls {
        by_tenant.entry(tenant).or_insert_with(|| named(tenant)).call_turns += turns;
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
