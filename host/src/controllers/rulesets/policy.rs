//! The cluster policy a tenant's rule set is held to (`ZundokoTenantPolicy`): which policy
//! selects its namespace (none: refused, deny by default), and what the policy says of the
//! rule set's spec before anything is read (its sources, candidate, follow, how many rule sets
//! the namespace has). What can be known only from the module's bytes (its signature, its
//! budget, its size, its compile) is handed down as [`TenantBounds`] to the supply, which
//! holds the module to them.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::core::{PartialObjectMeta, Selector, SelectorExt};
use kube::runtime::reflector::{ObjectRef, Store};

use crate::crd::{ModuleSource, ZundokoNamespacedRules, ZundokoRules, ZundokoTenantPolicy};
use crate::supply::oci::{ModuleRef, TrustedKey};
use crate::supply::sources::rulesets::Problem;
use crate::supply::tenant_bounds::{POLICY_REFUSED, TenantBounds};

/// What the tenants' policies are judged from: the policies, the namespaces' labels, the
/// tenants' rule sets (to count them), each listed by a watch.
#[derive(Clone)]
pub struct Tenancy {
    pub policies: Store<ZundokoTenantPolicy>,
    pub namespaces: Store<PartialObjectMeta<Namespace>>,
    pub rule_sets: Store<ZundokoNamespacedRules>,
    /// A bit per store listed at least once ([`POLICIES`], [`NAMESPACES`], [`RULE_SETS`]).
    pub listed: std::sync::Arc<std::sync::atomic::AtomicU8>,
    /// The writer of `rule_sets`, taken by the namespaced controller's watch.
    pub rule_sets_writer: std::sync::Arc<std::sync::Mutex<Option<kube::runtime::reflector::store::Writer<ZundokoNamespacedRules>>>>,
    /// Why the namespaces could not be listed, while they have not been: the API server's last
    /// refusal of the list (RBAC: the operator's ClusterRole lacks namespaces).
    pub namespaces_unlisted: std::sync::Arc<std::sync::Mutex<Option<ListFailure>>>,
    /// The same of the policies.
    pub policies_unlisted: std::sync::Arc<std::sync::Mutex<Option<ListFailure>>>,
}

pub const POLICIES: u8 = 1;
pub const NAMESPACES: u8 = 2;
pub const RULE_SETS: u8 = 4;

/// A tenant's rule set whose namespace's labels cannot be read: no policy can be judged, so
/// nothing of it serves (fail closed), and the status says what the operator must be granted.
pub const NAMESPACE_UNREADABLE: &str = "NamespaceUnreadable";
/// The same when the policies cannot be read.
pub const POLICIES_UNREADABLE: &str = "PoliciesUnreadable";

/// Whether `reason` says the rule set could not be judged for want of a list (looked at again
/// with backoff, not refused).
pub fn unreadable(reason: &str) -> bool {
    reason == NAMESPACE_UNREADABLE || reason == POLICIES_UNREADABLE
}

/// What a watch event says of its list: done (`Ok`), failed (the API server's answer), or
/// nothing (`None`: an object, a restart of the list).
pub fn list_outcome<K>(event: &Result<kube::runtime::watcher::Event<K>, kube::runtime::watcher::Error>) -> Option<Result<(), ListFailure>> {
    use kube::runtime::watcher::{Error, Event};
    match event {
        Ok(Event::InitDone) => Some(Ok(())),
        Err(Error::InitialListFailed(kube::Error::Api(status))) => Some(Err(ListFailure { code: status.code, message: status.message.clone() })),
        Err(Error::InitialListFailed(error)) => Some(Err(ListFailure { code: 0, message: error.to_string() })),
        _ => None,
    }
}

/// Whether a watch event may change a judgement (or what the listed objects name): an object
/// applied or deleted, a list done (not a list's start or its objects one by one, before it is
/// done).
pub fn changes<K>(event: &Result<kube::runtime::watcher::Event<K>, kube::runtime::watcher::Error>) -> bool {
    use kube::runtime::watcher::Event;
    matches!(event, Ok(Event::Apply(_) | Event::Delete(_) | Event::InitDone))
}

/// What an event of the policies' watch says of its list, and whether it may change a
/// judgement: as [`list_outcome`] and [`changes`], but a 404 (no ZundokoTenantPolicy CRD in
/// the cluster) is a list done with no policy in it that changes nothing by itself: the watch
/// retries it with its backoff, and only the first (a list done for the first time, [`wakes`])
/// wakes the tenants' rule sets, not every retry.
pub fn policies_outcome<K>(event: &Result<kube::runtime::watcher::Event<K>, kube::runtime::watcher::Error>) -> (Option<Result<(), ListFailure>>, bool) {
    match event {
        Err(kube::runtime::watcher::Error::InitialListFailed(kube::Error::Api(status))) if status.code == 404 => (Some(Ok(())), false),
        event => (list_outcome(event), changes(event)),
    }
}

