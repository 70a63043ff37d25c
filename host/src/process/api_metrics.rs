//! Every request the operator sends to the API server, measured as client-go measures its own
//! (`rest_client_request_duration_seconds`, `rest_client_requests_total`): by verb, resource
//! and answer code, from the request sent to the answer's headers. Without it nobody running
//! the operator can tell where a word's time goes (issue 55).
//!
//! One layer under every other client (the fenced ones too), so every request passes it once.
//! Labels are bounded: the verb is one of Kubernetes' eight, the resource one the operator asks
//! for (anything else is `other`), the code an HTTP status or `error` (no answer).

use std::sync::Arc;
use std::time::Instant;

use http::{Method, Request};
use kube::Client;
use kube::client::Body;

use super::metrics::Metrics;

/// The resources (with subresource) the operator requests; any other path counts as `other`.
const RESOURCES: &[&str] = &[
    "hikawas",
    "hikawas/status",
    "zundokos",
    "kiyoshis",
    "zundokorules",
    "zundokorules/status",
    "events",
    "leases",
    "configmaps",
    "secrets",
    "namespaces",
    "customresourcedefinitions",
];

/// `client` with every request measured into `metrics`.
pub fn observed(client: Client, metrics: Arc<Metrics>) -> Client {
    let namespace = client.default_namespace().to_string();
    let service = tower::service_fn(move |request: Request<Body>| {
        let (client, metrics) = (client.clone(), metrics.clone());
        async move {
            let (verb, resource) = classify(request.method(), request.uri().path(), request.uri().query());
            let started = Instant::now();
            let answer = client.send(request).await;
            let code = match &answer {
                Ok(response) => Code::Status(response.status().as_u16()),
                Err(_) => Code::NoAnswer,
            };
            metrics.api_request(verb, resource, &code.to_string(), started.elapsed());
            answer.map_err(tower::BoxError::from)
        }
    });
    Client::new(service, namespace)
}

/// An answer's code as the label says it.
enum Code {
    Status(u16),
    NoAnswer,
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Code::Status(code) => write!(f, "{code}"),
            Code::NoAnswer => f.write_str("error"),
        }
    }
}

/// Kubernetes' verb and the resource (`hikawas/status`) of a request, from its method and path:
/// `/api/v1/[namespaces/NS/]RESOURCE[/NAME[/SUB]]` or
/// `/apis/GROUP/VERSION/[namespaces/NS/]RESOURCE[/NAME[/SUB]]`; `nonresource` for the rest
/// (`/version`, discovery).
pub fn classify(method: &Method, path: &str, query: Option<&str>) -> (&'static str, &'static str) {
    let segments: Vec<&str> = path.trim_matches('/').split('/').filter(|s| !s.is_empty()).collect();
    let after_version = match segments.as_slice() {
        ["api", _version, rest @ ..] => rest,
        ["apis", _group, _version, rest @ ..] => rest,
        _ => return (verb(method, false, query), "nonresource"),
    };
    // `namespaces/NS/RESOURCE...` is a namespaced resource; `namespaces[/NS]` alone is the
    // namespaces themselves.
    let (resource, name, sub) = match after_version {
        ["namespaces", _ns, resource, rest @ ..] => (*resource, rest.first().copied(), rest.get(1).copied()),
        [resource, rest @ ..] => (*resource, rest.first().copied(), rest.get(1).copied()),
        [] => return (verb(method, false, query), "nonresource"),
    };
    let full = match sub {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource.to_string(),
    };
    let known = RESOURCES.iter().copied().find(|r| *r == full).unwrap_or("other");
    (verb(method, name.is_some(), query), known)
}

fn verb(method: &Method, named: bool, query: Option<&str>) -> &'static str {
    let watching = query.is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    match *method {
        Method::GET if watching => "watch",
        Method::GET if named => "get",
        Method::GET => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_named_by_verb_and_resource_as_kubernetes_names_them() {
        let g = "/apis/zundokokiyoshi.kaitoy.github.com/v1beta1";
        let cases = [
            (Method::PATCH, format!("{g}/namespaces/default/hikawas/sample/status"), None, ("patch", "hikawas/status")),
            (Method::POST, format!("{g}/namespaces/default/zundokos"), None, ("create", "zundokos")),
            (Method::GET, format!("{g}/zundokos"), Some("watch=true&resourceVersion=5"), ("watch", "zundokos")),
            (Method::GET, format!("{g}/zundokos"), Some("limit=500"), ("list", "zundokos")),
            (Method::GET, format!("{g}/zundokorules/mine"), None, ("get", "zundokorules")),
            (Method::POST, "/apis/events.k8s.io/v1/namespaces/default/events".into(), None, ("create", "events")),
            (Method::PUT, "/apis/coordination.k8s.io/v1/namespaces/ops/leases/shard-00".into(), None, ("update", "leases")),
            (Method::GET, "/api/v1/namespaces/ops/configmaps/rules".into(), None, ("get", "configmaps")),
            (Method::GET, "/api/v1/namespaces/ops".into(), None, ("get", "namespaces")),
            (Method::POST, "/api/v1/namespaces".into(), None, ("create", "namespaces")),
            (Method::DELETE, "/api/v1/namespaces/ops/pods".into(), None, ("deletecollection", "other")),
            (Method::GET, "/version".into(), None, ("list", "nonresource")),
            (Method::GET, "/apis".into(), None, ("list", "nonresource")),
        ];
        for (method, path, query, want) in cases {
            assert_eq!(classify(&method, &path, query), want, "{method} {path}?{query:?}");
        }
    }

    #[test]
    fn a_path_nobody_expected_is_other_not_a_new_label() {
        for path in ["/apis/x/v1/namespaces/a/b/c/d/e/f", "/api/v1/\u{1b}[31m", "/apis/a/b/c%2Fd", "/apis/g/v1/namespaces/ns/hikawas/n/scale"] {
            let (_, resource) = classify(&Method::GET, path, None);
            assert!(resource == "other" || resource == "nonresource", "{path}: {resource}");
        }
    }
}
