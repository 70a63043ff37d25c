//! The operator as a process (`zundoko-operator run`, against the local API server) and the
//! registries its modules come from, when they hurt (docs/threat-model.md, "A registry"):
//! - rule sets naming a hostile registry (common/hostile.rs: an endless manifest, an endless
//!   404 body, an endless token answer, a tarpit, a redirect to an internal plain-http origin):
//!   the operator stays alive, its peak RSS (VmHWM) stays within 64 MiB of its idle peak and
//!   under 200 MiB, its default rules sing meanwhile, each rule set shows a named reason, the
//!   internal origin is never contacted and no body text reaches a status, an Event or the log;
//! - the registry of `--module-oci` down with the cache empty: the process stays up, not
//!   ready, tries again with backoff saying why, and serves once the registry comes up (no
//!   crash loop, kubewarden/policy-server#374).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::hostile::{Answer, MANIFEST, SECRET, Server, endless, fixed};
use common::rules::{create_rules, rules_api, rules_events};
use common::running::eventually;
use kube::api::ListParams;
use zundoko_operator::crd::{ModuleSource, ZundokoRulesSpec};

/// The growth of peak RSS over the idle operator's allowed while hostile registries are pulled.
const MAX_GROWTH_KIB: u64 = 64 << 10;
/// The bound on the whole operator's peak RSS meanwhile.
const MAX_PEAK_KIB: u64 = 200 << 10;

/// An operator process, killed when the test ends.
struct Operator {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Operator {
    /// `zundoko-operator run` against `cluster` with `env` (ZUNDOKO_*), its log in `dir`. Its
    /// data segment is capped at 2 GiB: an unbounded read aborts there instead of taking the
    /// machine.
    fn spawn(cluster: &Cluster, dir: &Path, env: &[(&str, String)]) -> Operator {
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, cluster.server.kubeconfig_yaml()).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let log = dir.join("operator.log");
        let mut command = Command::new(env!("CARGO_BIN_EXE_zundoko-operator"));
        command
            .arg("run")
            .env_clear()
            .env("KUBECONFIG", &kubeconfig)
            .env("ZUNDOKO_HTTP_ADDR", format!("127.0.0.1:{port}"))
            .env("ZUNDOKO_API_TIMEOUT_SECS", "5")
            .env("ZUNDOKO_BACKOFF_BASE_MS", "50")
            .env("ZUNDOKO_LOG_FORMAT", "text")
            .env("RUST_LOG", std::env::var("ZUNDOKO_TEST_LOG").unwrap_or_else(|_| "info".into()))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        common::limit_data(&mut command, 2 << 30);

        Operator { child: command.spawn().unwrap(), port, log }
    }

    /// The status and body of GET `path` on its HTTP port.
    fn get(&self, path: &str) -> Option<(u16, String)> {
        common::http_get(self.port, path)
    }


    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Panics with the log if the process has ended.
    fn assert_alive(&mut self, when: &str) {
        if let Some(status) = self.child.try_wait().unwrap() {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(20).collect::<Vec<_>>().into_iter().rev().collect();
            panic!("the operator ended {when} ({status}); the end of its log:\n{}", tail.join("\n"));
        }
    }

