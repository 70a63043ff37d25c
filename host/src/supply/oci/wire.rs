//! The requests of a pull, made here rather than by oci-client, so that a registry cannot make
//! the operator read more than it means to (threat model: "A registry"):
//! - every body is read as a stream, refused (or, for an error, cut) as soon as it passes its
//!   cap: manifests and indexes (256 KiB), signature payloads (64 KiB), module layers
//!   (`--max-module-mib`), token answers (64 KiB), error bodies (the first 4 KiB, parsed as the
//!   OCI error JSON where they are one);
//! - a redirect is followed only to https, or to an origin `--insecure-registry` names (never to
//!   another plain-http origin), and with `--allowed-registries` only to a host it allows or the
//!   registry's own, at most five times; credentials never follow one to another origin (reqwest
//!   drops `Authorization` when the scheme, host or port changes), `Referer` is never sent, and of
//!   an answer from another origin that is no success only the status is read: its challenge is
//!   not answered, its body not read;
//! - descriptors' `urls` are never fetched: a blob comes from the registry named, by digest;
//! - a bearer challenge's token realm is held to the same rules before it is contacted, follows
//!   no redirect, and gets the credentials only on the registry's own host or if
//!   `--trusted-token-realm` names it (`origins`);
//! - nothing a registry says reaches an error beyond its status, the OCI error code and a short
//!   escaped message.
//!
//! The time of a try (every request and body in it) is bounded by the caller
//! (`Registry::tries_up_to`, `--registry-timeout-secs`).

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use futures::StreamExt;
use oci_client::secrets::RegistryAuth;
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderValue, WWW_AUTHENTICATE};

use super::origins::{Origins, PublicOnly, RealmRefused, same_origin, shown};
use super::reference::ModuleRef;
use super::registry::PullError;

/// What is kept of an error body.
pub(super) const MAX_ERROR_BYTES: usize = 4 << 10;
/// A token answer: a JWT of a few KiB.
pub(super) const MAX_TOKEN_BYTES: usize = 64 << 10;
/// Redirects followed by one request.
const MAX_REDIRECTS: usize = 5;
/// The most a `--registry-ca` file may hold: a whole system bundle (about 150 certificates) is
/// about 220 KiB; a bigger file is refused before it is buffered.
pub const MAX_CA_FILE_BYTES: u64 = 1 << 20;
/// What is kept of a message a registry writes (an OCI error's `message`), escaped.
const MAX_MESSAGE_BYTES: usize = 120;
const MAX_CODE_BYTES: usize = 40;

/// The refusal of a redirect, found again in reqwest's error.
#[derive(Debug)]
struct RedirectRefused(String);

impl std::fmt::Display for RedirectRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RedirectRefused {}

/// The HTTP clients of every pull: one set per `Registry`, their connections reused.
pub(super) struct Wire {
    /// The registry's requests, following redirects `origins` allows.
    client: reqwest::Client,
    /// A token realm on the registry's host or one trusted: no redirect followed.
    realm: reqwest::Client,
    /// Any other token realm: no redirect followed, connected only to public addresses.
    realm_public_only: reqwest::Client,
    origins: Origins,
}

impl Wire {
    /// Whether every `--registry-ca` certificate is usable: checked at start, though the
    /// client is built only when a registry is first asked (a flag's mistake is the operator's).
    pub fn check_extra_ca(extra_ca_pem: &[Vec<u8>]) -> Result<(), String> {
        for pem in extra_ca_pem {
            reqwest::Certificate::from_pem(pem).map_err(|e| format!("a --registry-ca certificate is not usable: {e}"))?;
        }
        Ok(())
    }

