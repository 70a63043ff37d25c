//! The API a tenant uses: `ZundokoNamespacedRules`, a rule set in a namespace serving only the
//! Hikawas there, and how a Hikawa names one (`spec.rulesRef`, as cert-manager's `issuerRef`
//! names an `Issuer` or a `ClusterIssuer`).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ZundokoRulesSpec, ZundokoRulesStatus};

/// A rule set in a namespace: the spec of a `ZundokoRules` (sources, pin, candidate and rollout,
/// follow, keys, identity), serving only the Hikawas of its own namespace that name it with
/// `spec.rulesRef`. Its ConfigMaps and pull secrets are read from its own namespace only, and a
/// cluster policy (`ZundokoTenantPolicy`) bounds what it may use.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "zundokokiyoshi.kaitoy.github.com",
    version = "v1beta1",
    kind = "ZundokoNamespacedRules",
    plural = "zundokonamespacedrules",
    singular = "zundokonamespacedrules",
    shortname = "znr",
    namespaced,
    status = "ZundokoRulesStatus",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Module","type":"string","jsonPath":".status.module.name"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".status.module.version"}"#,
    printcolumn = r#"{"name":"Candidate","type":"string","jsonPath":".status.candidate.name"}"#,
    printcolumn = r#"{"name":"Percent","type":"integer","jsonPath":".spec.candidate.rollout.percent"}"#,
    printcolumn = r#"{"name":"Hikawas","type":"integer","jsonPath":".status.hikawas"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.reason"}"#,
    printcolumn = r#"{"name":"Digest","type":"string","jsonPath":".status.module.digest","priority":1}"#,
    printcolumn = r#"{"name":"Reference","type":"string","jsonPath":".status.module.reference"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
pub struct ZundokoNamespacedRulesSpec {
    /// The same fields as a `ZundokoRules`' spec. A ConfigMap source's and a pull secret's
    /// `namespace` must be this rule set's own.
    #[serde(flatten)]
    pub rules: ZundokoRulesSpec,
}

impl ZundokoNamespacedRules {
    /// The rule set `name` in `namespace`.
    pub fn in_namespace(namespace: &str, name: &str, spec: ZundokoRulesSpec) -> Self {
        let mut rules = ZundokoNamespacedRules::new(name, ZundokoNamespacedRulesSpec { rules: spec });
        rules.metadata.namespace = Some(namespace.into());
        rules
    }
}

/// The kinds of rule set a Hikawa may name.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum RulesKind {
    /// Cluster-scoped (what `spec.rules: NAME` names too).
    ZundokoRules,
    /// In the Hikawa's own namespace.
    ZundokoNamespacedRules,
}

/// A rule set by kind and name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RulesRef {
    /// `ZundokoNamespacedRules` (in the Hikawa's namespace) or `ZundokoRules` (cluster-scoped).
    pub kind: RulesKind,
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Only the Hikawa's own namespace may be written here (or nothing): a Hikawa naming
    /// another namespace's rule set is refused (Ready=False, RulesInOtherNamespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub namespace: Option<String>,
}

/// What tenants may bring: for the namespaces it selects, which sources their rule sets may
/// use, which keys must sign their modules, the ceilings of their modules' budgets, how many
/// rule sets and followed tags a namespace may have and how often they poll, and whether they
/// may roll out candidates. Cluster-scoped, for cluster administrators (no namespace role is
/// given it). A namespace no policy selects may bring no rules: its rule sets are refused
/// (`NoTenantPolicy`); one that two policies select, too (`PolicyAmbiguous`). What a field left
/// out allows is the least: no source, no candidate, no followed tag, one rule set.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "zundokokiyoshi.kaitoy.github.com",
    version = "v1beta1",
    kind = "ZundokoTenantPolicy",
    plural = "zundokotenantpolicies",
    singular = "zundokotenantpolicy",
    shortname = "ztp",
    printcolumn = r#"{"name":"Selector","type":"string","jsonPath":".spec.namespaceSelector","priority":1}"#,
    printcolumn = r#"{"name":"Rule-Sets","type":"integer","jsonPath":".spec.maxRuleSets"}"#,
    printcolumn = r#"{"name":"Candidates","type":"boolean","jsonPath":".spec.candidates"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ZundokoTenantPolicySpec {
    /// The namespaces this policy bounds, by their labels (`{}`: every namespace).
    pub namespace_selector: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    #[serde(default)]
    pub sources: TenantSources,
    /// PEM public keys: a tenant's module serves only if one of them signed it, beside the
    /// rule set's own `publicKeys` and the operator's `--trusted-keys` (each must verify).
    /// A ConfigMap's module carries its signature in the annotation
    /// `zundokokiyoshi.kaitoy.github.com/signature.KEY`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8), inner(length(max = 4096)))]
    pub required_keys: Vec<String>,
    /// The most a tenant's module may use (its `zundoko:budget` section, or the operator's
    /// defaults when it has none): over any, it is refused. Left out: the operator's own ceilings.
    #[serde(default)]
    pub ceilings: TenantCeilings,
    /// Rule sets (`ZundokoNamespacedRules`) a namespace may have; the oldest serve, the rest are
    /// refused.
    #[serde(default = "one")]
    #[schemars(range(min = 0, max = 1000))]
    pub max_rule_sets: u32,
    /// Rule sets of a namespace that may follow a tag (`spec.source.oci.follow`).
    #[serde(default)]
    #[schemars(range(min = 0, max = 1000))]
    pub max_followed_tags: u32,
    /// A followed tag is resolved again at most this often (seconds; the operator's
    /// `--min-poll-secs` when more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 86400))]
    pub min_poll_seconds: Option<u64>,
    /// Whether a tenant's rule set may name a `candidate` and roll it out.
    #[serde(default)]
    pub candidates: bool,
}

