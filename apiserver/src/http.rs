//! The HTTP layer: routing of kube-apiserver paths, content negotiation (JSON and Table),
//! fault injection, the request log, and connection tracking for `restart()` and the
//! per-client faults.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::AuthorizationMode;
use crate::authn;
use crate::connections::Connections;
use crate::cost::{self, Cost, Facts};
use crate::discovery;
use crate::route::{ResourceReq, parse_query, parse_resource_path, selected_name};
use crate::faults::{Conn, Faults, Hold};
use crate::ops::{self, DeleteOpts, FieldValidation, ListQuery, Target, WriteOpts};
use crate::rbac::UserInfo;
use crate::status::{ApiError, ApiResult};
use crate::store::Store;
use crate::table;
use crate::watch::{self, WatchParams};

pub type Body = BoxBody<Bytes, Infallible>;

/// One handled request, as an authorizer would see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// Kubernetes verb: get, list, watch, create, update, patch, delete, deletecollection
    /// (for non-resource paths: the lowercase HTTP method).
    pub verb: String,
    pub api_group: String,
    pub api_version: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    /// HTTP status code of the response; 0 for a request held by a partition (never answered).
    pub code: u16,
    pub method: String,
    pub path: String,
    pub user_agent: String,
    /// When the request arrived (for a late one: when it was processed).
    pub at: SystemTime,
    /// Held by a `partition_late` and processed when it healed (logged twice: held, code 0,
    /// at arrival; then processed, with its code and `late`).
    pub late: bool,
    /// What the cost model charged it for (`cost.rs`; zero for a watch and a held request).
    pub facts: Facts,
    /// From its body read to its answer, the model's charge included (zero for a watch and a
    /// held request): apiserver_request_duration_seconds.
    pub duration: Duration,
}

pub const MAX_BODY: usize = 3 * 1024 * 1024;

pub struct Inner {
    pub store: Arc<Store>,
    pub faults: Faults,
    pub log: Mutex<Vec<RequestRecord>>,
    /// Requests so far by (verb, resource, subresource): unlike the log, never cut.
    pub counts: Mutex<HashMap<(String, String, String), u64>>,
    /// How many were answered, their durations and facts, by API group and the same key
    /// (watches excluded): `/metrics` labels its series by group as kube-apiserver does.
    pub durations: Mutex<HashMap<(String, String, String, String), cost::Tally>>,
    pub cost: Cost,
    pub connections: Connections,
    pub addr: SocketAddr,
    pub bookmark_every: Duration,
    pub authorization: AuthorizationMode,
}

impl Inner {
    pub fn new(store: Arc<Store>, addr: SocketAddr, bookmark_every: Duration, authorization: AuthorizationMode) -> Self {
        Inner {
            store,
            faults: Faults::default(),
            log: Mutex::new(vec![]),
            counts: Mutex::new(HashMap::new()),
            durations: Mutex::new(HashMap::new()),
            cost: Cost::default(),
            connections: Connections::default(),
            addr,
            bookmark_every,
            authorization,
        }
    }

    /// Breaks every open connection.
    pub fn break_connections(&self) {
        self.faults.drop_connections("*");
        // Watch streams end when their connection's body is dropped; make sure they do.
        self.faults.drop_watches_now();
    }
}

/// Accepts connections until aborted.
pub async fn serve(inner: Arc<Inner>, listener: TcpListener) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // E.g. out of file descriptors: back off instead of spinning.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        inner.connections.accepted();
        let conn = inner.faults.connect();
        let i2 = inner.clone();
        tokio::spawn(async move {
            let (svc_inner, svc_conn) = (i2.clone(), conn.clone());
            let svc = hyper::service::service_fn(move |req| {
                let (inner, conn) = (svc_inner.clone(), svc_conn.clone());
                async move { Ok::<_, Infallible>(handle(inner, conn, req).await) }
            });
            let served = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc);
            // Closing drops the connection (and whatever it was answering) mid-flight.
            tokio::select! {
                _ = served => {}
                _ = conn.closing() => {}
            }
            i2.faults.disconnect(&conn);
            if let Some(client) = conn.client() {
                i2.connections.closed(client);
            }
        });
    }
}