    pub fn new(origins: Origins, timeout: Duration, extra_ca_pem: &[Vec<u8>]) -> Result<Wire, String> {
        let builder = || -> Result<reqwest::ClientBuilder, String> {
            // Where a request came from is nobody else's business (a registry's path names
            // its repository).
            let mut builder = reqwest::Client::builder().referer(false).connect_timeout(timeout.min(Duration::from_secs(10))).read_timeout(timeout);
            if !extra_ca_pem.is_empty() {
                let certs = extra_ca_pem
                    .iter()
                    .map(|pem| reqwest::Certificate::from_pem(pem))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| format!("a --registry-ca certificate is not usable: {e}"))?;
                builder = builder.tls_certs_merge(certs);
            }
            Ok(builder)
        };
        let judge = origins.clone();
        let policy = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() > MAX_REDIRECTS {
                return attempt.error(RedirectRefused(format!("more than {MAX_REDIRECTS} redirects")));
            }
            let refusal = attempt.previous().first().and_then(|registry| judge.redirect_refusal(attempt.url(), registry));
            match refusal {
                None => attempt.follow(),
                Some(why) => attempt.error(RedirectRefused(why)),
            }
        });
        // What fails here is the system's certificate store (TLS roots are read as the client
        // is built): said so, with where it was looked for.
        let built = |builder: reqwest::ClientBuilder| {
            builder.build().map_err(|e| {
                let set = |name: &str| std::env::var_os(name).map_or_else(|| "unset".to_string(), |v| crate::text::printable(&v.to_string_lossy(), 200));
                format!(
                    "the certificate store cannot be read (SSL_CERT_FILE={}, SSL_CERT_DIR={}): {}; an image without a CA bundle needs one (ca-certificates), or the registry's CA with --registry-ca",
                    set("SSL_CERT_FILE"),
                    set("SSL_CERT_DIR"),
                    crate::text::printable(&with_causes(e.to_string(), &e), 400)
                )
            })
        };
        let client = built(builder()?.redirect(policy))?;
        let realm = built(builder()?.redirect(reqwest::redirect::Policy::none()))?;
        let realm_public_only = built(builder()?.redirect(reqwest::redirect::Policy::none()).dns_resolver(Arc::new(PublicOnly)))?;
        Ok(Wire { client, realm, realm_public_only, origins })
    }

    /// A session with `reference`'s repository: its credentials, and the token a challenge
    /// asked for once it has been fetched.
    pub fn session<'a>(&'a self, reference: &'a ModuleRef, auth: &'a RegistryAuth) -> Session<'a> {
        Session { wire: self, reference, auth, authorization: None }
    }
}

pub(super) struct Session<'a> {
    wire: &'a Wire,
    reference: &'a ModuleRef,
    auth: &'a RegistryAuth,
    authorization: Option<HeaderValue>,
}

/// A body read whole under a cap, or how far it went before the cap stopped it.
pub enum Capped {
    Whole(Vec<u8>),
    Over(u64),
}

impl<'a> Session<'a> {
    fn base(&self) -> String {
        let registry = self.reference.registry.as_str();
        // As oci-client (and docker) speak to Docker Hub.
        let host = match registry {
            "docker.io" | "index.docker.io" => "registry-1.docker.io",
            other => other,
        };
        let scheme = if self.wire.origins.insecure.iter().any(|o| o == registry) { "http" } else { "https" };
        format!("{scheme}://{host}")
    }

    /// The registry's host as its requests are sent (Docker Hub's `registry-1.docker.io`).
    fn registry_host(&self) -> String {
        reqwest::Url::parse(&self.base()).ok().and_then(|u| u.host_str().map(str::to_owned)).unwrap_or_default()
    }

    /// A manifest (or index) by tag or digest, read under `limit`.
    pub async fn manifest(&mut self, name: &str, accept: &[&str], limit: usize, what: &'static str) -> Result<Vec<u8>, PullError> {
        let response = self.get(&format!("manifests/{name}"), accept).await?;
        self.read(response, limit as u64, what).await
    }

    /// A blob by digest from the registry itself (a descriptor's `urls` are never fetched),
    /// read under `limit`. The caller checks its digest.
    pub async fn blob(&mut self, digest: &str, limit: u64, what: &'static str) -> Result<Vec<u8>, PullError> {
        let response = self.get(&format!("blobs/{digest}"), &[]).await?;
        self.read(response, limit, what).await
    }

    async fn read(&self, response: reqwest::Response, limit: u64, what: &'static str) -> Result<Vec<u8>, PullError> {
        match read_capped(response, limit).await {
            Ok(Capped::Whole(bytes)) => Ok(bytes),
            Ok(Capped::Over(size)) => Err(PullError::TooLarge { what, reference: self.reference.to_string(), size, limit }),
            Err(e) => Err(self.transport(&format!("reading {what}"), e)),
        }
    }

