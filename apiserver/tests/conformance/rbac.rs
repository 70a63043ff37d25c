//! `--authorization-mode RBAC`: who is asking (the kubeconfig's admin, anonymous, whom the
//! admin impersonates), what the server's own RBAC objects grant them, aggregated ClusterRoles,
//! refusals written as kube-apiserver writes them, and its privilege-escalation prevention on
//! every way of writing RBAC objects. Without it, everything is allowed.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role, RoleBinding};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use zundoko_apiserver::{ADMIN_TOKEN, ApiServer, AuthorizationMode, ServerConfig};

use crate::common::{Hikawa, HikawaSpec, install_crds, server_with};

async fn rbac_server() -> ApiServer {
    server_with(ServerConfig { authorization: AuthorizationMode::Rbac, ..Default::default() }).await
}

/// The kubeconfig's admin, impersonating `user` (and `groups`) if given.
fn client_as(s: &ApiServer, user: Option<&str>, groups: &[&str]) -> kube::Client {
    let mut cfg = kube::Config::new(s.url().parse().unwrap());
    cfg.auth_info.token = Some(ADMIN_TOKEN.to_string().into());
    cfg.auth_info.impersonate = user.map(String::from);
    cfg.auth_info.impersonate_groups = (!groups.is_empty()).then(|| groups.iter().map(|g| g.to_string()).collect());
    kube::Client::try_from(cfg).unwrap()
}

fn from_json<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

async fn namespaces(c: &kube::Client, names: &[&str]) {
    let api: Api<Namespace> = Api::all(c.clone());
    for n in names {
        api.create(&PostParams::default(), &from_json(json!({"metadata": {"name": n}}))).await.unwrap();
    }
}

