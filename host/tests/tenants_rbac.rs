//! Tenants on the local API server with real RBAC (`--authorization-mode RBAC`): two tenants
//! as service accounts holding only the aggregated `edit` role in their own namespace (deploy/'s
//! rbac-tenants.yaml aggregating `zundokonamespacedrules` into it), and the operator running as
//! its own service account with only what deploy/ grants it (and the read a tenant's namespace
//! grants it, as docs/tenants.md shows). Tenant A's rule set sings A's Hikawas; tenant B brings
//! its own in its namespace, reads its status, and is refused, as kube-apiserver refuses, a rule
//! set in A's namespace, A's Hikawas, and the cluster policy.

mod common;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use zundoko_apiserver::{AuthorizationMode, ServerConfig};
use zundoko_operator::crd::{Hikawa, RulesKind, ZundokoNamespacedRules, ZundokoTenantPolicy};
use zundoko_operator::supply::sandbox::{SandboxEngine, SandboxLimits};
use zundoko_operator::supply::sources::digest;
use zundoko_rules::strict_japanese;

use common::cluster::{Cluster, Operator, quick_settings};
use common::deploy::{ACCOUNT, DOCS, NAMESPACE};
use common::module_bytes;
use common::rules::RULES_NS;
use common::tenants::*;

const A: &str = "team-a";
const B: &str = "team-b";
const GROUP: &str = "zundokokiyoshi.kaitoy.github.com";

fn tenant(ns: &str) -> String {
    format!("system:serviceaccount:{ns}:default")
}

/// Creates one RBAC manifest as the admin.
async fn create_rbac(client: &Client, doc: &Value) {
    if let Err(status) = try_create_rbac(client, doc).await {
        panic!("{doc} was refused: {status:?}");
    }
}

/// Creates one RBAC manifest with `client`: Ok, or the Status it was refused with.
async fn try_create_rbac(client: &Client, doc: &Value) -> Result<(), kube::core::Status> {
    async fn create<K>(api: Api<K>, doc: &Value) -> Result<(), kube::core::Status>
    where
        K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
    {
        api.create(&PostParams::default(), &serde_json::from_value(doc.clone()).unwrap()).await.map(drop).map_err(|e| refused::<()>(Err(e)))
    }
    let ns = doc["metadata"]["namespace"].as_str().unwrap_or("");
    match doc["kind"].as_str().unwrap_or("") {
        "ClusterRole" => create(Api::<ClusterRole>::all(client.clone()), doc).await,
        "ClusterRoleBinding" => create(Api::<ClusterRoleBinding>::all(client.clone()), doc).await,
        "Role" => create(Api::<Role>::namespaced(client.clone(), ns), doc).await,
        "RoleBinding" => create(Api::<RoleBinding>::namespaced(client.clone(), ns), doc).await,
        other => panic!("not an RBAC kind: {other}"),
    }
}

fn edit_binding(ns: &str) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "tenant-edit", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": ns}],
    })
}

