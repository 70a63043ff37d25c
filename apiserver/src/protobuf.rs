//! Decoding of the Kubernetes protobuf envelope for the built-in kinds kubectl's generators
//! send that way (`kubectl create configmap|namespace|secret|role|clusterrole|rolebinding|
//! clusterrolebinding`, and `kubectl auth can-i`'s access reviews). Only those kinds are decoded; other protobuf bodies get 415 as before. Responses are always JSON, which client-go accepts.

use serde_json::{Map, Value, json};

const MAGIC: &[u8] = b"k8s\0";

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.b.get(self.i)?;
            self.i += 1;
            v |= ((byte & 0x7f) as u64) << shift;
            if byte & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    fn next(&mut self) -> Option<Option<(u64, Field<'a>)>> {
        if self.i >= self.b.len() {
            return Some(None);
        }
        let key = self.varint()?;
        let (num, wt) = (key >> 3, key & 7);
        let f = match wt {
            0 => Field::Varint(self.varint()?),
            2 => {
                let len = self.varint()? as usize;
                let s = self.b.get(self.i..self.i + len)?;
                self.i += len;
                Field::Bytes(s)
            }
            1 => {
                self.i += 8;
                Field::Varint(0)
            }
            5 => {
                self.i += 4;
                Field::Varint(0)
            }
            _ => return None,
        };
        Some(Some((num, f)))
    }
}

fn fields(b: &[u8]) -> Option<Vec<(u64, Field<'_>)>> {
    let mut r = Reader { b, i: 0 };
    let mut out = vec![];
    while let Some(f) = r.next()? {
        out.push(f);
    }
    Some(out)
}

fn string(b: &[u8]) -> Option<String> {
    String::from_utf8(b.to_vec()).ok()
}

fn map_entry(b: &[u8], bytes_value: bool) -> Option<(String, Value)> {
    let (mut k, mut v) = (String::new(), Value::String(String::new()));
    for (n, f) in fields(b)? {
        if let Field::Bytes(x) = f {
            match n {
                1 => k = string(x)?,
                2 if bytes_value => v = Value::String(b64(x)),
                2 => v = Value::String(string(x)?),
                _ => {}
            }
        }
    }
    Some((k, v))
}

fn b64(b: &[u8]) -> String {
    const T: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for c in b.chunks(3) {
        let n = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                s.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

fn object_meta(b: &[u8]) -> Option<Value> {
    let mut m = Map::new();
    let mut labels = Map::new();
    let mut annotations = Map::new();
    let mut finalizers = vec![];
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(x)) => {
                m.insert("name".into(), string(x)?.into());
            }
            (2, Field::Bytes(x)) => {
                m.insert("generateName".into(), string(x)?.into());
            }
            (3, Field::Bytes(x)) => {
                m.insert("namespace".into(), string(x)?.into());
            }
            (6, Field::Bytes(x)) => {
                m.insert("resourceVersion".into(), string(x)?.into());
            }
            (11, Field::Bytes(x)) => {
                let (k, v) = map_entry(x, false)?;
                labels.insert(k, v);
            }
            (12, Field::Bytes(x)) => {
                let (k, v) = map_entry(x, false)?;
                annotations.insert(k, v);
            }
            (14, Field::Bytes(x)) => finalizers.push(Value::String(string(x)?)),
            _ => {}
        }
    }
    if !labels.is_empty() {
        m.insert("labels".into(), Value::Object(labels));
    }
    if !annotations.is_empty() {
        m.insert("annotations".into(), Value::Object(annotations));
    }
    if !finalizers.is_empty() {
        m.insert("finalizers".into(), Value::Array(finalizers));
    }
    Some(Value::Object(m))
}

/// A message of string fields (and repeated string fields) as a JSON object, by field number.
fn strings(b: &[u8], names: &[(u64, &str, bool)]) -> Option<Value> {
    let mut m = Map::new();
    for (n, f) in fields(b)? {
        let (Field::Bytes(x), Some((_, name, repeated))) = (f, names.iter().find(|(k, _, _)| *k == n)) else { continue };
        let v = Value::String(string(x)?);
        if *repeated {
            m.entry(name.to_string()).or_insert_with(|| json!([])).as_array_mut()?.push(v);
        } else if v != "" {
            // gogo-protobuf writes every string, empty ones too; the JSON leaves them out.
            m.insert(name.to_string(), v);
        }
    }
    Some(Value::Object(m))
}

/// k8s.io/api/rbac/v1 PolicyRule: verbs 1, apiGroups 2, resources 3, resourceNames 4,
/// nonResourceURLs 5.
fn policy_rule(b: &[u8]) -> Option<Value> {
    strings(b, &[(1, "verbs", true), (2, "apiGroups", true), (3, "resources", true), (4, "resourceNames", true), (5, "nonResourceURLs", true)])
}

