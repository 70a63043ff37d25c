//! A registry is hostile (docs/threat-model.md, "A registry"): whoever may create a
//! ZundokoRules chooses it. A small HTTP server of the test's own plays it on 127.0.0.1 (no
//! mock of the client): an endless manifest, an endless 404 body, an endless token answer, a
//! tarpit sending a byte every 2 s, a redirect to a plain-http origin, a signature manifest
//! whose layer names `urls`. Each is pulled by `zundoko-operator check` in a child process,
//! whose peak RSS (`ru_maxrss` from `wait4`, the child's VmHWM) is compared with the same
//! command against a registry answering a plain 404 (the control): for each case the pull
//! fails with a named reason within its deadline, the peak stays within 64 MiB of the
//! control's, nothing reaches the origin it must not reach, and no body text is printed.
//! Plus `--allowed-registries` refusing a reference before anything is asked, two tarpitted
//! pulls with one pull permit each ending at their own deadline, a redirect to https followed
//! (to a TLS registry), and a plain-http token realm getting credentials only when named. The
//! server is common/hostile.rs.

mod common;

use std::io::Read as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::hostile::{Answer, MANIFEST, SECRET, Server, endless, fixed, sha256};

/// The growth of peak RSS over the control allowed to a hostile case.
const MAX_GROWTH_KIB: u64 = 64 << 10;
/// `--registry-timeout-secs` in these tests.
const TIMEOUT_SECS: u64 = 2;

/// What a child `zundoko-operator` did.
struct Run {
    success: bool,
    output: String,
    elapsed: Duration,
    peak_kib: u64,
}

/// `zundoko-operator ARGS` in a child process, its peak RSS read from `wait4`. Its data
/// segment is capped at 2 GiB (an unbounded read aborts there instead of taking the machine),
/// and it is killed after 90 s.
fn run(args: &[&str]) -> Run {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_zundoko-operator"));
    command.args(args).env("RUST_LOG", "warn").env_remove("RUST_BACKTRACE").stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    common::limit_data(&mut command, 2 << 30);

    let started = Instant::now();
    // Reaped by wait4 below (std's wait gives no rusage).
    #[allow(clippy::zombie_processes)]
    let mut child = command.spawn().unwrap();
    let pid = child.id() as libc::pid_t;
    let (mut stdout, mut stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stdout.read_to_end(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stderr.read_to_end(&mut s);
        s
    });
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = done.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(90));
        if !watchdog.load(Ordering::SeqCst) {
            // SAFETY: a plain kill of the child this test started (not reaped yet).
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
    let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
    // SAFETY: wait4 on our own child, with valid pointers.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    done.store(true, Ordering::SeqCst);
    let elapsed = started.elapsed();
    assert_eq!(reaped, pid);
    let output = format!(
        "{}{}",
        String::from_utf8_lossy(&out.join().unwrap()),
        String::from_utf8_lossy(&err.join().unwrap())
    );
    let success = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    Run { success, output, elapsed, peak_kib: usage.ru_maxrss as u64 }
}

/// `check` of `reference` at `server` (named by --insecure-registry), with `extra` flags.
fn check(server: &Server, repository: &str, extra: &[&str]) -> Run {
    let reference = format!("{}/{repository}:v1", server.addr);
    let timeout = TIMEOUT_SECS.to_string();
    let mut args = vec!["check", reference.as_str(), "--insecure-registry", server.addr.as_str(), "--registry-timeout-secs", timeout.as_str()];
    args.extend_from_slice(extra);
    run(&args)
}

/// The peak RSS of `check` against a registry that answers a plain 404.
fn control_peak_kib() -> u64 {
    let server = Server::start(|_, path| {
        if path == "/v2/" {
            return fixed(200, &[], b"{}");
        }
        fixed(404, &[("Content-Type", "application/json")], br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"unknown"}]}"#)
    });
    let run = check(&server, "control/rules", &[]);
    assert!(!run.success && run.output.contains("ModuleNotFound"), "the control fails as not found: {}", run.output);
    run.peak_kib
}