    /// GET `/v2/<repository>/<path>`: a success, or the error the answer means. A 401 with a
    /// challenge is answered once (a bearer token, or basic credentials).
    async fn get(&mut self, path: &str, accept: &[&str]) -> Result<reqwest::Response, PullError> {
        let url = format!("{}/v2/{}/{path}", self.base(), self.reference.repository);
        let asked = reqwest::Url::parse(&url)
            .map_err(|e| PullError::Registry { reference: self.reference.to_string(), detail: format!("the registry's URL cannot be made: {e}") })?;
        let mut challenged = false;
        loop {
            let mut request = self.wire.client.get(asked.clone());
            if !accept.is_empty() {
                request = request.header(ACCEPT, accept.join(", "));
            }
            if let Some(authorization) = &self.authorization {
                request = request.header(AUTHORIZATION, authorization.clone());
            }
            let response = request.send().await.map_err(|e| self.transport("sending the request", e))?;
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            if !same_origin(response.url(), &asked) {
                // A redirect target on another origin: its challenge is not answered with the
                // registry's credentials, and nothing it says is read.
                return Err(self.elsewhere(&response));
            }
            if status == reqwest::StatusCode::UNAUTHORIZED && !challenged {
                let challenge = response.headers().get(WWW_AUTHENTICATE).and_then(|v| v.to_str().ok()).map(str::to_owned);
                if let Some(challenge) = challenge
                    && let Some(authorization) = self.answer(&challenge).await?
                {
                    challenged = true;
                    self.authorization = Some(authorization);
                    continue;
                }
            }
            return Err(self.refusal(response).await);
        }
    }

    /// What answers a `WWW-Authenticate` challenge: a bearer token from its realm, or basic
    /// credentials; `None` if there is nothing to answer with. Marked sensitive, whichever it
    /// is: kept out of any debug output and HPACK's tables.
    async fn answer(&self, challenge: &str) -> Result<Option<HeaderValue>, PullError> {
        let mut answer = self.answer_unmarked(challenge).await?;
        if let Some(authorization) = &mut answer {
            authorization.set_sensitive(true);
        }
        Ok(answer)
    }