/// A response body that stops for good once its connection is partitioned: the connection
/// is then only ever closed, so it need not be woken.
struct Silenceable {
    inner: Body,
    conn: Arc<Conn>,
}

impl hyper::body::Body for Silenceable {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.conn.held() {
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_frame(cx)
    }
    fn is_end_stream(&self) -> bool {
        !self.conn.held() && self.inner.is_end_stream()
    }
    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// What APF's tooManyRequests writes: Go's http.Error, so plain text, not a Status.
fn too_many_requests(retry_after_secs: u64) -> Response<Body> {
    Response::builder()
        .status(429)
        .header("Content-Type", "text/plain; charset=utf-8")
        .header("X-Content-Type-Options", "nosniff")
        .header("Cache-Control", "no-cache, private")
        .header("Retry-After", retry_after_secs.to_string())
        .body(full("Too many requests, please try again later.\n"))
        .unwrap()
}

fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).boxed()
}

fn json_resp(code: u16, v: &Value, warnings: &[String]) -> Response<Body> {
    let mut r = Response::builder()
        .status(code)
        .header("Content-Type", "application/json")
        .header("Cache-Control", "no-cache, private");
    for w in warnings {
        r = r.header("Warning", format!("299 - {w:?}"));
    }
    r.body(full(serde_json::to_vec(v).unwrap_or_default())).unwrap()
}

fn err_resp(e: &ApiError) -> Response<Body> {
    json_resp(e.code, &e.to_status(), &[])
}

/// The `as=PartialObjectMetadata[List]` form kube-rs' metadata API asks for.
fn wants_partial(accept: &str) -> bool {
    accept.split(',').next().is_some_and(|first| first.contains("as=PartialObjectMetadata"))
}

fn partial(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata").cloned().unwrap_or(json!({}))})
}

fn wants_table(accept: &str) -> bool {
    accept.split(',').next().is_some_and(|first| first.contains("as=Table")) || accept.split(',').all(|a| a.contains("as=Table"))
}

/// Whether every `%` of `path` is followed by two hex digits, as Go's URL unescaping asks.
fn escapes_are_whole(path: &str) -> bool {
    let bytes = path.as_bytes();
    bytes.iter().enumerate().filter(|(_, b)| **b == b'%').all(|(i, _)| bytes.get(i + 1..i + 3).is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)))
}

