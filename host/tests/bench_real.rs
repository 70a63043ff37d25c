//! `make bench-real`'s whole path (`ZUNDOKO_BENCH_KUBECONFIG`, host/benches/scale/real.rs),
//! against the local API server started as a process of its own that writes its kubeconfig, as
//! a user points the bench at a real server: a short bench (5 Hikawas, `bare` and `wasm`) and
//! its report's lines; its namespaces gone after it; a start refused when a namespace it would
//! create exists, which it leaves alone; a Hikawa outside the run's namespace not sung.
//!
//! The scale bench's own code is compiled into this test, and the test re-runs itself in the
//! bench's roles (the API server, the bench, the bare client), as the bench re-runs itself.

use std::io::BufRead as _;
use std::process::{Child, Command, Output, Stdio};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ListParams, ObjectMeta, PostParams};
use kube::{Api, Client};
use zundoko_operator::crd::{Hikawa, HikawaSpec, Zundoko};

#[allow(dead_code, unused_imports)]
#[path = "../benches/scale/main.rs"]
mod scale;

const TEST: &str = "bench_against_a_server_named_by_its_kubeconfig";
const TEST_WITHOUT_KCM: &str = "a_server_without_kube_controller_manager_keeps_no_object_of_a_run";
/// The bench's role variable (host/benches/common/cluster.rs).
const ROLE: &str = "ZUNDOKO_BENCH_ROLE";
/// The local server stops when its stdin closes.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The arguments that re-run this test alone, its output unprefixed (`--quiet`: no `test NAME
/// ... ` before the first line the role prints).
fn own_args(test: &str) -> Vec<String> {
    [test, "--exact", "--nocapture", "--quiet", "--test-threads=1"].map(String::from).to_vec()
}

/// This test, re-run as the bench against the server `kubeconfig` names.
fn bench(kubeconfig: &std::path::Path, runs: &str, run_id: &str) -> Output {
    bench_as(TEST, kubeconfig, runs, run_id)
}

/// The test `test`, re-run as the bench.
fn bench_as(test: &str, kubeconfig: &std::path::Path, runs: &str, run_id: &str) -> Output {
    bench_as_with(test, kubeconfig, runs, run_id, &[])
}