    async fn answer_unmarked(&self, challenge: &str) -> Result<Option<HeaderValue>, PullError> {
        let (scheme, params) = parse_challenge(challenge);
        let unauthorized = |detail: String| PullError::Unauthorized { registry: self.reference.registry.clone(), reference: self.reference.to_string(), detail };
        match scheme.to_ascii_lowercase().as_str() {
            "basic" => Ok(match self.auth {
                RegistryAuth::Basic(user, password) => {
                    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
                    Some(HeaderValue::from_str(&format!("Basic {encoded}")).map_err(|_| unauthorized("the credentials do not fit a header".into()))?)
                }
                _ => None,
            }),
            "bearer" => {
                let realm = params.iter().find(|(k, _)| k == "realm").map(|(_, v)| v.as_str()).unwrap_or("");
                let mut url = reqwest::Url::parse(realm).map_err(|_| unauthorized("the bearer challenge names no realm URL".into()))?;
                if !matches!(url.scheme(), "http" | "https") {
                    return Err(unauthorized("the bearer realm is neither http nor https".into()));
                }
                let scope = params
                    .iter()
                    .find(|(k, _)| k == "scope")
                    .map(|(_, v)| v.clone())
                    .unwrap_or_else(|| format!("repository:{}:pull", self.reference.repository));
                {
                    let mut query = url.query_pairs_mut();
                    if let Some((_, service)) = params.iter().find(|(k, _)| k == "service") {
                        query.append_pair("service", service);
                    }
                    query.append_pair("scope", &scope);
                }
                // Before a byte is sent: the realm is an origin the registry chose.
                let realm = self.wire.origins.realm(&url, &self.registry_host()).map_err(|detail| PullError::RealmRefused { reference: self.reference.to_string(), detail })?;
                let client = if realm.public_only { &self.wire.realm_public_only } else { &self.wire.realm };
                let mut request = client.get(url.clone());
                if let (RegistryAuth::Basic(user, password), true) = (self.auth, realm.credentials) {
                    request = request.basic_auth(user, Some(password));
                }
                let response = request.send().await.map_err(|e| self.realm_transport(&url, e))?;
                if response.status().is_redirection() {
                    return Err(unauthorized(format!("the token realm {} answered HTTP {}: its redirect is not followed", shown(&url), response.status().as_u16())));
                }
                if !response.status().is_success() {
                    return Err(match self.refusal(response).await {
                        PullError::Unreachable { registry, detail } => PullError::Unreachable { registry, detail: format!("the token realm: {detail}") },
                        PullError::NotFound { .. } | PullError::Registry { .. } => unauthorized("the token realm refused".into()),
                        other => other,
                    });
                }
                let body = match read_capped(response, MAX_TOKEN_BYTES as u64).await {
                    Ok(Capped::Whole(body)) => body,
                    Ok(Capped::Over(size)) => {
                        return Err(PullError::TooLarge { what: "the token answer", reference: self.reference.to_string(), size, limit: MAX_TOKEN_BYTES as u64 });
                    }
                    Err(e) => return Err(self.transport("reading the token answer", e)),
                };
                #[derive(serde::Deserialize)]
                struct TokenAnswer {
                    token: Option<String>,
                    access_token: Option<String>,
                }
                let answer: TokenAnswer = serde_json::from_slice(&body).map_err(|_| unauthorized("the token realm's answer is not a token".into()))?;
                let token = answer.token.or(answer.access_token).filter(|t| !t.is_empty()).ok_or_else(|| unauthorized("the token realm gave no token".into()))?;
                let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| unauthorized("the token realm's token does not fit a header".into()))?;
                Ok(Some(value))
            }
            _ => Ok(None),
        }
    }

    /// A token realm's transport error: its name refused by `PublicOnly`, or as any other.
    fn realm_transport(&self, url: &reqwest::Url, error: reqwest::Error) -> PullError {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&error);
        while let Some(c) = cause {
            if let Some(refused) = c.downcast_ref::<RealmRefused>() {
                return PullError::RealmRefused { reference: self.reference.to_string(), detail: format!("the token realm {} refused: {}", shown(url), refused.0) };
            }
            cause = c.source();
        }
        self.transport("asking the token realm", error)
    }

    /// A transport error (or a refused redirect) as the operator tells it: reqwest's causes
    /// (they tell a refused connection or an unknown certificate issuer), without any URL.
    fn transport(&self, doing: &str, error: reqwest::Error) -> PullError {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&error);
        while let Some(c) = cause {
            if let Some(refused) = c.downcast_ref::<RedirectRefused>() {
                return PullError::RedirectRefused { reference: self.reference.to_string(), detail: refused.0.clone() };
            }

            cause = c.source();
        }
        let error = error.without_url();
        let detail = with_causes(format!("{doing}: {error}"), &error);
        PullError::Unreachable { registry: self.reference.registry.clone(), detail: crate::text::printable(&detail, 400) }
    }

    /// An answer that is no success, told by its status and the OCI error code in the first
    /// few KiB of its body (the rest is never read).
    async fn refusal(&self, response: reqwest::Response) -> PullError {
        let status = response.status();
        let prefix = read_prefix(response, MAX_ERROR_BYTES).await;
        let (code, detail) = oci_error(status, &prefix);
        self.refusal_of(status, code, detail)
    }

    /// An answer that is no success from a redirect target on another origin, told by its
    /// status alone.
    fn elsewhere(&self, response: &reqwest::Response) -> PullError {
        let status = response.status();
        let detail = format!("HTTP {} from {}, the target of a redirect (its answer is not read, its challenge not answered)", status.as_u16(), shown(response.url()));
        self.refusal_of(status, None, detail)
    }

    fn refusal_of(&self, status: reqwest::StatusCode, code: Option<String>, detail: String) -> PullError {
        let (registry, reference) = (self.reference.registry.clone(), self.reference.to_string());
        let code = code.as_deref().unwrap_or("");
        match (status.as_u16(), code) {
            (_, "MANIFEST_UNKNOWN" | "NAME_UNKNOWN" | "BLOB_UNKNOWN" | "NOT_FOUND") | (404, _) => PullError::NotFound { reference },
            (_, "UNAUTHORIZED" | "DENIED") | (401 | 403, _) => PullError::Unauthorized { registry, reference, detail },
            (_, "TOOMANYREQUESTS") | (429 | 500..=599, _) => PullError::Unreachable { registry, detail },
            (300..=399, _) => PullError::Registry { reference, detail: format!("{detail} (a redirect without a usable Location)") },
            _ => PullError::Registry { reference, detail },
        }
    }
}

