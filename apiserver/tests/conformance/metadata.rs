//! ObjectMeta validation (names, labels, annotations, owner references, finalizers), the
//! events.k8s.io/v1 Event rules and the object size limits, with kube-apiserver's Status bodies
//! and apimachinery's message texts.

use serde_json::{Value, json};

use crate::common::*;

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const EVENTS_V1: &str = "/apis/events.k8s.io/v1/namespaces/default/events";
const QUALIFIED_NAME: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_VALUE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// (reason, field, message) of one cause.
type Cause = (String, String, String);

fn causes(st: &Value) -> Vec<Cause> {
    st["details"]["causes"]
        .as_array()
        .unwrap_or_else(|| panic!("no causes in {st}"))
        .iter()
        .map(|c| (c["reason"].as_str().unwrap().to_string(), c["field"].as_str().unwrap().to_string(), c["message"].as_str().unwrap().to_string()))
        .collect()
}

fn cause(reason: &str, field: &str, message: &str) -> (String, String, String) {
    (reason.to_string(), field.to_string(), message.to_string())
}

fn configmap(meta: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}})
}

/// Asserts a 422 Invalid for `kind "name"` with exactly these causes, and the message
/// kube-apiserver builds from them.
fn assert_invalid(code: u16, st: &Value, qualified_kind: &str, name: &str, want: &[(String, String, String)]) {
    assert_eq!(code, 422, "{st}");
    assert_eq!(st["kind"], "Status");
    assert_eq!(st["status"], "Failure");
    assert_eq!(st["reason"], "Invalid");
    assert_eq!(st["code"], 422);
    assert_eq!(st["details"]["name"], name);
    assert_eq!(causes(st), want, "{st}");
    let mut distinct: Vec<String> = vec![];
    for (_, f, m) in want {
        let line = format!("{f}: {m}");
        if !distinct.contains(&line) {
            distinct.push(line);
        }
    }
    let listed = if distinct.len() == 1 { distinct[0].clone() } else { format!("[{}]", distinct.join(", ")) };
    assert_eq!(st["message"], format!("{qualified_kind} {name:?} is invalid: {listed}"));
}

#[tokio::test]
async fn names_follow_each_resources_rule() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    // Custom resources: a DNS-1123 subdomain.
    let (code, st) = raw.post(WIDGETS, &widget("Bad_Name", 1)).await;
    assert_invalid(code, &st, "Widget.test.zundoko.example", "Bad_Name", &[cause("FieldValueInvalid", "metadata.name", &format!("Invalid value: \"Bad_Name\": {SUBDOMAIN}"))]);
    let long = "a".repeat(254);
    let (code, st) = raw.post(CMS, &configmap(json!({"name": long}))).await;
    assert_invalid(code, &st, "ConfigMap", &long, &[cause("FieldValueInvalid", "metadata.name", &format!("Invalid value: \"{long}\": must be no more than 253 characters"))]);
    // Namespaces: a DNS-1123 label.
    let (code, st) = raw.post("/api/v1/namespaces", &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a.b"}})).await;
    assert_invalid(code, &st, "Namespace", "a.b", &[cause("FieldValueInvalid", "metadata.name", "Invalid value: \"a.b\": must not contain dots")]);
    // generateName: a trailing '-' is fine, the base is cut to 58 characters, and a bad
    // prefix is reported for both generateName and the generated name.
    let (code, o) = raw.post(CMS, &configmap(json!({"generateName": format!("{}-", "g".repeat(70))}))).await;
    assert_eq!(code, 201, "{o}");
    let generated = o["metadata"]["name"].as_str().unwrap();
    assert_eq!(generated.len(), 63);
    assert!(generated.starts_with(&"g".repeat(58)));
    let (code, st) = raw.post(CMS, &configmap(json!({"generateName": "Gen-"}))).await;
    assert_eq!(code, 422, "{st}");
    let c = causes(&st);
    assert_eq!(c.len(), 2, "{st}");
    assert_eq!(c[0], cause("FieldValueInvalid", "metadata.generateName", &format!("Invalid value: \"Gen-\": {SUBDOMAIN}")));
    assert_eq!(c[1].1, "metadata.name");
}

