//! deploy/monitoring/: the alert rules (promtool's checks and unit tests), the PrometheusRule
//! generated from them, the kustomize component, the Grafana dashboard, and one end-to-end run:
//! a real Prometheus scrapes an operator running against the local API server, and a rejected
//! swap makes ZundokoModuleRejected active through Prometheus' own API.
//!
//! promtool and prometheus come from Debian's `prometheus` package (.ci/run installs it). The
//! tests that need them are `#[ignore]`d with that reason, so a plain `cargo test` lists them
//! as ignored; `make test` runs them where the tools are installed and always in CI (CI=true),
//! where a missing tool fails them (`--include-ignored`).

mod common;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::deploy::{copy_tree, documents, render};
use common::kubelet::temp_dir;
use common::module_bytes;
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use serde_json::Value;
use zundoko_operator::supply::contract::RecordDecision as _;
use zundoko_operator::supply::contract::rules::Decision;
use zundoko_operator::supply::sandbox::ModuleIdentity;
use zundoko_operator::process::metrics::Metrics;
use zundoko_rules::{Action, ChildKind, ModuleInfo, Plan};

fn monitoring_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/monitoring")
}

fn yaml_file(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()))
}

fn rules() -> Value {
    yaml_file(&monitoring_dir().join("rules.yaml"))
}

