//! Each tenant's use of the operator (`supply/tenant.rs`), labelled by namespace: call turns
//! given, calls made and their guest seconds (any language's), seconds its compiles waited for
//! their turn, pull tries, and bytes it keeps in the cache. The cardinality is bounded: the first `MAX_NAMESPACES` namespaces seen keep a label of
//! their own, any later one counts under `_other` (no namespace name holds an underscore; the
//! cluster's rule sets and the default module are `_cluster`). Totals are read from the supply
//! when `/metrics` is scraped (the wiring hands them down as plain values: [`TenantUse`]).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Namespaces with a label of their own, at most.
pub const MAX_NAMESPACES: usize = 50;
pub const OTHER: &str = "_other";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NamespaceLabels {
    /// The tenant's namespace, `_cluster` or `_other`.
    pub namespace: String,
}

/// One tenant's totals since the start, as the supply counts them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TenantUse {
    /// The tenant's label (`Tenant::label`).
    pub namespace: String,
    pub call_turns: u64,
    /// Decisions its modules made, whatever their language, and the guest time they took.
    pub calls: u64,
    pub call_seconds: f64,
    pub compile_wait_seconds: f64,
    pub pulls: u64,
    pub cache_bytes: u64,
}

/// What reads the totals when `/metrics` is scraped.
pub type ReadUse = Box<dyn Fn() -> Vec<TenantUse> + Send + Sync>;

pub struct TenantMetrics {
    call_turns: Family<NamespaceLabels, Counter>,
    calls: Family<NamespaceLabels, Counter>,
    call_seconds: Family<NamespaceLabels, Counter<f64>>,
    compile_wait: Family<NamespaceLabels, Counter<f64>>,
    pulls: Family<NamespaceLabels, Counter>,
    cache_bytes: Family<NamespaceLabels, Gauge>,
    state: Mutex<State>,
}

/// A label's counters' totals as last counted.
#[derive(Default)]
struct Counted {
    call_turns: u64,
    calls: u64,
    call_seconds: f64,
    compile_wait_seconds: f64,
    pulls: u64,
}

#[derive(Default)]
struct State {
    named: HashSet<String>,
    /// Each label's totals as last counted (counters go up by the difference).
    counted: HashMap<String, Counted>,
    read: Option<ReadUse>,
}

