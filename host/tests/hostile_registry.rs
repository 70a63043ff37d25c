//! A registry is hostile (docs/threat-model.md, "A registry"): whoever may create a
//! ZundokoRules chooses it. A small HTTP server of the test's own plays it on 127.0.0.1 (no
//! mock of the client): an endless manifest, an endless 404 body, an endless token answer, a
//! tarpit sending a byte every 2 s, a redirect to a plain-http origin, a signature manifest
//! whose layer names `urls`. Each is pulled by `zundoko-operator check` in a child process,
//! whose peak RSS (`ru_maxrss` from `wait4`, the child's VmHWM) is compared with the same
//! command against a registry answering a plain 404 (the control): for each case the pull
//! fails with a named reason within its deadline, the peak stays within 64 MiB of the
//! control's, nothing reaches the origin it must not reach, and no body text is printed.
//! For each capped body, the bytes the server wrote on its connection stay within a receive
//! window of the cap, and the refusal names the limit. Plus `--allowed-registries` refusing a
//! reference, and a redirect target, before anything is asked of it, two tarpitted pulls with
//! one pull permit each ending at their own deadline, a redirect to https followed (to a TLS
//! registry), a token realm contacted only when every rule allows it (none of the refused is
//! connected to), and a redirect target's 401 not answered with the registry's credentials.
//! The server is common/hostile.rs.

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

/// What the hostile server wrote on the connection of `request` (the largest, if several) is
/// within `window` of `cap`: the body was read to its cap and no further. A client takes in
/// more than it reads, up to its receive window, which Linux grows as the client reads fast
/// (measured with the caps as they are: up to 1.1 MiB past 256 KiB, 120 KiB past 64 KiB,
/// 110 KiB past 4 KiB, the server's send buffer at 4 KiB). Each `window` is under 99 times its
/// cap: a cap raised 100x fails here; the readers' own bound, one chunk past the cap, is
/// wire.rs's unit tests'.
fn assert_read_near(server: &Server, request: &str, cap: u64, window: u64) {
    let written = server.most_written(request);
    eprintln!("{request}: {written} bytes of body written (cap {cap})");
    assert!(written > cap, "{request}: the body was read to its cap ({written} bytes written)");
    assert!(written <= cap + window, "{request}: {written} bytes written, over its cap {cap} by more than a receive window ({window})");
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
    assert_read_near(&server, "GET /v2/endless/rules/manifests/", 256 << 10, 4 << 20);
    assert!(run.output.contains("over the 262144-byte limit"), "the refusal names the 256 KiB cap: {}", run.output);
}

#[test]
fn an_endless_404_body_is_cut_after_a_few_kib() {
    let server = Server::start(|_, path| match path {
        "/v2/" => fixed(200, &[], b"{}"),
        _ => endless(404, &[("Content-Type", "text/plain")]),
    });
    let run = check(&server, "endless/notfound", &[]);
    assert_contained("endless 404 body", &run, "ModuleNotFound", one_try());
    assert_read_near(&server, "GET /v2/endless/notfound/manifests/", 4 << 10, 368 << 10);
}

