//! The API: `Hikawa`, `Zundoko` and `Kiyoshi` in `zundokokiyoshi.kaitoy.github.com/v1beta1`,
//! the rule sets (`ZundokoRules`; a tenant's, in `crd/tenants.rs`).
//! The CRDs in `deploy/crds/` are generated from these types (`zundoko-operator crd`).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{CustomResourceDefinition, ValidationRule};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub mod names;
mod tenants;
pub use tenants::{
    RulesKind, RulesRef, TenantCeilings, TenantSources, TenantUsage, ZundokoNamespacedRules, ZundokoNamespacedRulesSpec, ZundokoTenantPolicy, ZundokoTenantPolicySpec,
};

/// Annotation the host puts on every child: when it was said, to the millisecond.
/// (`creationTimestamp` has one-second resolution: too coarse for `intervalMillis`.)
pub const SAID_AT: &str = "zundokokiyoshi.kaitoy.github.com/said-at";

pub const GROUP: &str = "zundokokiyoshi.kaitoy.github.com";
pub const VERSION: &str = "v1beta1";

/// A singer: the operator says one word every `intervalMillis` until Ki-yo-shi!
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "zundokokiyoshi.kaitoy.github.com",
    version = "v1beta1",
    kind = "Hikawa",
    plural = "hikawas",
    shortname = "hk",
    namespaced,
    status = "HikawaStatus",
    printcolumn = r#"{"name":"Interval","type":"integer","jsonPath":".spec.intervalMillis"}"#,
    printcolumn = r#"{"name":"Said","type":"integer","jsonPath":".status.numZundokosSaid"}"#,
    printcolumn = r#"{"name":"Kiyoshied","type":"boolean","jsonPath":".status.kiyoshied"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Module","type":"string","jsonPath":".status.module.name"}"#,
    printcolumn = r#"{"name":"Rules","type":"string","jsonPath":".spec.rules","priority":1}"#,
    printcolumn = r#"{"name":"Decided-By","type":"string","jsonPath":".status.decidedBy","priority":1}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{"rule": "!(has(self.rules) && has(self.rulesRef))", "message": "name the rules once: spec.rules (a cluster-scoped ZundokoRules) or spec.rulesRef"}]))]
pub struct HikawaSpec {
    /// The pause between two consecutive words, in milliseconds.
    pub interval_millis: u64,
    /// From the original operator; accepted so its manifests apply, never used or written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_zundokos: Option<i64>,
    /// From the original operator; accepted so its manifests apply, never used or written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub say_kiyoshi: Option<bool>,
    /// Handed to the rules module verbatim (for example `zuns: "3"` for the default rules).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
    /// The `ZundokoRules` that decide for this Hikawa; without it, the operator's default
    /// module does. Rules that do not exist or serve no module leave it waiting (Ready=False).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub rules: Option<String>,
    /// The rule set that decides, by kind and name: `{kind: ZundokoNamespacedRules, name}` in
    /// this Hikawa's namespace, or `{kind: ZundokoRules, name}` (as `rules: NAME`). At most one
    /// of `rules` and `rulesRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules_ref: Option<RulesRef>,
}

/// What the operator has observed and decided. Written only through the status subresource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HikawaStatus {
    /// How many Zundokos have been said.
    #[serde(default)]
    pub num_zundokos_said: u32,
    /// Whether Ki-yo-shi! has been said.
    #[serde(default)]
    pub kiyoshied: bool,
    /// `Singing`, `Kiyoshied`, or `Failed` while the rules cannot decide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// A short note from the rules or about the last failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The generation of the spec the last decision was made for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When the last word was said (RFC 3339, milliseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_word_time: Option<String>,
    /// The rules module that made the last decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<ModuleStatus>,
    /// The operator replica (its Pod) that made the last decision: the holder of this
    /// Hikawa's shard then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// `Ready`: True when the rules decided and the plan was applied; False with the
    /// failure as its reason (GuestTrapped, PlanRejected, OutOfCpuBudget, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
}

