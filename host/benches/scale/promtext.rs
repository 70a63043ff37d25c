//! Prometheus' text format, as far as this benchmark reads it: an API server's
//! `apiserver_request_duration_seconds` (its `_sum` and `_count` by verb, resource and
//! subresource) and the operator's `zundoko_rest_client_requests_total`, each read with a size bound.

use super::*;

/// The most of a `/metrics` answer read: a real kube-apiserver's is some megabytes (its
/// histograms have a series per verb, resource, scope and bucket).
pub(crate) const METRICS_MAX_BYTES: usize = 64 << 20;

#[derive(Debug, thiserror::Error)]
pub(crate) enum ScrapeError {
    #[error("the API server's /metrics is Forbidden to this kubeconfig's user (it needs `get` on the non-resource URL /metrics)")]
    Forbidden,
    #[error("the API server's /metrics answered {0}")]
    Status(u16),
    #[error("the API server's /metrics could not be read: {0}")]
    Request(#[from] kube::Error),
    #[error("the API server's /metrics could not be read whole within {METRICS_MAX_BYTES} bytes: {0}")]
    Body(String),
}

/// GET `/metrics` from the API server `client` speaks to, read up to [`METRICS_MAX_BYTES`].
pub(crate) async fn scrape(client: &Client) -> Result<String, ScrapeError> {
    let request = http::Request::get("/metrics").body(kube::client::Body::empty()).map_err(|e| ScrapeError::Body(e.to_string()))?;
    let response = client.send(request).await?;
    match response.status().as_u16() {
        200 => {}
        403 => return Err(ScrapeError::Forbidden),
        code => return Err(ScrapeError::Status(code)),
    }
    let bytes = axum::body::to_bytes(axum::body::Body::new(response.into_body()), METRICS_MAX_BYTES).await.map_err(|e| ScrapeError::Body(e.to_string()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// A sample's labels, as (name, value) in the order written.
pub(crate) type Labels = Vec<(String, String)>;

/// One sample: its metric's name, its labels and its value (`None`: not a sample line).
pub(crate) fn sample(line: &str) -> Option<(&str, Labels, f64)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line.find(['{', ' ']).unwrap_or(line.len());
    let name = &line[..name_end];
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(mut after) = rest.strip_prefix('{') {
        // name="value" pairs, values escaped with \\, \" and \n.
        loop {
            after = after.trim_start_matches([',', ' ']);
            if let Some(closed) = after.strip_prefix('}') {
                rest = closed;
                break;
            }
            let (key, quoted) = after.split_once('=')?;
            let quoted = quoted.strip_prefix('"')?;
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let end = loop {
                match chars.next()? {
                    (i, '"') => break i + 1,
                    (_, '\\') => match chars.next()?.1 {
                        'n' => value.push('\n'),
                        escaped => value.push(escaped),
                    },
                    (_, c) => value.push(c),
                }
            };
            labels.push((key.trim().to_string(), value));
            after = &quoted[end..];
        }
    }
    let value = rest.split_whitespace().next()?.parse().ok()?;
    Some((name, labels, value))
}

fn label<'a>(labels: &'a [(String, String)], name: &str) -> &'a str {
    labels.iter().find(|(k, _)| k == name).map_or("", |(_, v)| v.as_str())
}

/// The verb as the local server's tallies (and Kubernetes' RBAC) say it, from
/// apiserver_request_duration_seconds' (kube-apiserver's reported verb: POST, PATCH, APPLY...).
fn kube_verb(reported: &str) -> String {
    match reported {
        "POST" => "create".into(),
        "PUT" => "update".into(),
        "PATCH" | "APPLY" => "patch".into(),
        other => other.to_lowercase(),
    }
}

/// The API groups a word's writes go to: events.k8s.io (its Event, as the operator and the bare
/// client write it) and the operator's (the child, the Hikawa's status). The core group serves
/// the same Events as `events` too, which other clients of a real server (kubelets, controllers)
/// write and the word never does.
const WORD_GROUPS: [&str; 2] = ["events.k8s.io", "zundokokiyoshi.kaitoy.github.com"];

/// `apiserver_request_duration_seconds` of [`WORD_GROUPS`] by (verb, resource, subresource):
/// requests and seconds in all, summed over the other labels (version, scope, component, dry run).
pub(crate) fn request_durations(text: &str) -> Vec<Tallied> {
    let mut by_key: std::collections::BTreeMap<(String, String, String), (u64, f64)> = Default::default();
    for (name, labels, value) in text.lines().filter_map(sample) {
        let count = match name {
            "apiserver_request_duration_seconds_count" => true,
            "apiserver_request_duration_seconds_sum" => false,
            _ => continue,
        };
        if !WORD_GROUPS.contains(&label(&labels, "group")) {
            continue;
        }
        let key = (kube_verb(label(&labels, "verb")), label(&labels, "resource").to_string(), label(&labels, "subresource").to_string());
        let entry = by_key.entry(key).or_default();
        if count {
            entry.0 += value as u64;
        } else {
            entry.1 += value;
        }
    }
    by_key.into_iter().map(|(key, (n, sum))| (key, n, sum, Vec::new())).collect()
}

/// What happened between two scrapes: `after` less `before`, key by key (a key only in
/// `after` counted whole).
pub(crate) fn difference(before: &[Tallied], after: &[Tallied]) -> Vec<Tallied> {
    after
        .iter()
        .map(|(key, n, sum, _)| {
            let (n0, sum0) = before.iter().find(|(k, ..)| k == key).map_or((0, 0.0), |(_, n, sum, _)| (*n, *sum));
            (key.clone(), n.saturating_sub(n0), (sum - sum0).max(0.0), Vec::new())
        })
        .filter(|(_, n, ..)| *n > 0)
        .collect()
}

/// The operator's `zundoko_rest_client_requests_total` by (verb, resource, subresource): the requests
/// it sent, as it counted them (a remote server's counts cannot be told apart by client).
pub(crate) fn client_requests(text: &str) -> Vec<((String, String, String), u64)> {
    let mut by_key: std::collections::BTreeMap<(String, String, String), u64> = Default::default();
    for (name, labels, value) in text.lines().filter_map(sample) {
        if name != "zundoko_rest_client_requests_total" {
            continue;
        }
        let (resource, sub) = label(&labels, "resource").split_once('/').unwrap_or((label(&labels, "resource"), ""));
        *by_key.entry((label(&labels, "verb").to_string(), resource.to_string(), sub.to_string())).or_default() += value as u64;
    }
    by_key.into_iter().collect()
}