async fn bind(c: &kube::Client, ns: &str, name: &str, role_kind: &str, role: &str, sa: (&str, &str)) {
    let api: Api<RoleBinding> = Api::namespaced(c.clone(), ns);
    let b = json!({
        "metadata": {"name": name, "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": [{"kind": "ServiceAccount", "namespace": sa.0, "name": sa.1}],
    });
    api.create(&PostParams::default(), &from_json(b)).await.unwrap();
}

fn configmap(ns: &str, name: &str) -> ConfigMap {
    from_json(json!({"metadata": {"name": name, "namespace": ns}, "data": {"k": "v"}}))
}

/// The Status of a refused kube-rs call.
fn refused<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> kube::core::Status {
    match r {
        Err(kube::Error::Api(s)) => *s,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

const ALICE: &str = "system:serviceaccount:team-a:alice";

#[tokio::test]
async fn a_rolebinding_of_edit_grants_in_its_namespace_only_and_refusals_read_as_kube_apiservers() {
    let s = rbac_server().await;
    let admin = client_as(&s, None, &[]);
    namespaces(&admin, &["team-a", "team-b"]).await;
    bind(&admin, "team-a", "alice-edit", "ClusterRole", "edit", ("team-a", "alice")).await;
    let alice = client_as(&s, Some(ALICE), &[]);
    let (mine, theirs): (Api<ConfigMap>, Api<ConfigMap>) = (Api::namespaced(alice.clone(), "team-a"), Api::namespaced(alice.clone(), "team-b"));
    mine.create(&PostParams::default(), &configmap("team-a", "c")).await.unwrap();
    assert_eq!(mine.get("c").await.unwrap().data.unwrap()["k"], "v");
    mine.list(&ListParams::default()).await.unwrap();

    let no = refused(theirs.create(&PostParams::default(), &configmap("team-b", "c")).await);
    assert_eq!((no.code, no.reason.as_str()), (403, "Forbidden"));
    assert_eq!(no.message, format!("configmaps is forbidden: User {ALICE:?} cannot create resource \"configmaps\" in API group \"\" in the namespace \"team-b\""));
    let details = no.details.unwrap();
    assert_eq!((details.name.as_str(), details.group.as_str(), details.kind.as_str()), ("", "", "configmaps"));
    let no = refused(theirs.get("c").await);
    assert_eq!(no.message, format!("configmaps \"c\" is forbidden: User {ALICE:?} cannot get resource \"configmaps\" in API group \"\" in the namespace \"team-b\""));
    assert_eq!(no.details.unwrap().name, "c");
    // A RoleBinding never grants a cluster-wide request, not even of what it grants in its namespace.
    let no = refused(Api::<ConfigMap>::all(alice.clone()).list(&ListParams::default()).await);
    assert_eq!(no.message, format!("configmaps is forbidden: User {ALICE:?} cannot list resource \"configmaps\" in API group \"\" at the cluster scope"));
    // edit has no Roles; a CRD's kinds are no one's until a role names them.
    let roles: Api<Role> = Api::namespaced(alice.clone(), "team-a");
    assert_eq!(refused(roles.list(&ListParams::default()).await).code, 403);
    // view (aggregated into edit) lets it read its own namespace: RequestInfo puts
    // `namespaces/team-a` in namespace team-a.
    let nss: Api<Namespace> = Api::all(alice.clone());
    nss.get("team-a").await.unwrap();
    assert_eq!(refused(nss.get("team-b").await).message, format!("namespaces \"team-b\" is forbidden: User {ALICE:?} cannot get resource \"namespaces\" in API group \"\" in the namespace \"team-b\""));

    // A binding naming a role that is not there: kube-apiserver says so after the refusal.
    bind(&admin, "team-b", "ghost", "ClusterRole", "no-such-role", ("team-a", "alice")).await;
    let no = refused(theirs.get("c").await);
    assert!(no.message.ends_with(": RBAC: clusterrole.rbac.authorization.k8s.io \"no-such-role\" not found"), "{}", no.message);
}

#[tokio::test]
async fn clusterroles_labelled_aggregate_to_view_reach_view_edit_and_admin_and_leave_when_unlabelled() {
    let s = rbac_server().await;
    let admin = client_as(&s, None, &[]);
    install_crds(&admin).await;
    namespaces(&admin, &["team-a"]).await;
    bind(&admin, "team-a", "alice-admin", "ClusterRole", "admin", ("team-a", "alice")).await;
    let hikawas: Api<Hikawa> = Api::namespaced(client_as(&s, Some(ALICE), &[]), "team-a");
    assert_eq!(refused(hikawas.list(&ListParams::default()).await).code, 403);

    let role = json!({
        "metadata": {"name": "hikawas-view", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [{"apiGroups": ["zundokokiyoshi.kaitoy.github.com"], "resources": ["hikawas"], "verbs": ["get", "list", "watch"]}],
    });
    let cluster_roles: Api<ClusterRole> = Api::all(admin.clone());
    cluster_roles.create(&PostParams::default(), &from_json(role)).await.unwrap();
    // The controller writes the rules into view, then (view being labelled to edit) edit, then admin.
    let has = |r: &ClusterRole| r.rules.iter().flatten().any(|rule| rule.resources.iter().flatten().any(|x| x == "hikawas"));
    for name in ["view", "edit", "admin"] {
        wait_for(|| async { has(&cluster_roles.get(name).await.unwrap()) }, &format!("{name} aggregating hikawas")).await;
    }
    hikawas.list(&ListParams::default()).await.unwrap();
    let h = Hikawa::new("h", HikawaSpec { interval_millis: 1, ..Default::default() });
    assert_eq!(refused(hikawas.create(&PostParams::default(), &h).await).code, 403, "view's verbs only");

    let unlabel = json!({"metadata": {"labels": {"rbac.authorization.k8s.io/aggregate-to-view": null}}});
    cluster_roles.patch("hikawas-view", &Default::default(), &kube::api::Patch::Merge(&unlabel)).await.unwrap();
    wait_for(|| async { !has(&cluster_roles.get("admin").await.unwrap()) }, "admin losing hikawas").await;
    assert_eq!(refused(hikawas.list(&ListParams::default()).await).code, 403);
}

async fn wait_for<F: std::future::Future<Output = bool>>(check: impl Fn() -> F, what: &str) {
    let started = std::time::Instant::now();
    while !check().await {
        assert!(started.elapsed() < Duration::from_secs(10), "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn resource_names_allow_the_named_object_and_a_list_or_watch_by_its_name_only() {
    let s = rbac_server().await;
    let admin = client_as(&s, None, &[]);
    namespaces(&admin, &["team-a"]).await;
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), "team-a");
    for n in ["one", "two"] {
        cms.create(&PostParams::default(), &configmap("team-a", n)).await.unwrap();
    }
    let role = json!({"metadata": {"name": "one", "namespace": "team-a"}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["one"], "verbs": ["get", "list", "watch", "create"]}]});
    Api::<Role>::namespaced(admin.clone(), "team-a").create(&PostParams::default(), &from_json(role)).await.unwrap();
    bind(&admin, "team-a", "one", "Role", "one", ("team-a", "alice")).await;
    let alice: Api<ConfigMap> = Api::namespaced(client_as(&s, Some(ALICE), &[]), "team-a");
    alice.get("one").await.unwrap();
    assert_eq!(refused(alice.get("two").await).code, 403);
    let by_name = alice.list(&ListParams::default().fields("metadata.name=one")).await.unwrap();
    assert_eq!(by_name.items.len(), 1);
    assert_eq!(refused(alice.list(&ListParams::default().fields("metadata.name=two")).await).code, 403);
    assert_eq!(refused(alice.list(&ListParams::default()).await).code, 403);
    // A create names no object (the name is in the body): resourceNames never allow it.
    assert_eq!(refused(alice.create(&PostParams::default(), &configmap("team-a", "one")).await).code, 403);
    // A watch by name, through the raw protocol.
    let http = reqwest::Client::new();
    let watch = |selector: &str| {
        http.get(format!("{}/api/v1/namespaces/team-a/configmaps?watch=true&timeoutSeconds=1&fieldSelector={selector}", s.url()))
            .bearer_auth(ADMIN_TOKEN)
            .header("Impersonate-User", ALICE)
            .send()
    };
    assert_eq!(watch("metadata.name%3Done").await.unwrap().status(), 200);
    assert_eq!(watch("metadata.name%3Dtwo").await.unwrap().status(), 403);
}

/// The admin's token, or no credentials (the plain-HTTP superuser: kubectl sends a
/// kubeconfig's credentials only over TLS), may impersonate; a wrong token is refused. (A
/// non-admin impersonating: authn.rs' unit tests, since only the admin authenticates here.)
#[tokio::test]
async fn the_admin_impersonates_kubectl_works_without_credentials_and_a_wrong_token_is_401() {
    let s = rbac_server().await;
    let http = reqwest::Client::new();
    let get = |path: &str, token: Option<&str>, user: Option<&str>| {
        let mut r = http.get(format!("{}{path}", s.url()));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        if let Some(u) = user {
            r = r.header("Impersonate-User", u);
        }
        r.send()
    };
    for token in [None, Some(ADMIN_TOKEN)] {
        assert_eq!(get("/api/v1/namespaces/default/configmaps", token, None).await.unwrap().status(), 200);
        let r = get("/api/v1/namespaces/default/configmaps", token, Some(ALICE)).await.unwrap();
        assert_eq!(r.status(), 403);
        assert_eq!(r.json::<Value>().await.unwrap()["message"], format!("configmaps is forbidden: User {ALICE:?} cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""));
    }
    // Impersonated users discover (system:discovery) and see /version (system:public-info-viewer);
    // the system:anonymous user sees /version only.
    assert_eq!(get("/apis", None, Some(ALICE)).await.unwrap().status(), 200);
    assert_eq!(get("/version", None, Some("system:anonymous")).await.unwrap().status(), 200);
    let r = get("/apis", None, Some("system:anonymous")).await.unwrap();
    assert_eq!(r.status(), 403);
    let status: Value = r.json().await.unwrap();
    assert_eq!(status["message"], "forbidden: User \"system:anonymous\" cannot get path \"/apis\"");
    assert_eq!(status["details"], json!({}));
    // Credentials the server does not know: 401.
    let r = get("/api/v1/namespaces", Some("not-the-token"), None).await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.json::<Value>().await.unwrap()["reason"], "Unauthorized");
    // Groups without a user: kube-apiserver's InternalError.
    let r = http.get(format!("{}/api", s.url())).header("Impersonate-Group", "system:masters").send().await.unwrap();
    assert_eq!(r.status(), 500);
    // A user impersonated with system:masters is allowed everything, as on a cluster.
    let master = client_as(&s, Some("someone"), &["system:masters"]);
    Api::<ConfigMap>::namespaced(master, "default").create(&PostParams::default(), &configmap("default", "m")).await.unwrap();
}

#[tokio::test]
async fn without_rbac_everyone_may_do_anything_and_impersonation_is_not_read() {
    let s = server_with(ServerConfig::default()).await;
    let anonymous_as_alice = {
        let mut cfg = kube::Config::new(s.url().parse().unwrap());
        cfg.auth_info.impersonate = Some(ALICE.into());
        kube::Client::try_from(cfg).unwrap()
    };
    let cms: Api<ConfigMap> = Api::namespaced(anonymous_as_alice, "default");
    cms.create(&PostParams::default(), &configmap("default", "c")).await.unwrap();
    cms.list(&ListParams::default()).await.unwrap();
    // No bootstrap roles: the default mode's objects are as they were.
    let roles: Api<ClusterRole> = Api::all(client_as(&s, None, &[]));
    assert!(roles.list(&ListParams::default()).await.unwrap().items.is_empty());
}

#[tokio::test]
async fn two_aggregated_clusterroles_selecting_each_other_settle() {
    let s = rbac_server().await;
    let roles: Api<ClusterRole> = Api::all(client_as(&s, None, &[]));
    let rule = json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]);
    for (name, selects) in [("ping", "pong"), ("pong", "ping")] {
        let role = json!({
            "metadata": {"name": name, "labels": {"mutual": name}},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"mutual": selects}}]},
            "rules": if name == "ping" { rule.clone() } else { json!([]) },
        });
        roles.create(&PostParams::default(), &from_json(role)).await.unwrap();
    }
    // Whatever they settle on, they settle: nothing is written again once it has.
    let versions = || async { (roles.get("ping").await.unwrap().metadata.resource_version, roles.get("pong").await.unwrap().metadata.resource_version) };
    let mut last = versions().await;
    let started = std::time::Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = versions().await;
        if now == last {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "ping and pong are still rewritten: {now:?}");
        last = now;
    }
    let (ping, pong) = (roles.get("ping").await.unwrap(), roles.get("pong").await.unwrap());
    assert_eq!(ping.rules, pong.rules);
}

