//! authorization.k8s.io/v1's access reviews, as kube-apiserver answers them: create only, a 201
//! with the request's object and its `status` (allowed, and the RBAC authorizer's reason), the
//! validation errors, who may create which review, the rules review, discovery, and AlwaysAllow.

use serde_json::{Value, json};
use zundoko_apiserver::{ApiServer, AuthorizationMode, ServerConfig};

use crate::common::server_with;

const ALICE: &str = "system:serviceaccount:team-a:alice";
const GROUP: &str = "/apis/authorization.k8s.io/v1";

/// A POST without credentials (this server's plain-HTTP superuser), as `user` if given; the
/// code, the body and the Warning headers.
async fn post(s: &ApiServer, path: &str, user: Option<&str>, body: &Value) -> (u16, Value, Vec<String>) {
    let mut r = reqwest::Client::new().post(format!("{}{path}", s.url())).json(body);
    if let Some(u) = user {
        r = r.header("Impersonate-User", u);
    }
    let r = r.send().await.unwrap();
    let warnings = r.headers().get_all("warning").iter().map(|w| w.to_str().unwrap().to_string()).collect();
    (r.status().as_u16(), r.json().await.unwrap(), warnings)
}

fn ssar(attrs: Value) -> Value {
    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {"resourceAttributes": attrs}})
}

/// The status of a review answered 201, its spec checked to be the one sent.
async fn status_of(s: &ApiServer, path: &str, user: Option<&str>, review: &Value) -> Value {
    let (code, body, _) = post(s, path, user, review).await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["spec"], review["spec"], "{body}");
    body["status"].clone()
}

async fn rbac_setup() -> ApiServer {
    let s = server_with(ServerConfig { authorization: AuthorizationMode::Rbac, ..Default::default() }).await;
    for ns in ["team-a", "team-b"] {
        assert_eq!(post(&s, "/api/v1/namespaces", None, &json!({"metadata": {"name": ns}})).await.0, 201);
    }
    let binding = json!({
        "metadata": {"name": "alice-edit"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": "alice", "namespace": "team-a"}],
    });
    assert_eq!(post(&s, "/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/rolebindings", None, &binding).await.0, 201);
    s
}

#[tokio::test]
async fn a_self_review_is_the_requests_object_with_the_rbac_authorizers_decision_and_reason() {
    let s = rbac_setup().await;
    let path = format!("{GROUP}/selfsubjectaccessreviews?fieldManager=conformance");
    let create_cm = |ns: &str| ssar(json!({"namespace": ns, "verb": "create", "resource": "configmaps"}));
    let (code, body, warnings) = post(&s, &path, Some(ALICE), &create_cm("team-a")).await;
    assert_eq!((code, warnings.len()), (201, 0), "{body}");
    let entry = &body["metadata"]["managedFields"][0];
    assert_eq!((entry["manager"].as_str(), entry["operation"].as_str()), (Some("conformance"), Some("Update")), "{body}");
    let mut without_fields = body.clone();
    without_fields["metadata"].as_object_mut().unwrap().remove("managedFields");
    let reason = "RBAC: allowed by RoleBinding \"alice-edit/team-a\" of ClusterRole \"edit\" to ServiceAccount \"alice/team-a\"";
    assert_eq!(without_fields, json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "metadata": {"creationTimestamp": null},
        "spec": {"resourceAttributes": {"namespace": "team-a", "verb": "create", "resource": "configmaps"}},
        "status": {"allowed": true, "reason": reason},
    }));
    // Elsewhere: no opinion, no reason (RBAC never denies).
    assert_eq!(status_of(&s, &path, Some(ALICE), &create_cm("team-b")).await, json!({"allowed": false}));
    // The admin is in system:masters: allowed before RBAC is asked, without a reason.
    assert_eq!(status_of(&s, &path, None, &create_cm("team-b")).await, json!({"allowed": true}));
    // A path, through system:discovery's binding to every authenticated user.
    let discovery = json!({"spec": {"nonResourceAttributes": {"path": "/apis", "verb": "get"}}});
    let allowed = "RBAC: allowed by ClusterRoleBinding \"system:discovery\" of ClusterRole \"system:discovery\" to Group \"system:authenticated\"";
    assert_eq!(status_of(&s, &path, Some(ALICE), &discovery).await, json!({"allowed": true, "reason": allowed}));
    // A binding of a missing role: the authorizer's errors are the reason.
    let ghost = json!({"metadata": {"name": "ghost"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "ghost"},
                       "subjects": [{"kind": "ServiceAccount", "name": "alice", "namespace": "team-a"}]});
    assert_eq!(post(&s, "/apis/rbac.authorization.k8s.io/v1/namespaces/team-b/rolebindings", None, &ghost).await.0, 201);
    let reason = "RBAC: clusterrole.rbac.authorization.k8s.io \"ghost\" not found";
    assert_eq!(status_of(&s, &path, Some(ALICE), &create_cm("team-b")).await, json!({"allowed": false, "reason": reason}));

    // Unknown fields are dropped and warned of (Strict: refused); the status sent is replaced.
    let mut sent = create_cm("team-a");
    sent["spec"]["resourceAttributes"]["colour"] = "red".into();
    sent["status"] = json!({"allowed": false, "denied": true});
    let (code, body, warnings) = post(&s, &path, Some(ALICE), &sent).await;
    assert_eq!((code, body["status"]["allowed"].as_bool()), (201, Some(true)), "{body}");
    assert_eq!(warnings, ["299 - \"unknown field \\\"spec.resourceAttributes.colour\\\"\""]);
    let (code, body, _) = post(&s, &format!("{path}&fieldValidation=Strict"), Some(ALICE), &sent).await;
    assert_eq!(code, 400, "{body}");

    // Validation, as kube-apiserver words it (the kind is the decoded internal object's: empty).
    let (code, body, _) = post(&s, &path, Some(ALICE), &json!({"spec": {}})).await;
    assert_eq!((code, body["reason"].as_str()), (422, Some("Invalid")));
    assert_eq!(body["message"], ".authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified");
    let both = json!({"spec": {"resourceAttributes": {"verb": "get"}, "nonResourceAttributes": {"path": "/x", "verb": "get"}}, "metadata": {"name": "n"}});
    let (code, body, _) = post(&s, &path, Some(ALICE), &both).await;
    assert_eq!(code, 422);
    let message = body["message"].as_str().unwrap();
    assert!(message.starts_with(".authorization.k8s.io \"\" is invalid: [spec.nonResourceAttributes: Invalid value: authorization.NonResourceAttributes{Path:\"/x\", Verb:\"get\"}: cannot be specified in combination with resourceAttributes, metadata: Invalid value: "), "{message}");
    assert!(message.ends_with(": must be empty]"), "{message}");
    // A namespace in a cluster-scoped review's body is cleared, as kube's create handler does,
    // not refused as metadata that must be empty.
    let namespaced = json!({"spec": {"resourceAttributes": {"verb": "get", "resource": "secrets"}}, "metadata": {"namespace": "team-a"}});
    let (code, body, _) = post(&s, &path, Some(ALICE), &namespaced).await;
    assert_eq!(code, 201, "{body}");
    // Create only: other verbs are not allowed; by name, or a local review across namespaces,
    // there is no route.
    let r = reqwest::get(format!("{}{GROUP}/selfsubjectaccessreviews", s.url())).await.unwrap();
    assert_eq!(r.status(), 405);
    for path in ["selfsubjectaccessreviews/x", "localsubjectaccessreviews"] {
        let r = reqwest::get(format!("{}{GROUP}/{path}", s.url())).await.unwrap();
        assert_eq!(r.status(), 404, "{path}");
    }
}

