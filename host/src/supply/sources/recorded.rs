//! The default module as a replica records it for `explain` (issue 54): the digest serving now
//! and the sources it may be had from: where it came from first, then every source the replica
//! was started with (`--module`, `--module-configmap`, `--module-oci`). Each replica keeps its
//! record beside its beat in the members Lease (`process/leader/members.rs`, which writes it
//! as an opaque value), so the cluster says where the default module comes from with the
//! operator down. A file is named but cannot be read from another machine; the deploy/
//! manifests mount the ConfigMap they also watch through the API, so that one is fetchable.
//!
//! The value is JSON, version 1 (docs/debugging.md documents it):
//! `{"v":1,"digest":"sha256:<hex>","sources":[{"file":"/etc/zundoko/module/rules.wasm"},
//! {"configMap":{"namespace":"zundoko-system","name":"zundoko-rules","key":"rules.wasm"}},
//! {"oci":"REGISTRY/REPOSITORY@sha256:<hex>"}]}`.

use serde::{Deserialize, Serialize};

use crate::supply::fetch::Origin;

const VERSION: u32 = 1;

/// A source of the default module, as recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RecordedSource {
    File(String),
    ConfigMap { namespace: String, name: String, key: String },
    /// A reference: pinned by its manifest digest where the module came from it.
    Oci(String),
}

impl From<&Origin> for RecordedSource {
    fn from(origin: &Origin) -> Self {
        match origin {
            Origin::File(path) => RecordedSource::File(path.display().to_string()),
            Origin::ConfigMap { namespace, name, key } => RecordedSource::ConfigMap { namespace: namespace.clone(), name: name.clone(), key: key.clone() },
            Origin::Oci(reference) => RecordedSource::Oci(reference.clone()),
        }
    }
}

/// The default module one replica serves, and where it may be had.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DefaultModuleRecord {
    pub digest: String,
    /// Where it came from first, then the other sources configured.
    pub sources: Vec<RecordedSource>,
}

#[derive(Serialize, Deserialize)]
struct Versioned<T> {
    v: u32,
    #[serde(flatten)]
    record: T,
}

impl DefaultModuleRecord {
    /// Module `digest`, served from `from`, of a replica configured with `configured`.
    pub fn new(digest: &str, from: &Origin, configured: &[Origin]) -> Self {
        let mut sources = vec![RecordedSource::from(from)];
        for source in configured.iter().map(RecordedSource::from) {
            if !sources.contains(&source) {
                sources.push(source);
            }
        }
        DefaultModuleRecord { digest: digest.into(), sources }
    }

    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(Versioned { v: VERSION, record: self }).expect("a record serializes")
    }

    /// Read a record; why not, if it is not one of this version.
    pub fn from_value(value: &serde_json::Value) -> Result<Self, String> {
        match serde_json::from_value::<Versioned<DefaultModuleRecord>>(value.clone()) {
            Ok(versioned) if versioned.v == VERSION => Ok(versioned.record),
            Ok(versioned) => Err(format!("a default module record of version {}; this host reads {VERSION}", versioned.v)),
            Err(error) => Err(format!("not a default module record: {error}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_names_where_the_module_came_from_first_and_reads_back() {
        let file = Origin::File("/etc/zundoko/module/rules.wasm".into());
        let cm = Origin::ConfigMap { namespace: "zundoko-system".into(), name: "zundoko-rules".into(), key: "rules.wasm".into() };
        let record = DefaultModuleRecord::new("sha256:ab", &cm, &[file.clone(), cm.clone()]);
        assert_eq!(record.sources, vec![RecordedSource::from(&cm), RecordedSource::from(&file)], "the origin first, once");
        let value = record.to_value();
        assert_eq!(
            value.to_string(),
            r#"{"digest":"sha256:ab","sources":[{"configMap":{"key":"rules.wasm","name":"zundoko-rules","namespace":"zundoko-system"}},{"file":"/etc/zundoko/module/rules.wasm"}],"v":1}"#
        );
        assert_eq!(DefaultModuleRecord::from_value(&value), Ok(record));
        let mut other = value.clone();
        other["v"] = 2.into();
        assert!(DefaultModuleRecord::from_value(&other).unwrap_err().contains("version 2"));
    }
}