#[tokio::test]
async fn label_keys_and_values() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    let cases: Vec<(Value, Vec<Cause>)> = vec![
        (json!({"bad key": "v"}), vec![cause("FieldValueInvalid", "metadata.labels", &format!("Invalid value: \"bad key\": name part {QUALIFIED_NAME}"))]),
        (json!({"k": "v".repeat(64)}), vec![cause("FieldValueInvalid", "metadata.labels", &format!("Invalid value: \"{}\": must be no more than 63 characters", "v".repeat(64)))]),
        (json!({"k": "-v"}), vec![cause("FieldValueInvalid", "metadata.labels", &format!("Invalid value: \"-v\": {LABEL_VALUE}"))]),
        (json!({"x".repeat(64): "v"}), vec![cause("FieldValueInvalid", "metadata.labels", &format!("Invalid value: \"{}\": name part must be no more than 63 characters", "x".repeat(64)))]),
        (json!({"Example.com/k": "v"}), vec![cause("FieldValueInvalid", "metadata.labels", &format!("Invalid value: \"Example.com/k\": prefix part {SUBDOMAIN}"))]),
        (json!({"/k": "v"}), vec![cause("FieldValueInvalid", "metadata.labels", "Invalid value: \"/k\": prefix part must be non-empty")]),
    ];
    for (labels, want) in cases {
        let mut w = widget("w", 1);
        w["metadata"]["labels"] = labels.clone();
        let (code, st) = raw.post(WIDGETS, &w).await;
        assert_invalid(code, &st, "Widget.test.zundoko.example", "w", &want);
        let (code, st) = raw.post(CMS, &configmap(json!({"name": "c", "labels": labels}))).await;
        assert_invalid(code, &st, "ConfigMap", "c", &want);
    }
    // The operator's own label is valid.
    let mut w = widget("w", 1);
    w["metadata"]["labels"] = json!({"zundokokiyoshi.kaitoy.github.com/hikawa": "h-1.x_y"});
    let (code, o) = raw.post(WIDGETS, &w).await;
    assert_eq!(code, 201, "{o}");
    // An update (here a merge patch) is checked by the generic registry twice (common
    // fields, then the metadata update rules) and by the strategy: three causes, one message.
    let (code, st) = raw.patch(&format!("{WIDGETS}/w"), "application/merge-patch+json", &json!({"metadata": {"labels": {"k": "-v"}}})).await;
    let one = cause("FieldValueInvalid", "metadata.labels", &format!("Invalid value: \"-v\": {LABEL_VALUE}"));
    assert_invalid(code, &st, "Widget.test.zundoko.example", "w", &[one.clone(), one.clone(), one]);
}

#[tokio::test]
async fn annotations_keys_and_total_size() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    // Keys are qualified names compared in lower case.
    let (code, o) = raw.post(CMS, &configmap(json!({"name": "upper", "annotations": {"Example.COM/Key": "v"}}))).await;
    assert_eq!(code, 201, "{o}");
    let (code, st) = raw.post(CMS, &configmap(json!({"name": "c", "annotations": {"a b": "v"}}))).await;
    assert_invalid(code, &st, "ConfigMap", "c", &[cause("FieldValueInvalid", "metadata.annotations", &format!("Invalid value: \"a b\": name part {QUALIFIED_NAME}"))]);
    // Keys plus values: 262144 bytes at most.
    let at_limit = json!({"k": "v".repeat(262144 - 1)});
    let mut w = widget("fits", 1);
    w["metadata"]["annotations"] = at_limit;
    let (code, o) = raw.post(WIDGETS, &w).await;
    assert_eq!(code, 201, "{o}");
    let mut w = widget("over", 1);
    w["metadata"]["annotations"] = json!({"k": "v".repeat(262144)});
    let (code, st) = raw.post(WIDGETS, &w).await;
    assert_invalid(code, &st, "Widget.test.zundoko.example", "over", &[cause("FieldValueTooLong", "metadata.annotations", "Too long: may not be more than 262144 bytes")]);
}