async fn handle(inner: Arc<Inner>, conn: Arc<Conn>, req: Request<Incoming>) -> Response<Body> {
    let at = SystemTime::now();
    let method = req.method().clone();
    // Go's server hands kube-apiserver the path unescaped (URL.Path): `%41` is `A` in a name;
    // a `%` without two hex digits fails url.ParseRequestURI, which net/http answers itself.
    if !escapes_are_whole(req.uri().path()) {
        return Response::builder().status(400).header("Content-Type", "text/plain; charset=utf-8").header("Connection", "close").body(full("400 Bad Request")).unwrap();
    }
    let path = percent_encoding::percent_decode_str(req.uri().path()).decode_utf8_lossy().into_owned();
    let query = parse_query(req.uri().query());
    let header = |n: &str| req.headers().get(n).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let content_type = header("content-type");
    let accept = header("accept");
    let user_agent = header("user-agent");
    let credentials = (inner.authorization == AuthorizationMode::Rbac).then(|| req.headers().clone());
    let rr = parse_resource_path(&method, &path, &query);
    let mut record = RequestRecord {
        verb: rr.as_ref().map(|r| r.verb.to_string()).unwrap_or_else(|| method.as_str().to_lowercase()),
        api_group: rr.as_ref().map(|r| r.group.clone()).unwrap_or_default(),
        api_version: rr.as_ref().map(|r| r.version.clone()).unwrap_or_default(),
        resource: rr.as_ref().map(|r| r.resource.clone()).unwrap_or_default(),
        subresource: rr.as_ref().and_then(|r| r.subresource.clone()).unwrap_or_default(),
        namespace: rr.as_ref().and_then(|r| r.namespace.clone()).unwrap_or_default(),
        name: rr.as_ref().and_then(|r| r.name.clone().or_else(|| selected_name(r.verb, &query))).unwrap_or_default(),
        code: 0,
        method: method.to_string(),
        path: path.clone(),
        user_agent,
        at,
        late: false,
        facts: Facts::default(),
        duration: Duration::ZERO,
    };
    conn.set_user_agent(&record.user_agent);
    if conn.first_request(&record.user_agent) {
        inner.connections.first_request(&record.user_agent);
    }
    let hold = inner.faults.hold_if_partitioned(&conn, &record.user_agent);
    if hold != Hold::No {
        // Read, logged, never answered: the connection waits to be closed. A write held
        // until the heal is processed then, by a task of its own (the connection is gone).
        let body = http_body_util::Limited::new(req.into_body(), MAX_BODY).collect().await.map(|b| b.to_bytes());
        if let (Hold::UntilHealed, Ok(body), Some(rr)) = (hold, body, rr.filter(|r| !matches!(r.verb, "get" | "list" | "watch")))
        {
            let (inner, mut record) = (inner.clone(), record.clone());
            tokio::spawn(async move {
                inner.faults.healed(&record.user_agent).await;
                let headers = Headers { content_type: &content_type, accept: &accept, user_agent: &record.user_agent };
                // Who sent it is asked as it is processed (with RBAC; APF has nothing to say).
                let admitted = credentials.map(|h| authn::identify(&inner.store, &h).and_then(|u| authn::authorize(&inner.store, &u, &record, true).map(|()| u))).transpose();
                let code = match admitted.and_then(|user| resource_request(&inner, rr, &query, &headers, user.as_ref(), &body, &mut Facts::default())) {
                    Ok(r) => r.status().as_u16(),
                    Err(e) => e.code,
                };
                (record.code, record.at, record.late) = (code, SystemTime::now(), true);
                tracing::debug!(verb = %record.verb, path = %record.path, code, "request held by a partition, processed late");
                push_log(&inner, record);
            });
        }
        push_log(&inner, record);
        return std::future::pending().await;
    }
    let body = match http_body_util::Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            let r = err_resp(&ApiError::too_large(format!("Request entity too large: limit is {MAX_BODY}")));
            record.code = 413;
            push_log(&inner, record);
            return r;
        }
    };
    // Cut: read, logged (code 0, never answered), not processed, the connection closed.
    if inner.faults.cut(&record.verb, &record.resource) {
        push_log(&inner, record);
        conn.cut();
        return std::future::pending().await;
    }
    let started = Instant::now();
    let latency = inner.faults.latency(&record.user_agent);
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    record.facts.body_bytes = body.len();
    // Authentication and impersonation, then APF, then authorization come before routing,
    // for every path (kube-apiserver's filter chain). Without RBAC, everyone may do anything.
    let user = credentials.map(|headers| authn::identify(&inner.store, &headers));
    let resp = if let Some(refused) = inner.faults.refusal(&record.user_agent, &record.verb, &path) {
        err_resp(&refused)
    } else if let Some(Err(refused)) = &user {
        err_resp(refused)
    } else if let Some(secs) = inner.faults.throttle(&record.user_agent) {
        too_many_requests(secs)
    } else if let Some(Err(refused)) = user.as_ref().and_then(|u| u.as_ref().ok()).map(|u| authn::authorize(&inner.store, u, &record, rr.is_some())) {
        err_resp(&refused)
    } else {
        match rr {
            Some(rr) => match resource_request(&inner, rr, &query, &Headers { content_type: &content_type, accept: &accept, user_agent: &record.user_agent }, user.as_ref().and_then(|u| u.as_ref().ok()), &body, &mut record.facts) {
                Ok(r) => r,
                Err(e) => err_resp(&e),
            },
            None => non_resource(&inner, &method, &path),
        }
    };
    record.code = resp.status().as_u16();
    // A watch is a stream, not a request to charge; the rest pay for what they answered.
    if record.verb != "watch" {
        record.facts.object_bytes = hyper::body::Body::size_hint(resp.body()).exact().unwrap_or(0) as usize;
        inner.cost.charge(&record.facts).await;
        record.duration = started.elapsed();
    }
    tracing::debug!(verb = %record.verb, path = %record.path, code = record.code, "request");
    push_log(&inner, record);
    if conn.held() {
        // Partitioned while in flight: processed, but the answer is lost.
        return std::future::pending().await;
    }
    resp.map(|b| Silenceable { inner: b, conn }.boxed())
}

