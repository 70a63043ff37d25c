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
