//! Shared helpers: a server per test, a kube-rs client, a raw HTTP client for exact codes
//! and Status bodies, and test CRDs.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use zundoko_apiserver::{ApiServer, ServerConfig};

pub async fn server() -> ApiServer {
    server_with(ServerConfig { bookmark_interval: Duration::from_millis(200), ..Default::default() }).await
}

pub async fn server_with(cfg: ServerConfig) -> ApiServer {
    ApiServer::start(cfg).await.expect("start server")
}

pub fn client(s: &ApiServer) -> kube::Client {
    let cfg = kube::Config::new(s.url().parse().unwrap());
    kube::Client::try_from(cfg).unwrap()
}

/// The operator's Hikawa, as kube-rs derives it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "zundokokiyoshi.kaitoy.github.com",
    version = "v1beta1",
    kind = "Hikawa",
    namespaced,
    status = "HikawaStatus",
    printcolumn = r#"{"name":"Interval","type":"integer","jsonPath":".spec.intervalMillis"}"#,
    printcolumn = r#"{"name":"Said","type":"integer","jsonPath":".status.numZundokosSaid"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct HikawaSpec {
    pub interval_millis: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_zundokos: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub say_kiyoshi: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<BTreeMap<String, String>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HikawaStatus {
    #[serde(default)]
    pub num_zundokos_said: i64,
    #[serde(default)]
    pub kiyoshied: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "zundokokiyoshi.kaitoy.github.com",
    version = "v1beta1",
    kind = "Zundoko",
    namespaced,
    printcolumn = r#"{"name":"Say","type":"string","jsonPath":".spec.say"}"#
)]
pub struct ZundokoSpec {
    pub say: String,
}

pub async fn install_crds(c: &kube::Client) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::CustomResourceExt;
    use kube::api::{Api, PostParams};
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    for crd in [Hikawa::crd(), Zundoko::crd()] {
        crds.create(&PostParams::default(), &crd).await.expect("create CRD");
    }
}

/// A hand-written CRD exercising the validation keywords.
pub fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.test.zundoko.example"},
        "spec": {
            "group": "test.zundoko.example",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList", "shortNames": ["wd"]},
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "required": ["size"],
                            "properties": {
                                "size": {"type": "integer", "format": "int64", "minimum": 1, "maximum": 10},
                                "color": {"type": "string", "enum": ["red", "green"]},
                                "label": {"type": "string", "maxLength": 5},
                                "tags": {"type": "array", "items": {"type": "string"}},
                                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                                "mode": {"type": "string", "default": "auto"}
                            }
                        },
                        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}, "count": {"type": "integer"}}}
                    }
                }}
            }]
        }
    })
}

pub const WIDGETS: &str = "/apis/test.zundoko.example/v1/namespaces/default/widgets";
pub const HIKAWAS: &str = "/apis/zundokokiyoshi.kaitoy.github.com/v1beta1/namespaces/default/hikawas";

pub fn widget(name: &str, size: i64) -> Value {
    json!({"apiVersion": "test.zundoko.example/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {"size": size}})
}

/// Raw HTTP, for exact status codes and bodies.
pub struct Raw {
    base: String,
    http: reqwest::Client,
}

impl Raw {
    pub fn new(s: &ApiServer) -> Self {
        Raw { base: s.url(), http: reqwest::Client::new() }
    }
    async fn send(&self, rb: reqwest::RequestBuilder) -> (u16, Value) {
        let r = rb.send().await.expect("send");
        let code = r.status().as_u16();
        let text = r.text().await.unwrap();
        (code, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }
    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.send(self.http.get(format!("{}{path}", self.base))).await
    }
    pub async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.send(self.http.post(format!("{}{path}", self.base)).header("Content-Type", "application/json").body(body.to_string())).await
    }
    pub async fn post_bytes(&self, path: &str, body: &str) -> (u16, Value) {
        self.send(self.http.post(format!("{}{path}", self.base)).header("Content-Type", "application/json").body(body.to_string())).await
    }
    pub async fn put(&self, path: &str, body: &Value) -> (u16, Value) {
        self.send(self.http.put(format!("{}{path}", self.base)).header("Content-Type", "application/json").body(body.to_string())).await
    }
    pub async fn patch(&self, path: &str, ct: &str, body: &Value) -> (u16, Value) {
        self.send(self.http.patch(format!("{}{path}", self.base)).header("Content-Type", ct).body(body.to_string())).await
    }
    pub async fn delete(&self, path: &str, body: Option<&Value>) -> (u16, Value) {
        let mut rb = self.http.delete(format!("{}{path}", self.base));
        if let Some(b) = body {
            rb = rb.header("Content-Type", "application/json").body(b.to_string());
        }
        self.send(rb).await
    }
    /// Reads a watch stream until `n` events arrived or `timeout` passed.
    pub async fn watch(&self, path: &str, n: usize, timeout: Duration) -> Vec<Value> {
        use futures::StreamExt;
        let mut out = vec![];
        let r = self.http.get(format!("{}{path}", self.base)).send().await.expect("watch");
        assert_eq!(r.status().as_u16(), 200);
        let mut stream = r.bytes_stream();
        let mut buf = Vec::new();
        let deadline = tokio::time::Instant::now() + timeout;
        while out.len() < n {
            let next = tokio::time::timeout_at(deadline, stream.next()).await;
            match next {
                Ok(Some(Ok(chunk))) => {
                    buf.extend_from_slice(&chunk);
                    while let Some(i) = buf.iter().position(|b| *b == b'\n') {
                        let line: Vec<u8> = buf.drain(..=i).collect();
                        out.push(serde_json::from_slice(&line).expect("watch line is JSON"));
                    }
                }
                _ => break,
            }
        }
        out
    }
    pub async fn install_widgets(&self) {
        let (code, body) = self.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &widget_crd()).await;
        assert_eq!(code, 201, "{body}");
    }
}

/// Polls `f` until it returns true or `timeout` passes.
pub async fn eventually<F, Fut>(timeout: Duration, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}