fn push_log(inner: &Inner, r: RequestRecord) {
    {
        let mut counts = inner.counts.lock().unwrap_or_else(|e| e.into_inner());
        let key = (r.verb.clone(), r.resource.clone(), r.subresource.clone());
        if !r.duration.is_zero() {
            let mut durations = inner.durations.lock().unwrap_or_else(|e| e.into_inner());
            durations.entry((r.api_group.clone(), key.0.clone(), key.1.clone(), key.2.clone())).or_default().add(r.duration, &r.facts);
        }
        *counts.entry(key).or_default() += 1;
    }
    let mut log = inner.log.lock().unwrap_or_else(|e| e.into_inner());
    if log.len() >= 200_000 {
        log.drain(..100_000);
    }
    log.push(r);
}

fn non_resource(inner: &Inner, method: &Method, path: &str) -> Response<Body> {
    if method != Method::GET && method != Method::HEAD {
        return err_resp(&ApiError::method_not_allowed());
    }
    let reg = inner.store.lock().registry.clone();
    let p = path.trim_end_matches('/');
    let segs: Vec<&str> = p.trim_start_matches('/').split('/').collect();
    let doc = match segs.as_slice() {
        ["api"] => Some(discovery::api_versions(&inner.addr.to_string())),
        ["api", v] => discovery::resource_list(&reg, "", v),
        ["apis"] => Some(discovery::api_group_list(&reg)),
        ["apis", g] => discovery::api_group(&reg, g),
        ["apis", g, v] => discovery::resource_list(&reg, g, v),
        ["version"] => Some(discovery::version()),
        ["openapi", "v3"] => Some(crate::openapi::root(&reg)),
        ["openapi", "v3", "api", v] => crate::openapi::group_version(&reg, "", v),
        ["openapi", "v3", "apis", g, v] => crate::openapi::group_version(&reg, g, v),
        ["metrics"] => {
            let text = crate::metrics::text(&inner.durations.lock().unwrap_or_else(|e| e.into_inner()));
            return Response::builder().status(200).header("Content-Type", "text/plain; version=0.0.4; charset=utf-8").body(full(text)).unwrap();
        }
        ["healthz"] | ["livez"] | ["readyz"] => {
            return Response::builder().status(200).header("Content-Type", "text/plain; charset=utf-8").body(full("ok")).unwrap();
        }
        _ => None,
    };
    match doc {
        Some(d) => json_resp(200, &d, &[]),
        None => err_resp(&ApiError::no_route()),
    }
}

fn write_opts(q: &HashMap<String, String>, user_agent: &str, user: Option<&UserInfo>) -> ApiResult<WriteOpts> {
    let dry_run = match q.get("dryRun").map(String::as_str) {
        None | Some("") => false,
        Some("All") => true,
        Some(other) => return Err(ApiError::bad_request(format!("Invalid dryRun value: {}", crate::goquote::Quoted(other)))),
    };
    let field_validation = match q.get("fieldValidation").map(String::as_str) {
        None | Some("") | Some("Warn") => FieldValidation::Warn,
        Some("Ignore") => FieldValidation::Ignore,
        Some("Strict") => FieldValidation::Strict,
        Some(other) => {
            return Err(ApiError::bad_request(format!("fieldValidation {} is invalid: valid values are Ignore, Warn, Strict", crate::goquote::Quoted(other))));
        }
    };
    if q.get("fieldManager").is_some_and(|m| m.chars().count() > 128) {
        return Err(ApiError::bad_request("fieldManager: Too long: may not be more than 128 bytes"));
    }
    Ok(WriteOpts {
        dry_run,
        field_manager: q.get("fieldManager").cloned(),
        field_validation,
        force: q.get("force").is_some_and(|f| f == "true" || f == "1"),
        user_agent: user_agent.to_string(),
        applying: false,
        user: user.cloned(),
    })
}