/// AggregationRule: clusterRoleSelectors 1, each a LabelSelector (matchLabels 1, a
/// map; matchExpressions 2: key 1, operator 2, values 3).
fn aggregation_rule(b: &[u8]) -> Option<Value> {
    let mut selectors = vec![];
    for (n, f) in fields(b)? {
        let (1, Field::Bytes(sel)) = (n, f) else { continue };
        let (mut labels, mut exprs) = (Map::new(), vec![]);
        for (sn, sf) in fields(sel)? {
            match (sn, sf) {
                (1, Field::Bytes(x)) => {
                    let (k, v) = map_entry(x, false)?;
                    labels.insert(k, v);
                }
                (2, Field::Bytes(x)) => exprs.push(strings(x, &[(1, "key", false), (2, "operator", false), (3, "values", true)])?),
                _ => {}
            }
        }
        let mut selector = Map::new();
        if !labels.is_empty() {
            selector.insert("matchLabels".into(), Value::Object(labels));
        }
        if !exprs.is_empty() {
            selector.insert("matchExpressions".into(), Value::Array(exprs));
        }
        selectors.push(Value::Object(selector));
    }
    Some(json!({"clusterRoleSelectors": selectors}))
}

/// Role and ClusterRole (metadata 1, rules 2, aggregationRule 3), RoleBinding and
/// ClusterRoleBinding (metadata 1, subjects 2: kind 1, apiGroup 2, name 3, namespace 4;
/// roleRef 3: apiGroup 1, kind 2, name 3), as `kubectl create role|rolebinding|...` send them.
fn rbac(obj: &mut Value, kind: &str, raw: &[u8]) -> Option<()> {
    let binding = kind.ends_with("Binding");
    for (n, f) in fields(raw)? {
        let Field::Bytes(x) = f else { continue };
        match (n, binding) {
            (1, _) => obj["metadata"] = object_meta(x)?,
            (2, false) => obj.as_object_mut()?.entry("rules").or_insert_with(|| json!([])).as_array_mut()?.push(policy_rule(x)?),
            (3, false) => obj["aggregationRule"] = aggregation_rule(x)?,
            (2, true) => {
                let subject = strings(x, &[(1, "kind", false), (2, "apiGroup", false), (3, "name", false), (4, "namespace", false)])?;
                obj.as_object_mut()?.entry("subjects").or_insert_with(|| json!([])).as_array_mut()?.push(subject);
            }
            (3, true) => obj["roleRef"] = strings(x, &[(1, "apiGroup", false), (2, "kind", false), (3, "name", false)])?,
            _ => {}
        }
    }
    Some(())
}

/// k8s.io/api/authorization/v1 ResourceAttributes: namespace 1, verb 2, group 3, version 4,
/// resource 5, subresource 6, name 7, fieldSelector 8 and labelSelector 9 (rawSelector 1,
/// requirements 2: key 1, operator 2, values 3).
fn resource_attributes(b: &[u8]) -> Option<Value> {
    let names = [(1, "namespace", false), (2, "verb", false), (3, "group", false), (4, "version", false), (5, "resource", false), (6, "subresource", false), (7, "name", false)];
    let mut attrs = strings(b, &names)?;
    for (n, f) in fields(b)? {
        let (8 | 9, Field::Bytes(x)) = (n, f) else { continue };
        let mut selector = strings(x, &[(1, "rawSelector", false)])?;
        for (sn, sf) in fields(x)? {
            if let (2, Field::Bytes(r)) = (sn, sf) {
                let requirement = strings(r, &[(1, "key", false), (2, "operator", false), (3, "values", true)])?;
                selector.as_object_mut()?.entry("requirements").or_insert_with(|| json!([])).as_array_mut()?.push(requirement);
            }
        }
        attrs[if n == 8 { "fieldSelector" } else { "labelSelector" }] = selector;
    }
    Some(attrs)
}