fn dashboard() -> Value {
    let path = monitoring_dir().join("dashboard.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// Every rule of every group (alerts and recording rules).
fn all_rules(rules: &Value) -> Vec<&Value> {
    rules["groups"].as_array().unwrap().iter().flat_map(|g| g["rules"].as_array().unwrap()).collect()
}

fn alert_names(rules: &Value) -> Vec<String> {
    all_rules(rules).iter().filter_map(|r| r["alert"].as_str().map(String::from)).collect()
}

fn unit_test_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(monitoring_dir().join("tests"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no promtool unit tests in deploy/monitoring/tests/");
    files
}

/// `tool`, which must run here: a test that needs it is ignored unless asked for, and then
/// fails without it.
fn installed(tool: &str) -> String {
    match Command::new(tool).arg("--version").output() {
        Ok(out) if out.status.success() => tool.to_string(),
        _ => panic!("{tool} is not installed (apt-get install prometheus; .ci/run does): this test needs it"),
    }
}

fn run_ok(out: Output, what: &str) -> String {
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{what} failed:\n{text}");
    text
}

#[test]
#[ignore = "needs promtool (apt-get install prometheus); make test runs it where installed, CI always"]
fn promtool_checks_the_rules_and_runs_every_unit_test() {
    let promtool = installed("promtool");
    let rules_file = monitoring_dir().join("rules.yaml");
    let text = run_ok(Command::new(&promtool).arg("check").arg("rules").arg(&rules_file).output().unwrap(), "promtool check rules");
    let count = all_rules(&rules()).len();
    assert!(text.contains(&format!("SUCCESS: {count} rules found")), "{text}");

    let text = run_ok(Command::new(&promtool).args(["test", "rules"]).args(unit_test_files()).output().unwrap(), "promtool test rules");
    println!("{text}");
    assert!(text.contains("SUCCESS") && !text.contains("FAILED"), "{text}");
}

#[test]
fn every_alert_has_a_severity_a_summary_a_description_and_unit_tests_where_it_fires_and_stays_silent() {
    let rules = rules();
    let alerts = alert_names(&rules);
    for name in [
        "ZundokoModuleRejected",
        "ZundokoRolloutRolledBack",
        "ZundokoReconcileErrors",
        "ZundokoHikawasThrottled",
        "ZundokoShardsUnheld",
        "ZundokoShardsLost",
        "ZundokoLeaseRenewalsFailing",
        "ZundokoOperatorDown",
        "ZundokoGuestFuelNearBudget",
    ] {
        assert!(alerts.iter().any(|a| a == name), "rules.yaml has no {name}: {alerts:?}");
    }
    for rule in all_rules(&rules).into_iter().filter(|r| r["alert"].is_string()) {
        let name = rule["alert"].as_str().unwrap();
        let severity = rule["labels"]["severity"].as_str().unwrap_or_default();
        assert!(["critical", "warning", "info"].contains(&severity), "{name}: severity {severity:?}");
        for annotation in ["summary", "description"] {
            assert!(rule["annotations"][annotation].as_str().is_some_and(|s| s.len() > 10), "{name} has no {annotation}");
        }
    }

    let (mut fires, mut silent) = (BTreeSet::new(), BTreeSet::new());
    for file in unit_test_files() {
        let tests = yaml_file(&file);
        let loads: Vec<&str> = tests["rule_files"].as_array().unwrap().iter().filter_map(|f| f.as_str()).collect();
        assert_eq!(loads, ["../rules.yaml"], "{}: the unit tests load the source rules file", file.display());
        for test in tests["tests"].as_array().unwrap() {
            for case in test["alert_rule_test"].as_array().into_iter().flatten() {
                let name = case["alertname"].as_str().unwrap().to_string();
                let expected = case["exp_alerts"].as_array().map_or(0, |a| a.len());
                (if expected > 0 { &mut fires } else { &mut silent }).insert(name);
            }
        }
    }
    for name in &alerts {
        assert!(fires.contains(name), "no unit test where {name} fires");
        assert!(silent.contains(name), "no unit test where {name} stays silent");
    }
}

#[test]
fn the_prometheusrule_is_rules_yaml_under_a_header() {
    let generated = yaml_file(&monitoring_dir().join("prometheusrule.yaml"));
    assert_eq!(generated["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(generated["kind"], "PrometheusRule");
    assert_eq!(generated["metadata"]["namespace"], "zundoko-system");
    assert!(generated["spec"] == rules(), "deploy/monitoring/prometheusrule.yaml differs from rules.yaml: run `make monitoring`");
}

/// The names the operator exposes, as Prometheus stores them: from the TYPE lines of its own
/// metrics text (counters get `_total`, histograms `_bucket`, `_sum` and `_count`), every
/// labelled family given a series first (an empty family is not in the text).
fn exposed_metric_names() -> BTreeSet<String> {
    let metrics = Metrics::new();
    let module = Arc::new(ModuleIdentity {
        info: ModuleInfo { name: "zundoko-classic".into(), version: "0.1.0".into(), description: String::new() },
        digest: "sha256:aaa".into(),
        size: 1,
    });
    metrics.reconcile_failed("GuestTrapped");
    metrics.decided(&Decision {
        module: module.clone(),
        outcome: Ok(Plan { actions: vec![Action::RequeueAfter(1000)] }),
        fuel_used: Some(1000),
        logs: Vec::new(),
        elapsed: Duration::from_micros(20),
    });
    metrics.said(ChildKind::Zundoko);
    metrics.not_decided("throttled");
    metrics.module_serving(module.label());
    metrics.swap_rejected("NotAComponent");
    metrics.ruleset_serving("classic", Some(module.label()), None);
    metrics.rollout_ended("rolled-back");
    metrics.ruleset_rejected("classic", "ModulePinMismatch");
    metrics.shard_handover("lost");
    metrics.api_request("create", "zundokos", "201", Duration::from_millis(3));
    metrics.reconcile_took("hikawa", true, Duration::from_millis(5));
    metrics.queue_waited("hikawa", Duration::from_millis(1));
    metrics.queue_depth_from("hikawa", Box::new(|| Some(0)));
    metrics.instance_reset("pagemap");
    metrics.tenants.read_with(Box::new(|| {
        vec![zundoko_operator::process::tenant_metrics::TenantUse { namespace: "team-a".into(), call_turns: 1, calls: 1, call_seconds: 0.25, compile_wait_seconds: 0.5, pulls: 1, cache_bytes: 1 }]
    }));
    let mut names = BTreeSet::new();
    for line in metrics.encode().lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else { continue };
        let (name, kind) = rest.split_once(' ').unwrap();
        match kind {
            "counter" => names.insert(format!("{name}_total")),
            "histogram" => {
                names.extend(["_bucket", "_sum", "_count"].map(|s| format!("{name}{s}")));
                true
            }
            _ => names.insert(name.to_string()),
        };
    }
    for name in [
        "zundoko_module_swaps_total",
        "zundoko_leader",
        "zundoko_plan_actions_total",
        "zundoko_ruleset_info",
        "zundoko_rollouts_total",
        "zundoko_shards",
        "zundoko_shards_held",
        "zundoko_shard_handovers_total",
    ] {
        assert!(names.contains(name), "{name} is not in {names:?}");
    }
    names
}

/// The metric names a PromQL expression selects. Small, for the expressions in this folder:
/// strings, label matchers, ranges and the label lists after by/on/... are dropped, and an
/// identifier followed by `(` is a function.
fn metric_names(expr: &str) -> BTreeSet<String> {
    // Operators, modifiers and aggregations (`sum by (...) (...)`: not followed by `(`).
    const KEYWORDS: [&str; 24] = [
        "and", "or", "unless", "offset", "bool", "by", "without", "on", "ignoring", "group_left", "group_right", "inf", "nan", "sum", "min",
        "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile", "group",
    ];
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    let mut last_word = String::new();
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' | '`' => {
                i += 1;
                while i < chars.len() && chars[i] != c {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
            }
            '{' | '[' => {
                let close = if c == '{' { '}' } else { ']' };
                let mut quote = None;
                while i < chars.len() && (quote.is_some() || chars[i] != close) {
                    match (quote, chars[i]) {
                        (Some(_), '\\') => i += 1,
                        (Some(q), ch) if ch == q => quote = None,
                        (None, ch @ ('"' | '\'' | '`')) => quote = Some(ch),
                        _ => {}
                    }
                    i += 1;
                }
                i += 1;
            }
            // A label list: by (...), on (...), group_left (...).
            '(' if ["by", "without", "on", "ignoring", "group_left", "group_right"].contains(&last_word.as_str()) => {
                while i < chars.len() && chars[i] != ')' {
                    i += 1;
                }
                i += 1;
                last_word.clear();
            }
            c if c.is_ascii_digit() || c == '.' => {
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.' || chars[i] == '_') {
                    i += 1;
                }
            }
            c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':') {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let next = chars[i..].iter().find(|c| !c.is_whitespace());
                if !KEYWORDS.contains(&word.to_lowercase().as_str()) && next != Some(&'(') {
                    names.insert(word.clone());
                }
                last_word = word;
            }
            _ => {
                if !c.is_whitespace() {
                    last_word.clear();
                }
                i += 1;
            }
        }
    }
    names
}