/// Whether a list's `outcome` wakes every tenant's rule set: an event that `changes` a
/// judgement, the list done for the `first` time, or a failure other than the one `recorded`
/// (a list failing as before, at each retry of its watch, wakes nothing).
pub fn wakes(changes: bool, first: bool, recorded: Option<&ListFailure>, outcome: &Result<(), ListFailure>) -> bool {
    changes || first || recorded != outcome.as_ref().err()
}

/// Why the policies cannot be read, from the list's `failure`.
pub fn policies_unreadable(failure: &ListFailure) -> Problem {
    let said = crate::text::printable(&failure.message, 256);
    let message = if failure.code == 403 {
        format!(
            "the operator's service account cannot list ZundokoTenantPolicies (the API server refused it: {said}), so no policy can be matched to this namespace: grant it get, list and watch on zundokotenantpolicies cluster-wide (a ClusterRole rule apiGroups [\"zundokokiyoshi.kaitoy.github.com\"], resources [\"zundokotenantpolicies\"], verbs [\"get\", \"list\", \"watch\"], as deploy/rbac-cluster.yaml has)"
        )
    } else {
        format!("the operator cannot read the ZundokoTenantPolicies (their list failed, HTTP {}: {said}), so no policy can be matched to this namespace yet", failure.code)
    };
    Problem::new(POLICIES_UNREADABLE, message, true)
}

/// The API server's answer to a failed list: its HTTP code (403: RBAC refused it) and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListFailure {
    pub code: u16,
    pub message: String,
}

/// Why namespace `ns` cannot be read, from the list's `failure`.
pub fn namespace_unreadable(ns: &str, failure: &ListFailure) -> Problem {
    let said = crate::text::printable(&failure.message, 256);
    let message = if failure.code == 403 {
        format!(
            "the operator's service account cannot get namespace {ns} (the API server refused its list of namespaces: {said}), so no ZundokoTenantPolicy can be matched to it: grant it get, list and watch on namespaces cluster-wide (a ClusterRole rule apiGroups [\"\"], resources [\"namespaces\"], verbs [\"get\", \"list\", \"watch\"], as deploy/rbac-cluster.yaml has)"
        )
    } else {
        format!("the operator cannot read namespace {ns} (its list of namespaces failed, HTTP {}: {said}), so no ZundokoTenantPolicy can be matched to it yet", failure.code)
    };
    Problem::new(NAMESPACE_UNREADABLE, message, true)
}

impl Tenancy {
    /// The policies, one namespace and its rule sets as read once (what `explain` reads from
    /// the cluster), judged by [`judge`](Self::judge) as the controller judges from its watches.
    pub fn listed_once(policies: Vec<ZundokoTenantPolicy>, namespace: PartialObjectMeta<Namespace>, rule_sets: Vec<ZundokoNamespacedRules>) -> Tenancy {
        use kube::runtime::watcher::Event;
        fn filled<K>(objects: impl IntoIterator<Item = K>) -> Store<K>
        where
            K: kube::runtime::reflector::Lookup + Clone + 'static,
            K::DynamicType: Eq + std::hash::Hash + Clone + Default,
        {
            let (store, mut writer) = kube::runtime::reflector::store();
            for object in objects {
                writer.apply_watcher_event(&Event::Apply(object));
            }
            store
        }
        Tenancy {
            policies: filled(policies),
            namespaces: filled([namespace]),
            rule_sets: filled(rule_sets),
            listed: std::sync::Arc::new(std::sync::atomic::AtomicU8::new(POLICIES | NAMESPACES | RULE_SETS)),
            rule_sets_writer: std::sync::Arc::default(),
            namespaces_unlisted: std::sync::Arc::default(),
            policies_unlisted: std::sync::Arc::default(),
        }
    }