/// The same, `env` passed on.
fn bench_as_with(test: &str, kubeconfig: &std::path::Path, runs: &str, run_id: &str, env: &[(&str, &str)]) -> Output {
    Command::new(std::env::current_exe().unwrap())
        .args(own_args(test))
        .env_remove("ZUNDOKO_BENCH_NAMESPACE_WAIT_SECS")
        .envs(env.iter().copied())
        .env(ROLE, "bench")
        .env("ZUNDOKO_BENCH_KUBECONFIG", kubeconfig)
        .env("ZUNDOKO_BENCH_SIZES", "5")
        .env("ZUNDOKO_BENCH_RUNS", runs)
        .env("ZUNDOKO_BENCH_RUN_ID", run_id)
        .env("ZUNDOKO_BENCH_LOG", "warn")
        .env_remove("ZUNDOKO_BENCH_LATENCIES")
        .env_remove("ZUNDOKO_BENCH_COST")
        .env_remove("ZUNDOKO_BENCH_PERF")
        .env_remove("ZUNDOKO_BENCH_CONCURRENCY")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

async fn bench_namespaces(client: &Client) -> Vec<String> {
    let list = Api::<Namespace>::all(client.clone()).list(&ListParams::default()).await.unwrap();
    list.items.into_iter().filter_map(|n| n.metadata.name).filter(|n| n.starts_with("zundoko-bench-")).collect()
}

/// The figure in column `i` (whitespace-separated) of the report's line for run `name`.
fn column(report: &str, name: &str, i: usize) -> String {
    let line = report.lines().find(|l| l.split_whitespace().next() == Some(name) && l.contains('|')).unwrap_or_else(|| panic!("no {name} line in:\n{report}"));
    line.split_whitespace().nth(i).unwrap_or_else(|| panic!("no column {i} in {line:?}")).to_string()
}

/// The local API server, as a process of its own (this test re-run in the server's role),
/// writing its kubeconfig to `kubeconfig`; `env` passed on. With its stdout, read past its address.
fn start_server(test: &str, kubeconfig: &std::path::Path, env: &[(&str, &str)]) -> (Server, std::io::BufReader<std::process::ChildStdout>) {
    let mut server = Server(
        Command::new(std::env::current_exe().unwrap())
            .args(own_args(test))
            .env(ROLE, "apiserver")
            .env("ZUNDOKO_BENCH_SERVER_KUBECONFIG", kubeconfig)
            .env_remove("ZUNDOKO_BENCH_COST")
            .env_remove("ZUNDOKO_BENCH_LATENCY_MS")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Its address, once it serves (after libtest's own lines).
    let mut stdout = std::io::BufReader::new(server.0.stdout.take().unwrap());
    let mut line = String::new();
    while !line.starts_with("http") {
        line.clear();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "the API server ended before it served");
    }
    (server, stdout)
}

/// Whether this process is one of the bench's roles (the API server, the bench, its bare
/// client) for `test`, played if so.
fn played_a_role(test: &str) -> bool {
    let _ = scale::OWN_ARGS.set(own_args(test));
    if std::env::var_os(ROLE).is_none() {
        return false;
    }
    scale::main();
    true
}

/// A client of the server `kubeconfig` names, as the bench makes its own.
fn client_of(runtime: &tokio::runtime::Runtime, kubeconfig: &std::path::Path) -> Client {
    runtime.block_on(scale::real::client_from(kubeconfig)).unwrap()
}

#[test]
fn bench_against_a_server_named_by_its_kubeconfig() {
    if played_a_role(TEST) {
        return;
    }
    let kubeconfig = std::env::temp_dir().join(format!("zundoko-bench-real-{}.kubeconfig", std::process::id()));
    let (mut server, mut stdout) = start_server(TEST, &kubeconfig, &[]);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let client = client_of(&runtime, &kubeconfig);

    let output = bench(&kubeconfig, "bare,wasm", "first");
    let report = String::from_utf8_lossy(&output.stdout);
    let errors = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the bench failed:\n{report}\n{errors}");
    // Every run in a namespace of its own, gone when the bench ends.
    assert!(errors.contains("namespace zundoko-bench-bare-1-first deleted"), "{errors}");
    assert!(errors.contains("namespace zundoko-bench-wasm-2-first deleted"), "{errors}");
    // Their objects deleted kind by kind first (a server without kube-controller-manager would
    // keep them in a namespace left Terminating), each delete-collection answered.
    assert!(!errors.contains("deleting the") && !errors.contains("still there"), "{errors}");
    assert_eq!(runtime.block_on(bench_namespaces(&client)), Vec::<String>::new(), "the bench's namespaces are gone");
    // The CRDs were missing: applied, and left.
    assert!(report.contains("CRDs applied (missing; left in place after the bench): hikawas.zundokokiyoshi.kaitoy.github.com"), "{report}");

    // What a remote server does not tell is not printed as a figure.
    for run in ["bare", "wasm"] {
        assert_eq!(column(&report, run, 12), "-", "the server's CPU per word, {run}:\n{report}");
        assert!(column(&report, run, 15).parse::<f64>().unwrap() >= 3.0, "three writes a word at least, {run}:\n{report}");
    }
    assert!(report.contains("remote API server: its process CPU and RSS"), "{report}");
    assert!(!report.contains("charged for"), "no cost-model facts from a remote server:\n{report}");
    assert!(!report.contains("connections accepted"), "no connection counts from a remote server:\n{report}");
    // The server's own durations of the three writes, bare beside wasm, from its /metrics.
    for write in ["POST zundokos", "POST events", "PATCH hikawas/status"] {
        let row = report.lines().find(|l| l.starts_with(write) && !l.contains(':')).unwrap_or_else(|| panic!("no {write} row:\n{report}"));
        let cells: Vec<f64> = row[write.len()..].split_whitespace().map(|c| c.parse().unwrap_or_else(|_| panic!("{write}: {row:?}"))).collect();
        assert_eq!(cells.len(), 3, "bare ms, wasm ms, ratio: {row:?}");
        assert!(cells.iter().all(|c| *c > 0.0), "{row:?}");
    }
    assert!(report.contains("issue 55, wasm: steady words/s "), "{report}");

    // A namespace the bench would create exists: refused, and left as it was.
    let taken = "zundoko-bench-bare-1-second";
    let namespace = Namespace { metadata: ObjectMeta { name: Some(taken.into()), ..ObjectMeta::default() }, ..Namespace::default() };
    runtime.block_on(Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &namespace)).unwrap();
    let refused = bench(&kubeconfig, "bare", "second");
    let errors = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "a start into an existing namespace is refused");
    assert!(errors.contains(&format!("namespace {taken} exists")), "{errors}");
    assert_eq!(runtime.block_on(bench_namespaces(&client)), vec![taken.to_string()], "the namespace it did not create is left");

    // A Hikawa outside the run's namespace is not the bench's to sing: the operator is
    // confined to its namespace.
    let outsider = Hikawa::new("outsider", HikawaSpec { interval_millis: 0, ..HikawaSpec::default() });
    let hikawas = Api::<Hikawa>::namespaced(client.clone(), "default");
    runtime.block_on(hikawas.create(&PostParams::default(), &outsider)).unwrap();
    let confined = bench(&kubeconfig, "wasm", "third");
    let (report3, errors3) = (String::from_utf8_lossy(&confined.stdout), String::from_utf8_lossy(&confined.stderr));
    assert!(confined.status.success(), "the bench failed:\n{report3}\n{errors3}");
    assert!(report3.contains("CRDs already there (used as they are): hikawas.zundokokiyoshi.kaitoy.github.com"), "{report3}");
    let outsider = runtime.block_on(hikawas.get("outsider")).unwrap();
    assert_eq!(outsider.status, None, "a Hikawa in another namespace was sung: {outsider:?}");
    let zundokos = runtime.block_on(Api::<Zundoko>::namespaced(client.clone(), "default").list(&ListParams::default())).unwrap();
    assert_eq!(zundokos.items.len(), 0);

    // Words counted (the report's) are the children the server created: its own count, said
    // when it stops.
    let words: u64 = ["bare", "wasm"].iter().map(|run| column(&report, run, 1).parse::<u64>().unwrap()).sum::<u64>() + column(&report3, "wasm", 1).parse::<u64>().unwrap();
    let mut children = 0;
    drop(server.0.stdin.take());
    let mut counts = String::new();
    while stdout.read_line(&mut counts).unwrap() > 0 {}
    for count in counts.lines().filter_map(|l| l.strip_prefix("requests ")).flat_map(|l| l.split(',')) {
        if let Some(n) = count.strip_prefix("create/zundokos/=").or_else(|| count.strip_prefix("create/kiyoshis/=")) {
            children += n.parse::<u64>().unwrap();
        }
    }
    assert!(words >= 15, "5 songs a run, each at least one word:\n{report}");
    assert_eq!(words, children, "the words in the report are the children the server created:\n{report}\n{counts}");
    let _ = std::fs::remove_file(&kubeconfig);
}