#[tokio::test]
async fn a_write_held_by_a_partition_is_authorized_when_it_lands_late() {
    let s = rbac_server().await;
    s.faults().partition_late("late-writer");
    let http = reqwest::Client::new();
    let post = http
        .post(format!("{}/api/v1/namespaces/default/configmaps", s.url()))
        .bearer_auth(ADMIN_TOKEN)
        .header("Impersonate-User", ALICE)
        .header("User-Agent", "late-writer")
        .json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}}))
        .timeout(Duration::from_millis(300))
        .send();
    assert!(post.await.is_err(), "a partitioned request is never answered");
    s.faults().heal("late-writer");
    wait_for(|| async { s.requests().iter().any(|r| r.late) }, "the held write to land").await;
    let late = s.requests().into_iter().find(|r| r.late).unwrap();
    assert_eq!((late.verb.as_str(), late.code), ("create", 403));
    let cms: Api<ConfigMap> = Api::namespaced(client_as(&s, None, &[]), "default");
    assert!(cms.get_opt("late").await.unwrap().is_none(), "alice may not create it, late or not");
}

/// Escalation prevention (rbac_escalation.rs) on each path a Role is written by: a merge patch,
/// a PUT (even one whose resourceVersion is stale: checked first, as the storage's update
/// transform runs before the comparison), server-side apply creating or updating, a dry run;
/// not an update of the garbage collector's fields only. A binding naming no role is the
/// registry's 404.
#[tokio::test]
async fn every_write_of_a_role_granting_what_its_writer_does_not_hold_is_refused() {
    let s = rbac_server().await;
    let admin = client_as(&s, None, &[]);
    namespaces(&admin, &["team-a"]).await;
    bind(&admin, "team-a", "alice-admin", "ClusterRole", "admin", ("team-a", "alice")).await;
    // `admin` holds no Nodes (cluster-scoped, granted by no namespace role).
    let nodes = json!({"metadata": {"name": "nodes", "namespace": "team-a"}, "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]});
    Api::<Role>::namespaced(admin.clone(), "team-a").create(&PostParams::default(), &from_json(nodes.clone())).await.unwrap();
    let roles: Api<Role> = Api::namespaced(client_as(&s, Some(ALICE), &[]), "team-a");
    let message = |name: &str| {
        format!(
            "roles.rbac.authorization.k8s.io {name:?} is forbidden: user {ALICE:?} (groups=[\"system:serviceaccounts\" \"system:serviceaccounts:team-a\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{}",
            r#"{APIGroups:[""], Resources:["nodes"], Verbs:["get"]}"#
        )
    };
    let no = refused(roles.patch("nodes", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"mine": "yes"}}}))).await);
    assert_eq!((no.code, no.message.clone()), (403, message("nodes")));
    let mut stale: Role = roles.get("nodes").await.unwrap();
    stale.metadata.resource_version = Some("1".into());
    assert_eq!(refused(roles.replace("nodes", &PostParams::default(), &stale).await).message, message("nodes"));
    // What the garbage collector writes (finalizers, ownerReferences) needs nothing held.
    roles.patch("nodes", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/keep"]}}))).await.unwrap();
    let apply = PatchParams::apply("alice");
    let mut applied = nodes.clone();
    (applied["apiVersion"], applied["kind"], applied["metadata"]["name"]) = ("rbac.authorization.k8s.io/v1".into(), "Role".into(), "applied".into());
    assert_eq!(refused(roles.patch("applied", &apply, &Patch::Apply(&applied)).await).message, message("applied"));
    let dry = PostParams { dry_run: true, ..Default::default() };
    assert_eq!(refused(roles.create(&dry, &from_json(nodes.clone())).await).message, message("nodes"));
    // What alice holds (admin reads Secrets): applied, then updated.
    applied["rules"] = json!([{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["pull"], "verbs": ["get"]}]);
    roles.patch("applied", &apply, &Patch::Apply(&applied)).await.unwrap();
    applied["rules"][0]["verbs"] = json!(["get", "list"]);
    roles.patch("applied", &apply, &Patch::Apply(&applied)).await.unwrap();
    assert!(roles.get_opt("nodes").await.unwrap().unwrap().metadata.labels.is_none(), "the refused patch wrote nothing");

    let ghost = json!({"metadata": {"name": "ghost", "namespace": "team-a"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "ghost"}, "subjects": [{"kind": "User", "name": "bob"}]});
    let no = refused(Api::<RoleBinding>::namespaced(client_as(&s, Some(ALICE), &[]), "team-a").create(&PostParams::default(), &from_json(ghost)).await);
    assert_eq!((no.code, no.message.as_str()), (404, "roles.rbac.authorization.k8s.io \"ghost\" not found"));
}

/// The bootstrap `edit` holds its rules only once kube-controller-manager's aggregation
/// controller wrote them: on kube-apiserver alone it has its aggregationRule and no rule.
#[tokio::test]
async fn without_kube_controller_manager_the_aggregated_roles_hold_no_rules() {
    for controller_manager in [true, false] {
        let s = server_with(ServerConfig { authorization: AuthorizationMode::Rbac, controller_manager, ..Default::default() }).await;
        let edit = Api::<ClusterRole>::all(client_as(&s, None, &[])).get("edit").await.unwrap();
        assert!(edit.aggregation_rule.is_some(), "{edit:?}");
        let rules = edit.rules.unwrap_or_default().len();
        assert_eq!(rules > 0, controller_manager, "edit's rules with controller_manager={controller_manager}: {rules}");
    }
}