/// The claims every hostile case makes: refused naming `reason`, within `within`, its peak
/// RSS within 64 MiB of the control's, no body text printed.
fn assert_contained(case: &str, run: &Run, reason: &str, within: Duration) {
    let control = control_peak_kib();
    eprintln!(
        "{case}: failed in {:.2} s, peak RSS {} MiB (control {} MiB): {}",
        run.elapsed.as_secs_f64(),
        run.peak_kib >> 10,
        control >> 10,
        run.output.trim()
    );
    assert!(!run.success, "{case}: the check fails");
    assert!(run.output.contains(&format!("({reason})")), "{case}: refused as {reason}: {}", run.output);
    assert!(run.elapsed < within, "{case}: failed in {:?}, over {within:?}", run.elapsed);
    assert!(
        run.peak_kib <= control + MAX_GROWTH_KIB,
        "{case}: peak RSS {} KiB, over the control's {control} KiB by more than {MAX_GROWTH_KIB} KiB",
        run.peak_kib
    );
    assert!(!run.output.contains("HOSTILE") && !run.output.contains(SECRET), "{case}: no body text printed: {}", run.output);
}

/// One try: the deadline, the process's start and the check's own work.
fn one_try() -> Duration {
    Duration::from_secs(TIMEOUT_SECS + 3)
}

/// Three tries (`check` tries a failure that may pass three times, pausing 0.2 s then 0.4 s).
fn three_tries() -> Duration {
    Duration::from_secs(3 * TIMEOUT_SECS + 4)
}

#[test]
fn an_endless_manifest_is_refused_at_its_cap() {
    let server = Server::start(|_, path| match path {
        "/v2/" => fixed(200, &[], b"{}"),
        _ => endless(200, &[("Content-Type", MANIFEST)]),
    });
    let run = check(&server, "endless/rules", &[]);
    assert_contained("endless manifest", &run, "RegistryAnswerTooLarge", one_try());
}

#[test]
fn an_endless_404_body_is_cut_after_a_few_kib() {
    let server = Server::start(|_, path| match path {
        "/v2/" => fixed(200, &[], b"{}"),
        _ => endless(404, &[("Content-Type", "text/plain")]),
    });
    let run = check(&server, "endless/notfound", &[]);
    assert_contained("endless 404 body", &run, "ModuleNotFound", one_try());
}

#[test]
fn an_endless_token_answer_is_refused_at_its_cap() {
    // The token realm: another origin, named by --insecure-registry (so it is spoken to).
    let realm = Server::start(|_, _| endless(200, &[("Content-Type", "application/json")]));
    let challenge = format!("Bearer realm=\"http://{}/token\",service=\"hostile\"", realm.addr);
    let server = Server::start(move |_, _| fixed(401, &[("WWW-Authenticate", challenge.as_str())], b"{}"));
    let run = check(&server, "endless/token", &["--insecure-registry", &realm.addr]);
    assert_contained("endless token answer", &run, "RegistryAnswerTooLarge", one_try());
    assert!(realm.hits().iter().any(|h| h.contains("/token")), "the token realm was asked: {:?}", realm.hits());
}

#[test]
fn a_tarpit_is_cut_at_the_deadline_of_each_try() {
    let server = Server::start(|_, path| match path {
        "/v2/" => fixed(200, &[], b"{}"),
        _ => Answer::Tarpit,
    });
    let run = check(&server, "tarpit/rules", &[]);
    assert_contained("tarpit", &run, "RegistryUnreachable", three_tries());
    assert!(run.elapsed >= Duration::from_secs(3 * TIMEOUT_SECS), "three tries, each to its deadline: {:?}", run.elapsed);
}

#[test]
fn a_redirect_to_a_plain_http_origin_is_not_followed() {
    let internal = Server::start(|_, _| fixed(500, &[("Content-Type", "text/plain")], format!("{SECRET} the internal service").as_bytes()));
    let location = format!("http://{}/internal", internal.addr);
    let server = Server::start(move |_, path| match path {
        "/v2/" => fixed(200, &[], b"{}"),
        _ => fixed(302, &[("Location", location.as_str())], b""),
    });
    let run = check(&server, "redirect/rules", &[]);
    assert_contained("redirect to plain http", &run, "RedirectRefused", one_try());
    assert_eq!(internal.hits(), Vec::<String>::new(), "the internal origin is never contacted");
}