#[test]
fn the_promql_name_scanner_finds_metrics_and_skips_functions_labels_and_keywords() {
    let names = metric_names(
        r#"(sum by (job, le) (increase(a_total{result="rejected", x=~"b{c}"}[10m])) > 0.05 or c unless c offset 10m) * on (job) group_left (name) d:rec and absent(up{job="j"} == 1) > 1e3"#,
    );
    assert_eq!(names, ["a_total", "c", "d:rec", "up"].map(String::from).into());
}

/// Every expression of the dashboard's panels, with Grafana's variables made PromQL.
fn dashboard_queries(dashboard: &Value) -> Vec<(String, String)> {
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap().replace("$__rate_interval", "1m").replace("$__range", "1h");
            queries.push((panel["title"].as_str().unwrap().to_string(), expr));
        }
    }
    queries
}

#[test]
fn rules_and_dashboard_query_only_metrics_the_operator_exposes() {
    let rules = rules();
    let exposed = exposed_metric_names();
    let recorded: BTreeSet<String> = all_rules(&rules).iter().filter_map(|r| r["record"].as_str().map(String::from)).collect();
    // Not the operator's: Prometheus' own `up`, and the kubelet's cAdvisor for memory (the
    // operator exports no process metrics).
    let external = ["up", "container_memory_rss", "container_memory_working_set_bytes"];
    let allowed = |name: &str| exposed.contains(name) || recorded.contains(name) || external.contains(&name);

    let mut used = BTreeSet::new();
    for rule in all_rules(&rules) {
        let expr = rule["expr"].as_str().unwrap();
        let names = metric_names(expr);
        // Only the budget's recording rule is a constant.
        assert!(!names.is_empty() || rule["record"] == "zundoko:guest_fuel_budget", "no metric in {expr}");
        for name in names {
            assert!(allowed(&name), "rules.yaml: {name} is not a metric the operator exposes (in {expr}); exposed: {exposed:?}");
            used.insert(name);
        }
    }
    let dashboard = dashboard();
    let queries = dashboard_queries(&dashboard);
    for (panel, expr) in &queries {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "{panel}: no metric in {expr}");
        for name in names {
            assert!(allowed(&name), "dashboard panel {panel:?}: {name} is not a metric the operator exposes (in {expr}); exposed: {exposed:?}");
            used.insert(name);
        }
    }
    // What the issue asks the dashboard to show.
    let titles: Vec<&str> = dashboard["panels"].as_array().unwrap().iter().filter_map(|p| p["title"].as_str()).collect();
    for title in ["Words/s", "Decisions by outcome", "Guest call time", "Guest fuel used", "Default module", "Rule sets", "Swaps", "Rollouts ended", "Shards held", "Shard handovers", "Memory (RSS)", "Call turns by tenant", "Calls by tenant", "Guest time by tenant", "Compile wait by tenant", "Pulls by tenant", "Cache by tenant"] {
        assert!(titles.contains(&title), "the dashboard has no panel {title:?}: {titles:?}");
    }
    for panel in dashboard["panels"].as_array().unwrap().iter().filter(|p| p["type"] != "row") {
        assert!(panel["targets"].as_array().is_some_and(|t| !t.is_empty()), "panel {} has no query", panel["title"]);
        assert!(panel["gridPos"]["w"].as_u64().is_some_and(|w| w > 0), "panel {} has no place", panel["title"]);
    }
    for name in ["zundoko_words_total", "zundoko_guest_fuel_used_bucket", "zundoko_guest_call_duration_seconds_bucket", "zundoko_module_info", "zundoko_ruleset_info", "zundoko_module_swaps_total", "zundoko_rollouts_total", "zundoko_shards_held", "zundoko_shards", "zundoko_shard_handovers_total", "zundoko_tenant_call_turns_total", "zundoko_tenant_calls_total", "zundoko_tenant_call_seconds_total", "zundoko_tenant_compile_wait_seconds_total", "zundoko_tenant_pulls_total", "zundoko_tenant_cache_bytes"] {
        assert!(used.contains(name), "neither the rules nor the dashboard use {name}");
    }
}