/// The Role `zundoko-operator grant-reads` prints (docs/tenants.md's): the operator may read
/// the objects `grants` name (`--configmap C`, `--secret S`) in the tenant's namespace, for
/// deploy/'s service account.
fn operator_reads(ns: &str, grants: &[&str]) -> Vec<Value> {
    let out = common::operator_cli(&[&["grant-reads", "--namespace", ns], grants].concat(), &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let docs = common::deploy::documents(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(docs.iter().map(|d| d["kind"].as_str().unwrap_or_default()).collect::<Vec<_>>(), ["Role", "RoleBinding"]);
    assert_eq!(docs[1]["subjects"][0], json!({"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}), "deploy/'s account by default");
    docs
}

/// Whether RBAC lets deploy/'s operator account `verb` the `resource` named `name` in `ns`,
/// asked as `kubectl auth can-i --as` asks: a SelfSubjectAccessReview as that account.
async fn operator_can(cluster: &Cluster, verb: &str, resource: &str, ns: &str, name: &str) -> bool {
    let operator = cluster.client_as(&format!("system:serviceaccount:{NAMESPACE}:{ACCOUNT}"), &[]);
    let review: SelfSubjectAccessReview = serde_json::from_value(json!({"spec": {"resourceAttributes": {"namespace": ns, "verb": verb, "resource": resource, "name": name}}})).unwrap();
    let answer = Api::<SelfSubjectAccessReview>::all(operator).create(&PostParams::default(), &review).await.unwrap();
    answer.status.is_some_and(|s| s.allowed)
}

/// The operator may `get` exactly the Secrets and ConfigMaps `granted` names in `ns`
/// (grant-reads'), and nothing else of them there: no other name, no list or watch, no write.
async fn assert_operator_reads_exactly(cluster: &Cluster, ns: &str, granted: &[(&str, &str)]) {
    let mut asked = vec![];
    for resource in ["secrets", "configmaps"] {
        for (verb, name) in granted.iter().map(|(_, n)| ("get", *n)).chain([("get", "other"), ("list", ""), ("watch", ""), ("update", "other"), ("delete", "other")]) {
            let want = verb == "get" && granted.contains(&(resource, name));
            asked.push((verb, resource, name, operator_can(cluster, verb, resource, ns, name).await, want));
        }
        for (_, name) in granted.iter().filter(|(r, _)| *r == resource) {
            for verb in ["update", "patch", "delete", "watch"] {
                asked.push((verb, resource, name, operator_can(cluster, verb, resource, ns, name).await, false));
            }
        }
    }
    let wrong: Vec<_> = asked.iter().filter(|(.., got, want)| got != want).collect();
    assert!(wrong.is_empty(), "in {ns}, (verb, resource, name, allowed, expected): {wrong:?}");
}

/// A tenant's own ConfigMap with its module, written with its own client.
async fn put_module(client: &Client, ns: &str, name: &str, module: &[u8]) {
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns}})).unwrap();
    let cm = ConfigMap { binary_data: Some([("rules.wasm".to_string(), k8s_openapi::ByteString(module.to_vec()))].into()), ..cm };
    Api::<ConfigMap>::namespaced(client.clone(), ns).create(&PostParams::default(), &cm).await.unwrap();
}

/// The RBAC cluster: deploy/'s roles (the operator's and the tenants' aggregated ones), each
/// tenant's `default` service account bound to `edit` in its namespace, an open policy, and
/// the operator as its own service account.
async fn start() -> (Cluster, Operator) {
    let cluster = Cluster::start_with(ServerConfig { authorization: AuthorizationMode::Rbac, ..ServerConfig::default() }).await;
    for ns in [RULES_NS, A, B] {
        cluster.create_namespace(ns).await;
    }
    let rbac = DOCS.iter().filter(|d| d["apiVersion"] == "rbac.authorization.k8s.io/v1");
    for doc in rbac.cloned().chain([edit_binding(A), edit_binding(B)]) {
        create_rbac(&cluster.client, &doc).await;
    }
    // The clusterrole-aggregation controller writes rbac-tenants.yaml's rules into edit (both
    // roles': the edit one's directly, the view one's through view).
    let roles: Api<ClusterRole> = Api::all(cluster.client.clone());
    let started = std::time::Instant::now();
    let grants = |role: &ClusterRole, resource: &str, verb: &str| {
        role.rules.iter().flatten().any(|r| r.resources.iter().flatten().any(|x| x == resource) && r.verbs.iter().any(|v| v == verb))
    };
    loop {
        let edit = roles.get("edit").await.unwrap();
        if grants(&edit, "zundokonamespacedrules", "create") && grants(&edit, "zundokonamespacedrules/status", "get") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "edit never aggregated rbac-tenants.yaml's rules: {:?}", edit.rules);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    put_policy(&cluster, "open", open_policy()).await;
    let as_operator = cluster.client_as(&format!("system:serviceaccount:{NAMESPACE}:{ACCOUNT}"), &[]);
    let rules = Arc::new(SandboxEngine::new(SandboxLimits::default()).unwrap().load(&module_bytes("zundoko-classic")).unwrap());
    let operator = cluster.operator_with_client(as_operator, "in-process", rules, quick_settings(), Default::default());
    (cluster, operator)
}

/// The Status of a refused call.
fn refused<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> kube::core::Status {
    match r {
        Err(kube::Error::Api(s)) => *s,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn forbidden_message(object: &str, verb: &str, resource: &str, scope: &str) -> String {
    forbidden_message_to(B, object, verb, resource, scope)
}

/// kube-apiserver's refusal of `verb` to the tenant of namespace `ns`.
fn forbidden_message_to(ns: &str, object: &str, verb: &str, resource: &str, scope: &str) -> String {
    format!("{object} is forbidden: User {:?} cannot {verb} resource {resource:?} in API group {GROUP:?} {scope}", tenant(ns))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_holding_only_their_namespaces_edit_role_bring_their_own_rules_and_reach_nothing_else() {
    let (cluster, _operator) = start().await;
    let (a, b) = (cluster.client_as(&tenant(A), &[]), cluster.client_as(&tenant(B), &[]));

    // A brings its module and its rule set with its own hands; its namespace's admin (here the
    // cluster's) lets the operator read that one ConfigMap.
    let japanese = module_bytes("zundoko-strict-ja");
    put_module(&a, A, "rules-a", &japanese).await;
    for doc in operator_reads(A, &["--configmap", "rules-a"]) {
        create_rbac(&cluster.client, &doc).await;
    }
    // With deploy/'s roles too, the operator reads that one ConfigMap of A's and nothing of B's.
    assert_operator_reads_exactly(&cluster, A, &[("configmaps", "rules-a")]).await;
    assert_operator_reads_exactly(&cluster, B, &[]).await;
    let mine = ZundokoNamespacedRules::in_namespace(A, "mine", from_configmap(A, "rules-a"));
    Api::<ZundokoNamespacedRules>::namespaced(a.clone(), A).create(&PostParams::default(), &mine).await.unwrap();
    // A sings in its namespace with its own hands too (deploy/ aggregates Hikawas to edit).
    let songs = ["a-1".to_string(), "a-2".to_string()];
    for name in &songs {
        sing_as(&a, A, name, None, Some((RulesKind::ZundokoNamespacedRules, "mine", None))).await;
    }
    // It reads the words sung (view), and cannot write one itself: the children are the operator's.
    cluster.assert_songs_complete(A, &songs, &strict_japanese(), Duration::from_secs(60)).await;
    let words = Api::<zundoko_operator::crd::Zundoko>::namespaced(a.clone(), A).list(&Default::default()).await.unwrap();
    assert!(!words.items.is_empty());
    let forged = serde_json::from_value::<zundoko_operator::crd::Zundoko>(json!({
        "apiVersion": "zundokokiyoshi.kaitoy.github.com/v1beta1", "kind": "Zundoko",
        "metadata": {"name": "a-1-zundoko-999", "namespace": A}, "spec": {"say": "Doko"},
    }))
    .unwrap();
    let no = refused(Api::<zundoko_operator::crd::Zundoko>::namespaced(a.clone(), A).create(&PostParams::default(), &forged).await);
    assert_eq!(no.message, forbidden_message_to(A, &format!("zundokos.{GROUP}"), "create", "zundokos", "in the namespace \"team-a\""));

    // B brings its own in its namespace: allowed; its namespace grants the operator no read.
    put_module(&b, B, "rules-b", &module_bytes("zundoko-classic")).await;
    let theirs: Api<ZundokoNamespacedRules> = Api::namespaced(b.clone(), B);
    theirs.create(&PostParams::default(), &ZundokoNamespacedRules::in_namespace(B, "theirs", from_configmap(B, "rules-b"))).await.unwrap();

    // ...and nowhere else: A's namespace, A's rule set, A's Hikawas, the policy.
    let in_a: Api<ZundokoNamespacedRules> = Api::namespaced(b.clone(), A);
    let no = refused(in_a.create(&PostParams::default(), &ZundokoNamespacedRules::in_namespace(A, "intruder", from_configmap(B, "rules-b"))).await);
    assert_eq!((no.code, no.reason.as_str()), (403, "Forbidden"));
    assert_eq!(no.message, forbidden_message(&format!("zundokonamespacedrules.{GROUP}"), "create", "zundokonamespacedrules", "in the namespace \"team-a\""));
    let details = no.details.unwrap();
    assert_eq!((details.group.as_str(), details.kind.as_str(), details.name.as_str()), (GROUP, "zundokonamespacedrules", ""));
    let no = refused(in_a.patch("mine", &PatchParams::default(), &Patch::Merge(json!({"spec": {"sha256": "0"}}))).await);
    assert_eq!(no.message, forbidden_message(&format!("zundokonamespacedrules.{GROUP} \"mine\""), "patch", "zundokonamespacedrules", "in the namespace \"team-a\""));
    let no = refused(Api::<Hikawa>::namespaced(b.clone(), A).get("a-1").await);
    assert_eq!(no.message, forbidden_message(&format!("hikawas.{GROUP} \"a-1\""), "get", "hikawas", "in the namespace \"team-a\""));
    assert_eq!(no.details.unwrap().name, "a-1");
    let policies: Api<ZundokoTenantPolicy> = Api::all(b.clone());
    let no = refused(policies.patch("open", &PatchParams::default(), &Patch::Merge(json!({"spec": {"maxRuleSets": 100}}))).await);
    assert_eq!(no.message, forbidden_message(&format!("zundokotenantpolicies.{GROUP} \"open\""), "patch", "zundokotenantpolicies", "at the cluster scope"));
    let no = refused(policies.create(&PostParams::default(), &ZundokoTenantPolicy::new("mine", open_policy())).await);
    assert_eq!(no.message, forbidden_message(&format!("zundokotenantpolicies.{GROUP}"), "create", "zundokotenantpolicies", "at the cluster scope"));

    // A's rule set sings A's Hikawas.
    cluster.assert_songs_complete(A, &songs, &strict_japanese(), Duration::from_secs(60)).await;
    let status = wait_tenant_rules(&cluster, A, "mine", "2 Hikawas", |s| s.hikawas == 2).await;
    assert_eq!(status.module.map(|m| m.digest), Some(digest(&japanese)));

    // B reads its own rule set's status (view, aggregated into edit): the operator was not
    // granted its ConfigMap, and says so. The status is the operator's to write, not B's.
    let started = std::time::Instant::now();
    let said = loop {
        let status = theirs.get_status("theirs").await.unwrap().status.unwrap_or_default();
        if status.reason.is_some() {
            break status;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "B's rule set never said why it does not serve");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(said.reason.as_deref(), Some("SourceUnreadable"), "{said:?}");
    let no = refused(theirs.patch_status("theirs", &PatchParams::default(), &Patch::Merge(json!({"status": {"phase": "Active"}}))).await);
    assert_eq!(no.message, forbidden_message(&format!("zundokonamespacedrules.{GROUP} \"theirs\""), "patch", "zundokonamespacedrules/status", "in the namespace \"team-b\""));
    // Nothing of B's reached A's rule set.
    let a_said = serde_json::to_string(&Api::<ZundokoNamespacedRules>::namespaced(a, A).get_status("mine").await.unwrap().status).unwrap();
    assert!(!a_said.contains("team-b") && !a_said.contains("theirs") && !a_said.contains("rules-b"), "{a_said}");

    // The operator, as its service account, was refused only the ConfigMap B's namespace did
    // not grant it (read again at each check); the other refusals are B's.
    let mut refusals: Vec<String> = cluster.server.requests().iter().filter(|r| r.code == 403).map(|r| format!("{} {}/{} {}/{}", r.verb, r.resource, r.subresource, r.namespace, r.name)).collect();
    refusals.sort();
    refusals.dedup();
    let expected = [
        "create zundokonamespacedrules/ team-a/",
        "create zundokos/ team-a/",
        "create zundokotenantpolicies/ /",
        "get configmaps/ team-b/rules-b",
        "get hikawas/ team-a/a-1",
        "patch zundokonamespacedrules/ team-a/mine",
        "patch zundokonamespacedrules/status team-b/theirs",
        "patch zundokotenantpolicies/ /open",
    ];
    assert_eq!(refusals, expected, "the refused requests");
}

/// A binding of `role` to the user `user` in `ns` ("": a ClusterRoleBinding).
fn user_binding(ns: &str, name: &str, role_kind: &str, role: &str, user: &str) -> Value {
    let mut b = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}],
    });
    if !ns.is_empty() {
        (b["kind"], b["metadata"]["namespace"]) = ("RoleBinding".into(), ns.into());
    }
    b
}

fn rbac_role(kind: &str, ns: &str, name: &str, rules: Value) -> Value {
    let mut r = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "rules": rules});
    if !ns.is_empty() {
        r["metadata"]["namespace"] = ns.into();
    }
    r
}