    /// The bounds of the tenant rule set `zr` (seen as a ZundokoRules in namespace `ns`), or
    /// the refusal naming the policy and its field, or [`NAMESPACE_UNREADABLE`] while the
    /// namespaces' list fails ([`POLICIES_UNREADABLE`], the policies'). `None` while the policies, the namespaces or the rule sets have
    /// not been listed yet.
    pub fn judge(&self, zr: &ZundokoRules, ns: &str, min_poll: Duration) -> Option<Result<TenantBounds, Problem>> {
        let listed = self.listed.load(std::sync::atomic::Ordering::SeqCst);
        if listed & NAMESPACES == 0
            && let Some(failure) = self.namespaces_unlisted.lock().unwrap_or_else(|p| p.into_inner()).as_ref()
        {
            return Some(Err(namespace_unreadable(ns, failure)));
        }
        if listed & POLICIES == 0
            && let Some(failure) = self.policies_unlisted.lock().unwrap_or_else(|p| p.into_inner()).as_ref()
        {
            return Some(Err(policies_unreadable(failure)));
        }
        if listed != POLICIES | NAMESPACES | RULE_SETS {
            return None;
        }
        let Some(namespace) = self.namespaces.get(&ObjectRef::new(ns)) else {
            return Some(Err(Problem::new("NoTenantPolicy", format!("namespace {ns} is not listed: no ZundokoTenantPolicy can select it"), true)));
        };
        let labels = namespace.labels().clone();
        Some(self.select(ns, &labels).and_then(|policy| check_spec(&policy, zr, ns, &self.siblings(ns), min_poll)))
    }

    /// The one policy selecting namespace `ns` (by its labels).
    fn select(&self, ns: &str, labels: &BTreeMap<String, String>) -> Result<std::sync::Arc<ZundokoTenantPolicy>, Problem> {
        let mut selecting: Vec<_> = self.policies.state().into_iter().filter(|p| selects(p, labels)).collect();
        selecting.sort_by_key(|p| p.name_any());
        match selecting.len() {
            0 => Err(Problem::new(
                "NoTenantPolicy",
                format!("no ZundokoTenantPolicy selects namespace {ns}: a namespace may bring its own rules only once a cluster administrator's policy selects it"),
                false,
            )),
            1 => Ok(selecting.remove(0)),
            _ => {
                let names: Vec<String> = selecting.iter().map(|p| p.name_any()).collect();
                Err(Problem::new("PolicyAmbiguous", format!("ZundokoTenantPolicies {} all select namespace {ns}: exactly one may", names.join(", ")), false))
            }
        }
    }

    /// The namespace's rule sets, oldest first (by creation, then name): the first
    /// `maxRuleSets` serve.
    fn siblings(&self, ns: &str) -> Vec<(String, bool)> {
        let mut all: Vec<_> = self.rule_sets.state().into_iter().filter(|r| r.namespace().as_deref() == Some(ns)).collect();
        all.sort_by(|a, b| (a.metadata.creation_timestamp.as_ref().map(|t| t.0), a.name_any()).cmp(&(b.metadata.creation_timestamp.as_ref().map(|t| t.0), b.name_any())));
        all.iter().map(|r| (r.name_any(), follows(&r.spec.rules.source) && r.spec.rules.candidate.is_none())).collect()
    }
}

/// Whether `policy` selects a namespace with these labels; a selector that does not parse
/// selects none.
fn selects(policy: &ZundokoTenantPolicy, labels: &BTreeMap<String, String>) -> bool {
    Selector::try_from(policy.spec.namespace_selector.clone()).is_ok_and(|selector| selector.matches(labels))
}

fn follows(source: &ModuleSource) -> bool {
    source.oci.as_ref().is_some_and(|o| o.follow)
}

/// A refusal by `policy`'s `field`.
fn refused(policy: &ZundokoTenantPolicy, field: &str, why: String) -> Problem {
    Problem::new(POLICY_REFUSED, format!("ZundokoTenantPolicy {} {field}: {why}", policy.name_any()), false)
}