/// The status and, where the body is the OCI error JSON, its first error's code and a short,
/// escaped message. Nothing else of the body.
pub fn oci_error(status: reqwest::StatusCode, body: &[u8]) -> (Option<String>, String) {
    #[derive(serde::Deserialize)]
    struct Envelope {
        errors: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        code: String,
        #[serde(default)]
        message: Option<String>,
    }
    let mut detail = format!("HTTP {}", status.as_u16());
    let first = serde_json::from_slice::<Envelope>(body).ok().and_then(|e| e.errors.into_iter().next());
    let code = first.as_ref().map(|e| crate::text::printable(&e.code, MAX_CODE_BYTES));
    if let Some(entry) = first {
        detail = format!("{detail} {}", crate::text::printable(&entry.code, MAX_CODE_BYTES));
        if let Some(message) = entry.message.filter(|m| !m.is_empty()) {
            detail = format!("{detail}: {}", crate::text::printable(&message, MAX_MESSAGE_BYTES));
        }
    }
    (code, detail)
}

/// A body read chunk by chunk, refused as soon as it passes `limit` (before more is buffered;
/// a `Content-Length` over it refuses it before a byte is read).
pub async fn read_capped(response: reqwest::Response, limit: u64) -> Result<Capped, reqwest::Error> {
    if let Some(length) = response.content_length()
        && length > limit
    {
        return Ok(Capped::Over(length));
    }
    let mut bytes = Vec::with_capacity(response.content_length().unwrap_or(0).min(limit).min(1 << 20) as usize);
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        let size = (bytes.len() + chunk.len()) as u64;
        if size > limit {
            return Ok(Capped::Over(size));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Capped::Whole(bytes))
}

/// The first `limit` bytes of a body at most (what is there when it fails), the rest unread.
pub async fn read_prefix(response: reqwest::Response, limit: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut stream = response.bytes_stream();
    while bytes.len() < limit {
        match stream.next().await {
            Some(Ok(chunk)) => bytes.extend_from_slice(&chunk[..chunk.len().min(limit - bytes.len())]),
            _ => break,
        }
    }
    bytes
}

/// `Bearer realm="...",service="...",scope="a,b"`: the scheme and its parameters (quoted
/// values may hold commas).
pub fn parse_challenge(header: &str) -> (String, Vec<(String, String)>) {
    let header = header.trim();
    let (scheme, rest) = header.split_once(char::is_whitespace).unwrap_or((header, ""));
    let mut params = Vec::new();
    let mut chars = rest.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect::<String>().trim().to_ascii_lowercase();
        if key.is_empty() {
            break;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next()),
                    '"' => break,
                    c => value.push(c),
                }
            }
        } else {
            value = chars.by_ref().take_while(|c| *c != ',').collect::<String>().trim().to_string();
        }
        params.push((key, value));
    }
    (scheme.to_string(), params)
}