fn parse_body(body: &[u8], content_type: &str) -> ApiResult<Value> {
    let ct = content_type.split(';').next().unwrap_or("").trim();
    if ct == "application/vnd.kubernetes.protobuf" {
        return crate::protobuf::decode(body).ok_or_else(|| ApiError::unsupported_media_type(&["application/json", "application/yaml"]));
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(v) => Ok(v),
        Err(e) if ct.contains("yaml") => serde_yaml::from_slice(body).map_err(|e2| ApiError::bad_request(format!("error decoding YAML: {e2} ({e})"))),
        Err(e) => Err(ApiError::bad_request(format!("error decoding JSON: {e}"))),
    }
}

struct Headers<'a> {
    content_type: &'a str,
    accept: &'a str,
    user_agent: &'a str,
}

/// `user`: who asks, with RBAC (None: anyone may do anything).
fn resource_request(inner: &Arc<Inner>, rr: ResourceReq, q: &HashMap<String, String>, h: &Headers<'_>, user: Option<&UserInfo>, body: &[u8], facts: &mut Facts) -> ApiResult<Response<Body>> {
    let (content_type, accept, user_agent) = (h.content_type, h.accept, h.user_agent);
    let def = {
        let st = inner.store.lock();
        st.registry.get(&rr.group, &rr.version, &rr.resource).cloned()
    };
    let Some(def) = def else { return Err(ApiError::no_route()) };
    if !def.namespaced && rr.namespace.is_some() {
        return Err(ApiError::no_route());
    }
    if def.namespaced && rr.namespace.is_none() && (rr.name.is_some() || rr.verb == "create" || rr.verb == "deletecollection") {
        return Err(ApiError::no_route());
    }
    if let Some(sub) = &rr.subresource {
        let ok = sub == "status" && def.version(&rr.version).is_some_and(|v| v.status_subresource);
        if !ok {
            return Err(ApiError::no_route());
        }
        if !["get", "update", "patch"].contains(&rr.verb) {
            return Err(ApiError::method_not_allowed());
        }
    }
    if rr.verb == "unknown" || (rr.verb == "create" && rr.name.is_some()) || ((rr.verb == "update" || rr.verb == "patch") && rr.name.is_none()) {
        return Err(ApiError::method_not_allowed());
    }
    if let Some(e) = inner.faults.roll(rr.verb, &def.group, &def.plural, rr.name.as_deref().unwrap_or("")) {
        return Err(e);
    }
    let table = wants_table(accept);
    let review = def.group == ops::REVIEWS_GROUP;
    let target = Target { def: def.clone(), version: rr.version.clone(), namespace: rr.namespace.clone(), name: rr.name.clone(), subresource: rr.subresource.clone() };
    let store = &inner.store;
    let ok = |r: ops::Resp| json_resp(r.code, &r.body, &r.warnings);
    // A write computes managedFields and fans out to the resource's watchers.
    let mut written = |r: ops::Resp| {
        (facts.managed_fields_bytes, facts.watchers) = (cost::managed_fields_bytes(&r.body), store.watchers(&def.storage));
        ok(r)
    };
    Ok(match rr.verb {
        // A review has a create route only: none by name, nor across namespaces for the local one.
        _ if review && (rr.name.is_some() || (def.namespaced && rr.namespace.is_none())) => return Err(ApiError::no_route()),
        "create" if review => ok(ops::review(store, &target, parse_body(body, content_type)?, user, &write_opts(q, user_agent, user)?)?),
        _ if review => return Err(ApiError::method_not_allowed()),
        "get" => {
            let obj = ops::get(store, &target)?;
            if wants_partial(accept) {
                json_resp(200, &partial(&obj), &[])
            } else if table {
                json_resp(200, &table::to_table(&def, &rr.version, &[obj], true, None), &[])
            } else {
                json_resp(200, &obj, &[])
            }
        }
        "list" => {
            let lq = list_query(q);
            let r = ops::list(store, &target, &lq)?;
            let mut meta = json!({"resourceVersion": r.resource_version.to_string()});
            if let Some(c) = &r.continue_token {
                meta["continue"] = c.clone().into();
            }
            if let Some(n) = r.remaining {
                meta["remainingItemCount"] = n.into();
            }
            if wants_partial(accept) {
                let items: Vec<Value> = r.items.iter().map(partial).collect();
                json_resp(200, &json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "items": items}), &[])
            } else if table {
                json_resp(200, &table::to_table(&def, &rr.version, &r.items, true, Some(meta)), &[])
            } else {
                let items: Vec<Value> = r
                    .items
                    .into_iter()
                    .map(|mut o| {
                        if def.builtin
                            && let Some(m) = o.as_object_mut() {
                                m.remove("kind");
                                m.remove("apiVersion");
                            }
                        o
                    })
                    .collect();
                json_resp(200, &json!({"kind": def.list_kind, "apiVersion": def.api_version(&rr.version), "metadata": meta, "items": items}), &[])
            }
        }
        "watch" => {
            let p = WatchParams {
                resource_version: q.get("resourceVersion").cloned(),
                resource_version_match: q.get("resourceVersionMatch").cloned().filter(|s| !s.is_empty()),
                send_initial_events: q.get("sendInitialEvents").map(|s| s == "true" || s == "1"),
                allow_bookmarks: q.get("allowWatchBookmarks").is_some_and(|s| s == "true" || s == "1"),
                timeout: q.get("timeoutSeconds").and_then(|s| s.parse::<u64>().ok()).filter(|s| *s > 0).map(Duration::from_secs),
                label_selector: q.get("labelSelector").cloned(),
                field_selector: q.get("fieldSelector").cloned(),
                table,
                partial: wants_partial(accept),
            };
            let rx = watch::start(inner.store.clone(), target, p, inner.bookmark_every, inner.faults.drops())?;
            let stream = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx)) });
            Response::builder()
                .status(200)
                .header("Content-Type", "application/json")
                .header("Cache-Control", "no-cache, private")
                .body(StreamBody::new(stream).boxed())
                .unwrap()
        }
        "create" => written(ops::create(store, &target, parse_body(body, content_type)?, &write_opts(q, user_agent, user)?)?),
        "update" => written(ops::update(store, &target, parse_body(body, content_type)?, &write_opts(q, user_agent, user)?)?),
        "patch" => written(ops::patch(store, &target, content_type, body, &write_opts(q, user_agent, user)?)?),
        "delete" => written(ops::delete(store, &target, &delete_opts(q, body)?)?),
        "deletecollection" => written(ops::delete_collection(store, &target, &list_query(q), &delete_opts(q, body)?)?),
        _ => return Err(ApiError::method_not_allowed()),
    })
}