#[test]
#[ignore = "needs promtool (apt-get install prometheus); make test runs it where installed, CI always"]
fn promtool_accepts_every_dashboard_query() {
    let promtool = installed("promtool");
    // Each query as a recording rule: promtool parses and checks it.
    let rules: Vec<Value> = dashboard_queries(&dashboard())
        .into_iter()
        .enumerate()
        .map(|(i, (_, expr))| serde_json::json!({"record": format!("dashboard:query_{i}"), "expr": expr}))
        .collect();
    let count = rules.len();
    let dir = temp_dir("dashboard-queries");
    let file = dir.join("queries.yaml");
    std::fs::write(&file, serde_yaml::to_string(&serde_json::json!({"groups": [{"name": "dashboard", "rules": rules}]})).unwrap()).unwrap();
    let text = run_ok(Command::new(&promtool).arg("check").arg("rules").arg(&file).output().unwrap(), "promtool check rules on the dashboard's queries");
    assert!(text.contains(&format!("SUCCESS: {count} rules found")), "{text}");
}

#[test]
fn the_monitoring_component_renders_with_deploy_and_only_when_opted_into() {
    let module = module_bytes("zundoko-classic");
    let default_kinds: Vec<Value> = documents(&render(&module)).into_iter().map(|d| d["kind"].clone()).collect();
    for kind in ["PrometheusRule", "PodMonitor"] {
        assert!(!default_kinds.contains(&Value::from(kind)), "deploy/ includes a {kind} by default");
    }

    // An overlay as a user writes it: deploy/ plus the component, in a scratch copy.
    let scratch = temp_dir("monitoring-overlay");
    copy_tree(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy"), &scratch.join("deploy"));
    std::fs::write(scratch.join("deploy/module/rules.wasm"), &module).unwrap();
    std::fs::create_dir_all(scratch.join("overlay")).unwrap();
    std::fs::write(
        scratch.join("overlay/kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../deploy]\ncomponents: [../deploy/monitoring]\n",
    )
    .unwrap();
    let out = Command::new("kubectl").arg("kustomize").arg(scratch.join("overlay")).output().expect("kubectl (the client) is installed");
    let docs = documents(&run_ok(out, "kubectl kustomize overlay"));
    let _ = std::fs::remove_dir_all(&scratch);
    let one = |kind: &str| {
        let found: Vec<&Value> = docs.iter().filter(|d| d["kind"] == kind).collect();
        assert_eq!(found.len(), 1, "one {kind} in the overlay's render");
        found[0]
    };

    assert!(one("PrometheusRule")["spec"] == rules(), "the rendered PrometheusRule carries rules.yaml");
    // The PodMonitor finds the operator's pods, on a port they declare, and names the job the
    // rules select (up{job="zundoko-operator"}).
    let monitor = one("PodMonitor");
    let pod = &one("Deployment")["spec"]["template"];
    for (key, value) in monitor["spec"]["selector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(&pod["metadata"]["labels"][key], value, "the PodMonitor selects {key}={value}");
    }
    let job_label = monitor["spec"]["jobLabel"].as_str().unwrap();
    assert_eq!(pod["metadata"]["labels"][job_label], "zundoko-operator");
    let ports: Vec<&Value> = pod["spec"]["containers"][0]["ports"].as_array().unwrap().iter().map(|p| &p["name"]).collect();
    for endpoint in monitor["spec"]["podMetricsEndpoints"].as_array().unwrap() {
        assert!(ports.contains(&&endpoint["port"]), "the PodMonitor's port {} is one the pod declares: {ports:?}", endpoint["port"]);
        assert_eq!(endpoint["path"], "/metrics");
    }
    assert_eq!(monitor["metadata"]["namespace"], one("Deployment")["metadata"]["namespace"]);
    let expr = |alert: &str| all_rules(&rules()).iter().find(|r| r["alert"] == alert).unwrap()["expr"].as_str().unwrap().to_string();
    assert!(expr("ZundokoOperatorDown").contains("job=\"zundoko-operator\""));

    let dashboards: Vec<&Value> = docs.iter().filter(|d| d["kind"] == "ConfigMap" && d["metadata"]["labels"]["grafana_dashboard"] == "1").collect();
    assert_eq!(dashboards.len(), 1);
    let json: Value = serde_json::from_str(dashboards[0]["data"]["dashboard.json"].as_str().unwrap()).unwrap();
    assert_eq!(json, dashboard());
}

/// A child process killed when the test ends, passing or not.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// GET over HTTP/1.0 (so neither side chunks), loopback only.
fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, response.split_once("\r\n\r\n")?.1.to_string()))
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

