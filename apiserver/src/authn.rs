//! Who is asking, and may they, with `--authorization-mode RBAC`: kube-apiserver's
//! authentication, impersonation (k8s.io/apiserver/pkg/endpoints/filters/impersonation.go) and
//! authorization filters, the last deciding by rbac.rs over the server's own RBAC objects.
//!
//! - the kubeconfig's bearer token ([`ADMIN_TOKEN`]) is the cluster administrator,
//!   `kubernetes-admin` in `system:masters` (as kind's and kubeadm's admin.conf);
//! - no credentials: `system:unsecured` in `system:masters`, as kube-apiserver's plain-HTTP
//!   port (`--insecure-port`, until 1.20) took every request. This server speaks only plain
//!   HTTP, and client-go (kubectl) sends a kubeconfig's credentials only over TLS
//!   (clientcmd's `IsConfigTransportTLS`), so without this kubectl could do nothing here;
//!   unlike that port, impersonation and authorization are applied after it, as on the secure
//!   port, so `kubectl --as` works. There is no `system:anonymous` requestor;
//! - any other credentials: 401 Unauthorized;
//! - `Impersonate-User` (and `Impersonate-Group`, `Impersonate-Uid`, `Impersonate-Extra-*`), as
//!   `kubectl --as/--as-group` and kube-rs' `auth_info.impersonate` send them: each asked of the
//!   authorizer as verb `impersonate` on `users`, `groups`, `serviceaccounts` (a
//!   `system:serviceaccount:NS:NAME` user), `uids` or `userextras/KEY`; a service account
//!   impersonated without groups gets its own (`system:serviceaccounts`,
//!   `system:serviceaccounts:NS`), and every impersonated user but `system:anonymous` gets
//!   `system:authenticated`.

use hyper::HeaderMap;

use crate::http::RequestRecord;
use crate::rbac::{AUTHENTICATED, Attributes, MASTERS, Policy, UserInfo, forbidden, service_account_groups, split_service_account};
use crate::registry::GroupResource;
use crate::status::ApiError;
use crate::store::{State, Store};

/// The bearer token of the kubeconfig the server writes: the administrator's.
pub const ADMIN_TOKEN: &str = "zundoko-local-dummy-token";
pub const ADMIN_USER: &str = "kubernetes-admin";
/// Who a request without credentials is (server.InsecureSuperuser).
pub const UNSECURED_USER: &str = "system:unsecured";
const ANONYMOUS: &str = "system:anonymous";
const UNAUTHENTICATED: &str = "system:unauthenticated";

/// One impersonation asked for: (resource, group, namespace, name), as the authorizer checks it.
struct Impersonation {
    resource: String,
    api_group: &'static str,
    namespace: String,
    name: String,
}

/// The requestor, from its credentials.
pub(crate) fn authenticate(headers: &HeaderMap) -> Result<UserInfo, ApiError> {
    let unauthorized = || ApiError::new(401, "Unauthorized", "Unauthorized", None);
    match headers.get("authorization") {
        None => Ok(UserInfo { name: UNSECURED_USER.into(), groups: vec![MASTERS.into(), AUTHENTICATED.into()] }),
        Some(v) => match v.to_str().ok().and_then(|v| v.strip_prefix("Bearer ")).map(str::trim) {
            Some(ADMIN_TOKEN) => Ok(UserInfo { name: ADMIN_USER.into(), groups: vec![MASTERS.into(), AUTHENTICATED.into()] }),
            _ => Err(unauthorized()),
        },
    }
}

fn values<'h>(headers: &'h HeaderMap, name: &str) -> Vec<&'h str> {
    headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).filter(|v| !v.is_empty()).collect()
}

/// The user the request acts as: the requestor, or whom it impersonates if the authorizer
/// lets the requestor impersonate each part.
pub(crate) fn acting_user(policy: &Policy<'_>, requestor: UserInfo, headers: &HeaderMap) -> Result<UserInfo, ApiError> {
    let user = values(headers, "impersonate-user").first().map(|u| u.to_string());
    let groups: Vec<String> = values(headers, "impersonate-group").into_iter().map(String::from).collect();
    let uid = values(headers, "impersonate-uid").first().map(|u| u.to_string());
    let extras: Vec<(String, String)> = headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().strip_prefix("impersonate-extra-")?.to_string(), v.to_str().ok()?.to_string())))
        .collect();
    let Some(user) = user else {
        if groups.is_empty() && uid.is_none() && extras.is_empty() {
            return Ok(requestor);
        }
        // buildImpersonationRequests' error, answered by responsewriters.InternalError.
        return Err(ApiError::internal("requested impersonation of groups, a uid or extras without impersonating a user"));
    };
    let mut asks = vec![];
    let service_account = split_service_account(&user);
    match service_account {
        Some((ns, name)) => asks.push(Impersonation { resource: "serviceaccounts".into(), api_group: "", namespace: ns.into(), name: name.into() }),
        None => asks.push(Impersonation { resource: "users".into(), api_group: "", namespace: String::new(), name: user.clone() }),
    }
    for g in &groups {
        asks.push(Impersonation { resource: "groups".into(), api_group: "", namespace: String::new(), name: g.clone() });
    }
    if let Some(uid) = &uid {
        asks.push(Impersonation { resource: "uids".into(), api_group: "authentication.k8s.io", namespace: String::new(), name: uid.clone() });
    }
    for (key, value) in &extras {
        asks.push(Impersonation { resource: format!("userextras/{key}"), api_group: "authentication.k8s.io", namespace: String::new(), name: value.clone() });
    }
    for ask in &asks {
        let (resource, subresource) = ask.resource.split_once('/').unwrap_or((&ask.resource, ""));
        let a = Attributes {
            user: &requestor,
            verb: "impersonate",
            resource_request: true,
            api_group: ask.api_group,
            api_version: "v1",
            resource,
            subresource,
            namespace: &ask.namespace,
            name: &ask.name,
            path: "",
        };
        policy.authorize(&a).map_err(|reason| forbidden(&a, &reason))?;
    }
    let mut acting = groups;
    if let (Some((ns, _)), true) = (service_account, acting.is_empty()) {
        acting = service_account_groups(ns);
    }
    if user != ANONYMOUS && !acting.iter().any(|g| g == AUTHENTICATED || g == UNAUTHENTICATED) {
        acting.push(AUTHENTICATED.into());
    } else if user == ANONYMOUS && !acting.iter().any(|g| g == UNAUTHENTICATED) {
        acting.push(UNAUTHENTICATED.into());
    }
    Ok(UserInfo { name: user, groups: acting })
}