#[tokio::test]
async fn owner_references() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    let owner = |name: &str, uid: &str, controller: bool| json!({"apiVersion": "zundokokiyoshi.kaitoy.github.com/v1beta1", "kind": "Hikawa", "name": name, "uid": uid, "controller": controller});
    let post = |refs: Value| {
        let mut w = widget("w", 1);
        w["metadata"]["ownerReferences"] = refs;
        w
    };
    let (code, st) = raw.post(WIDGETS, &post(json!([{"apiVersion": "", "kind": "", "name": "", "uid": ""}]))).await;
    assert_invalid(
        code,
        &st,
        "Widget.test.zundoko.example",
        "w",
        &[
            cause("FieldValueInvalid", "metadata.ownerReferences.apiVersion", "Invalid value: \"\": version must not be empty"),
            cause("FieldValueInvalid", "metadata.ownerReferences.kind", "Invalid value: \"\": kind must not be empty"),
            cause("FieldValueInvalid", "metadata.ownerReferences.name", "Invalid value: \"\": name must not be empty"),
            cause("FieldValueInvalid", "metadata.ownerReferences.uid", "Invalid value: \"\": uid must not be empty"),
        ],
    );
    let (code, st) = raw.post(WIDGETS, &post(json!([owner("a", "u1", true), owner("b", "u2", true)]))).await;
    assert_eq!(code, 422, "{st}");
    let c = causes(&st);
    assert_eq!(c.len(), 1, "{st}");
    assert_eq!((c[0].0.as_str(), c[0].1.as_str()), ("FieldValueInvalid", "metadata.ownerReferences"));
    assert!(c[0].2.starts_with("Invalid value: []v1.OwnerReference{v1.OwnerReference{APIVersion:\"zundokokiyoshi.kaitoy.github.com/v1beta1\", Kind:\"Hikawa\", Name:\"a\", UID:\"u1\""), "{}", c[0].2);
    assert!(c[0].2.ends_with(": Only one reference can have Controller set to true. Found \"true\" in references for Hikawa/a and Hikawa/b"), "{}", c[0].2);
    // A core/v1 Event may not own anything.
    let (code, st) = raw.post(WIDGETS, &post(json!([{"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "u"}]))).await;
    assert_eq!(code, 422, "{st}");
    assert!(causes(&st)[0].2.ends_with(": /v1, Kind=Event is disallowed from being an owner"), "{st}");
    // One controller among several owners is fine.
    let (code, o) = raw.post(WIDGETS, &post(json!([owner("a", "u1", true), owner("b", "u2", false)]))).await;
    assert_eq!(code, 201, "{o}");
}

#[tokio::test]
async fn finalizer_names() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    let mut w = widget("w", 1);
    w["metadata"]["finalizers"] = json!(["example.com/ok", "bad name"]);
    let (code, st) = raw.post(WIDGETS, &w).await;
    assert_invalid(code, &st, "Widget.test.zundoko.example", "w", &[cause("FieldValueInvalid", "metadata.finalizers", &format!("Invalid value: \"bad name\": name part {QUALIFIED_NAME}"))]);
    w["metadata"]["finalizers"] = json!(["orphan", "foregroundDeletion"]);
    let (code, st) = raw.post(WIDGETS, &w).await;
    assert_invalid(
        code,
        &st,
        "Widget.test.zundoko.example",
        "w",
        &[cause("FieldValueInvalid", "metadata.finalizers", "Invalid value: []string{\"orphan\", \"foregroundDeletion\"}: finalizer orphan and foregroundDeletion cannot be both set")],
    );
    // Updates check finalizer names too (the generic registry's common check).
    let (code, o) = raw.post(WIDGETS, &widget("w", 1)).await;
    assert_eq!(code, 201, "{o}");
    let (code, st) = raw.patch(&format!("{WIDGETS}/w"), "application/merge-patch+json", &json!({"metadata": {"finalizers": ["a/b/c"]}})).await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(causes(&st).len(), 1, "{st}");
    assert_eq!(causes(&st)[0].1, "metadata.finalizers");
    assert!(causes(&st)[0].2.starts_with("Invalid value: \"a/b/c\": a qualified name must consist of"), "{st}");
}

fn event_v1(name: &str) -> Value {
    json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "zundoko-operator", "reportingInstance": "zundoko-operator-0",
        "action": "Say", "reason": "Said", "type": "Normal", "note": "Zun",
        "regarding": {"apiVersion": "zundokokiyoshi.kaitoy.github.com/v1beta1", "kind": "Hikawa", "namespace": "default", "name": "h", "uid": "u"}
    })
}

#[tokio::test]
async fn events_k8s_io_v1_rules() {
    let s = server().await;
    let raw = Raw::new(&s);
    let (code, o) = raw.post(EVENTS_V1, &event_v1("ok")).await;
    assert_eq!(code, 201, "{o}");
    // Field paths are those of the internal (core) Event: `note` is `message`.
    let cases: Vec<(Value, Vec<Cause>)> = vec![
        (json!({"note": "n".repeat(1025)}), vec![cause("FieldValueInvalid", "message", "Invalid value: \"\": can have at most 1024 characters")]),
        (json!({"type": "Info"}), vec![cause("FieldValueInvalid", "type", "Invalid value: \"\": has invalid value: Info")]),
        (json!({"eventTime": null}), vec![cause("FieldValueRequired", "eventTime", "Required value")]),
        (json!({"action": "a".repeat(129)}), vec![cause("FieldValueInvalid", "action", "Invalid value: \"\": can have at most 128 characters")]),
        (json!({"reason": null}), vec![cause("FieldValueRequired", "reason", "Required value")]),
        (json!({"reportingInstance": "i".repeat(129)}), vec![cause("FieldValueInvalid", "reportingInstance", "Invalid value: \"\": can have at most 128 characters")]),
        (
            json!({"reportingController": null}),
            vec![
                cause("FieldValueRequired", "reportingController", "Required value"),
                cause("FieldValueInvalid", "reportingController", "Invalid value: \"\": name part must be non-empty"),
                cause("FieldValueInvalid", "reportingController", &format!("Invalid value: \"\": name part {QUALIFIED_NAME}")),
            ],
        ),
        (json!({"regarding": {"kind": "Hikawa", "name": "h", "namespace": ""}}), vec![]),
        (json!({"deprecatedCount": 3}), vec![cause("FieldValueInvalid", "count", "Invalid value: \"\": needs to be unset")]),
        (json!({"series": {"count": 1, "lastObservedTime": "2026-01-01T00:00:00.000000Z"}}), vec![cause("FieldValueInvalid", "series.count", "Invalid value: \"\": should be at least 2")]),
        (json!({"metadata": {"labels": {"k": "-"}}}), vec![cause("FieldValueInvalid", "metadata.labels", &format!("Invalid value: \"-\": {LABEL_VALUE}"))]),
    ];
    for (i, (change, want)) in cases.into_iter().enumerate() {
        let name = format!("e{i}");
        let mut ev = event_v1(&name);
        json_patch::merge(&mut ev, &change);
        let (code, st) = raw.post(EVENTS_V1, &ev).await;
        if want.is_empty() {
            // An Event in "default" may regard a cluster-scoped object.
            assert_eq!(code, 201, "{st}");
            continue;
        }
        assert_invalid(code, &st, "Event.events.k8s.io", &name, &want);
    }
    // core/v1 Events keep the legacy rules only.
    let core = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "legacy", "namespace": "default"},
        "involvedObject": {"kind": "Hikawa", "name": "h", "namespace": "default"}, "reason": "Said", "message": "m".repeat(2000), "type": "Info"});
    let (code, o) = raw.post("/api/v1/namespaces/default/events", &core).await;
    assert_eq!(code, 201, "{o}");
    let mut other_ns = core.clone();
    other_ns["metadata"]["name"] = json!("other");
    other_ns["involvedObject"]["namespace"] = json!("kube-system");
    let (code, st) = raw.post("/api/v1/namespaces/default/events", &other_ns).await;
    assert_invalid(code, &st, "Event", "other", &[cause("FieldValueInvalid", "involvedObject.namespace", "Invalid value: \"kube-system\": does not match event.namespace")]);
}

