//! What the operator is started with: where the rules come from ([`ModuleSources`]) and
//! everything else ([`OperatorConfig`]). Plain data; `cli/run.rs` fills it from the flags
//! (`RunArgs::operator_config`), tests and benches fill it directly.

use std::net::SocketAddr;
use std::time::Duration;

use zundoko_rules::RuleSet;

use crate::controllers::hikawa::controller::Settings;
use crate::process::leader::ShardSettings;
use crate::supply::sandbox::SandboxLimits;
use crate::supply::sources::configmap::ConfigMapRef;
use crate::supply::sources::file::FileSource;

/// Where the rules come from.
#[derive(Clone, Debug, Default)]
pub struct ModuleSources {
    pub file: Option<FileSource>,
    pub configmap: Option<ConfigMapRef>,
    /// An OCI artifact (`--module-oci`).
    pub oci: Option<crate::supply::sources::oci::OciSource>,
    /// `sha256:<hex>` or `<hex>`: refuse any other module.
    pub pin: Option<String>,
    /// Start without a usable module and wait for one (instead of exiting).
    pub wait: bool,
    /// Benchmarking only: the shipped rules linked natively, no sandbox, no swaps.
    pub native: Option<RuleSet>,
}

#[derive(Clone, Debug)]
pub struct OperatorConfig {
    pub controller: Settings,
    pub sandbox: SandboxLimits,
    /// Where modules too big to compile in the operator's own memory compile (`run` uses its
    /// own binary); in this process if `None`.
    pub compiler: Option<crate::supply::sandbox::compiler_process::CompilerProcess>,
    pub modules: ModuleSources,
    /// How registries are reached (the default module's and every rule set's).
    pub registry: crate::supply::oci::RegistrySettings,
    /// `/metrics`, `/healthz`, `/readyz`; none if `None`.
    pub http_addr: Option<SocketAddr>,
    /// Share the Hikawas with other replicas through shard Leases; hold every shard if `None`.
    pub leader: Option<ShardSettings>,
    /// Shards the Hikawas fall into (the children's shard label names them).
    pub shards: u16,
    /// The longest any API request may take (retries included); shorter than the renew deadline.
    pub api_timeout: Duration,
    /// The operator's own namespace and Pod (downward API), for swap Events.
    pub namespace: Option<String>,
    pub pod_name: Option<String>,
}
