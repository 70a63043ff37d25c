//! `/metrics`: what kube-apiserver's own says of the requests it served, as far as the
//! benchmarks read it: `apiserver_request_duration_seconds` (its sum and count; one bucket,
//! `+Inf`) by verb as kube-apiserver reports it (POST, PATCH, LIST...), resource and
//! subresource, from the tallies the cost model keeps (watches excluded, as there). A client
//! that reads a real server's the same way reads this one's.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::cost::Tally;

/// The verb as kube-apiserver's metrics report it, from the Kubernetes verb the request log
/// keeps (a non-resource request's is its lowercase method).
fn reported_verb(verb: &str) -> String {
    match verb {
        "create" => "POST".into(),
        "update" => "PUT".into(),
        "patch" => "PATCH".into(),
        "delete" | "deletecollection" => "DELETE".into(),
        other => other.to_uppercase(),
    }
}

/// A label value in Prometheus' text format.
fn escaped(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The text `/metrics` answers, from the durations tallied so far.
pub(crate) fn text(durations: &HashMap<(String, String, String, String), Tally>) -> String {
    let mut out = String::from(
        "# HELP apiserver_request_duration_seconds Response latency distribution in seconds for each verb, resource and subresource.\n\
         # TYPE apiserver_request_duration_seconds histogram\n",
    );
    let mut keys: Vec<_> = durations.keys().collect();
    keys.sort();
    for key in keys {
        let (group, verb, resource, subresource) = key;
        let tally = &durations[key];
        let labels = format!(
            "component=\"apiserver\",group=\"{}\",resource=\"{}\",subresource=\"{}\",verb=\"{}\"",
            escaped(group),
            escaped(resource),
            escaped(subresource),
            escaped(&reported_verb(verb))
        );
        let _ = writeln!(out, "apiserver_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}", tally.answered);
        let _ = writeln!(out, "apiserver_request_duration_seconds_sum{{{labels}}} {}", tally.duration.as_secs_f64());
        let _ = writeln!(out, "apiserver_request_duration_seconds_count{{{labels}}} {}", tally.answered);
    }
    out
}