/// The access reviews as `kubectl auth can-i` sends them: metadata 1, spec 2 (status 3, which
/// the server fills, is not read). SelfSubjectAccessReviewSpec: resourceAttributes 1,
/// nonResourceAttributes 2 (path 1, verb 2); SubjectAccessReviewSpec: those, user 3, groups 4,
/// extra 5 (a map of ExtraValue: items 1), uid 6; SelfSubjectRulesReviewSpec: namespace 1.
fn access_review(obj: &mut Value, kind: &str, raw: &[u8]) -> Option<()> {
    for (n, f) in fields(raw)? {
        let Field::Bytes(x) = f else { continue };
        match n {
            1 => obj["metadata"] = object_meta(x)?,
            2 if kind == "SelfSubjectRulesReview" => obj["spec"] = strings(x, &[(1, "namespace", false)])?,
            2 => {
                let mut spec = strings(x, &[(3, "user", false), (4, "groups", true), (6, "uid", false)])?;
                for (sn, sf) in fields(x)? {
                    let Field::Bytes(y) = sf else { continue };
                    match sn {
                        1 => spec["resourceAttributes"] = resource_attributes(y)?,
                        2 => spec["nonResourceAttributes"] = strings(y, &[(1, "path", false), (2, "verb", false)])?,
                        5 => {
                            let (mut key, mut items) = (String::new(), json!([]));
                            for (en, ef) in fields(y)? {
                                match (en, ef) {
                                    (1, Field::Bytes(k)) => key = string(k)?,
                                    (2, Field::Bytes(v)) => items = strings(v, &[(1, "items", true)])?.get("items").cloned().unwrap_or_else(|| json!([])),
                                    _ => {}
                                }
                            }
                            spec.as_object_mut()?.entry("extra").or_insert_with(|| json!({}))[key] = items;
                        }
                        _ => {}
                    }
                }
                obj["spec"] = spec;
            }
            _ => {}
        }
    }
    Some(())
}

/// Decodes a protobuf-encoded ConfigMap, Secret, Namespace, RBAC object or access review into
/// its JSON form.
pub fn decode(body: &[u8]) -> Option<Value> {
    let rest = body.strip_prefix(MAGIC)?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for (n, f) in fields(rest)? {
        match (n, f) {
            (1, Field::Bytes(tm)) => {
                for (tn, tf) in fields(tm)? {
                    if let Field::Bytes(x) = tf {
                        match tn {
                            1 => api_version = string(x)?,
                            2 => kind = string(x)?,
                            _ => {}
                        }
                    }
                }
            }
            (2, Field::Bytes(x)) => raw = x,
            _ => {}
        }
    }
    let mut obj = json!({"apiVersion": api_version, "kind": kind});
    match (api_version.as_str(), kind.as_str()) {
        ("v1", "ConfigMap") => {
            let (mut data, mut bin) = (Map::new(), Map::new());
            for (n, f) in fields(raw)? {
                match (n, f) {
                    (1, Field::Bytes(x)) => obj["metadata"] = object_meta(x)?,
                    (2, Field::Bytes(x)) => {
                        let (k, v) = map_entry(x, false)?;
                        data.insert(k, v);
                    }
                    (3, Field::Bytes(x)) => {
                        let (k, v) = map_entry(x, true)?;
                        bin.insert(k, v);
                    }
                    (4, Field::Varint(v)) => obj["immutable"] = (v != 0).into(),
                    _ => {}
                }
            }
            if !data.is_empty() {
                obj["data"] = Value::Object(data);
            }
            if !bin.is_empty() {
                obj["binaryData"] = Value::Object(bin);
            }
        }
        ("v1", "Secret") => {
            // k8s.io/api/core/v1 Secret: metadata 1, data 2 (map<string, bytes>), type 3,
            // stringData 4 (map<string, string>), immutable 5.
            let (mut data, mut string_data) = (Map::new(), Map::new());
            for (n, f) in fields(raw)? {
                match (n, f) {
                    (1, Field::Bytes(x)) => obj["metadata"] = object_meta(x)?,
                    (2, Field::Bytes(x)) => {
                        let (k, v) = map_entry(x, true)?;
                        data.insert(k, v);
                    }
                    (3, Field::Bytes(x)) => obj["type"] = string(x)?.into(),
                    (4, Field::Bytes(x)) => {
                        let (k, v) = map_entry(x, false)?;
                        string_data.insert(k, v);
                    }
                    (5, Field::Varint(v)) => obj["immutable"] = (v != 0).into(),
                    _ => {}
                }
            }
            if !data.is_empty() {
                obj["data"] = Value::Object(data);
            }
            if !string_data.is_empty() {
                obj["stringData"] = Value::Object(string_data);
            }
        }
        ("v1", "Namespace") => {
            for (n, f) in fields(raw)? {
                if let (1, Field::Bytes(x)) = (n, f) {
                    obj["metadata"] = object_meta(x)?;
                }
            }
        }
        ("rbac.authorization.k8s.io/v1", "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding") => rbac(&mut obj, &kind, raw)?,
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview" | "SubjectAccessReview" | "LocalSubjectAccessReview" | "SelfSubjectRulesReview") => access_review(&mut obj, &kind, raw)?,
        _ => return None,
    }
    Some(obj)
}

#[cfg(test)]
mod tests {
    fn ld(n: u8, b: &[u8]) -> Vec<u8> {
        let mut out = vec![n << 3 | 2, b.len() as u8];
        out.extend_from_slice(b);
        out
    }

