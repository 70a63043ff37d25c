//! Label selectors (`a=b`, `a==b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x)`) and field
//! selectors (`=`, `==`, `!=` on the fields each resource supports).

use serde_json::Value;

use crate::registry::ResourceDef;
use crate::status::{ApiError, ApiResult};
use crate::goquote::Quoted;

#[derive(Debug, Clone)]
enum Req {
    Eq(String, String),
    Ne(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

#[derive(Debug, Clone, Default)]
pub struct LabelSelector(Vec<Req>);

/// Splits on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = vec![];
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn valid_key(k: &str) -> bool {
    !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || "-._/".contains(c))
}

impl LabelSelector {
    pub fn parse(s: &str) -> ApiResult<Self> {
        let bad = |why: &str| ApiError::bad_request(format!("unable to parse requirement: {why}"));
        let mut reqs = vec![];
        for part in split_top(s) {
            let p = part.trim();
            if p.is_empty() {
                continue;
            }
            let words: Vec<&str> = p.split_whitespace().collect();
            if let Some(k) = p.strip_prefix('!') {
                let k = k.trim();
                if !valid_key(k) {
                    return Err(bad(&format!("invalid label key {}", Quoted(k))));
                }
                reqs.push(Req::NotExists(k.into()));
            } else if let Some((k, v)) = p.split_once("!=") {
                reqs.push(Req::Ne(k.trim().into(), v.trim().into()));
            } else if let Some((k, v)) = p.split_once("==").or_else(|| p.split_once('=')) {
                let k = k.trim();
                if !valid_key(k) {
                    return Err(bad(&format!("invalid label key {}", Quoted(k))));
                }
                reqs.push(Req::Eq(k.into(), v.trim().into()));
            } else if words.len() >= 2 && (words[1] == "in" || words[1] == "notin" || words[1].starts_with("in(") || words[1].starts_with("notin(")) {
                let key = words[0];
                let rest = p[key.len()..].trim();
                let (op, vals) = if let Some(r) = rest.strip_prefix("notin") { ("notin", r) } else { ("in", &rest[2..]) };
                let vals = vals.trim();
                let inner = vals.strip_prefix('(').and_then(|v| v.strip_suffix(')')).ok_or_else(|| bad("expected ( and )"))?;
                let set: Vec<String> = inner.split(',').map(|x| x.trim().to_string()).filter(|x| !x.is_empty()).collect();
                reqs.push(if op == "in" { Req::In(key.into(), set) } else { Req::NotIn(key.into(), set) });
            } else if words.len() == 1 && valid_key(p) {
                reqs.push(Req::Exists(p.into()));
            } else {
                return Err(bad(&format!("found '{p}', expected: !, identifier, or 'end of string'")));
            }
        }
        Ok(LabelSelector(reqs))
    }

    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels");
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Req::Eq(k, v) => get(k) == Some(v.as_str()),
            Req::Ne(k, v) => get(k) != Some(v.as_str()),
            Req::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Req::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
            Req::Exists(k) => get(k).is_some(),
            Req::NotExists(k) => get(k).is_none(),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[derive(Debug, Clone, Default)]
pub struct FieldSelector(Vec<(String, bool, String)>);

/// The field labels a resource supports (metadata.name and metadata.namespace everywhere).
fn supported(def: &ResourceDef, field: &str) -> bool {
    if field == "metadata.name" || field == "metadata.namespace" {
        return true;
    }
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "namespaces") => field == "status.phase",
        ("", "secrets") => field == "type",
        ("", "events") | ("events.k8s.io", "events") => {
            field.starts_with("involvedObject.")
                || field.starts_with("regarding.")
                || ["reason", "type", "source", "reportingComponent", "reportingController"].contains(&field)
        }
        _ => false,
    }
}

fn field_value(obj: &Value, field: &str) -> String {
    let path = match field {
        "source" => "source.component",
        f => f,
    };
    let mut cur = obj;
    for p in path.split('.') {
        match cur.get(p) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        v => v.to_string(),
    }
}

impl FieldSelector {
    pub fn parse(s: &str, def: &ResourceDef) -> ApiResult<Self> {
        let mut out = vec![];
        for part in s.split(',') {
            let p = part.trim();
            if p.is_empty() {
                continue;
            }
            let (k, eq, v) = if let Some((k, v)) = p.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = p.split_once("==").or_else(|| p.split_once('=')) {
                (k, true, v)
            } else {
                return Err(ApiError::bad_request(format!("invalid selector: '{s}'; can't understand '{p}'")));
            };
            let k = k.trim();
            // events.k8s.io/v1 field selectors address the v1 field names.
            let k_core = if def.group == "events.k8s.io" {
                k.replacen("regarding.", "involvedObject.", 1).replace("reportingController", "reportingComponent")
            } else {
                k.to_string()
            };
            if !supported(def, k) {
                return Err(ApiError::bad_request(format!("field label not supported: {k}")));
            }
            out.push((k_core, eq, v.trim().to_string()));
        }
        Ok(FieldSelector(out))
    }

    /// Matches against the stored (internal) form.
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(k, eq, v)| {
            let actual = if let Some(m) = k.strip_prefix("metadata.") { obj["metadata"].get(m).and_then(Value::as_str).unwrap_or("").to_string() } else { field_value(obj, k) };
            (actual == *v) == *eq
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    #[test]
    fn labels() {
        let o = json!({"metadata": {"labels": {"a": "b", "c": "d"}}});
        for (s, want) in [("a=b", true), ("a!=b", false), ("a", true), ("!a", false), ("a in (x, b)", true), ("a notin (b)", false), ("a=b,c=d", true), ("e", false), ("", true)] {
            assert_eq!(LabelSelector::parse(s).unwrap().matches(&o), want, "{s}");
        }
    }
}