/// kube-apiserver's refusal of an RBAC object granting what `user` does not hold.
fn escalation_message(object: &str, user: &str, not_held: &str) -> String {
    format!("{object} is forbidden: user {user:?} (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{not_held}")
}

/// What grant-reads asks of a namespace's admin, under kube-apiserver's RBAC escalation
/// prevention (the local API server's rbac_escalation.rs): carol, `admin` of team-a, grants the
/// operator its reads there; where she only views (team-b), she may not write Roles at all, and
/// given that, may not grant the Secret read she does not hold there, nor bind a Role granting
/// it; a ClusterRole may grant only what her ClusterRoleBindings give. dave, who may `escalate`
/// and `bind` Roles in team-b, grants it there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_admin_grants_the_operator_reads_in_its_namespace_and_nothing_it_does_not_hold() {
    let cluster = Cluster::start_with(ServerConfig { authorization: AuthorizationMode::Rbac, ..ServerConfig::default() }).await;
    for ns in [A, B] {
        cluster.create_namespace(ns).await;
    }
    let (carol, dave) = (cluster.client_as("carol", &[]), cluster.client_as("dave", &[]));
    create_rbac(&cluster.client, &user_binding(A, "carol-admin", "ClusterRole", "admin", "carol")).await;
    create_rbac(&cluster.client, &user_binding(B, "carol-view", "ClusterRole", "view", "carol")).await;
    let grants = ["--secret", "a-pull", "--configmap", "rules"];
    for doc in operator_reads(A, &grants) {
        try_create_rbac(&carol, &doc).await.unwrap();
    }
    let granted = [("secrets", "a-pull"), ("configmaps", "rules")];
    assert_operator_reads_exactly(&cluster, A, &granted).await;
    let [role_b, binding_b]: [Value; 2] = operator_reads(B, &grants).try_into().unwrap();
    let no = try_create_rbac(&carol, &role_b).await.unwrap_err();
    assert_eq!((no.code, no.message.as_str()), (403, "roles.rbac.authorization.k8s.io is forbidden: User \"carol\" cannot create resource \"roles\" in API group \"rbac.authorization.k8s.io\" in the namespace \"team-b\""));

    // Allowed to write RBAC in team-b, she still holds only view's reads there: ConfigMaps, not Secrets.
    let writer = json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["create", "get", "update", "patch"]}]);
    create_rbac(&cluster.client, &rbac_role("Role", B, "rbac-writer", writer)).await;
    create_rbac(&cluster.client, &user_binding(B, "carol-rbac", "Role", "rbac-writer", "carol")).await;
    let secret = r#"{APIGroups:[""], Resources:["secrets"], ResourceNames:["a-pull"], Verbs:["get"]}"#;
    let no = try_create_rbac(&carol, &role_b).await.unwrap_err();
    assert_eq!((no.code, no.reason.as_str()), (403, "Forbidden"));
    assert_eq!(no.message, escalation_message(r#"roles.rbac.authorization.k8s.io "zundoko-operator-reads""#, "carol", secret));

    // dave may escalate and bind Roles in team-b (and view nothing): both written by him, while
    // carol may not bind his Role, which grants what she does not hold.
    let escalator = json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["create", "escalate", "bind"]}, {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["rolebindings"], "verbs": ["create"]}]);
    create_rbac(&cluster.client, &rbac_role("Role", B, "escalator", escalator)).await;
    create_rbac(&cluster.client, &user_binding(B, "dave-escalator", "Role", "escalator", "dave")).await;
    try_create_rbac(&dave, &role_b).await.unwrap();
    let no = try_create_rbac(&carol, &binding_b).await.unwrap_err();
    assert_eq!(no.message, escalation_message(r#"rolebindings.rbac.authorization.k8s.io "zundoko-operator-reads""#, "carol", secret));
    assert_operator_reads_exactly(&cluster, B, &[]).await;
    try_create_rbac(&dave, &binding_b).await.unwrap();
    assert_operator_reads_exactly(&cluster, B, &granted).await;

    // A ClusterRole counts what ClusterRoleBindings give: team-a's admin reads no Secret cluster-wide.
    let creates_clusterroles = json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["create"]}]);
    create_rbac(&cluster.client, &rbac_role("ClusterRole", "", "clusterrole-writer", creates_clusterroles.clone())).await;
    create_rbac(&cluster.client, &user_binding("", "carol-clusterroles", "ClusterRole", "clusterrole-writer", "carol")).await;
    let reads_secrets = rbac_role("ClusterRole", "", "carol-reads", json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]));
    let no = try_create_rbac(&carol, &reads_secrets).await.unwrap_err();
    assert_eq!(no.message, escalation_message(r#"clusterroles.rbac.authorization.k8s.io "carol-reads""#, "carol", r#"{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}"#));
    try_create_rbac(&carol, &rbac_role("ClusterRole", "", "carol-writes-clusterroles", creates_clusterroles)).await.unwrap();
    // Nothing refused was written.
    assert!(Api::<ClusterRole>::all(cluster.client.clone()).get_opt("carol-reads").await.unwrap().is_none());
}