/// Which module made a decision.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModuleStatus {
    pub name: String,
    pub version: String,
    /// `sha256:<hex>` of the module file.
    pub digest: String,
    /// From a registry: the artifact that serves, pinned by its manifest digest
    /// (`REGISTRY/REPOSITORY@sha256:...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// The tag (as `spec` writes it) that was resolved to `reference`: a restarted operator
    /// serves that digest again rather than whatever the tag points at now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_from: Option<String>,
}

/// A word said for a Hikawa. Created by the operator, owned by its Hikawa.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[kube(
    group = "zundokokiyoshi.kaitoy.github.com",
    version = "v1beta1",
    kind = "Zundoko",
    plural = "zundokos",
    shortname = "zd",
    namespaced,
    printcolumn = r#"{"name":"Say","type":"string","jsonPath":".spec.say"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
pub struct ZundokoSpec {
    /// The word: "Zun" or "Doko" under the default rules.
    pub say: String,
}

/// The end of a song. Created by the operator, owned by its Hikawa.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[kube(
    group = "zundokokiyoshi.kaitoy.github.com",
    version = "v1beta1",
    kind = "Kiyoshi",
    plural = "kiyoshis",
    shortname = "ky",
    namespaced,
    printcolumn = r#"{"name":"Say","type":"string","jsonPath":".spec.say"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
pub struct KiyoshiSpec {
    /// "Ki-yo-shi!" under the default rules.
    pub say: String,
}

/// A rule set: a rules module from a ConfigMap, chosen by Hikawas with `spec.rules: NAME`,
/// optionally with a candidate module rolled out to a share of them. Cluster-scoped.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "zundokokiyoshi.kaitoy.github.com",
    version = "v1beta1",
    kind = "ZundokoRules",
    plural = "zundokorules",
    singular = "zundokorules",
    shortname = "zr",
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
#[serde(rename_all = "camelCase")]
pub struct ZundokoRulesSpec {
    /// Where the module comes from.
    pub source: ModuleSource,
    /// Serve only the module with this sha256 (64 hex digits, optionally `sha256:`-prefixed);
    /// any other is rejected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(sha256:)?[0-9a-fA-F]{64}$"))]
    pub sha256: Option<String>,
    /// A second module, rolled out to a share of this rule set's Hikawas, then promoted or
    /// rolled back by the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<CandidateSpec>,
}

/// A module source: a ConfigMap or an OCI registry, exactly one.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{"rule": "has(self.configMap) != has(self.oci)", "message": "a source names exactly one of configMap or oci"}]))]
pub struct ModuleSource {
    /// A ConfigMap holding the module under a `binaryData` key, read through the API (at most
    /// about 1 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapSource>,
    /// A Wasm component artifact in an OCI registry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oci: Option<OciSource>,
}

impl ModuleSource {
    pub fn config_map(namespace: &str, name: &str) -> Self {
        ModuleSource { config_map: Some(ConfigMapSource { namespace: namespace.into(), name: name.into(), key: None }), oci: None }
    }

    pub fn oci(reference: &str) -> Self {
        ModuleSource { config_map: None, oci: Some(OciSource { reference: reference.into(), ..OciSource::default() }) }
    }
}

/// A module in an OCI registry (the CNCF Wasm artifact layout: config
/// `application/vnd.wasm.config.v0+json`, one `application/wasm` layer).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OciSource {
    /// `REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]`. A tag is resolved to a digest once, and
    /// that digest serves (`status.module.reference`) until the spec changes, or, with
    /// `follow`, until the tag moves and the new artifact is promoted through a rollout.
    #[schemars(length(min = 1, max = 1024))]
    pub reference: String,
    /// A `kubernetes.io/dockerconfigjson` Secret with the registry's credentials, in one of the
    /// namespaces the operator reads rules from (`--rules-namespaces`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_secret: Option<SecretReference>,
    /// Follow the tag: resolve it again every `pollSeconds`; a new artifact is a candidate,
    /// rolled out by `rollout` (promoted, or rolled back by itself), never a silent change.
    /// Ignored while `spec.candidate` names a candidate of its own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub follow: bool,
    /// How often a followed tag is resolved again, in seconds (default 60; never more often than
    /// the operator's `--min-poll-secs`, 30 by default: less is read as that).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 86400))]
    pub poll_seconds: Option<u64>,
    /// How a followed tag's new artifact is rolled out (the defaults of `candidate.rollout`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutSpec>,
    /// PEM public keys (as `cosign.pub`): the module serves only if a signature by one of them
    /// verifies, beside the operator's own trusted keys (`--trusted-keys`), if any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8), inner(length(max = 4096)))]
    pub public_keys: Vec<String>,
    /// Bind signatures to this repository: a signature counts only if its payload's
    /// `critical.identity.docker-reference` is `REGISTRY/REPOSITORY` of `reference`, so a
    /// signed artifact copied from another repository does not verify here. Needs a trusted
    /// key (`publicKeys` or `--trusted-keys`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub require_identity: bool,
}