/// The RBAC objects the server holds.
pub(crate) fn policy_of(st: &State) -> Policy<'_> {
    let of = |resource: &str| st.list(&GroupResource::new(crate::rbac::GROUP, resource), None).collect::<Vec<_>>();
    Policy { roles: of("roles"), cluster_roles: of("clusterroles"), role_bindings: of("rolebindings"), cluster_role_bindings: of("clusterrolebindings") }
}

/// Authentication and impersonation: the user a request acts as, or its refusal (401; 403 for
/// an impersonation the requestor may not make; 500 for groups without a user).
pub(crate) fn identify(store: &Store, headers: &HeaderMap) -> Result<UserInfo, ApiError> {
    let requestor = authenticate(headers)?;
    let st = store.lock();
    acting_user(&policy_of(&st), requestor, headers)
}

/// Authorization of a handled request (after APF, as in kube-apiserver's chain): its
/// RequestInfo (`RequestRecord`) against the server's RBAC objects.
pub(crate) fn authorize(store: &Store, user: &UserInfo, r: &RequestRecord, resource_request: bool) -> Result<(), ApiError> {
    // RequestInfo: `/api/v1/namespaces/NAME` is in namespace NAME (so a RoleBinding there may
    // let its subject read its own namespace).
    let namespace = if resource_request && r.api_group.is_empty() && r.resource == "namespaces" && !r.name.is_empty() { &r.name } else { &r.namespace };
    let a = Attributes {
        user,
        verb: &r.verb,
        resource_request,
        api_group: &r.api_group,
        api_version: &r.api_version,
        resource: &r.resource,
        subresource: &r.subresource,
        namespace,
        name: &r.name,
        path: &r.path,
    };
    let st = store.lock();
    policy_of(&st).authorize(&a).map_err(|reason| forbidden(&a, &reason))
}

#[cfg(test)]
mod tests {
    use hyper::header::HeaderValue;
    use serde_json::json;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    /// `alice` in team-a holding what `edit` holds for impersonation: serviceaccounts in team-a.
    fn objects() -> Vec<serde_json::Value> {
        vec![
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "sa-impersonator"},
                   "rules": [{"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "b", "namespace": "team-a"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "sa-impersonator"},
                   "subjects": [{"kind": "ServiceAccount", "name": "alice", "namespace": "team-a"}]}),
        ]
    }

    #[test]
    fn a_non_admin_impersonates_only_what_rbac_lets_it() {
        let objects = objects();
        let policy = Policy::from_objects(&objects);
        let alice = UserInfo::service_account("team-a", "alice");
        let bob = acting_user(&policy, alice.clone(), &headers(&[("impersonate-user", "system:serviceaccount:team-a:bob")])).unwrap();
        assert_eq!(bob, UserInfo::service_account("team-a", "bob"));
        let refused = |h: &[(&'static str, &str)]| acting_user(&policy, alice.clone(), &headers(h)).unwrap_err();
        let e = refused(&[("impersonate-user", "system:serviceaccount:team-b:bob")]);
        assert_eq!((e.code, e.message.as_str()), (403, "serviceaccounts \"bob\" is forbidden: User \"system:serviceaccount:team-a:alice\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"team-b\""));
        let e = refused(&[("impersonate-user", "kubernetes-admin")]);
        assert_eq!(e.message, "users \"kubernetes-admin\" is forbidden: User \"system:serviceaccount:team-a:alice\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope");
        let e = refused(&[("impersonate-user", "system:serviceaccount:team-a:bob"), ("impersonate-group", "system:masters")]);
        assert_eq!(e.message, "groups \"system:masters\" is forbidden: User \"system:serviceaccount:team-a:alice\" cannot impersonate resource \"groups\" in API group \"\" at the cluster scope");
        // No impersonation: alice herself.
        assert_eq!(acting_user(&policy, alice.clone(), &HeaderMap::new()).unwrap(), alice);
    }

    #[test]
    fn the_admin_and_a_request_without_credentials_impersonate_anyone() {
        let policy = Policy::default();
        for requestor in [authenticate(&headers(&[("authorization", "Bearer zundoko-local-dummy-token")])).unwrap(), authenticate(&HeaderMap::new()).unwrap()] {
            assert!(requestor.in_group(MASTERS), "{requestor:?}");
            let as_user = acting_user(&policy, requestor, &headers(&[("impersonate-user", "jane"), ("impersonate-group", "devs"), ("impersonate-group", "ops")])).unwrap();
            assert_eq!(as_user, UserInfo { name: "jane".into(), groups: vec!["devs".into(), "ops".into(), AUTHENTICATED.into()] });
        }
        assert_eq!(authenticate(&headers(&[("authorization", "Bearer guessed")])).unwrap_err().code, 401);
    }
}
