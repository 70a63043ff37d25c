//! Routing: a request's path and query to the Kubernetes verb, resource and object it names,
//! as kube-apiserver's RequestInfo.

use std::collections::HashMap;

use hyper::Method;

pub(crate) struct ResourceReq {
    pub verb: &'static str,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

/// Parses `/api/v1/...` and `/apis/G/V/...` resource paths.
pub(crate) fn parse_resource_path(method: &Method, path: &str, query: &HashMap<String, String>) -> Option<ResourceReq> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, mut rest) = match segs.as_slice() {
        ["api", v, rest @ ..] if !rest.is_empty() => (String::new(), v.to_string(), rest.to_vec()),
        ["apis", g, v, rest @ ..] if !rest.is_empty() => (g.to_string(), v.to_string(), rest.to_vec()),
        _ => return None,
    };
    let mut watch_path = false;
    if rest.first() == Some(&"watch") {
        watch_path = true;
        rest.remove(0);
    }
    if rest.iter().any(|s| s.is_empty()) || rest.is_empty() {
        return None;
    }
    let core_ns_sub = group.is_empty() && rest.len() == 3 && rest[0] == "namespaces" && (rest[2] == "status" || rest[2] == "finalize");
    let (namespace, resource, name, sub) = if rest[0] == "namespaces" && rest.len() >= 3 && !core_ns_sub {
        if rest.len() > 5 {
            return None;
        }
        (Some(rest[1].to_string()), rest[2].to_string(), rest.get(3).map(|s| s.to_string()), rest.get(4).map(|s| s.to_string()))
    } else {
        if rest.len() > 3 {
            return None;
        }
        (None, rest[0].to_string(), rest.get(1).map(|s| s.to_string()), rest.get(2).map(|s| s.to_string()))
    };
    let watch = watch_path || matches!(query.get("watch").map(String::as_str), Some("true") | Some("1"));
    let verb = match (method, name.is_some()) {
        (&Method::GET, _) if watch => "watch",
        (&Method::GET, true) => "get",
        (&Method::GET, false) => "list",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, true) => "delete",
        (&Method::DELETE, false) => "deletecollection",
        _ => "unknown",
    };
    Some(ResourceReq { verb, group, version, resource, namespace, name, subresource: sub })
}

/// As kube-apiserver's RequestInfo: a list or watch whose field selector pins `metadata.name`
/// to a valid path segment names that object, so RBAC `resourceNames` can allow it (a
/// deletecollection is a DELETE, which RequestInfo never names so).
pub(crate) fn selected_name(verb: &str, query: &HashMap<String, String>) -> Option<String> {
    if !matches!(verb, "list" | "watch") {
        return None;
    }
    let selector = query.get("fieldSelector")?;
    let mut names = selector.split(',').filter_map(|term| {
        let (field, value) = term.split_once("==").or_else(|| term.split_once('='))?;
        (field.trim() == "metadata.name" && !field.ends_with('!')).then(|| value.trim().to_string())
    });
    // path.IsValidPathSegmentName.
    names.next().filter(|n| n != "." && n != ".." && !n.contains('/') && !n.contains('%'))
}

pub(crate) fn parse_query(q: Option<&str>) -> HashMap<String, String> {
    form_urlencoded::parse(q.unwrap_or("").as_bytes()).into_owned().collect()
}