/// A Secret, by namespace and name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretReference {
    #[schemars(length(min = 1, max = 63))]
    pub namespace: String,
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapSource {
    /// The ConfigMap's namespace: one the operator reads rules from (`--rules-namespaces`).
    #[schemars(length(min = 1, max = 63))]
    pub namespace: String,
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The `binaryData` key holding the module (default `rules.wasm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub key: Option<String>,
}

/// A candidate module and how it is rolled out.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CandidateSpec {
    pub source: ModuleSource,
    /// Roll out only the module with this sha256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(sha256:)?[0-9a-fA-F]{64}$"))]
    pub sha256: Option<String>,
    #[serde(default)]
    pub rollout: RolloutSpec,
}

/// How a candidate is rolled out: to which share of the Hikawas, when it is promoted, when it
/// is rolled back.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutSpec {
    /// The percentage of this rule set's Hikawas the candidate decides for, chosen by uid
    /// (stable across restarts and replicas).
    #[serde(default = "default_percent")]
    #[schemars(range(min = 0, max = 100))]
    pub percent: u8,
    /// Promote once the candidate has decided this long (seconds since the rollout started)
    /// with its failure rate within `maxFailurePercent`. Default 300 when neither this nor
    /// `promoteAfterDecisions` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub promote_after_seconds: Option<u64>,
    /// Promote once the candidate has made this many decisions with its failure rate within
    /// `maxFailurePercent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub promote_after_decisions: Option<u64>,
    /// Roll back as soon as the candidate's failed decisions pass this percentage of its
    /// decisions (default 0: the first failure rolls it back).
    #[serde(default)]
    #[schemars(range(min = 0, max = 100))]
    pub max_failure_percent: u8,
}

fn default_percent() -> u8 {
    10
}

impl Default for RolloutSpec {
    fn default() -> Self {
        RolloutSpec { percent: default_percent(), promote_after_seconds: None, promote_after_decisions: None, max_failure_percent: 0 }
    }
}

/// What the operator found and serves for a rule set. Written only through the status subresource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ZundokoRulesStatus {
    /// `Pending` (no module yet), `Active` (serving), `Rejected` (the source's module was
    /// refused and none serves), `RollingOut` (a candidate decides for a share of the
    /// Hikawas), `RolledBack` (the candidate failed and was stopped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The module serving.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<ModuleStatus>,
    /// The candidate module, once checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<ModuleStatus>,
    /// The candidate's rollout: kept here, so a restarted operator resumes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutStatus>,
    /// Why a module was rejected or a candidate rolled back (`ModulePinMismatch`,
    /// `SourceNotFound`, `FailureRateExceeded`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the sources were last checked (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_at: Option<String>,
    /// Hikawas naming these rules.
    #[serde(default)]
    pub hikawas: u32,
    /// Of those, the ones the candidate decides for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_hikawas: Option<u32>,
    /// `Ready`: a module serves. `CandidateReady`: the candidate's state, while there is one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
    /// This tenant's use of the operator, as the replica writing this status counts it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TenantUsage>,
}

/// A candidate's rollout, as far as it has come.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// The candidate module's `sha256:<hex>`: a rollout is of these bytes only.
    pub digest: String,
    /// `Progressing`, `Promoted` or `RolledBack`.
    pub state: String,
    /// When the candidate first served (RFC 3339).
    pub started_at: String,
    /// When it was promoted or rolled back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// Decisions the candidate made, and how many of them failed: over every replica.
    #[serde(default)]
    pub decisions: u64,
    #[serde(default)]
    pub failures: u64,
    /// Each replica's own count (by its Pod name): every replica writes its own entry, the
    /// one that writes the rule set's status sums them into `decisions` and `failures`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub replicas: BTreeMap<String, ReplicaCount>,
}