    /// VmHWM: the process's peak resident set so far, in KiB.
    fn peak_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status.lines().find_map(|l| l.strip_prefix("VmHWM:")?.trim().strip_suffix("kB")?.trim().parse().ok()).expect("VmHWM in /proc/PID/status")
    }

    async fn wait_ready(&mut self, timeout: Duration) {
        let started = Instant::now();
        loop {
            self.assert_alive("before it was ready");
            if let Some((200, _)) = self.get("/readyz") {
                return;
            }
            assert!(started.elapsed() < timeout, "not ready after {timeout:?}: {:?}; its log:\n{}", self.get("/readyz"), self.log());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn scratch(what: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn oci(reference: String) -> ZundokoRulesSpec {
    ZundokoRulesSpec { source: ModuleSource::oci(&reference), sha256: None, candidate: None }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_sets_naming_hostile_registries_cost_a_bounded_peak_and_the_default_rules_sing() {
    let internal = Server::start(|_, _| fixed(500, &[("Content-Type", "text/plain")], format!("{SECRET} the internal service").as_bytes()));
    let realm = Server::start(|_, _| endless(200, &[("Content-Type", "application/json")]));
    let (location, challenge) = (format!("http://{}/internal", internal.addr), format!("Bearer realm=\"http://{}/token\",service=\"hostile\"", realm.addr));
    let registry = Server::start(move |_, path| match path.split('/').nth(2).unwrap_or("") {
        "" => fixed(200, &[], b"{}"),
        "endless" => endless(200, &[("Content-Type", MANIFEST)]),
        "notfound" => endless(404, &[("Content-Type", "text/plain")]),
        "private" => fixed(401, &[("WWW-Authenticate", challenge.as_str())], b"{}"),
        "tarpit" => Answer::Tarpit,
        _ => fixed(302, &[("Location", location.as_str())], b""),
    });
    // Each rule set, the repository it names and the reason it must show.
    let cases = [
        ("endless-manifest", "endless", "RegistryAnswerTooLarge"),
        ("endless-error", "notfound", "ModuleNotFound"),
        ("endless-token", "private", "RegistryAnswerTooLarge"),
        ("tarpit", "tarpit", "RegistryUnreachable"),
        ("redirect", "redirect", "RedirectRefused"),
    ];

    let cluster = Cluster::start().await;
    let dir = scratch("hostile-operator");
    let module = common::module_path("zundoko-classic").display().to_string();
    let insecure = format!("{},{}", registry.addr, realm.addr);
    let env = [("ZUNDOKO_MODULE", module), ("ZUNDOKO_INSECURE_REGISTRIES", insecure), ("ZUNDOKO_REGISTRY_TIMEOUT_SECS", "2".into())];
    let mut operator = Operator::spawn(&cluster, &dir, &env);
    operator.wait_ready(Duration::from_secs(60)).await;
    // Idle: started, its module compiled, one song sung.
    cluster.create_hikawa("default", "before", 100, &[]).await;
    cluster.wait_kiyoshied("default", &["before".into()], Duration::from_secs(60)).await;
    let idle = operator.peak_kib();

    for (name, repository, _) in cases {
        create_rules(&cluster, name, oci(format!("{}/{repository}/rules:v1", registry.addr))).await;
    }
    // The default rules sing while the rule sets pull (each pull retried every 5 s).
    cluster.create_hikawa("default", "meanwhile", 100, &[]).await;
    let started = Instant::now();
    loop {
        operator.assert_alive("while rule sets pulled from hostile registries");
        let mut shown = Vec::new();
        for (name, _, _) in cases {
            shown.push(rules_api(&cluster).get(name).await.unwrap().status.and_then(|s| s.reason));
        }
        if cases.iter().zip(&shown).all(|((_, _, reason), shown)| shown.as_deref() == Some(*reason)) {
            break;
        }
        let expected = cases.map(|(name, _, reason)| (name, reason));
        let peak = operator.peak_kib();
        assert!(started.elapsed() < Duration::from_secs(60), "after 60 s the rule sets {expected:?} show {shown:?} (peak RSS {} MiB)", peak >> 10);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    cluster.wait_kiyoshied("default", &["meanwhile".into()], Duration::from_secs(60)).await;
    // Every hostile answer given; the tarpit's rule set (Pending: a registry that does not
    // answer may come back) tried again and again, the others Rejected until their spec changes.
    let asked = |repository: &str| registry.hits().iter().filter(|h| h.starts_with(&format!("GET /v2/{repository}/"))).count();
    let all_asked = async || cases.iter().all(|(_, r, _)| asked(r) >= 1) && asked("tarpit") >= 3;
    eventually("every hostile repository asked, the tarpit three times", Duration::from_secs(60), all_asked).await;
    operator.assert_alive("while rule sets pulled from hostile registries");
    let peak = operator.peak_kib();
    println!("operator peak RSS: idle {} MiB, with hostile registries {} MiB (hits: {:?})", idle >> 10, peak >> 10, cases.map(|(_, r, _)| (r, asked(r))));
    assert!(peak <= idle + MAX_GROWTH_KIB, "peak RSS {peak} KiB, over the idle {idle} KiB by more than {MAX_GROWTH_KIB} KiB");
    assert!(peak < MAX_PEAK_KIB, "peak RSS {peak} KiB, over {MAX_PEAK_KIB} KiB");
    assert!(realm.hits().iter().any(|h| h.contains("/token")), "the token realm was asked: {:?}", realm.hits());

    // Nothing reached the internal origin; nothing any of them said reached a status, an Event
    // or the log (`kubectl get zr -o yaml`, `kubectl describe zr`).
    assert_eq!(internal.hits(), Vec::<String>::new(), "the internal origin is never contacted");
    let statuses = serde_json::to_string(&rules_api(&cluster).list(&ListParams::default()).await.unwrap().items).unwrap();
    let mut seen = vec![("the statuses".to_string(), statuses), ("the log".to_string(), operator.log())];
    for (name, _, _) in cases {
        seen.push((format!("the Events of {name}"), format!("{:?}", rules_events(&cluster, name).await)));
    }
    for (what, text) in seen {
        assert!(!text.contains("HOSTILE") && !text.contains(SECRET) && !text.contains("the internal service"), "a body's text in {what}: {text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_its_registry_down_and_no_cache_the_operator_waits_unready_and_serves_once_it_is_up() {
    let Some(mut registry) = common::registry::TestRegistry::start(false) else { return };
    registry.stop();
    let cluster = Cluster::start().await;
    let dir = scratch("registry-down");
    let reference = format!("{}/rules/default:v1", registry.addr);
    let env = [
        ("ZUNDOKO_MODULE_OCI", reference),
        ("ZUNDOKO_INSECURE_REGISTRIES", registry.addr.clone()),
        ("ZUNDOKO_CACHE_DIR", dir.join("cache").display().to_string()),
        ("ZUNDOKO_REGISTRY_TIMEOUT_SECS", "2".into()),
    ];
    let mut operator = Operator::spawn(&cluster, &dir, &env);

    // Up, alive, not ready, and saying why, try after try.
    let tries = |log: &str| log.lines().filter(|l| l.contains("no rules module yet") && l.contains("RegistryUnreachable")).count();
    eventually("the operator up and tried the registry three times", Duration::from_secs(60), async || {
        operator.assert_alive("with its registry down");
        tries(&operator.log()) >= 3
    })
    .await;
    operator.assert_alive("with its registry down");
    let (status, why) = operator.get("/readyz").expect("the HTTP port answers");
    assert_eq!(status, 503, "not ready without a module: {why}");
    assert!(why.contains("no rules module"), "{why}");
    assert_eq!(operator.get("/healthz").map(|(s, _)| s), Some(200), "alive: no liveness restart either");
    // Backoff: the pauses named grow.
    let pauses: Vec<u64> = operator.log().lines().filter_map(|l| l.split("retry_in_secs=").nth(1)?.split_whitespace().next()?.parse().ok()).collect();
    assert!(pauses.windows(2).all(|w| w[1] >= w[0]) && pauses.last() > pauses.first(), "the pauses between tries grow: {pauses:?}");

    // The registry comes up with the module: ready, and it sings.
    registry.resume();
    let module = common::module_bytes("zundoko-classic");
    registry.push("rules/default:v1", &module, None).await;
    operator.wait_ready(Duration::from_secs(90)).await;
    cluster.create_hikawa("default", "song", 100, &[]).await;
    cluster.wait_kiyoshied("default", &["song".into()], Duration::from_secs(60)).await;
    assert_eq!(common::rules::decided_by(&cluster, "song").await, Some(zundoko_operator::supply::sources::digest(&module)));
    operator.assert_alive("after the registry came up");
    let _ = std::fs::remove_dir_all(&dir);
}