#[tokio::test]
async fn object_size_limits() {
    let s = server().await;
    let raw = Raw::new(&s);
    raw.install_widgets().await;
    // Under the 3 MiB request limit but over etcd's 1.5 MiB: etcd's error, passed on as a 500.
    let mut w = widget("big", 1);
    w["spec"]["extra"] = json!({"blob": "b".repeat(1024 * 1024 + 600 * 1024)});
    let (code, st) = raw.post(WIDGETS, &w).await;
    assert_eq!(code, 500, "{st}");
    assert_eq!(st, json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "etcdserver: request is too large", "code": 500}));
    let (code, _) = raw.get(&format!("{WIDGETS}/big")).await;
    assert_eq!(code, 404);
    // Just under it is stored.
    w["spec"]["extra"] = json!({"blob": "b".repeat(1024 * 1024 + 400 * 1024)});
    let (code, o) = raw.post(WIDGETS, &w).await;
    assert_eq!(code, 201, "{o}");
    // Growing it past the limit by a patch is refused the same way.
    let (code, st) = raw.patch(&format!("{WIDGETS}/big"), "application/merge-patch+json", &json!({"spec": {"extra": {"more": "m".repeat(200 * 1024)}}})).await;
    assert_eq!(code, 500, "{st}");
    assert_eq!(st["message"], "etcdserver: request is too large");
}