/// The spec of rule set `zr` in namespace `ns` against `policy`; `siblings` are the
/// namespace's rule sets oldest first, and whether each follows a tag.
fn check_spec(policy: &ZundokoTenantPolicy, zr: &ZundokoRules, ns: &str, siblings: &[(String, bool)], min_poll: Duration) -> Result<TenantBounds, Problem> {
    let spec = &policy.spec;
    let name = zr.name_any();
    let position = siblings.iter().position(|(n, _)| *n == name).unwrap_or(siblings.len());
    if position >= spec.max_rule_sets as usize {
        return Err(refused(policy, "spec.maxRuleSets", format!("namespace {ns} may have {} rule sets, and {} older ones serve", spec.max_rule_sets, position.min(spec.max_rule_sets as usize))));
    }
    let sources = std::iter::once(("spec.source", &zr.spec.source)).chain(zr.spec.candidate.as_ref().map(|c| ("spec.candidate.source", &c.source)));
    for (at, source) in sources {
        if source.config_map.is_some() && !spec.sources.config_maps {
            return Err(refused(policy, "spec.sources.configMaps", format!("{at} names a ConfigMap, and tenants' modules may not come from ConfigMaps")));
        }
        if let Some(oci) = &source.oci {
            let repository = oci.reference.parse::<ModuleRef>().map(|r| r.repository_name()).unwrap_or_else(|_| oci.reference.clone());
            if !spec.sources.registries.iter().any(|glob| glob_matches(glob, &repository)) {
                let allowed = if spec.sources.registries.is_empty() { "none".to_string() } else { spec.sources.registries.join(", ") };
                return Err(refused(policy, "spec.sources.registries", format!("{at} names {repository}, which matches none of the registries tenants may use ({allowed})")));
            }
        }
    }
    if zr.spec.candidate.is_some() && !spec.candidates {
        return Err(refused(policy, "spec.candidates", "tenants may not roll out candidates: remove spec.candidate".into()));
    }
    if follows(&zr.spec.source) && zr.spec.candidate.is_none() {
        let followed_before = siblings.iter().take(position).filter(|(_, f)| *f).count();
        if followed_before >= spec.max_followed_tags as usize {
            return Err(refused(policy, "spec.maxFollowedTags", format!("namespace {ns} may follow {} tags, and {followed_before} older rule sets follow one", spec.max_followed_tags)));
        }
    }
    let required_keys = spec
        .required_keys
        .iter()
        .enumerate()
        .map(|(i, pem)| TrustedKey::from_pem(&format!("ZundokoTenantPolicy {} requiredKeys[{i}]", policy.name_any()), pem))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|why| refused(policy, "spec.requiredKeys", why))?;
    let c = &spec.ceilings;
    Ok(TenantBounds {
        policy: policy.name_any(),
        required_keys,
        fuel: c.fuel,
        memory_bytes: c.memory_mib.map(|m| m.saturating_mul(1 << 20)),
        module_bytes: c.module_mib.map(|m| m.saturating_mul(1 << 20)),
        compile_memory_bytes: c.compile_memory_mib.map(|m| m.saturating_mul(1 << 20)),
        compile_time: c.compile_seconds.map(Duration::from_secs),
        min_poll: spec.min_poll_seconds.map(Duration::from_secs).map(|p| p.max(min_poll)),
    })
}

/// `*` matches any run of characters (`/` too); everything else matches itself.
pub fn glob_matches(glob: &str, text: &str) -> bool {
    let mut parts = glob.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else { return false };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else { return rest.is_empty() };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_policy_crd_is_a_list_done_that_wakes_the_rule_sets_once_not_at_every_retry() {
        use kube::runtime::watcher::{Error, Event};
        let failed = |code: u16| -> Result<Event<ZundokoTenantPolicy>, Error> {
            Err(Error::InitialListFailed(kube::Error::Api(kube::core::Status::failure("refused", "Refused").with_code(code).boxed())))
        };
        let forbidden = ListFailure { code: 403, message: "refused".into() };
        assert_eq!(policies_outcome(&failed(404)), (Some(Ok(())), false), "no CRD: listed, nothing changed");
        assert_eq!(policies_outcome(&failed(403)), (Some(Err(forbidden.clone())), false));
        assert_eq!(policies_outcome::<ZundokoTenantPolicy>(&Ok(Event::InitDone)), (Some(Ok(())), true));
        // The first 404 wakes them (the list counted as done for the first time); its retries do not.
        assert!(wakes(false, true, None, &Ok(())));
        assert!(!wakes(false, false, None, &Ok(())));
        // A refusal wakes them when it is new, not when the retry is refused the same way.
        assert!(wakes(false, false, None, &Err(forbidden.clone())));
        assert!(!wakes(false, false, Some(&forbidden), &Err(forbidden.clone())));
        assert!(wakes(false, false, Some(&forbidden), &Ok(())), "the refusal is over");
        assert!(wakes(true, false, None, &Ok(())), "a policy applied or deleted");
    }

    #[test]
    fn a_glob_matches_a_run_of_any_characters_at_each_star_and_itself_elsewhere() {
        assert!(glob_matches("ghcr.io/team-a/*", "ghcr.io/team-a/rules"));
        assert!(glob_matches("ghcr.io/team-a/*", "ghcr.io/team-a/x/y"));
        assert!(!glob_matches("ghcr.io/team-a/*", "ghcr.io/team-b/rules"));
        assert!(!glob_matches("ghcr.io/team-a/*", "evil.io/ghcr.io/team-a/rules"));
        assert!(glob_matches("*.example/*", "r.example/a"));
        assert!(!glob_matches("r.example/a", "r.example/ab"));
        assert!(glob_matches("r.example/a", "r.example/a"));
        assert!(glob_matches("*", "anything/at/all"));
        assert!(!glob_matches("a*a", "a"));
        assert!(glob_matches("a*a", "aa"));
    }
}
