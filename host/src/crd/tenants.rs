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

