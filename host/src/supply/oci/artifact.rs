//! The Wasm OCI artifact of the CNCF TAG Runtime (what `wkg oci push` and `oras` with these
//! media types write): an OCI image manifest whose config is `application/vnd.wasm.config.v0+json`
//! and whose one layer is the component, `application/wasm`.

use std::collections::BTreeMap;

use oci_client::client::{Config, ImageLayer};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciImageManifest};
use serde::Serialize;

pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
/// Manifests the operator asks a registry for: an artifact is an OCI image manifest; the
/// others are accepted only to be refused by name (a container image, an index).
pub const ACCEPTED_MANIFESTS: &[&str] = &[
    OCI_IMAGE_MEDIA_TYPE,
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

/// The config blob: what the TAG Runtime layout puts there (architecture, os, the layers'
/// digests), so tools that read it find what they expect. No `created` time (it is optional):
/// the same module pushed twice is the same artifact, with the same digest.
#[derive(Serialize)]
struct WasmConfig {
    architecture: &'static str,
    os: &'static str,
    #[serde(rename = "layerDigests")]
    layer_digests: Vec<String>,
}

/// The layer and config of a module, ready to push.
pub fn build(module: &[u8], name: &str, version: &str) -> (ImageLayer, Config, BTreeMap<String, String>) {
    let layer = ImageLayer::new(module.to_vec(), LAYER_MEDIA_TYPE.into(), None);
    let config = WasmConfig {
        architecture: "wasm",
        os: "wasip2",
        layer_digests: vec![layer.sha256_digest()],
    };
    let config = Config::new(serde_json::to_vec(&config).expect("config serializes"), CONFIG_MEDIA_TYPE.into(), None);
    let annotations = BTreeMap::from([
        ("org.opencontainers.image.title".to_string(), name.to_string()),
        ("org.opencontainers.image.version".to_string(), version.to_string()),
    ]);
    (layer, config, annotations)
}

/// The one component layer of a manifest, or why the manifest is not a Wasm artifact
/// (naming what it is instead).
pub fn module_layer(raw: &[u8]) -> Result<(String, u64), String> {
    let value: serde_json::Value = serde_json::from_slice(raw).map_err(|e| format!("the manifest is not JSON: {e}"))?;
    let media_type = value.get("mediaType").and_then(|m| m.as_str()).unwrap_or("");
    if value.get("manifests").is_some() {
        return Err(format!(
            "the reference names an index ({}), not a Wasm artifact: a component has one manifest, with config {CONFIG_MEDIA_TYPE}",
            crate::text::printable(media_type, 100)
        ));
    }
    let manifest: OciImageManifest = serde_json::from_value(value).map_err(|e| format!("the manifest is not an OCI image manifest: {e}"))?;
    if manifest.config.media_type != CONFIG_MEDIA_TYPE {
        return Err(format!(
            "not a Wasm artifact: its config is {}, not {CONFIG_MEDIA_TYPE} (a container image?)",
            crate::text::printable(&manifest.config.media_type, 100)
        ));
    }
    let wasm: Vec<_> = manifest.layers.iter().filter(|l| l.media_type == LAYER_MEDIA_TYPE).collect();
    let [layer] = wasm.as_slice() else {
        return Err(format!("a Wasm artifact has exactly one {LAYER_MEDIA_TYPE} layer; this one has {}", wasm.len()));
    };
    let size = u64::try_from(layer.size).map_err(|_| "the layer's size is negative".to_string())?;
    Ok((layer.digest.clone(), size))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(config: &str, layers: &[&str]) -> Vec<u8> {
        let layers: Vec<_> = layers.iter().map(|m| serde_json::json!({"mediaType": m, "digest": "sha256:aa", "size": 3})).collect();
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2, "mediaType": OCI_IMAGE_MEDIA_TYPE,
            "config": {"mediaType": config, "digest": "sha256:bb", "size": 2}, "layers": layers
        }))
        .unwrap()
    }

    #[test]
    fn finds_the_component_layer() {
        assert_eq!(module_layer(&manifest(CONFIG_MEDIA_TYPE, &[LAYER_MEDIA_TYPE])).unwrap(), ("sha256:aa".into(), 3));
    }

    #[test]
    fn names_what_is_not_a_wasm_artifact() {
        let image = module_layer(&manifest("application/vnd.oci.image.config.v1+json", &["application/vnd.oci.image.layer.v1.tar+gzip"])).unwrap_err();
        assert!(image.contains("application/vnd.oci.image.config.v1+json") && image.contains("container image"), "{image}");
        let two = module_layer(&manifest(CONFIG_MEDIA_TYPE, &[LAYER_MEDIA_TYPE, LAYER_MEDIA_TYPE])).unwrap_err();
        assert!(two.contains("exactly one") && two.contains('2'), "{two}");
        let index = module_layer(br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}"#).unwrap_err();
        assert!(index.contains("index"), "{index}");
        assert!(module_layer(b"<html>").unwrap_err().contains("not JSON"));
    }

    #[test]
    fn the_same_module_is_the_same_artifact() {
        let digest = |m: &[u8]| {
            let (layer, config, annotations) = build(m, "x", "1");
            let manifest = OciImageManifest::build(&[layer], &config, Some(annotations));
            super::super::registry::sha256_of(&serde_json::to_vec(&oci_client::manifest::OciManifest::from(manifest)).unwrap())
        };
        assert_eq!(digest(b"\0asm one"), digest(b"\0asm one"));
        assert_ne!(digest(b"\0asm one"), digest(b"\0asm two"));
    }

    #[test]
    fn what_is_pushed_is_what_is_pulled() {
        let (layer, config, _) = build(b"\0asm", "x", "1");
        let manifest = OciImageManifest::build(std::slice::from_ref(&layer), &config, None);
        let raw = serde_json::to_vec(&manifest).unwrap();
        assert_eq!(module_layer(&raw).unwrap(), (layer.sha256_digest(), 4));
    }
}