fn list_query(q: &HashMap<String, String>) -> ListQuery {
    ListQuery {
        label_selector: q.get("labelSelector").cloned().filter(|s| !s.is_empty()),
        field_selector: q.get("fieldSelector").cloned().filter(|s| !s.is_empty()),
        limit: q.get("limit").and_then(|l| l.parse().ok()),
        continue_token: q.get("continue").cloned(),
        resource_version: q.get("resourceVersion").cloned(),
        resource_version_match: q.get("resourceVersionMatch").cloned(),
    }
}

fn delete_opts(q: &HashMap<String, String>, body: &[u8]) -> ApiResult<DeleteOpts> {
    let mut o = DeleteOpts::default();
    let b: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?
    };
    o.propagation = b.get("propagationPolicy").and_then(Value::as_str).map(String::from).or_else(|| q.get("propagationPolicy").cloned());
    let orphan = b.get("orphanDependents").and_then(Value::as_bool).or_else(|| q.get("orphanDependents").map(|s| s == "true"));
    if o.propagation.is_none() {
        o.propagation = match orphan {
            Some(true) => Some("Orphan".into()),
            Some(false) => Some("Background".into()),
            None => None,
        };
    }
    if let Some(p) = &o.propagation
        && !["Orphan", "Background", "Foreground"].contains(&p.as_str()) {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "DeleteOptions",
                "",
                &[crate::status::FieldError::new(
                    crate::status::ErrType::NotSupported,
                    "propagationPolicy",
                    Some(p.clone().into()),
                    "supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"",
                )],
            ));
        }
    o.precondition_uid = b.pointer("/preconditions/uid").and_then(Value::as_str).map(String::from);
    o.precondition_rv = b.pointer("/preconditions/resourceVersion").and_then(Value::as_str).map(String::from);
    let dry = b.get("dryRun").and_then(Value::as_array).is_some_and(|a| a.iter().any(|x| x == "All"));
    o.dry_run = dry || q.get("dryRun").is_some_and(|d| d == "All");
    Ok(o)
}