#[test]
fn an_endless_token_answer_is_refused_at_its_cap() {
    // The token realm: another origin on the registry's host, named by --insecure-registry (so
    // it is spoken to).
    let realm = Server::start(|_, _| endless(200, &[("Content-Type", "application/json")]));
    let challenge = format!("Bearer realm=\"http://{}/token\",service=\"hostile\"", realm.addr);
    let server = Server::start(move |_, _| fixed(401, &[("WWW-Authenticate", challenge.as_str())], b"{}"));
    let run = check(&server, "endless/token", &["--insecure-registry", &realm.addr]);
    assert_contained("endless token answer", &run, "RegistryAnswerTooLarge", one_try());
    assert_read_near(&realm, "GET /token", 64 << 10, 2 << 20);
    assert!(run.output.contains("over the 65536-byte limit"), "the refusal names the 64 KiB cap: {}", run.output);
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

/// A docker config.json giving `registry` the credentials `zundoko:s3cret-pass`, in `dir`.
fn credentials_for(registry: &str, dir: &std::path::Path) -> String {
    std::fs::create_dir_all(dir).unwrap();
    let auth = dir.join("config.json");
    let encoded = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "zundoko:s3cret-pass");
    std::fs::write(&auth, format!(r#"{{"auths":{{"{registry}":{{"auth":"{encoded}"}}}}}}"#)).unwrap();
    auth.to_str().unwrap().to_string()
}

/// A token realm is an origin the registry chose, held to the rules of a registry before it is
/// contacted: plain http only to an origin --insecure-registry names; on another host than the
/// registry's (`localhost` for `127.0.0.1`, resolving to loopback) only if
/// --trusted-token-realm names it, and within --allowed-registries. Each refusal names the
/// realm, and its listener sees no connection; each control is the same realm allowed, asked
/// with the registry's credentials, its token used.
#[test]
fn a_token_realm_is_contacted_only_when_every_rule_allows_it() {
    const TOKEN: &str = "t0ken-from-the-realm";
    let realm = Server::start(|_, _| fixed(200, &[("Content-Type", "application/json")], format!(r#"{{"token":"{TOKEN}"}}"#).as_bytes()));
    let realm_named = realm.localhost();
    // The registry asks for a token from the realm its repository's name says.
    let (by_address, by_name) = (format!("http://{}/token", realm.addr), format!("http://{realm_named}/token"));
    let server = Server::start_seeing(move |_, path, authorization| match authorization {
        Some(a) if a == format!("Bearer {TOKEN}") => fixed(404, &[("Content-Type", "application/json")], br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"unknown"}]}"#),
        _ => {
            let realm = if path.contains("/named/") { &by_name } else { &by_address };
            fixed(401, &[("WWW-Authenticate", &format!("Bearer realm=\"{realm}\",service=\"hostile\""))], b"{}")
        }
    });
    let dir = std::env::temp_dir().join(format!("zundoko-realm-{}", std::process::id()));
    let auth = credentials_for(&server.addr, &dir);
    let tokens = |realm: &Server| realm.hits().into_iter().filter(|h| h.starts_with("GET /token")).collect::<Vec<_>>();
    let refused = |case: &str, run: &Run, realm_url: &str, why: &str| {
        assert!(!run.success && run.output.contains("(TokenRealmRefused)"), "{case}: refused as TokenRealmRefused: {}", run.output);
        assert!(run.output.contains(&format!("the token realm {realm_url} refused")) && run.output.contains(why), "{case}: names the realm and why ({why}): {}", run.output);
        assert_eq!(realm.connections(), 0, "{case}: the realm is never contacted");
    };

    // Plain http to an origin --insecure-registry does not name.
    let run = check(&server, "private/rules", &["--registry-auth", &auth]);
    refused("plain http, not named", &run, &format!("http://{}", realm.addr), "--insecure-registry does not name");
    // Another host than the registry's, at a loopback address, not trusted (named insecure).
    let run = check(&server, "named/rules", &["--registry-auth", &auth, "--insecure-registry", &realm_named]);
    refused("another host, internal", &run, &format!("http://{realm_named}"), "--trusted-token-realm does not name");
    // Trusted, but not within --allowed-registries (the registry's own host is).
    let trusted = ["--registry-auth", &auth, "--insecure-registry", &realm_named, "--trusted-token-realm", &realm_named];
    let run = check(&server, "named/rules", &[&trusted[..], &["--allowed-registries", "127.0.0.1:*"]].concat());
    refused("another host, not allowed", &run, &format!("http://{realm_named}"), "--allowed-registries does not allow it");

    // The controls: named, on the registry's own host; trusted and allowed, on another host.
    let run = check(&server, "private/rules", &["--registry-auth", &auth, "--insecure-registry", &realm.addr]);
    assert!(!run.success && run.output.contains("(ModuleNotFound)"), "the token was used, the manifest not found: {}", run.output);
    let asked = tokens(&realm);
    assert!(!asked.is_empty() && asked.iter().all(|h| h.ends_with("+authorization")), "a realm on the registry's host gets the credentials: {asked:?}");
    let run = check(&server, "named/rules", &[&trusted[..], &["--allowed-registries", "127.0.0.1:*,localhost:*"]].concat());
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!run.success && run.output.contains("(ModuleNotFound)"), "{}", run.output);
    let trusted_asked = tokens(&realm).split_off(asked.len());
    assert!(!trusted_asked.is_empty() && trusted_asked.iter().all(|h| h.ends_with("+authorization")), "a trusted realm gets them: {trusted_asked:?}");
    assert!(server.hits().iter().any(|h| h.ends_with("+authorization")), "the registry got the token: {:?}", server.hits());
}

/// A token request follows no redirect: a realm answering 307 is refused, and where it points
/// is never contacted.
#[test]
fn a_token_realm_s_redirect_is_not_followed() {
    let elsewhere = Server::start(|_, _| fixed(200, &[("Content-Type", "application/json")], br#"{"token":"from-elsewhere"}"#));
    let location = format!("http://{}/token", elsewhere.addr);
    let realm = Server::start(move |_, _| fixed(307, &[("Location", location.as_str())], b""));
    let challenge = format!("Bearer realm=\"http://{}/token\",service=\"hostile\"", realm.addr);
    let server = Server::start(move |_, _| fixed(401, &[("WWW-Authenticate", challenge.as_str())], b"{}"));
    let run = check(&server, "realm/rules", &["--insecure-registry", &realm.addr, "--insecure-registry", &elsewhere.addr]);
    assert_contained("a token realm's redirect", &run, "RegistryUnauthorized", one_try());
    assert!(run.output.contains(&format!("the token realm http://{} answered HTTP 307: its redirect is not followed", realm.addr)), "{}", run.output);
    assert!(realm.connections() > 0, "the realm was asked");
    assert_eq!(elsewhere.connections(), 0, "where the realm points is never contacted");
}

/// A redirect target on another origin is told apart from the registry (the CVE-2020-15157
/// class): its 401 is not answered with the registry's credentials (the realm it names, on the
/// registry's own host, is never contacted), nothing it says is printed, and it is sent neither
/// the registry's `Authorization` (once the registry had it) nor a `Referer`.
#[test]
fn a_redirect_target_s_challenge_is_not_answered() {
    let realm = Server::start(|_, _| fixed(200, &[("Content-Type", "application/json")], br#"{"token":"stolen"}"#));
    let challenge = format!("Bearer realm=\"http://{}/token\",service=\"hostile\"", realm.addr);
    let target = Server::start(move |_, _| fixed(401, &[("WWW-Authenticate", challenge.as_str()), ("Content-Type", "application/json")], format!(r#"{{"errors":[{{"code":"UNAUTHORIZED","message":"{SECRET}"}}]}}"#).as_bytes()));
    let moved = target.addr.clone();
    let server = Server::start_seeing(move |_, path, authorization| match (path, authorization) {
        ("/v2/", _) => fixed(200, &[], b"{}"),
        // `private/`: the registry's credentials are asked for first, then the request is sent on.
        (p, None) if p.starts_with("/v2/private/") => fixed(401, &[("WWW-Authenticate", "Basic realm=\"hostile\"")], b"{}"),
        _ => fixed(307, &[("Location", &format!("http://{moved}{path}"))], b""),
    });
    let dir = std::env::temp_dir().join(format!("zundoko-redirect-realm-{}", std::process::id()));
    let auth = credentials_for(&server.addr, &dir);
    let flags = ["--registry-auth", &auth, "--insecure-registry", &target.addr, "--insecure-registry", &realm.addr];
    let runs = ["moved/rules", "private/rules"].map(|repository| (repository, check(&server, repository, &flags)));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(realm.connections(), 0, "the realm a redirect target names is never contacted");
    for (repository, run) in runs {
        assert_contained(&format!("a redirect target's challenge ({repository})"), &run, "RegistryUnauthorized", one_try());
        assert!(run.output.contains(&format!("HTTP 401 from http://{}, the target of a redirect", target.addr)), "{}", run.output);
    }
    let (asked, sent_on) = (server.hits(), target.hits());
    assert!(asked.iter().any(|h| h.starts_with("GET /v2/private/rules/manifests/v1 +authorization")), "the registry got its credentials: {asked:?}");
    assert!(sent_on.iter().any(|h| h.starts_with("GET /v2/private/")), "the registry's credentials were sent on: {sent_on:?}");
    assert!(sent_on.iter().all(|h| !h.contains("+authorization")), "the target gets no credentials: {sent_on:?}");
    assert!(sent_on.iter().all(|h| !h.contains("+referer")), "the target gets no Referer: {sent_on:?}");
}

/// --allowed-registries bounds redirect targets too: one on a host it does not allow is
/// refused without contact (a target on the registry's own host, or allowed, is followed).
#[test]
fn a_redirect_to_a_host_not_allowed_is_not_followed() {
    let target = Server::start(|_, _| fixed(404, &[("Content-Type", "application/json")], br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"unknown"}]}"#));
    let moved = target.localhost();
    let server = Server::start(move |_, path| match path {
        "/v2/" => fixed(200, &[], b"{}"),
        _ => fixed(302, &[("Location", &format!("http://{moved}{path}"))], b""),
    });
    let insecure = target.localhost();
    let run = check(&server, "redirect/rules", &["--insecure-registry", &insecure, "--allowed-registries", "127.0.0.1:*"]);
    assert_contained("a redirect to a host not allowed", &run, "RedirectRefused", one_try());
    assert!(run.output.contains(&format!("a redirect to http://{insecure} refused: --allowed-registries does not allow its host")), "{}", run.output);
    assert_eq!(target.connections(), 0, "the target is never contacted");
    // The control: the same target allowed is followed (and says the module is not there).
    let run = check(&server, "redirect/rules", &["--insecure-registry", &insecure, "--allowed-registries", "127.0.0.1:*,localhost:*"]);
    assert!(!run.success && run.output.contains("(ModuleNotFound)"), "{}", run.output);
    assert!(target.connections() > 0);
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