fn one() -> u32 {
    1
}

/// What a policy with every field left out allows: the least (as the API server defaults it).
impl Default for ZundokoTenantPolicySpec {
    fn default() -> Self {
        ZundokoTenantPolicySpec {
            namespace_selector: Default::default(),
            sources: TenantSources::default(),
            required_keys: Vec::new(),
            ceilings: TenantCeilings::default(),
            max_rule_sets: one(),
            max_followed_tags: 0,
            min_poll_seconds: None,
            candidates: false,
        }
    }
}

/// The sources tenants may use.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TenantSources {
    /// Whether a ConfigMap (in the tenant's own namespace) may hold its module.
    #[serde(default)]
    pub config_maps: bool,
    /// `REGISTRY/REPOSITORY` globs a reference must match (`*` matches any run of characters,
    /// `/` included: `ghcr.io/team-a/*`). None: no registry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(min = 1, max = 512)))]
    pub registries: Vec<String>,
}

/// Ceilings of a tenant module's budget.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TenantCeilings {
    /// Fuel per call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub fuel: Option<u64>,
    /// Memory per call, MiB.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "memoryMiB")]
    #[schemars(range(min = 1))]
    pub memory_mib: Option<u64>,
    /// The module's size, MiB.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "moduleMiB")]
    #[schemars(range(min = 1))]
    pub module_mib: Option<u64>,
    /// The compiler process's memory for the module, MiB (under `--max-compile-mib`).
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "compileMemoryMiB")]
    #[schemars(range(min = 16))]
    pub compile_memory_mib: Option<u64>,
    /// The compile's time, seconds (under `--compile-timeout-secs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub compile_seconds: Option<u64>,
}

/// The use of the operator by the tenant whose rule set this is (its namespace; `_cluster` for
/// a `ZundokoRules`: every cluster rule set and the default module together), since the start of
/// the replica that writes this status, as that replica counts it: with several replicas, the
/// one holding the rule set's shard writes it, and the others' use is in their own metrics.
/// Refreshed at most every 30 s, and only when a figure moved. Never another tenant's figures.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TenantUsage {
    /// Whose figures: the namespace, or `_cluster`.
    pub tenant: String,
    /// Guest call turns given to its modules that import WASI (an interpreter's); a module
    /// without WASI takes no turn.
    #[serde(default)]
    pub call_turns: u64,
    /// Guest calls its modules made to decide for Hikawas (one a decision), whatever their
    /// language: a Rust module's too, which takes no turn.
    #[serde(default)]
    pub calls: u64,
    /// The guest time of those calls in milliseconds, rounded down: each as the
    /// `zundoko_guest_call_duration_seconds` metric times it (a fresh instance, the call, the
    /// plan check).
    #[serde(default)]
    pub call_millis: u64,
    /// How long its compiles waited for their turn, in milliseconds.
    #[serde(default)]
    pub compile_wait_millis: u64,
    /// Registry tries made for it (a pull permit given).
    #[serde(default)]
    pub pulls: u64,
    /// Bytes it keeps in the module cache (`--cache-dir`) now.
    #[serde(default)]
    pub cache_bytes: u64,
    /// When the figures were taken (RFC 3339).
    pub taken_at: String,
    /// The replica (its Pod name) whose figures these are.
    #[schemars(length(max = 253))]
    pub replica: String,
}
