//! Prometheus metrics (prometheus-client), served as text on `/metrics`. Plumbing beneath the
//! module supply and the controllers: every function takes plain values (a module as a
//! [`ModuleLabel`], a guest call as its time, fuel and plan), so nothing here imports from above.

use std::collections::HashMap;
use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use zundoko_rules::{Action, ChildKind, Plan};

/// A module as the metrics name it: its name, version and digest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModuleLabel<'a> {
    pub name: &'a str,
    pub version: &'a str,
    pub digest: &'a str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActionLabels {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WhyLabels {
    pub why: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModuleLabels {
    pub name: String,
    pub version: String,
    pub digest: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RuleSetLabels {
    /// The ZundokoRules' name.
    pub rules: String,
    /// `stable` (serving outside the candidate's share) or `candidate`.
    pub role: String,
    pub name: String,
    pub version: String,
    pub digest: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RuleSetProblemLabels {
    /// The ZundokoRules' name.
    pub rules: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// Kubernetes' verb: get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: String,
    /// The resource, with its subresource (`hikawas/status`); `other` or `nonresource`.
    pub resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestCodeLabels {
    pub verb: String,
    pub resource: String,
    /// The HTTP status, or `error` when no answer came.
    pub code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileLabels {
    /// `hikawa` or `zundokorules`.
    pub controller: String,
    /// `success` or `error`.
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    /// The controller whose queue it is, as controller-runtime names a workqueue: `hikawa`.
    pub name: String,
}

/// Reads a queue's depth when the metrics are read: (queue name, depth now).
type DepthSource = Box<dyn Fn() -> Option<i64> + Send + Sync>;

/// A histogram family's constructor (prometheus-client needs one per bucket layout).
type HistogramOf = fn() -> Histogram;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResetLabels {
    /// `pagemap`, `default` or `broken` (supply/sandbox/reset_check.rs).
    pub path: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SwapLabels {
    /// `accepted` or `rejected`.
    pub result: String,
    /// Why a candidate was rejected (`""` when accepted).
    pub reason: String,
}

pub struct Metrics {
    registry: Registry,
    /// Each tenant's use, by namespace (`tenant_metrics.rs`).
    pub tenants: super::tenant_metrics::TenantMetrics,
    reconciles: Counter,
    reconcile_errors: Family<ReasonLabels, Counter>,
    guest_call_seconds: Histogram,
    guest_fuel: Histogram,
    plan_actions: Family<ActionLabels, Counter>,
    words: Family<ActionLabels, Counter>,
    not_decided: Family<WhyLabels, Counter>,
    module_info: Family<ModuleLabels, Gauge>,
    swaps: Family<SwapLabels, Counter>,
    module_check_seconds: Histogram,
    leader: Gauge,
    shards: Gauge,
    shards_held: Gauge,
    shard_handovers: Family<ReasonLabels, Counter>,
    lease_renew_failures: Counter,
    /// Unix seconds (fractional) of the last successful acquisition or renewal of the Lease.
    lease_last_renew: Gauge<f64, std::sync::atomic::AtomicU64>,
    ruleset_info: Family<RuleSetLabels, Gauge>,
    rollouts: Family<ResultLabels, Counter>,
    ruleset_rejections: Family<RuleSetProblemLabels, Counter>,
    modules_compiled: Gauge,
    modules_compiled_bytes: Gauge,
    instance_reset: Family<ResetLabels, Gauge>,
    api_request_seconds: Family<RequestLabels, Histogram, HistogramOf>,
    api_requests: Family<RequestCodeLabels, Counter>,
    reconcile_seconds: Family<ReconcileLabels, Histogram, HistogramOf>,
    queue_depth: Family<QueueLabels, Gauge>,
    queue_wait_seconds: Family<QueueLabels, Histogram, HistogramOf>,
    /// Each queue's depth, read at every scrape (it grows as requeues come due, with no event).
    depth_sources: Mutex<Vec<(String, DepthSource)>>,
    /// The labels each rule set has in `ruleset_info` (a family cannot list its own).
    ruleset_shown: Mutex<HashMap<String, Vec<RuleSetLabels>>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("zundoko");
        let tenants = super::tenant_metrics::TenantMetrics::register(&mut registry);
        let mut metrics = Metrics {
            registry,
            tenants,
            reconciles: Counter::default(),
            reconcile_errors: Family::default(),
            // 10 us .. 0.7 s: a fresh instance plus call is tens of microseconds.
            guest_call_seconds: Histogram::new(exponential_buckets(10e-6, 4.0, 9)),
            // 1k .. 260M fuel units; the default budget is 50M.
            guest_fuel: Histogram::new(exponential_buckets(1e3, 4.0, 14)),
            plan_actions: Family::default(),
            words: Family::default(),
            not_decided: Family::default(),
            module_info: Family::default(),
            swaps: Family::default(),
            // 1 ms .. 4 s: compiling a ~32 KiB component takes tens of milliseconds.
            module_check_seconds: Histogram::new(exponential_buckets(1e-3, 2.0, 13)),
            leader: Gauge::default(),
            shards: Gauge::default(),
            shards_held: Gauge::default(),
            shard_handovers: Family::default(),
            lease_renew_failures: Counter::default(),
            lease_last_renew: Gauge::default(),
            ruleset_info: Family::default(),
            rollouts: Family::default(),
            ruleset_rejections: Family::default(),
            modules_compiled: Gauge::default(),
            modules_compiled_bytes: Gauge::default(),
            instance_reset: Family::default(),
            // client-go's buckets for rest_client_request_duration_seconds.
            api_request_seconds: Family::new_with_constructor(|| {
                Histogram::new([0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0])
            }),
            api_requests: Family::default(),
            // 1 ms .. 16 s: a reconcile is a guest call and up to three writes.
            reconcile_seconds: Family::new_with_constructor(|| Histogram::new(exponential_buckets(1e-3, 2.0, 15))),
            queue_depth: Family::default(),
            // controller-runtime's buckets for workqueue_queue_duration_seconds: 10 ns .. 1,000 s.
            queue_wait_seconds: Family::new_with_constructor(|| Histogram::new(exponential_buckets(10e-9, 10.0, 12))),
            depth_sources: Mutex::default(),
            ruleset_shown: Mutex::default(),
        };
        metrics.registry.register("reconciles", "Hikawa reconciles run", metrics.reconciles.clone());
        metrics.registry.register("reconcile_errors", "Failed reconciles, by reason", metrics.reconcile_errors.clone());
        metrics.registry.register(
            "guest_call_duration_seconds",
            "Time to decide: a fresh guest instance, the call and the plan check (both tries of a call made again off the async workers)",
            metrics.guest_call_seconds.clone(),
        );
        metrics.registry.register("guest_fuel_used", "Guest CPU used per call, in wasmtime fuel units", metrics.guest_fuel.clone());
        metrics.registry.register("plan_actions", "Actions in accepted plans, by kind", metrics.plan_actions.clone());
        metrics.registry.register("words", "Children created, by kind (each word once)", metrics.words.clone());
        metrics.registry.register(
            "reconciles_not_decided",
            "Reconciles that did not call the rules: catching-up (the caches lag this process's own writes), unchanged (nothing changed but its own writes), throttled (idle-decision budget spent), lease-renewal-late (the shard's writes would be refused now), module-busy (the module's places were all taken: the Hikawa waited in its line)",
            metrics.not_decided.clone(),
        );
        metrics.registry.register("module_info", "The default rules module serving: for Hikawas that name no rules (value 1)", metrics.module_info.clone());
        metrics.registry.register("module_swaps", "Candidate rules modules, by result and rejection reason", metrics.swaps.clone());
        metrics.registry.register(
            "module_check_duration_seconds",
            "Time to check a candidate module: digest, compile, world, smoke test",
            metrics.module_check_seconds.clone(),
        );
        metrics.registry.register("leader", "1 while this replica holds at least one shard (or runs without election)", metrics.leader.clone());
        metrics.registry.register("shards", "Shards the Hikawas are split into (--shards)", metrics.shards.clone());
        metrics.registry.register("shards_held", "Shards this replica holds (deciding or handing over)", metrics.shards_held.clone());
        metrics.registry.register(
            "shard_handovers",
            "Shard Leases that changed hands here: taken, released (handed back), lost (past the renew deadline)",
            metrics.shard_handovers.clone(),
        );
        metrics.registry.register(
            "lease_renew_failures",
            "Tries to renew a held Lease that failed (past the renew deadline, the replica stops deciding for its shard)",
            metrics.lease_renew_failures.clone(),
        );
        metrics.registry.register(
            "lease_last_renew_timestamp_seconds",
            "When this replica last acquired or renewed a shard Lease (Unix seconds; 0: never)",
            metrics.lease_last_renew.clone(),
        );
        metrics.registry.register(
            "ruleset_info",
            "The modules each ZundokoRules serves (value 1): role stable, and candidate during a rollout",
            metrics.ruleset_info.clone(),
        );
        metrics.registry.register("rollouts", "Candidate rollouts ended, by result (promoted, rolled-back)", metrics.rollouts.clone());
        metrics.registry.register(
            "ruleset_rejections",
            "Problems a ZundokoRules reported (its status and a Warning Event), by rule set and reason: its module or candidate refused, or its source unreadable; what it served before keeps serving",
            metrics.ruleset_rejections.clone(),
        );
        metrics.registry.register("modules_compiled", "Rules modules compiled and in memory (each shared by all who serve it)", metrics.modules_compiled.clone());
        metrics.registry.register(
            "modules_compiled_bytes",
            "Bytes of compiled code and metadata the compiled rules modules keep in memory",
            metrics.modules_compiled_bytes.clone(),
        );
        metrics.registry.register(
            "instance_reset_info",
            "How used instance slots are reset, as the fresh-instance self-check at start settled it (value 1): pagemap (only the pages a call changed; the check passed with the scan), default (the whole used part: the scan is off, missing, or failed the check)",
            metrics.instance_reset.clone(),
        );
        metrics.registry.register(
            "rest_client_request_duration_seconds",
            "API requests' time from sent to the answer's headers, by verb and resource (as client-go's; a watch's is until its stream opens)",
            metrics.api_request_seconds.clone(),
        );
        metrics.registry.register("rest_client_requests", "API requests sent, by verb, resource and answer code (error: no answer)", metrics.api_requests.clone());
        metrics.registry.register(
            "reconcile_duration_seconds",
            "Time of one reconcile, by controller and result (success or error): the guest call, the plan check and the writes",
            metrics.reconcile_seconds.clone(),
        );
        metrics.registry.register(
            "workqueue_depth",
            "Reconciles due and not started, by controller (as controller-runtime's): asked for by a watch event or a wake-up, or their requeue come",
            metrics.queue_depth.clone(),
        );
        metrics.registry.register(
            "workqueue_queue_duration_seconds",
            "Time from a reconcile being due (its first ask, or its requeue's time) to its start, by controller (as controller-runtime's)",
            metrics.queue_wait_seconds.clone(),
        );
        metrics
    }

    /// Prometheus / OpenMetrics text.
    pub fn encode(&self) -> String {
        self.tenants.refresh();
        for (name, source) in self.depth_sources.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            if let Some(depth) = source() {
                self.queue_depth.get_or_create(&QueueLabels { name: name.clone() }).set(depth);
            }
        }
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }

    pub fn reconciled(&self) {
        self.reconciles.inc();
    }

    pub fn reconcile_failed(&self, reason: &str) {
        self.reconcile_errors.get_or_create(&ReasonLabels { reason: reason.into() }).inc();
    }

    /// A guest call that took `elapsed` and `fuel_used`, and the plan it made if it made one.
    pub fn guest_called(&self, elapsed: std::time::Duration, fuel_used: Option<u64>, plan: Option<&Plan>) {
        self.guest_call_seconds.observe(elapsed.as_secs_f64());
        if let Some(fuel) = fuel_used.filter(|f| *f > 0) {
            self.guest_fuel.observe(fuel as f64);
        }
        if let Some(plan) = plan {
            self.planned(plan);
        }
    }

    fn planned(&self, plan: &Plan) {
        for action in &plan.actions {
            let kind = match action {
                Action::Say(say) if say.kind == ChildKind::Kiyoshi => "say-kiyoshi",
                Action::Say(_) => "say-zundoko",
                Action::SetStatus(_) => "set-status",
                Action::RequeueAfter(_) => "requeue-after",
            };
            self.plan_actions.get_or_create(&ActionLabels { kind: kind.into() }).inc();
        }
    }

    pub fn said(&self, kind: ChildKind) {
        let kind = if kind == ChildKind::Kiyoshi { "kiyoshi" } else { "zundoko" };
        self.words.get_or_create(&ActionLabels { kind: kind.into() }).inc();
    }

    /// A reconcile that did not decide, and why (`catching-up`, `unchanged`, `throttled`).
    pub fn not_decided(&self, why: &str) {
        self.not_decided.get_or_create(&WhyLabels { why: why.into() }).inc();
    }

    /// A counter's value from the exposition text (for tests and benchmarks): the sum of
    /// the samples whose line starts with `prefix`.
    pub fn sum(&self, prefix: &str) -> u64 {
        self.encode()
            .lines()
            .filter(|l| l.starts_with(prefix))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    pub fn module_serving(&self, module: ModuleLabel<'_>) {
        self.module_info.clear();
        let labels = ModuleLabels {
            name: module.name.into(),
            version: module.version.into(),
            digest: module.digest.into(),
        };
        self.module_info.get_or_create(&labels).set(1);
    }

    /// No module serves any more (it was withdrawn): `zundoko_module_info` names none.
    pub fn module_withdrawn(&self) {
        self.module_info.clear();
    }

    pub fn module_checked(&self, took: std::time::Duration) {
        self.module_check_seconds.observe(took.as_secs_f64());
    }

    pub fn swap_accepted(&self) {
        self.swaps.get_or_create(&SwapLabels { result: "accepted".into(), reason: String::new() }).inc();
    }

    pub fn swap_rejected(&self, reason: &str) {
        self.swaps.get_or_create(&SwapLabels { result: "rejected".into(), reason: reason.into() }).inc();
    }

    /// What rule set `rules` serves now (replacing what it served before).
    pub fn ruleset_serving(&self, rules: &str, stable: Option<ModuleLabel<'_>>, candidate: Option<ModuleLabel<'_>>) {
        let labels = |role: &str, m: ModuleLabel<'_>| RuleSetLabels {
            rules: rules.into(),
            role: role.into(),
            name: m.name.into(),
            version: m.version.into(),
            digest: m.digest.into(),
        };
        let now: Vec<RuleSetLabels> = [stable.map(|m| labels("stable", m)), candidate.map(|m| labels("candidate", m))].into_iter().flatten().collect();
        self.ruleset_gone_except(rules, &now);
        for l in &now {
            self.ruleset_info.get_or_create(l).set(1);
        }
    }

    pub fn ruleset_gone(&self, rules: &str) {
        self.ruleset_gone_except(rules, &[]);
    }

    fn ruleset_gone_except(&self, rules: &str, keep: &[RuleSetLabels]) {
        let mut shown = self.ruleset_shown.lock().unwrap_or_else(|p| p.into_inner());
        for stale in shown.remove(rules).unwrap_or_default().iter().filter(|l| !keep.contains(l)) {
            self.ruleset_info.remove(stale);
        }
        if !keep.is_empty() {
            shown.insert(rules.into(), keep.to_vec());
        }
    }

    pub fn ruleset_rejected(&self, rules: &str, reason: &str) {
        self.ruleset_rejections.get_or_create(&RuleSetProblemLabels { rules: rules.into(), reason: reason.into() }).inc();
    }

    pub fn rollout_ended(&self, result: &str) {
        self.rollouts.get_or_create(&ResultLabels { result: result.into() }).inc();
    }

    /// Modules compiled and alive, and their bytes in memory.
    pub fn modules_compiled(&self, (count, bytes): (usize, usize)) {
        self.modules_compiled.set(count as i64);
        self.modules_compiled_bytes.set(bytes as i64);
    }

    /// One API request: its verb, resource, answer code and time.
    pub fn api_request(&self, verb: &str, resource: &str, code: &str, took: std::time::Duration) {
        self.api_request_seconds.get_or_create(&RequestLabels { verb: verb.into(), resource: resource.into() }).observe(took.as_secs_f64());
        self.api_requests.get_or_create(&RequestCodeLabels { verb: verb.into(), resource: resource.into(), code: code.into() }).inc();
    }

    /// One reconcile of `controller`, and whether it succeeded.
    pub fn reconcile_took(&self, controller: &str, succeeded: bool, took: std::time::Duration) {
        let result = if succeeded { "success" } else { "error" };
        self.reconcile_seconds.get_or_create(&ReconcileLabels { controller: controller.into(), result: result.into() }).observe(took.as_secs_f64());
    }

    /// A reconcile of the `name` controller started after waiting `wait` in its queue.
    pub fn queue_waited(&self, name: &str, wait: std::time::Duration) {
        self.queue_wait_seconds.get_or_create(&QueueLabels { name: name.into() }).observe(wait.as_secs_f64());
    }

    /// Where the `name` queue's depth is read from at each scrape, replacing an earlier source
    /// (a controller of a new term); a source that answers `None` (its queue gone) leaves the
    /// last figure.
    pub fn queue_depth_from(&self, name: &str, source: DepthSource) {
        let mut sources = self.depth_sources.lock().unwrap_or_else(|e| e.into_inner());
        sources.retain(|(n, _)| n != name);
        sources.push((name.to_string(), source));
    }

    /// How used instance slots are reset (one path, set once at start).
    pub fn instance_reset(&self, path: &str) {
        self.instance_reset.clear();
        self.instance_reset.get_or_create(&ResetLabels { path: path.into() }).set(1);
    }

    pub fn set_leader(&self, leading: bool) {
        self.leader.set(leading as i64);
    }

    /// The shard count, and how many this replica holds.
    pub fn set_shards(&self, count: u16, held: usize) {
        self.shards.set(i64::from(count));
        self.shards_held.set(held as i64);
        self.leader.set((held > 0) as i64);
    }

    pub fn shard_handover(&self, reason: &str) {
        self.shard_handovers.get_or_create(&ReasonLabels { reason: reason.into() }).inc();
    }

    pub fn lease_renewed(&self, at: jiff::Timestamp) {
        self.lease_last_renew.set(at.as_millisecond() as f64 / 1000.0);
    }

    pub fn lease_renew_failed(&self) {
        self.lease_renew_failures.inc();
    }

    /// Failed reconciles so far, all reasons (for tests and benchmarks).
    pub fn reconcile_errors_total(&self) -> u64 {
        self.sum("zundoko_reconcile_errors_total{")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_names_each_metric_and_reason_and_swaps_replace_module_info() {
        let m = Metrics::new();
        m.reconciled();
        m.reconcile_failed("GuestTrapped");
        m.reconcile_failed("GuestTrapped");
        m.reconcile_failed("ApiConflict");
        m.swap_rejected("WorldMismatch");
        let id = |digest| ModuleLabel { name: "zundoko-classic", version: "1.0.0", digest };
        m.module_serving(id("sha256:aaa"));
        m.module_serving(id("sha256:bbb"));
        let text = m.encode();
        assert!(text.contains("zundoko_reconciles_total 1"), "{text}");
        assert!(text.contains("zundoko_reconcile_errors_total{reason=\"GuestTrapped\"} 2"), "{text}");
        assert!(text.contains("zundoko_module_swaps_total{result=\"rejected\",reason=\"WorldMismatch\"} 1"), "{text}");
        assert!(text.contains("digest=\"sha256:bbb\"} 1"), "{text}");
        assert!(!text.contains("sha256:aaa"), "the replaced module is no longer reported: {text}");
        assert!(text.contains("# TYPE zundoko_guest_call_duration_seconds histogram"), "{text}");
        assert_eq!(m.reconcile_errors_total(), 3);
    }
}