/// The control of the test above: a redirect to https is followed (a registry handing blobs to
/// its CDN does that). The hostile registry sends every manifest and blob request to a TLS
/// registry (docker-registry, its certificate from a CA of its own), and the module checks.
#[test]
fn a_redirect_to_an_https_origin_is_followed() {
    let Some(tls) = common::registry::TestRegistry::start_tls() else { return };
    let module = common::module_bytes("zundoko-classic");
    tokio::runtime::Runtime::new().unwrap().block_on(tls.push("moved/rules:v1", &module, None));
    let target = tls.addr.clone();
    let server = Server::start(move |_, path| match path {
        "/v2/" => fixed(200, &[], b"{}"),
        _ => {
            let location = format!("https://{target}{}", path.replacen("/v2/redirect/", "/v2/moved/", 1));
            fixed(307, &[("Location", location.as_str())], b"")
        }
    });
    let ca = tls.dir().join("ca.pem");
    let run = check(&server, "redirect/rules", &["--registry-ca", ca.to_str().unwrap()]);
    assert!(run.success, "the module behind the redirects checks: {}", run.output);
    assert!(run.output.contains(&sha256(&module)), "the module's digest is printed: {}", run.output);
    let hits = server.hits();
    for what in ["/manifests/v1", "/blobs/sha256:"] {
        assert!(hits.iter().any(|h| h.starts_with("GET /v2/redirect/rules") && h.contains(what)), "{what} was asked of the redirecting registry first: {hits:?}");
    }
}