impl TenantMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = TenantMetrics {
            call_turns: Family::default(),
            calls: Family::default(),
            call_seconds: Family::default(),
            compile_wait: Family::default(),
            pulls: Family::default(),
            cache_bytes: Family::default(),
            state: Mutex::default(),
        };
        registry.register("tenant_call_turns", "WASI call turns given, by the tenant owning the rules (namespace, _cluster or _other)", metrics.call_turns.clone());
        registry.register("tenant_calls", "Guest calls made (decisions), by the tenant owning the rules, whatever the module's language", metrics.calls.clone());
        registry.register("tenant_call_seconds", "Guest time of those calls (instance, call and plan check), by tenant", metrics.call_seconds.clone());
        registry.register("tenant_compile_wait_seconds", "Seconds compiles waited for their turn, by tenant", metrics.compile_wait.clone());
        registry.register("tenant_pulls", "Registry tries made (a permit given), by tenant", metrics.pulls.clone());
        registry.register("tenant_cache_bytes", "Bytes a tenant keeps in the module cache (--cache-max-mib is shared between tenants)", metrics.cache_bytes.clone());
        metrics
    }

    /// Read the totals with `read` at every scrape.
    pub fn read_with(&self, read: ReadUse) {
        self.lock().read = Some(read);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Bring the metrics to the totals read now (before an encode).
    pub fn refresh(&self) {
        let mut state = self.lock();
        let Some(read) = state.read.as_ref() else { return };
        let uses = read();
        let mut by_label: HashMap<String, TenantUse> = HashMap::new();
        for used in uses {
            let label = if state.named.contains(&used.namespace) || state.named.len() < MAX_NAMESPACES {
                state.named.insert(used.namespace.clone());
                used.namespace.clone()
            } else {
                OTHER.to_owned()
            };
            let sum = by_label.entry(label).or_default();
            sum.call_turns += used.call_turns;
            sum.calls += used.calls;
            sum.call_seconds += used.call_seconds;
            sum.compile_wait_seconds += used.compile_wait_seconds;
            sum.pulls += used.pulls;
            sum.cache_bytes += used.cache_bytes;
        }
        for (label, used) in by_label {
            let labels = NamespaceLabels { namespace: label.clone() };
            let before = state.counted.entry(label).or_default();
            self.call_turns.get_or_create(&labels).inc_by(used.call_turns.saturating_sub(before.call_turns));
            self.calls.get_or_create(&labels).inc_by(used.calls.saturating_sub(before.calls));
            self.call_seconds.get_or_create(&labels).inc_by((used.call_seconds - before.call_seconds).max(0.0));
            self.compile_wait.get_or_create(&labels).inc_by((used.compile_wait_seconds - before.compile_wait_seconds).max(0.0));
            self.pulls.get_or_create(&labels).inc_by(used.pulls.saturating_sub(before.pulls));
            self.cache_bytes.get_or_create(&labels).set(i64::try_from(used.cache_bytes).unwrap_or(i64::MAX));
            *before = Counted {
                call_turns: before.call_turns.max(used.call_turns),
                calls: before.calls.max(used.calls),
                call_seconds: before.call_seconds.max(used.call_seconds),
                compile_wait_seconds: before.compile_wait_seconds.max(used.compile_wait_seconds),
                pulls: before.pulls.max(used.pulls),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_past_the_bound_count_as_other() {
        let mut registry = Registry::with_prefix("zundoko");
        let metrics = TenantMetrics::register(&mut registry);
        let uses = |turns: u64| -> Vec<TenantUse> {
            (0..MAX_NAMESPACES + 10).map(|i| TenantUse { namespace: format!("ns-{i:03}"), call_turns: turns, ..TenantUse::default() }).collect()
        };
        metrics.read_with(Box::new(move || uses(3)));
        metrics.refresh();
        metrics.refresh();
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        let lines: Vec<_> = text.lines().filter(|l| l.starts_with("zundoko_tenant_call_turns_total{")).collect();
        assert_eq!(lines.len(), MAX_NAMESPACES + 1, "{MAX_NAMESPACES} namespaces and _other: {lines:?}");
        assert!(lines.contains(&"zundoko_tenant_call_turns_total{namespace=\"_other\"} 30"), "ten namespaces' 3 each, counted once: {lines:?}");
        assert!(lines.contains(&"zundoko_tenant_call_turns_total{namespace=\"ns-000\"} 3"));
    }

    #[test]
    fn a_tenants_calls_and_their_seconds_are_exported_by_its_namespace_as_they_go_up() {
        let mut registry = Registry::with_prefix("zundoko");
        let metrics = TenantMetrics::register(&mut registry);
        let made = std::sync::Arc::new(std::sync::Mutex::new((3, 0.25)));
        let read = made.clone();
        metrics.read_with(Box::new(move || {
            let (calls, call_seconds) = *read.lock().unwrap();
            vec![TenantUse { namespace: "team-a".into(), calls, call_seconds, ..TenantUse::default() }, TenantUse { namespace: "team-b".into(), calls: 7, call_seconds: 2.0, ..TenantUse::default() }]
        }));
        let scrape = || {
            metrics.refresh();
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
            text.lines().filter(|l| l.starts_with("zundoko_tenant_call")).map(str::to_owned).collect::<Vec<_>>()
        };
        let first = scrape();
        for line in ["zundoko_tenant_calls_total{namespace=\"team-a\"} 3", "zundoko_tenant_call_seconds_total{namespace=\"team-a\"} 0.25", "zundoko_tenant_calls_total{namespace=\"team-b\"} 7", "zundoko_tenant_call_seconds_total{namespace=\"team-b\"} 2.0"] {
            assert!(first.iter().any(|l| l == line), "{line} not in {first:?}");
        }
        // team-a calls twice more, for half a second: its counters go up by that, team-b's stay.
        *made.lock().unwrap() = (5, 0.75);
        let then = scrape();
        for line in ["zundoko_tenant_calls_total{namespace=\"team-a\"} 5", "zundoko_tenant_call_seconds_total{namespace=\"team-a\"} 0.75", "zundoko_tenant_calls_total{namespace=\"team-b\"} 7", "zundoko_tenant_call_seconds_total{namespace=\"team-b\"} 2.0"] {
            assert!(then.iter().any(|l| l == line), "{line} not in {then:?}");
        }
    }
}