    #[test]
    fn secret() {
        let type_meta = [ld(1, b"v1"), ld(2, b"Secret")].concat();
        let meta = [ld(1, b"s"), ld(3, b"default")].concat();
        let raw = [
            ld(1, &meta),
            ld(2, &[ld(1, b".dockerconfigjson"), ld(2, b"{}")].concat()),
            ld(3, b"kubernetes.io/dockerconfigjson"),
            ld(4, &[ld(1, b"k"), ld(2, b"v")].concat()),
            vec![5 << 3, 1],
        ]
        .concat();
        let body = [super::MAGIC.to_vec(), ld(1, &type_meta), ld(2, &raw)].concat();
        let obj = super::decode(&body).unwrap();
        assert_eq!(
            obj,
            serde_json::json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"},
                "data": {".dockerconfigjson": "e30="}, "type": "kubernetes.io/dockerconfigjson", "stringData": {"k": "v"}, "immutable": true})
        );
    }

    #[test]
    fn access_reviews_as_client_go_sends_them() {
        let envelope = |kind: &[u8], raw: Vec<u8>| {
            let type_meta = [ld(1, b"authorization.k8s.io/v1"), ld(2, kind)].concat();
            super::decode(&[super::MAGIC.to_vec(), ld(1, &type_meta), ld(2, &raw)].concat()).unwrap()
        };
        // gogo-protobuf writes every string of a set message, empty ones too.
        let attrs = [ld(1, b"team-a"), ld(2, b"get"), ld(3, b""), ld(4, b""), ld(5, b"secrets"), ld(6, b""), ld(7, b"pull"), ld(8, &ld(1, b"metadata.name=pull"))].concat();
        let extra = [ld(1, b"scopes"), ld(2, &[ld(1, b"a"), ld(1, b"b")].concat())].concat();
        let spec = [ld(1, &attrs), ld(3, b"bob"), ld(4, b"devs"), ld(4, b"ops"), ld(5, &extra), ld(6, b"")].concat();
        assert_eq!(envelope(b"SubjectAccessReview", [ld(1, b""), ld(2, &spec), ld(3, &[8, 1])].concat()), serde_json::json!({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "metadata": {},
            "spec": {"resourceAttributes": {"namespace": "team-a", "verb": "get", "resource": "secrets", "name": "pull", "fieldSelector": {"rawSelector": "metadata.name=pull"}},
                     "user": "bob", "groups": ["devs", "ops"], "extra": {"scopes": ["a", "b"]}}}));
        let path = ld(2, &[ld(1, b"/apis"), ld(2, b"get")].concat());
        assert_eq!(envelope(b"SelfSubjectAccessReview", ld(2, &path))["spec"], serde_json::json!({"nonResourceAttributes": {"path": "/apis", "verb": "get"}}));
        assert_eq!(envelope(b"SelfSubjectRulesReview", ld(2, &ld(1, b"team-a")))["spec"], serde_json::json!({"namespace": "team-a"}));
    }

    #[test]
    fn rbac_objects_as_kubectl_create_sends_them() {
        let envelope = |kind: &[u8], raw: Vec<u8>| {
            let type_meta = [ld(1, b"rbac.authorization.k8s.io/v1"), ld(2, kind)].concat();
            super::decode(&[super::MAGIC.to_vec(), ld(1, &type_meta), ld(2, &raw)].concat()).unwrap()
        };
        let meta = [ld(1, b"e"), ld(3, b"team-a")].concat();
        let subject = [ld(1, b"ServiceAccount"), ld(2, b""), ld(3, b"alice"), ld(4, b"team-a")].concat();
        let role_ref = [ld(1, b"rbac.authorization.k8s.io"), ld(2, b"ClusterRole"), ld(3, b"edit")].concat();
        let binding = envelope(b"RoleBinding", [ld(1, &meta), ld(2, &subject), ld(3, &role_ref)].concat());
        assert_eq!(binding, serde_json::json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "e", "namespace": "team-a"},
            "subjects": [{"kind": "ServiceAccount", "name": "alice", "namespace": "team-a"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"}}));
        let rule = [ld(1, b"get"), ld(1, b"list"), ld(2, b""), ld(3, b"secrets"), ld(4, b"s1")].concat();
        // AggregationRule.clusterRoleSelectors[0].matchLabels{x: y}
        let selector = ld(1, &ld(1, &[ld(1, b"x"), ld(2, b"y")].concat()));
        let role = envelope(b"ClusterRole", [ld(1, &ld(1, b"agg")), ld(2, &rule), ld(3, &selector)].concat());
        assert_eq!(role, serde_json::json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "agg"},
            "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["s1"]}],
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}}));
    }

    #[test]
    fn base64() {
        assert_eq!(super::b64(b"\x00\x01\x02"), "AAEC");
        assert_eq!(super::b64(b"ab"), "YWI=");
    }
}
