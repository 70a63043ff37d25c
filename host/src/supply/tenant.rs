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