/// One replica's count of a candidate's decisions.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaCount {
    /// The candidate these decisions were made by (an entry for other bytes does not count).
    pub digest: String,
    #[serde(default)]
    pub decisions: u64,
    #[serde(default)]
    pub failures: u64,
    /// The sum over every replica (its own count and the others' entries as it read them) on
    /// which this replica found the candidate failing past `maxFailurePercent`. It stopped the
    /// candidate there and then, and the rule set's writer rolls the rollout back on this sum,
    /// as one replica would have at that count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_too_often: Option<Counted>,
}

/// Decisions and how many of them failed.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct Counted {
    #[serde(default)]
    pub decisions: u64,
    #[serde(default)]
    pub failures: u64,
}

/// Conditions as a list map keyed by type, the way built-in types declare them.
fn conditions_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = generator.subschema_for::<Vec<Condition>>();
    schema.insert("x-kubernetes-list-type".into(), "map".into());
    schema.insert("x-kubernetes-list-map-keys".into(), serde_json::json!(["type"]));
    schema
}

/// The longest Hikawa name: its children are named `<hikawa>-zundoko-NNNN` (at most 9,999
/// words, see `plan_check::MAX_CHILDREN_LIMIT`), and an object name may have at most 253 characters.
pub const MAX_HIKAWA_NAME: usize = 253 - "-zundoko-".len() - 4;

/// The CRDs, in the order they are applied.
pub fn all() -> Vec<CustomResourceDefinition> {
    use kube::CustomResourceExt;
    vec![hikawa_crd(), Zundoko::crd(), Kiyoshi::crd(), ZundokoRules::crd(), ZundokoNamespacedRules::crd(), ZundokoTenantPolicy::crd()]
}

/// Hikawa's CRD, refusing at admission a name too long for its children (CEL on the root,
/// where `self.metadata.name` is available).
fn hikawa_crd() -> CustomResourceDefinition {
    use kube::CustomResourceExt;
    let mut crd = Hikawa::crd();
    for version in &mut crd.spec.versions {
        if let Some(schema) = version.schema.as_mut().and_then(|s| s.open_api_v3_schema.as_mut()) {
            schema.x_kubernetes_validations = Some(vec![ValidationRule {
                rule: format!("self.metadata.name.size() <= {MAX_HIKAWA_NAME}"),
                message: Some(format!(
                    "a Hikawa's name may have at most {MAX_HIKAWA_NAME} characters: its children are named <name>-zundoko-NNNN and an object name may have at most 253"
                )),
                ..ValidationRule::default()
            }]);
        }
    }
    crd
}

/// The CRDs as one multi-document YAML stream (what `zundoko-operator crd` prints).
pub fn all_yaml() -> anyhow::Result<String> {
    let mut out = String::new();
    for crd in all() {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&crd)?);
    }
    Ok(out)
}

/// Parse a Hikawa manifest (YAML or JSON), naming what is wrong when it is not one.
pub fn parse_hikawa(source: &str, text: &str) -> anyhow::Result<Hikawa> {
    use anyhow::Context;
    let value: serde_yaml::Value =
        serde_yaml::from_str(text).with_context(|| format!("{source}: not valid YAML"))?;
    let api_version = value.get("apiVersion").and_then(|v| v.as_str()).unwrap_or("");
    let kind = value.get("kind").and_then(|v| v.as_str()).unwrap_or("");
    let expected = format!("{GROUP}/{VERSION}");
    anyhow::ensure!(
        api_version == expected && kind == "Hikawa",
        "{source}: expected apiVersion {expected} and kind Hikawa, found apiVersion {api_version:?} and kind {kind:?}"
    );
    let hikawa: Hikawa = serde_yaml::from_value(value)
        .with_context(|| format!("{source}: not a valid Hikawa"))?;
    anyhow::ensure!(hikawa.metadata.name.is_some(), "{source}: metadata.name is missing");
    Ok(hikawa)
}