/// `detail` followed by each cause of `error` it does not already say: reqwest's own message
/// ("error sending request") hides the one that tells (connection refused, an unknown issuer).
pub(super) fn with_causes(mut detail: String, error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !detail.contains(&text) {
            detail = format!("{detail}: {text}");
        }
        cause = c.source();
    }
    detail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_credentials_a_challenge_is_answered_with_are_marked_sensitive() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let wire = Wire::new(Origins::default(), Duration::from_secs(1), &[]).unwrap();
        let reference: ModuleRef = "registry.example.com/rules/classic:v1".parse().unwrap();
        let auth = RegistryAuth::Basic("user".into(), "hunter2".into());
        let answer = wire.session(&reference, &auth).answer(r#"Basic realm="registry""#).await.unwrap().unwrap();
        assert!(answer.is_sensitive(), "{answer:?}");
        assert_eq!(format!("{answer:?}"), "Sensitive", "debug output shows nothing of it");
    }

    #[test]
    fn a_challenge_is_parsed_with_commas_in_quotes() {
        let (scheme, params) = parse_challenge(r#"Bearer realm="https://auth.io/token",service="registry.io",scope="repository:a/b:pull,push""#);
        assert_eq!(scheme, "Bearer");
        assert_eq!(
            params,
            vec![
                ("realm".into(), "https://auth.io/token".into()),
                ("service".into(), "registry.io".into()),
                ("scope".into(), "repository:a/b:pull,push".into())
            ]
        );
        assert_eq!(parse_challenge(r#"Basic realm="Registry Realm""#), ("Basic".into(), vec![("realm".into(), "Registry Realm".into())]));
    }

    #[test]
    fn an_error_body_gives_its_code_and_a_short_escaped_message_only() {
        let body = format!(r#"{{"errors":[{{"code":"DENIED","message":"no\u001b[31m {}","detail":"SECRET"}}]}}"#, "x".repeat(500));
        let (code, detail) = oci_error(reqwest::StatusCode::FORBIDDEN, body.as_bytes());
        assert_eq!(code.as_deref(), Some("DENIED"));
        assert!(detail.starts_with("HTTP 403 DENIED: no\\u{1b}[31m x") && detail.len() <= 160 && !detail.contains("SECRET"), "{detail}");
        let (code, detail) = oci_error(reqwest::StatusCode::INTERNAL_SERVER_ERROR, b"INTERNAL-SECRET the internal service");
        assert_eq!((code, detail.as_str()), (None, "HTTP 500"));
    }

    /// A streamed body of 1 KiB chunks, `total` of them at most (none: forever), with a count of
    /// the chunks taken from it.
    fn counted_body(total: Option<usize>) -> (reqwest::Response, Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let taken = Arc::new(AtomicUsize::new(0));
        let counter = taken.clone();
        let chunks = futures::stream::repeat_with(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok::<_, std::io::Error>(vec![b'x'; 1 << 10])
        });
        let body = match total {
            Some(total) => reqwest::Body::wrap_stream(chunks.take(total)),
            None => reqwest::Body::wrap_stream(chunks),
        };
        (reqwest::Response::from(http::Response::new(body)), taken)
    }

    fn taken(count: &std::sync::atomic::AtomicUsize) -> usize {
        count.load(std::sync::atomic::Ordering::SeqCst)
    }

    #[tokio::test]
    async fn an_endless_body_is_refused_one_chunk_past_its_cap() {
        // The token answer's cap, as the docs give it: 64 KiB.
        let (response, count) = counted_body(None);
        let Ok(Capped::Over(size)) = read_capped(response, MAX_TOKEN_BYTES as u64).await else { panic!("an endless body is refused") };
        assert_eq!((size, taken(&count)), ((64 << 10) + 1024, 65), "read one chunk past 64 KiB, and no more");
        // A body whose length is known to be over (hyper knows it from `Content-Length`):
        // refused by that length.
        let response = reqwest::Response::from(http::Response::new(reqwest::Body::from(vec![b'x'; (64 << 10) + 1])));
        assert!(matches!(read_capped(response, MAX_TOKEN_BYTES as u64).await, Ok(Capped::Over(65537))));
        // At the cap: whole.
        let (response, _) = counted_body(Some(64));
        assert!(matches!(read_capped(response, MAX_TOKEN_BYTES as u64).await, Ok(Capped::Whole(b)) if b.len() == 64 << 10));
    }

    #[tokio::test]
    async fn an_error_body_is_read_to_4_kib_and_no_further() {
        let (response, count) = counted_body(None);
        assert_eq!(read_prefix(response, MAX_ERROR_BYTES).await.len(), 4 << 10);
        assert_eq!(taken(&count), 4, "four chunks of 1 KiB taken, the rest never read");
    }

    #[test]
    fn too_large_names_the_limit() {
        let error = PullError::TooLarge { what: "the token answer", reference: "r.io/a:v1".into(), size: 65537, limit: 65536 };
        assert_eq!(error.to_string(), "the token answer of r.io/a:v1 is 65537 bytes, over the 65536-byte limit");
        assert_eq!(error.reason(), "RegistryAnswerTooLarge");
    }
}
