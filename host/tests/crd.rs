//! The CRDs in deploy/ are generated from the Rust types and must not drift from them.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use zundoko_operator::crd;

const DEPLOYED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/crds/zundokokiyoshi.yaml");

#[test]
fn deploy_crds_equal_the_rust_types() {
    let deployed = std::fs::read_to_string(DEPLOYED).expect("deploy/crds/zundokokiyoshi.yaml");
    assert!(
        deployed == crd::all_yaml().unwrap(),
        "deploy/crds/zundokokiyoshi.yaml differs from the Rust types: run `make crds` and commit the result"
    );
}

#[test]
fn the_crds_declare_validation_status_columns_and_short_names() {
    let crds = crd::all();
    let by_kind = |kind: &str| -> &CustomResourceDefinition { crds.iter().find(|c| c.spec.names.kind == kind).unwrap() };
    let hikawa = by_kind("Hikawa");
    assert_eq!(hikawa.spec.group, "zundokokiyoshi.kaitoy.github.com");
    assert_eq!(hikawa.spec.scope, "Namespaced");
    assert_eq!(hikawa.spec.names.short_names.as_deref(), Some(&["hk".to_string()][..]));
    let version = &hikawa.spec.versions[0];
    assert_eq!(version.name, "v1beta1");
    assert!(version.subresources.as_ref().unwrap().status.is_some(), "status subresource");
    let columns: Vec<&str> = version.additional_printer_columns.as_ref().unwrap().iter().map(|c| c.name.as_str()).collect();
    for column in ["Interval", "Said", "Kiyoshied", "Module", "Age"] {
        assert!(columns.contains(&column), "{column} in {columns:?}");
    }
    let schema = serde_json::to_value(version.schema.as_ref().unwrap().open_api_v3_schema.as_ref().unwrap()).unwrap();
    let spec = &schema["properties"]["spec"];
    assert_eq!(spec["required"], serde_json::json!(["intervalMillis"]));
    assert_eq!(spec["properties"]["intervalMillis"]["minimum"], serde_json::json!(0.0));
    assert_eq!(spec["properties"]["params"]["additionalProperties"]["type"], "string");
    for kind in ["Zundoko", "Kiyoshi"] {
        let v = &by_kind(kind).spec.versions[0];
        let cols: Vec<&str> = v.additional_printer_columns.as_ref().unwrap().iter().map(|c| c.json_path.as_str()).collect();
        assert!(cols.contains(&".spec.say"), "{kind} shows its word");
    }
}

#[test]
fn the_original_sample_manifest_parses_unchanged() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/samples/hikawa-sample.yaml")).unwrap();
    let hikawa = crd::parse_hikawa("sample", &text).unwrap();
    assert_eq!(hikawa.spec.interval_millis, 500);
    // Fields of the original operator are accepted too.
    let old = text.replace("intervalMillis: 500", "intervalMillis: 500\n  numZundokos: 3\n  sayKiyoshi: true");
    let hikawa = crd::parse_hikawa("old", &old).unwrap();
    assert_eq!((hikawa.spec.num_zundokos, hikawa.spec.say_kiyoshi), (Some(3), Some(true)));
    // A manifest of another kind is refused, naming what it found.
    let err = crd::parse_hikawa("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n").unwrap_err();
    assert!(err.to_string().contains("found apiVersion \"v1\" and kind \"ConfigMap\""), "{err}");
}

#[test]
fn zundoko_rules_is_cluster_scoped_with_its_columns_and_the_samples_parse() {
    let crds = crd::all();
    let rules = crds.iter().find(|c| c.spec.names.kind == "ZundokoRules").expect("the ZundokoRules CRD");
    assert_eq!(rules.spec.scope, "Cluster");
    assert_eq!(rules.spec.names.plural, "zundokorules");
    assert_eq!(rules.spec.names.short_names.as_deref(), Some(&["zr".to_string()][..]));
    let version = &rules.spec.versions[0];
    assert!(version.subresources.as_ref().unwrap().status.is_some(), "status subresource");
    let columns: Vec<&str> = version.additional_printer_columns.as_ref().unwrap().iter().map(|c| c.name.as_str()).collect();
    for column in ["Phase", "Module", "Version", "Candidate", "Percent", "Hikawas", "Reason", "Age"] {
        assert!(columns.contains(&column), "{column} in {columns:?}");
    }
    let schema = serde_json::to_value(version.schema.as_ref().unwrap().open_api_v3_schema.as_ref().unwrap()).unwrap();
    let rollout = &schema["properties"]["spec"]["properties"]["candidate"]["properties"]["rollout"]["properties"];
    assert_eq!((rollout["percent"]["minimum"].as_f64(), rollout["percent"]["maximum"].as_f64()), (Some(0.0), Some(100.0)));
    assert_eq!(schema["properties"]["spec"]["properties"]["sha256"]["pattern"], "^(sha256:)?[0-9a-fA-F]{64}$");
    // The Hikawa names its rules in spec.rules.
    let hikawa = crds.iter().find(|c| c.spec.names.kind == "Hikawa").unwrap();
    let schema = serde_json::to_value(hikawa.spec.versions[0].schema.as_ref().unwrap().open_api_v3_schema.as_ref().unwrap()).unwrap();
    assert_eq!(schema["properties"]["spec"]["properties"]["rules"]["type"], "string");
    for sample in ["zundokorules-sample.yaml", "zundokorules-rollout.yaml"] {
        let path = format!("{}/../deploy/samples/{sample}", env!("CARGO_MANIFEST_DIR"));
        let parsed: crd::ZundokoRules = serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap_or_else(|e| panic!("{sample}: {e}"));
        assert_eq!(parsed.spec.source.config_map.as_ref().unwrap().namespace, "zundoko-system", "{sample}");
    }
    // The registry sample: each rule set names an OCI reference the operator parses, and a
    // pull secret the Role lets it read.
    let path = format!("{}/../deploy/samples/zundokorules-oci.yaml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let samples: Vec<crd::ZundokoRules> = serde_yaml::Deserializer::from_str(&text).map(|d| serde::Deserialize::deserialize(d).unwrap()).collect();
    assert_eq!(samples.len(), 2);
    let rbac = std::fs::read_to_string(format!("{}/../deploy/rbac-namespace.yaml", env!("CARGO_MANIFEST_DIR"))).unwrap();
    for sample in &samples {
        let oci = sample.spec.source.oci.as_ref().expect("an oci source");
        assert!(sample.spec.source.config_map.is_none());
        oci.reference.parse::<zundoko_operator::supply::oci::ModuleRef>().unwrap();
        let secret = oci.pull_secret.as_ref().unwrap();
        assert!(rbac.contains(&format!("resourceNames: [\"{}\"]", secret.name)), "the Role grants {}", secret.name);
    }
    assert!(samples[1].spec.source.oci.as_ref().unwrap().follow);
}