/// A real kube-apiserver's histogram: each write's sum and count summed over the labels the
/// bench does not key on (version, scope...), buckets, other metrics and the same resource name
/// in another group (core's `events`, a kubelet's) left out, APPLY counted as a patch, escaped
/// label values read whole; then the difference of two scrapes.
#[test]
fn request_durations_are_read_from_kube_apiservers_text_format() {
    let series = |group: &str, verb: &str, sub: &str, sum: f64, count: u64| {
        let labels = format!("component=\"a\\\"b,c=\\\"d\",dry_run=\"\",group=\"{group}\",resource=\"events\",scope=\"resource\",subresource=\"{sub}\",verb=\"{verb}\",version=\"v1\"");
        format!(
            "apiserver_request_duration_seconds_bucket{{{labels},le=\"0.005\"}} 1\n\
             apiserver_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {count}\n\
             apiserver_request_duration_seconds_sum{{{labels}}} {sum}\n\
             apiserver_request_duration_seconds_count{{{labels}}} {count}\n\
             apiserver_request_sli_duration_seconds_sum{{{labels}}} 99\n"
        )
    };
    let before = format!(
        "# HELP apiserver_request_duration_seconds [STABLE] Response latency\n# TYPE apiserver_request_duration_seconds histogram\n{}{}",
        series("events.k8s.io", "POST", "", 1.0, 10),
        series("", "POST", "", 7.0, 70)
    );
    let after = [
        series("events.k8s.io", "POST", "", 1.5, 14),
        series("events.k8s.io", "POST", "", 0.5, 6),
        // Core's `events`, which other clients write and a word never does: left out.
        series("", "POST", "", 9.0, 90),
        series("zundokokiyoshi.kaitoy.github.com", "APPLY", "status", 0.25, 1),
    ]
    .concat();
    let read = |text: &str| scale::promtext::request_durations(text).into_iter().map(|(key, n, sum, _)| (key, n, sum)).collect::<Vec<_>>();
    let key = |verb: &str, sub: &str| (verb.to_string(), "events".to_string(), sub.to_string());
    assert_eq!(read(&before), vec![(key("create", ""), 10, 1.0)]);
    assert_eq!(read(&after), vec![(key("create", ""), 20, 2.0), (key("patch", "status"), 1, 0.25)]);
    let between = scale::promtext::difference(&scale::promtext::request_durations(&before), &scale::promtext::request_durations(&after));
    let between: Vec<_> = between.into_iter().map(|(key, n, sum, _)| (key, n, sum)).collect();
    assert_eq!(between, vec![(key("create", ""), 10, 1.0), (key("patch", "status"), 1, 0.25)]);
}