/// Prometheus' HTTP API: the `data` of a successful answer.
fn prometheus_api(port: u16, path: &str) -> Option<Value> {
    let (status, body) = http_get(port, path)?;
    let value: Value = serde_json::from_str(&body).ok()?;
    (status == 200 && value["status"] == "success").then(|| value["data"].clone())
}

fn instant_query(port: u16, query: &str) -> Vec<Value> {
    prometheus_api(port, &format!("/api/v1/query?query={}", percent_encode(query)))
        .and_then(|d| d["result"].as_array().cloned())
        .unwrap_or_default()
}

fn active_alerts(port: u16, name: &str) -> Vec<Value> {
    let alerts = prometheus_api(port, "/api/v1/alerts").and_then(|d| d["alerts"].as_array().cloned()).unwrap_or_default();
    alerts.into_iter().filter(|a| a["labels"]["alertname"] == name).collect()
}

fn wait_for(what: &str, timeout: Duration, logs: &[&Path], mut check: impl FnMut() -> bool) {
    let started = Instant::now();
    while !check() {
        if started.elapsed() > timeout {
            let logs: Vec<String> = logs.iter().map(|l| format!("--- {}:\n{}", l.display(), std::fs::read_to_string(l).unwrap_or_default())).collect();
            panic!("timed out after {timeout:?} waiting for {what}\n{}", logs.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs prometheus (apt-get install prometheus); make test runs it where installed, CI always"]
async fn a_rejected_swap_makes_its_alert_active_in_a_real_prometheus() {
    let prometheus = installed("prometheus");
    let cluster = Cluster::start().await;
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    let ns = Namespace { metadata: ObjectMeta { name: Some("zundoko-system".into()), ..ObjectMeta::default() }, ..Namespace::default() };
    namespaces.create(&PostParams::default(), &ns).await.unwrap();
    let dir = temp_dir("monitoring-e2e");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, cluster.server.kubeconfig_yaml()).unwrap();
    let module = dir.join("rules.wasm");
    std::fs::write(&module, module_bytes("zundoko-classic")).unwrap();

    // The operator as a process, its default module in a file it watches.
    let operator_port = free_port();
    let operator_log = dir.join("operator.log");
    let _operator = Process(
        Command::new(env!("CARGO_BIN_EXE_zundoko-operator"))
            .arg("run")
            .env_clear()
            .env("KUBECONFIG", &kubeconfig)
            .env("ZUNDOKO_MODULE", &module)
            .env("ZUNDOKO_MODULE_POLL_MS", "200")
            .env("ZUNDOKO_HTTP_ADDR", format!("127.0.0.1:{operator_port}"))
            .env("POD_NAME", "zundoko-operator-e2e")
            .env("POD_NAMESPACE", "zundoko-system")
            .env("ZUNDOKO_LOG_FORMAT", "text")
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&operator_log).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_for("the operator's /metrics", Duration::from_secs(60), &[&operator_log], || {
        http_get(operator_port, "/metrics").is_some_and(|(s, body)| s == 200 && body.contains("zundoko_module_info{"))
    });

    // Prometheus scraping it every second with the rules file as shipped (this alert has no
    // `for`), the target labelled as the PodMonitor would.
    let prometheus_port = free_port();
    std::fs::copy(monitoring_dir().join("rules.yaml"), dir.join("rules.yaml")).unwrap();
    std::fs::write(
        dir.join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nrule_files: [rules.yaml]\n\
             scrape_configs:\n- job_name: zundoko-operator\n  static_configs:\n  - targets: ['127.0.0.1:{operator_port}']\n    \
             labels: {{namespace: zundoko-system, pod: zundoko-operator-e2e}}\n"
        ),
    )
    .unwrap();
    let prometheus_log = dir.join("prometheus.log");
    let _prometheus = Process(
        Command::new(&prometheus)
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{prometheus_port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&prometheus_log).unwrap())
            .spawn()
            .unwrap(),
    );
    let logs = [operator_log.as_path(), prometheus_log.as_path()];
    wait_for("Prometheus to scrape the operator", Duration::from_secs(60), &logs, || {
        instant_query(prometheus_port, "zundoko_module_info{job=\"zundoko-operator\"}").len() == 1
    });
    let serving = instant_query(prometheus_port, "zundoko_module_info")[0]["metric"].clone();
    assert_eq!(serving["name"], "zundoko-classic", "{serving}");
    // With the good module the alert is not active. The control: Prometheus evaluated the
    // alert's rule twice since the operator was scraped, on what it scraped.
    let scraped = jiff::Timestamp::now();
    let evaluated_since = || {
        let rules = prometheus_api(prometheus_port, "/api/v1/rules").and_then(|d| d["groups"].as_array().cloned()).unwrap_or_default();
        let rule = rules.iter().flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default()).find(|r| r["name"] == "ZundokoModuleRejected");
        rule.and_then(|r| r["lastEvaluation"].as_str()?.parse::<jiff::Timestamp>().ok()).is_some_and(|at| at > scraped + Duration::from_secs(1))
    };
    wait_for("two evaluations of ZundokoModuleRejected", Duration::from_secs(60), &logs, evaluated_since);
    assert_eq!(active_alerts(prometheus_port, "ZundokoModuleRejected"), Vec::<Value>::new(), "no rejection yet");

    // Garbage replaces the module (by rename, as editors and kubelet do): rejected, the old one serves.
    let tmp = dir.join("rules.wasm.tmp");
    std::fs::write(&tmp, b"this is not a wasm module at all").unwrap();
    std::fs::rename(&tmp, &module).unwrap();
    let rejected = "zundoko_module_swaps_total{result=\"rejected\",reason=\"NotAComponent\"} 1";
    wait_for("the operator to reject the module", Duration::from_secs(30), &logs, || {
        http_get(operator_port, "/metrics").is_some_and(|(_, body)| body.contains(rejected))
    });
    let started = Instant::now();
    let mut alert = Value::Null;
    wait_for("ZundokoModuleRejected pending or firing in Prometheus", Duration::from_secs(60), &logs, || {
        alert = active_alerts(prometheus_port, "ZundokoModuleRejected").into_iter().next().unwrap_or(Value::Null);
        alert["state"] == "pending" || alert["state"] == "firing"
    });
    println!("ZundokoModuleRejected {} {:?} after the rejection: {alert}", alert["state"], started.elapsed());
    let labels = &alert["labels"];
    assert_eq!((&labels["reason"], &labels["name"], &labels["severity"]), (&Value::from("NotAComponent"), &Value::from("zundoko-classic"), &Value::from("warning")));
    assert_eq!(labels["pod"], "zundoko-operator-e2e");
    let description = alert["annotations"]["description"].as_str().unwrap();
    assert!(description.contains("zundoko-system/zundoko-operator-e2e") && description.contains("NotAComponent") && description.contains("zundoko-classic"), "{description}");
    // The old module still serves, as the alert says.
    assert!(http_get(operator_port, "/metrics").unwrap().1.contains("name=\"zundoko-classic\""));
}
