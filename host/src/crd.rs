//! The API: `Hikawa`, `Zundoko` and `Kiyoshi` in `zundokokiyoshi.kaitoy.github.com/v1beta1`.
//! The CRDs in `deploy/crds/` are generated from these types (`zundoko-operator crd`).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{CustomResourceDefinition, ValidationRule};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
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

/// The three CRDs, in the order they are applied.
pub fn all() -> Vec<CustomResourceDefinition> {
    use kube::CustomResourceExt;
    vec![hikawa_crd(), Zundoko::crd(), Kiyoshi::crd()]
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