/// Against kube-apiserver alone (no kube-controller-manager: no namespace controller, no
/// garbage collector), a run's Hikawas, words and Events are deleted all the same; its
/// namespace, which such a server never removes, is said and left Terminating.
#[test]
fn a_server_without_kube_controller_manager_keeps_no_object_of_a_run() {
    if played_a_role(TEST_WITHOUT_KCM) {
        return;
    }
    let kubeconfig = std::env::temp_dir().join(format!("zundoko-bench-real-nokcm-{}.kubeconfig", std::process::id()));
    let (_server, _stdout) = start_server(TEST_WITHOUT_KCM, &kubeconfig, &[("ZUNDOKO_BENCH_SERVER_NO_CONTROLLER_MANAGER", "1")]);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let client = client_of(&runtime, &kubeconfig);
    let output = bench_as_with(TEST_WITHOUT_KCM, &kubeconfig, "bare", "nokcm", &[("ZUNDOKO_BENCH_NAMESPACE_WAIT_SECS", "2")]);
    let (report, errors) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the bench failed:\n{report}\n{errors}");
    let namespace = "zundoko-bench-bare-1-nokcm";
    assert!(errors.contains(&format!("namespace {namespace} is still there 2s after it was deleted (its objects are gone")), "{errors}");
    assert!(!errors.contains("deleting the"), "{errors}");
    let left = runtime.block_on(Api::<Namespace>::all(client.clone()).get(namespace)).unwrap();
    assert_eq!(left.status.and_then(|s| s.phase).as_deref(), Some("Terminating"));
    let hikawas = runtime.block_on(Api::<Hikawa>::namespaced(client.clone(), namespace).list(&ListParams::default())).unwrap();
    let zundokos = runtime.block_on(Api::<Zundoko>::namespaced(client.clone(), namespace).list(&ListParams::default())).unwrap();
    let events = runtime.block_on(Api::<k8s_openapi::api::core::v1::Event>::namespaced(client.clone(), namespace).list(&ListParams::default())).unwrap();
    assert_eq!((hikawas.items.len(), zundokos.items.len(), events.items.len()), (0, 0, 0), "the run's objects are gone");
    assert!(column(&report, "bare", 1).parse::<u64>().unwrap() >= 5, "five songs sung:\n{report}");
    let _ = std::fs::remove_file(&kubeconfig);
}