/// A bearer challenge's realm on plain http gets the registry's credentials only if
/// --insecure-registry names its origin; either way the token it gives is used.
#[test]
fn a_plain_http_token_realm_gets_credentials_only_when_named() {
    const TOKEN: &str = "t0ken-from-the-realm";
    let realm = Server::start(|_, _| fixed(200, &[("Content-Type", "application/json")], format!(r#"{{"token":"{TOKEN}"}}"#).as_bytes()));
    let challenge = format!("Bearer realm=\"http://{}/token\",service=\"hostile\"", realm.addr);
    let server = Server::start_seeing(move |_, _, authorization| match authorization {
        Some(a) if a == format!("Bearer {TOKEN}") => fixed(404, &[("Content-Type", "application/json")], br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"unknown"}]}"#),
        _ => fixed(401, &[("WWW-Authenticate", challenge.as_str())], b"{}"),
    });
    let dir = std::env::temp_dir().join(format!("zundoko-realm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let auth = dir.join("config.json");
    let encoded = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "zundoko:s3cret-pass");
    std::fs::write(&auth, format!(r#"{{"auths":{{"{}":{{"auth":"{encoded}"}}}}}}"#, server.addr)).unwrap();
    let auth = auth.to_str().unwrap();

    let tokens = |realm: &Server| realm.hits().into_iter().filter(|h| h.starts_with("GET /token")).collect::<Vec<_>>();
    let run = check(&server, "private/rules", &["--registry-auth", auth]);
    assert!(!run.success && run.output.contains("(ModuleNotFound)"), "the token was used, the manifest not found: {}", run.output);
    let asked = tokens(&realm);
    assert!(!asked.is_empty() && asked.iter().all(|h| !h.ends_with("+authorization")), "an unnamed plain-http realm gets no credentials: {asked:?}");
    assert!(server.hits().iter().any(|h| h.ends_with("+authorization")), "the registry got the token: {:?}", server.hits());

    let run = check(&server, "private/rules", &["--registry-auth", auth, "--insecure-registry", &realm.addr]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!run.success && run.output.contains("(ModuleNotFound)"), "{}", run.output);
    let named = tokens(&realm).split_off(asked.len());
    assert!(!named.is_empty() && named.iter().all(|h| h.ends_with("+authorization")), "a realm --insecure-registry names gets them: {named:?}");
}

#[test]
fn a_signature_layer_s_urls_are_never_fetched() {
    let elsewhere = Server::start(|_, _| fixed(200, &[], b"{\"critical\":{}}"));
    let dir = std::env::temp_dir().join(format!("zundoko-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("urls");
    let _ = std::fs::remove_file(key.with_extension("key"));
    let _ = std::fs::remove_file(key.with_extension("pub"));
    assert!(run(&["keygen", "--out", key.to_str().unwrap()]).success);

    let layer = b"\0asm not really a module".to_vec();
    let config = br#"{"architecture":"wasm","os":"wasip2"}"#.to_vec();
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2, "mediaType": MANIFEST,
        "config": {"mediaType": "application/vnd.wasm.config.v0+json", "digest": sha256(&config), "size": config.len()},
        "layers": [{"mediaType": "application/wasm", "digest": sha256(&layer), "size": layer.len()}]
    }))
    .unwrap();
    let payload = b"{\"critical\":{}}".to_vec();
    let signature_manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2, "mediaType": MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha256(b"{}"), "size": 2},
        "layers": [{
            "mediaType": "application/vnd.dev.cosign.simplesigning.v1+json", "digest": sha256(&payload), "size": payload.len(),
            "urls": [format!("http://{}/payload", elsewhere.addr), format!("https://{}/payload", elsewhere.addr)],
            "annotations": {"dev.cosignproject.cosign/signature": "MEUCIQDhostile"}
        }]
    }))
    .unwrap();
    let digest = sha256(&manifest);
    let signature_tag = format!("/v2/signed/rules/manifests/{}.sig", digest.replace(':', "-"));
    let (layer_path, manifest_path) = (format!("/v2/signed/rules/blobs/{}", sha256(&layer)), format!("/v2/signed/rules/manifests/{digest}"));
    let server = Server::start(move |_, path| {
        let oci = [("Content-Type", MANIFEST), ("Docker-Content-Digest", digest.as_str())];
        match path {
            "/v2/" => fixed(200, &[], b"{}"),
            "/v2/signed/rules/manifests/v1" => fixed(200, &oci, &manifest),
            p if p == manifest_path => fixed(200, &oci, &manifest),
            p if p == layer_path => fixed(200, &[("Content-Type", "application/octet-stream")], &layer),
            p if p == signature_tag => fixed(200, &[("Content-Type", MANIFEST)], &signature_manifest),
            // The payload is not in the registry: only `urls` name it.
            _ => fixed(404, &[("Content-Type", "application/json")], br#"{"errors":[{"code":"BLOB_UNKNOWN","message":"unknown"}]}"#),
        }
    });
    let public = key.with_extension("pub");
    let run = check(&server, "signed/rules", &["--trusted-keys", public.to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_contained("signature layer with urls", &run, "SignatureNotVerified", one_try());
    assert_eq!(elsewhere.hits(), Vec::<String>::new(), "a descriptor's urls are never fetched");
    assert!(server.hits().iter().any(|h| h.contains(".sig")), "the signature manifest was read: {:?}", server.hits());
}

#[test]
fn allowed_registries_refuse_any_other_before_asking_it() {
    let server = Server::start(|_, _| fixed(404, &[], b""));
    let run = check(&server, "elsewhere/rules", &["--allowed-registries", "registry.example.com,*.internal.example:5000"]);
    assert!(!run.success && run.output.contains("(RegistryNotAllowed)"), "{}", run.output);
    assert_eq!(server.hits(), Vec::<String>::new(), "nothing is asked of a registry not allowed");
    // The same registry allowed by a pattern is asked.
    let run = check(&server, "elsewhere/rules", &["--allowed-registries", "127.0.0.*:*"]);
    assert!(!run.success && run.output.contains("(ModuleNotFound)"), "{}", run.output);
    assert!(!server.hits().is_empty());
}

/// Two tarpitted pulls with one pull permit: the second waits for the permit inside its own
/// deadline, so neither takes longer than one deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_permit_is_taken_inside_the_deadline() {
    use zundoko_operator::supply::oci::{ModuleRef, Registry, RegistrySettings};
    let server = Server::start(|_, path| match path {
        "/v2/" => fixed(200, &[], b"{}"),
        _ => Answer::Tarpit,
    });
    let settings = RegistrySettings { insecure: vec![server.addr.clone()], timeout: Duration::from_secs(TIMEOUT_SECS), concurrent_pulls: 1, ..RegistrySettings::default() };
    let registry = Registry::new(settings).unwrap();
    let digest = sha256(b"anything");
    let auth = oci_client::secrets::RegistryAuth::Anonymous;
    let pull = |name: &'static str| {
        let (registry, digest, auth) = (registry.clone(), digest.clone(), auth.clone());
        let reference: ModuleRef = format!("{}/tarpit/{name}@{digest}", server.addr).parse().unwrap();
        async move {
            let started = Instant::now();
            let error = registry.fetch_once(&reference, &digest, &auth, &[], false).await.expect_err("a tarpit gives no module");
            (started.elapsed(), error.reason())
        }
    };
    let (a, b) = tokio::join!(pull("a"), pull("b"));
    for (elapsed, reason) in [a, b] {
        assert_eq!(reason, "RegistryUnreachable");
        assert!(elapsed < Duration::from_millis(TIMEOUT_SECS * 1000 + 700), "each pull ends at its own deadline: {elapsed:?}");
    }
}