#[tokio::test]
async fn subject_reviews_need_create_on_them_ask_about_the_spec_subject_and_a_local_one_its_namespace() {
    let s = rbac_setup().await;
    let sar = |user: &str, ns: &str| json!({"kind": "SubjectAccessReview", "spec": {"user": user, "resourceAttributes": {"namespace": ns, "verb": "get", "resource": "secrets"}}});
    let path = format!("{GROUP}/subjectaccessreviews");
    // alice (edit in team-a) may not: nothing bootstrapped and bound grants it.
    let (code, body, _) = post(&s, &path, Some(ALICE), &sar(ALICE, "team-a")).await;
    assert_eq!(code, 403);
    assert_eq!(body["message"], format!("subjectaccessreviews.authorization.k8s.io is forbidden: User {ALICE:?} cannot create resource \"subjectaccessreviews\" in API group \"authorization.k8s.io\" at the cluster scope"));
    // Bound to the bootstrapped system:auth-delegator, she may.
    let delegator = json!({"metadata": {"name": "alice-delegator"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"},
                           "subjects": [{"kind": "ServiceAccount", "name": "alice", "namespace": "team-a"}]});
    assert_eq!(post(&s, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", None, &delegator).await.0, 201);
    let allowed = status_of(&s, &path, Some(ALICE), &sar(ALICE, "team-a")).await;
    assert_eq!(allowed["allowed"], true, "{allowed}");
    assert_eq!(status_of(&s, &path, Some(ALICE), &sar(ALICE, "team-b")).await, json!({"allowed": false}));
    // The spec's subject only: no system:authenticated is added, so no discovery for "bob".
    let mut discovery = json!({"spec": {"user": "bob", "nonResourceAttributes": {"path": "/apis", "verb": "get"}}});
    assert_eq!(status_of(&s, &path, None, &discovery).await, json!({"allowed": false}));
    discovery["spec"]["groups"] = json!(["system:authenticated"]);
    assert_eq!(status_of(&s, &path, None, &discovery).await["allowed"], true);
    let (code, body, _) = post(&s, &path, None, &json!({"spec": {"resourceAttributes": {"verb": "get"}}})).await;
    assert_eq!((code, body["message"].as_str()), (422, Some(".authorization.k8s.io \"\" is invalid: spec.user: Invalid value: \"\": at least one of user or group must be specified")));

    // A local review, in its namespace only.
    let local = format!("{GROUP}/namespaces/team-a/localsubjectaccessreviews");
    let mut review = sar(ALICE, "team-a");
    review["kind"] = "LocalSubjectAccessReview".into();
    let (code, body, _) = post(&s, &local, None, &review).await;
    assert_eq!((code, body["metadata"]["namespace"].as_str(), body["status"]["allowed"].as_bool()), (201, Some("team-a"), Some(true)), "{body}");
    review["spec"]["resourceAttributes"]["namespace"] = "team-b".into();
    let (code, body, _) = post(&s, &local, None, &review).await;
    assert_eq!((code, body["message"].as_str()), (422, Some(".authorization.k8s.io \"\" is invalid: spec.resourceAttributes.namespace: Invalid value: \"team-b\": must match metadata.namespace")));
    review["metadata"] = json!({"namespace": "team-b"});
    let (code, body, _) = post(&s, &local, None, &review).await;
    assert_eq!((code, body["message"].as_str()), (400, Some("the namespace of the provided object does not match the namespace sent on the request")));
    // Creating one is admin's (system:aggregate-to-admin), not edit's.
    review["metadata"] = json!({});
    review["spec"]["resourceAttributes"]["namespace"] = "team-a".into();
    assert_eq!(post(&s, &local, Some(ALICE), &review).await.0, 403);
}

#[tokio::test]
async fn a_rules_review_lists_what_rbac_grants_in_the_namespace_and_needs_one() {
    let s = rbac_setup().await;
    let path = format!("{GROUP}/selfsubjectrulesreviews");
    let review = |ns: &str| json!({"kind": "SelfSubjectRulesReview", "spec": {"namespace": ns}});
    let (code, body, _) = post(&s, &path, Some(ALICE), &review("team-a")).await;
    assert_eq!(code, 201, "{body}");
    // A new object: the spec is not echoed.
    assert_eq!((&body["metadata"], &body["spec"], &body["status"]["incomplete"]), (&json!({"creationTimestamp": null}), &json!({}), &json!(false)));
    let rules = body["status"]["resourceRules"].as_array().unwrap();
    let has = |rule: &Value| rules.contains(rule);
    assert!(has(&json!({"verbs": ["create", "delete", "deletecollection", "patch", "update"], "apiGroups": [""], "resources": ["configmaps", "events", "persistentvolumeclaims", "replicationcontrollers", "replicationcontrollers/scale", "secrets", "serviceaccounts", "services", "services/proxy"]})), "{body}");
    assert!(has(&json!({"verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]})), "{body}");
    assert!(body["status"]["nonResourceRules"].as_array().unwrap().contains(&json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"]})), "{body}");
    assert!(body["status"].get("evaluationError").is_none());
    // In team-b, edit is not hers.
    let (_, body, _) = post(&s, &path, Some(ALICE), &review("team-b")).await;
    assert!(!body["status"]["resourceRules"].as_array().unwrap().iter().any(|r| r["resources"].as_array().is_some_and(|rs| rs.contains(&json!("configmaps")))), "{body}");
    let (code, body, _) = post(&s, &path, Some(ALICE), &review("")).await;
    assert_eq!((code, body["message"].as_str()), (400, Some("no namespace on request")));
}

#[tokio::test]
async fn with_always_allow_every_review_is_allowed_and_discovery_lists_the_reviews_create_only() {
    let s = server_with(ServerConfig::default()).await;
    let sar = json!({"spec": {"user": "nobody", "resourceAttributes": {"verb": "delete", "resource": "secrets"}}});
    assert_eq!(status_of(&s, &format!("{GROUP}/subjectaccessreviews"), None, &sar).await, json!({"allowed": true}));
    let ssar = ssar(json!({"verb": "escalate", "group": "rbac.authorization.k8s.io", "resource": "clusterroles"}));
    assert_eq!(status_of(&s, &format!("{GROUP}/selfsubjectaccessreviews"), None, &ssar).await, json!({"allowed": true}));
    let (code, body, _) = post(&s, &format!("{GROUP}/selfsubjectrulesreviews"), None, &json!({"spec": {"namespace": "default"}})).await;
    assert_eq!(code, 201);
    assert_eq!(body["status"], json!({"resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}], "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}], "incomplete": false}));

    let groups: Value = reqwest::get(format!("{}/apis", s.url())).await.unwrap().json().await.unwrap();
    assert!(groups["groups"].as_array().unwrap().iter().any(|g| g["name"] == "authorization.k8s.io"), "{groups}");
    let list: Value = reqwest::get(format!("{}{GROUP}", s.url())).await.unwrap().json().await.unwrap();
    let resources: Vec<(&str, bool, &Value)> = list["resources"].as_array().unwrap().iter().map(|r| (r["name"].as_str().unwrap(), r["namespaced"].as_bool().unwrap(), &r["verbs"])).collect();
    let create = json!(["create"]);
    assert_eq!(resources, [
        ("localsubjectaccessreviews", true, &create),
        ("selfsubjectaccessreviews", false, &create),
        ("selfsubjectrulesreviews", false, &create),
        ("subjectaccessreviews", false, &create),
    ]);
}
