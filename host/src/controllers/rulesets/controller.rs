//! The ZundokoRules controller: for each rule set, check its sources (a module per digest,
//! compiled once), advance its candidate's rollout from what the status recorded and what the
//! Hikawa reconciles counted, publish what serves ([`RuleSets::publish`]), and tell the user
//! in the status and in Events. Level-triggered like the Hikawa controller: everything it
//! decides comes from the resource, its ConfigMaps and its status, so a restarted operator
//! resumes a rollout where the status left it.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as watch};
use kube::{Api, Client, ResourceExt};
use tokio::sync::mpsc;
use tracing::{Instrument, info, info_span, warn};

use crate::supply::serving::rollout::{self, Tally, Thresholds};
use crate::supply::sources::rulesets::{Checked, Problem, SourceSpec, Sources};
use super::status::{self, Findings, PROGRESSING, PROMOTED, ROLLED_BACK};
use crate::supply::serving::{Candidate, RuleSets, Serving, Unavailable};
use crate::crd::{Hikawa, ReplicaCount, ZundokoRules, ZundokoRulesStatus};
use crate::supply::ModuleLoader;
use crate::supply::contract::rules::Rules;
use crate::supply::sandbox::RulesModule;
use crate::process::leader::{ShardTable, assign};
use crate::process::metrics::Metrics;
use crate::controllers::writes::events::{EventSink, EventType};

/// A rule set's status is written at most this often (a rollout's counts change with every
/// decision); a change of phase waits at most this long too.
const STATUS_EVERY: Duration = Duration::from_secs(1);
/// Without a rollout in progress, how often the count of Hikawas is refreshed.
const REFRESH_EVERY: Duration = Duration::from_secs(10);
/// A source's ConfigMap is read (and a new module compiled) at most this often per rule set:
/// a ConfigMap rewritten in a loop costs at most one compile a second.
const READ_EVERY: Duration = Duration::from_secs(1);

/// What this process remembers of a rule set between reconciles: never an input to what
/// serves beyond the module that served last (kept while a newer source is refused).
#[derive(Default)]
struct Memo {
    stable: Option<Checked>,
    candidate: Option<Checked>,
    /// The last module the source gave that passed its checks.
    last_stable: Option<Arc<RulesModule>>,
    checked_at: Option<String>,
    /// The status as last written (the cache may not show it yet), and when.
    written: Option<(ZundokoRulesStatus, Instant)>,
    /// This replica's own count as it last wrote it (not being the writer), and when.
    counted: Option<(ReplicaCount, Instant)>,
    /// When each source's ConfigMap (the source's, the candidate's) was last read.
    read_at: [Option<Instant>; 2],
    failures: u32,
    /// A tag resolved once: the reference as written (normalized) and the digest that serves,
    /// until the status records it (then the status says).
    pinned: Option<(String, String)>,
    /// A followed tag: what it pointed at when last resolved, and when it was tried.
    followed: Option<Followed>,
}

struct Followed {
    written: String,
    digest: Option<String>,
    tried_at: Instant,
    /// Tries in a row that failed: the next waits longer (at most the poll interval).
    failures: u32,
    problem: Option<Problem>,
}

/// After a registry failure that may pass, an artifact is tried again this long after.
const OCI_RETRY: Duration = Duration::from_secs(5);
/// How often a followed tag is resolved again, unless the rule set says.
const FOLLOW_EVERY: Duration = Duration::from_secs(60);

pub struct Context {
    /// Reads, and this replica's own count in a rule set's status.
    client: Client,
    /// A rule set's status and Events are written by one replica: the holder of its shard.
    shards: Arc<ShardTable>,
    sets: Arc<RuleSets>,
    sources: Sources,
    hikawas: Store<Hikawa>,
    /// Per shard: Events through the shard's fenced client.
    events: Vec<EventSink>,
    metrics: Arc<Metrics>,
    modules: Arc<ModuleLoader>,
    /// By uid: a rule set deleted and created again under its name starts afresh.
    memo: Mutex<HashMap<String, Memo>>,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API error: {0}")]
    Kube(#[from] kube::Error),
}

/// What the rule set controller needs.
pub struct Settings {
    /// Namespaces whose ConfigMaps (and pull secrets) rule sets may name.
    pub namespaces: Vec<String>,
    pub instance: String,
    /// Where artifacts are pulled from (the operator's one registry client and cache).
    pub registry: Arc<crate::supply::oci::Registry>,
}

/// Run the rule set controller until `shutdown`. `wake` names rule sets to reconcile at once.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    client: Client,
    shards: Arc<ShardTable>,
    sets: Arc<RuleSets>,
    wake: mpsc::UnboundedReceiver<String>,
    hikawas: Store<Hikawa>,
    modules: Arc<ModuleLoader>,
    metrics: Arc<Metrics>,
    settings: Settings,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let (sources, configmaps) = Sources::watch(&client, &settings.namespaces, modules.clone(), settings.registry.clone());
    let ctx = Arc::new(Context {
        client: client.clone(),
        events: (0..shards.count).map(|s| EventSink::new(shards.client(s).clone(), "zundoko-operator", &settings.instance)).collect(),
        shards,
        sets: sets.clone(),
        sources,
        hikawas,
        metrics,
        modules,
        memo: Mutex::default(),
    });
    let (store, writer) = reflector::store();
    let rule_sets = {
        let (store, ctx) = (store.clone(), ctx.clone());
        reflector::reflector(
            writer,
            watch(Api::<ZundokoRules>::all(client), watcher::Config::default()).default_backoff().modify(|zr| {
                zr.metadata.managed_fields = None;
                zr.metadata.annotations = None;
            }),
        )
        .inspect(move |event| match event {
            Ok(Event::Apply(zr) | Event::InitApply(zr)) => ctx.sets.announce(&zr.name_any()),
            Ok(Event::Delete(zr)) => ctx.forget(&zr.name_any(), zr.uid().as_deref()),
            Ok(Event::InitDone) => {
                let alive: std::collections::HashSet<String> = store.state().iter().map(|zr| zr.name_any()).collect();
                ctx.sets.retain(|name| alive.contains(name));
                ctx.sets.set_synced();
            }
            // Without the ZundokoRules CRD there are no rule sets: Hikawas naming one hear so.
            Err(watcher::Error::InitialListFailed(kube::Error::Api(status))) if status.code == 404 => ctx.sets.set_synced(),
            Err(error) => ctx.sets.set_unlistable(error.to_string()),
            _ => {}
        })
        .applied_objects()
    };
    let named = {
        let store = store.clone();
        move |cm: kube::core::PartialObjectMeta<k8s_openapi::api::core::v1::ConfigMap>| {
            let (ns, name) = (cm.namespace().unwrap_or_default(), cm.name_any());
            store
                .state()
                .iter()
                .filter(|zr| names_configmap(zr, &ns, &name))
                .map(|zr| ObjectRef::from_obj(zr.as_ref()))
                .collect::<Vec<_>>()
        }
    };
    let woken = futures::stream::unfold(wake, |mut wake| async move { wake.recv().await.map(|name| (ObjectRef::<ZundokoRules>::new(&name), wake)) });
    info!(namespaces = ?settings.namespaces, "starting the ZundokoRules controller");
    Controller::for_stream(rule_sets, store)
        .watches_stream(configmaps, named)
        .reconcile_on(woken)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "rule set reconcile failed");
            }
        })
        .await;
    info!("the ZundokoRules controller stopped");
}

fn names_configmap(zr: &ZundokoRules, namespace: &str, name: &str) -> bool {
    let sources = std::iter::once(&zr.spec.source).chain(zr.spec.candidate.as_ref().map(|c| &c.source));
    sources.filter_map(|s| s.config_map.as_ref()).any(|cm| cm.namespace == namespace && cm.name == name)
}

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

impl Context {
    fn forget(&self, name: &str, uid: Option<&str>) {
        self.sets.remove(name);
        if let Some(uid) = uid {
            self.memo.lock().unwrap_or_else(|p| p.into_inner()).remove(uid);
        }
        self.metrics.ruleset_gone(name);
    }

    fn with_memo<R>(&self, uid: &str, f: impl FnOnce(&mut Memo) -> R) -> R {
        let mut memo = self.memo.lock().unwrap_or_else(|p| p.into_inner());
        f(memo.entry(uid.to_string()).or_default())
    }

    /// Check a source, remembering what was found. `Err(retry_in)` until its namespace is
    /// listed, or while it was read less than `READ_EVERY` ago and must be read again.
    async fn check(&self, uid: &str, spec: &SourceSpec, candidate: bool, pinned_by: &'static str) -> Result<Result<Checked, Duration>, Error> {
        let (last, read_at) = self.with_memo(uid, |m| (if candidate { m.candidate.clone() } else { m.stable.clone() }, m.read_at[usize::from(candidate)]));
        let wait = read_at.map(|at| READ_EVERY.saturating_sub(at.elapsed())).filter(|d| !d.is_zero());
        let Some(checked) = self.sources.check(spec, last.as_ref(), pinned_by, wait.is_some(), OCI_RETRY).await? else {
            return Ok(Err(wait.unwrap_or(Duration::from_millis(200))));
        };
        let fresh = last.as_ref().is_none_or(|l| l.spec != checked.spec || l.resource_version != checked.resource_version);
        self.with_memo(uid, |m| {
            if fresh {
                m.checked_at = Some(crate::controllers::writes::status::rfc3339_millis(now_ms()));
                m.read_at[usize::from(candidate)] = Some(Instant::now());
            }
            if candidate {
                m.candidate = Some(checked.clone());
            } else {
                if let Ok(module) = &checked.outcome {
                    m.last_stable = Some(module.clone());
                }
                m.stable = Some(checked.clone());
            }
        });
        if fresh {
            self.metrics.modules_compiled(self.modules.footprint());
        }
        Ok(Ok(checked))
    }

    /// What a followed tag points at: resolved again once `poll` has passed since the last
    /// try (sooner after a failure, with backoff); meanwhile what it pointed at last. The
    /// problem, if the last try failed.
    async fn follow(&self, uid: &str, spec: &SourceSpec, written: &str, poll: Duration) -> (Option<String>, Option<Problem>) {
        let Some(oci) = spec.oci() else { return (None, None) };
        let due = self.with_memo(uid, |m| match m.followed.as_ref().filter(|f| f.written == written) {
            None => None,
            Some(f) => {
                let wait = if f.failures == 0 { poll } else { (OCI_RETRY * (1 << (f.failures - 1).min(4))).min(poll) };
                (f.tried_at.elapsed() < wait).then(|| (f.digest.clone(), f.problem.clone()))
            }
        });
        if let Some(known) = due {
            return known;
        }
        let resolved = self.sources.resolve(oci).await;
        self.with_memo(uid, |m| {
            let last = m.followed.take().filter(|f| f.written == written);
            let followed = match resolved {
                Ok(digest) => Followed { written: written.into(), digest: Some(digest), tried_at: Instant::now(), failures: 0, problem: None },
                Err(problem) => {
                    warn!(reference = written, reason = %problem.reason, message = %problem.message, "cannot resolve the followed tag; what serves keeps serving");
                    Followed {
                        written: written.into(),
                        digest: last.as_ref().and_then(|l| l.digest.clone()),
                        tried_at: Instant::now(),
                        failures: last.map_or(1, |l| l.failures.saturating_add(1)),
                        problem: Some(problem),
                    }
                }
            };
            let known = (followed.digest.clone(), followed.problem.clone());
            m.followed = Some(followed);
            known
        })
    }
}

/// The digest of a pinned reference `REGISTRY/REPOSITORY@sha256:...`.
fn digest_of(reference: &str) -> Option<String> {
    reference.rsplit_once('@').map(|(_, d)| d.to_string())
}

async fn reconcile(zr: Arc<ZundokoRules>, ctx: Arc<Context>) -> Result<Action, Error> {
    let span = info_span!("rules", name = %zr.name_any());
    reconcile_inner(zr, ctx).instrument(span).await
}

async fn reconcile_inner(zr: Arc<ZundokoRules>, ctx: Arc<Context>) -> Result<Action, Error> {
    let (name, uid) = (zr.name_any(), zr.uid().unwrap_or_default());
    // The status as last written: this process's last write if the cache does not show it yet.
    // One writer per rule set: the holder of its shard. The others serve as its status says,
    // and write only their own count. A writer's own last write counts until the cache
    // shows it; a replica that does not write (or no longer does) goes by the cache alone.
    let shard = assign::shard_of_rules(&name, ctx.shards.count);
    let writes = ctx.shards.holds(shard);
    if !writes {
        ctx.with_memo(&uid, |m| m.written = None);
    }
    let before = ctx.with_memo(&uid, |m| m.written.as_ref().map(|w| w.0.clone())).or_else(|| zr.status.clone());

    // A tag in a registry is resolved once: the digest the status records for it (this
    // replica's last write, another's, or a process's before a restart) serves again.
    let oci = zr.spec.source.oci.as_ref();
    let written = oci.and_then(|o| o.reference.parse::<crate::supply::oci::ModuleRef>().ok()).filter(|r| r.is_tag()).map(|r| r.to_string());
    let pinned_digest = written.as_ref().and_then(|written| {
        let recorded = before.as_ref().and_then(|s| s.module.as_ref()).filter(|m| m.resolved_from.as_deref() == Some(written.as_str()));
        recorded
            .and_then(|m| m.reference.as_deref().and_then(digest_of))
            .or_else(|| ctx.with_memo(&uid, |m| m.pinned.clone()).filter(|(w, _)| w == written).map(|(_, d)| d))
    });

    // The sources: the module of each, or why there is none.
    let spec = SourceSpec::new(&zr.spec.source, zr.spec.sha256.as_deref(), pinned_digest.clone());
    let stable = match ctx.check(&uid, &spec, false, "spec.sha256").await? {
        Ok(checked) => checked,
        Err(retry_in) => return Ok(Action::requeue(retry_in)),
    };
    let stable_digest = stable.pinned.as_ref().and_then(|p| p.digest.clone());
    if let (Some(written), Some(digest), Ok(_)) = (&written, &stable_digest, &stable.outcome) {
        ctx.with_memo(&uid, |m| m.pinned = Some((written.clone(), digest.clone())));
    }
    // A followed tag that moved: its artifact is the candidate (unless the spec names one).
    let mut follow_problem = None;
    let mut followed = None;
    if let (Some(o), Some(written)) = (oci.filter(|o| o.follow && zr.spec.candidate.is_none()), &written) {
        let poll = o.poll_seconds.map_or(FOLLOW_EVERY, Duration::from_secs);
        let (digest, problem) = ctx.follow(&uid, &spec, written, poll).await;
        follow_problem = problem;
        if let Some(digest) = digest.filter(|d| Some(d) != stable_digest.as_ref()) {
            if stable.outcome.is_err() && ctx.with_memo(&uid, |m| m.last_stable.is_none()) {
                // Nothing serves: what the tag points at now is simply the source's module.
                info!(reference = %written, %digest, "the followed tag moved while nothing serves: checking what it points at");
                ctx.with_memo(&uid, |m| m.pinned = Some((written.clone(), digest)));
                return Ok(Action::requeue(Duration::from_millis(10)));
            }
            followed = Some((SourceSpec::new(&zr.spec.source, zr.spec.sha256.as_deref(), Some(digest)), o.rollout.clone().unwrap_or_default()));
        }
    }
    let candidate_source = match (&zr.spec.candidate, followed) {
        (Some(c), _) => Some((SourceSpec::new(&c.source, c.sha256.as_deref(), None), c.rollout.clone(), "spec.candidate.sha256")),
        (None, Some((spec, rollout))) => Some((spec, rollout, "spec.sha256")),
        (None, None) => None,
    };
    let follows = zr.spec.candidate.is_none() && candidate_source.is_some();
    let candidate = match &candidate_source {
        Some((spec, _, pinned_by)) => match ctx.check(&uid, spec, true, pinned_by).await? {
            Ok(checked) => Some(checked),
            Err(retry_in) => return Ok(Action::requeue(retry_in)),
        },
        None => {
            // No candidate: one added later (even the same bytes again) starts afresh.
            ctx.with_memo(&uid, |m| m.candidate = None);
            ctx.sets.forget_candidate(&name);
            None
        }
    };
    // The source's module, or the one it gave last while a newer one is refused (if the pin,
    // which may have changed since, allows it).
    let pinned = |m: &Arc<RulesModule>| spec.pin.as_ref().is_none_or(|pin| *pin == m.identity().digest);
    let stable_module = stable.outcome.as_ref().ok().cloned().or_else(|| ctx.with_memo(&uid, |m| m.last_stable.clone()).filter(pinned));
    let candidate_module = candidate.as_ref().and_then(|c| c.outcome.as_ref().ok().cloned());
    let thresholds = candidate_source.as_ref().map(|(_, rollout, _)| Thresholds::from(rollout));
    let now = now_ms();
    // The rollout: from the status (so a restart resumes it) and what was counted here.
    let recorded = before.as_ref().and_then(|s| s.rollout.as_ref());
    // Replicas count their own decisions: this one's entry, and the others' as the cache
    // shows them (fresher than this replica's last write).
    let me = ctx.shards.identity.as_str();
    let rollout = match (&candidate_module, &thresholds) {
        (Some(module), Some(thresholds)) => {
            let digest = &module.identity().digest;
            let previous = recorded.filter(|r| &r.digest == digest);
            if let Some(p) = previous {
                // A status written before replicas counted apart: its count is this one's.
                let mine = match p.replicas.get(me) {
                    Some(c) if &c.digest == digest => Tally { decisions: c.decisions, failures: c.failures },
                    _ if p.replicas.is_empty() => Tally { decisions: p.decisions, failures: p.failures },
                    _ => Tally::default(),
                };
                ctx.sets.resume(&name, digest, mine, p.state == ROLLED_BACK);
            }
            let cached = zr.status.as_ref().and_then(|s| s.rollout.as_ref()).filter(|r| &r.digest == digest);
            let (others, judged) = cached.map(|r| status::others(r, me, digest)).unwrap_or_default();
            ctx.sets.others_counted(&name, digest, others);
            // Another replica found the candidate failing too often: it stops here too, and
            // the writer records the rollback on the sum that replica judged.
            if let Some(on) = judged
                && previous.is_none_or(|r| r.state == PROGRESSING)
            {
                ctx.sets.roll_back(&name, digest, on);
            }
            let promoted = previous.is_some_and(|r| r.state == PROMOTED);
            // A candidate rolls out beside a module that serves; once promoted it is that module.
            (stable_module.is_some() || promoted).then(|| {
                let (tally, rolled_back) = ctx.sets.tally(&name, digest).unwrap_or_default();
                // Only the writer advances the rollout; the others follow its record (and
                // progress until there is one), but a candidate judged failing too often stops
                // at once wherever it was judged.
                let mut advanced = match previous {
                    _ if writes => status::advance(previous, digest, tally, rolled_back, thresholds, now),
                    Some(recorded) if !rolled_back => recorded.clone(),
                    _ => status::advance(previous, digest, if rolled_back { tally } else { Tally::default() }, rolled_back, thresholds, now),
                };
                if let Some(cached) = cached {
                    advanced.replicas.extend(cached.replicas.iter().filter(|(r, _)| r.as_str() != me).map(|(r, c)| (r.clone(), c.clone())));
                }
                let mine = ctx.sets.own_tally(&name, digest).unwrap_or_default();
                if mine.decisions > 0 || advanced.replicas.contains_key(me) {
                    let failed_too_often = ctx.sets.failed_too_often(&name, digest);
                    advanced.replicas.insert(me.into(), ReplicaCount { digest: digest.clone(), decisions: mine.decisions, failures: mine.failures, failed_too_often });
                }
                advanced
            })
        }
        _ => None,
    };
    let state = rollout.as_ref().map(|r| r.state.as_str());
    let serving_module = if state == Some(PROMOTED) { candidate_module.clone() } else { stable_module.clone() };
    let progressing = state == Some(PROGRESSING);
    // Where each came from, for the status: the artifact pinned, and the tag it was resolved from.
    let origin = |checked: Option<&Checked>| {
        checked.and_then(|c| {
            let tag = c.spec.oci().and_then(|o| o.reference.as_ref().ok()).filter(|r| r.is_tag()).map(|r| r.to_string());
            c.pinned.as_ref().map(|p| (p.to_string(), tag))
        })
    };
    let stable_origin = origin(Some(&stable)).filter(|_| stable.outcome.is_ok() || stable_module.is_none());
    let candidate_origin = origin(candidate.as_ref());
    let serving_origin = if state == Some(PROMOTED) { candidate_origin.clone() } else { stable_origin.or_else(|| before.as_ref().and_then(|b| b.module.as_ref()).filter(|m| Some(&m.digest) == stable_module.as_ref().map(|s| &s.identity().digest)).and_then(|m| m.reference.clone().map(|r| (r, m.resolved_from.clone())))) };
    // A followed tag's artifact promoted: it is the source's module from now on.
    if follows
        && state == Some(PROMOTED)
        && let (Some(written), Some(digest)) = (&written, candidate.as_ref().and_then(|c| c.pinned.as_ref()).and_then(|p| p.digest.clone()))
    {
        ctx.with_memo(&uid, |m| m.pinned = Some((written.clone(), digest)));
    }

    // Who it serves.
    let (mut hikawas, mut in_share) = (0u32, 0u32);
    for hikawa in ctx.hikawas.state() {
        if hikawa.spec.rules.as_deref() == Some(name.as_str()) {
            hikawas += 1;
            let share = thresholds.as_ref().map_or(0, |t| t.percent);
            in_share += u32::from(progressing && rollout::decides_for(&hikawa.uid().unwrap_or_default(), share));
        }
    }

    let (source_problem, candidate_problem) = (stable.outcome.as_ref().err().or(follow_problem.as_ref()), candidate.as_ref().and_then(|c| c.outcome.as_ref().err()));
    let findings = Findings {
        generation: zr.metadata.generation.unwrap_or(0),
        serving: serving_module.as_ref().map(|m| m.identity().as_ref()),
        serving_origin,
        candidate_origin,
        source_problem,
        candidate: candidate_module.as_ref().map(|m| m.identity().as_ref()),
        candidate_problem,
        rollout: rollout.as_ref(),
        checked_at: ctx.with_memo(&uid, |m| m.checked_at.clone()),
        hikawas,
        candidate_hikawas: progressing.then_some(in_share),
        now,
    };
    let desired = status::desired(before.as_ref(), &findings);

    // What serves, at once; the status follows.
    let stable_rules = serving_module.clone().map(|m| m as Arc<dyn Rules>).ok_or_else(|| unavailable(&desired, source_problem));
    let candidate_serving = match (progressing, &candidate_module, thresholds) {
        (true, Some(module), Some(thresholds)) => Some(Candidate { rules: module.clone() as Arc<dyn Rules>, thresholds }),
        _ => None,
    };
    ctx.sets.publish(&name, Serving { stable: stable_rules, candidate: candidate_serving });
    ctx.metrics.ruleset_serving(&name, serving_module.as_ref().map(|m| m.identity().label()), progressing.then(|| candidate_module.as_ref().map(|m| m.identity().label())).flatten());

    let requeue = match (progressing, &thresholds) {
        (true, Some(t)) => {
            let started = rollout.as_ref().and_then(|r| r.started_at.parse::<jiff::Timestamp>().ok()).map_or(now, |t| t.as_millisecond());
            let serving_for = Duration::from_millis((now - started).max(0) as u64);
            t.promotion_in(serving_for).map_or(STATUS_EVERY, |d| d.clamp(Duration::from_millis(10), STATUS_EVERY))
        }
        // Stopped here on a judgement the writer has not recorded yet: this replica's entry
        // carries it until it does.
        _ if !writes && recorded.is_some_and(|r| r.state == PROGRESSING) && rollout.as_ref().is_some_and(|r| r.state == ROLLED_BACK) => STATUS_EVERY,
        _ => REFRESH_EVERY,
    };
    // A registry that failed in a way that may pass is tried again soon; a followed tag is
    // resolved again at its interval.
    let waiting_on_registry = [Some(&stable), candidate.as_ref()].into_iter().flatten().any(|c| c.spec.oci().is_some() && c.outcome.as_ref().is_err_and(|p| p.pending));
    let requeue = if waiting_on_registry || follow_problem.is_some() { requeue.min(OCI_RETRY) } else { requeue };
    let requeue = match oci.filter(|o| o.follow) {
        Some(o) => requeue.min(o.poll_seconds.map_or(FOLLOW_EVERY, Duration::from_secs)),
        None => requeue,
    };
    if !writes {
        // Its count is written again at the next reconcile: a failure here fails nothing else.
        if let Err(error) = count_own(&ctx, &zr, &uid, me, rollout.as_ref()).await {
            warn!(rules = %name, %error, "could not write this replica's count of the candidate's decisions");
        }
    } else if before.as_ref() != Some(&desired) {
        let last_write = ctx.with_memo(&uid, |m| m.written.as_ref().map(|w| w.1));
        if let Some(at) = last_write
            && at.elapsed() < STATUS_EVERY
        {
            return Ok(Action::requeue(STATUS_EVERY - at.elapsed()));
        }
        for (type_, reason, note) in status::events(before.as_ref(), &desired) {
            let type_ = if type_ == "Warning" { EventType::Warning } else { EventType::Normal };
            match reason.as_str() {
                "Promoted" => ctx.metrics.rollout_ended("promoted"),
                "RolledBack" => ctx.metrics.rollout_ended("rolled-back"),
                // Every other Warning is a problem the status now names (a module refused, a
                // source unreadable).
                _ if type_ == EventType::Warning => ctx.metrics.ruleset_rejected(&name, &reason),
                _ => {}
            }
            info!(reason, note, "rule set");
            ctx.events[shard as usize].publish(zr.as_ref(), type_, &reason, &crate::text::printable(&note, 1024), "Serve", None).await;
        }
        let api: Api<ZundokoRules> = Api::all(ctx.shards.client(shard).clone());
        // Fields neither the status last written nor the cached one should keep become null.
        let mut fields = crate::controllers::writes::status::replacing_patch(before.as_ref(), &desired);
        if let (Some(fields), Ok(serde_json::Value::Object(cached))) = (fields.as_object_mut(), serde_json::to_value(&zr.status)) {
            for key in cached.keys() {
                fields.entry(key.clone()).or_insert(serde_json::Value::Null);
            }
        }
        // The other replicas' counts are theirs: only this replica's entry is written (and
        // the entries of another candidate's rollout removed).
        if let Some(rollout) = fields.get_mut("rollout").and_then(|r| r.as_object_mut()) {
            let mut replicas = serde_json::Map::new();
            let stale = before.as_ref().and_then(|b| b.rollout.as_ref()).filter(|r| Some(&r.digest) != desired.rollout.as_ref().map(|d| &d.digest));
            for replica in stale.map(|r| r.replicas.keys().cloned().collect::<Vec<_>>()).unwrap_or_default() {
                replicas.insert(replica, serde_json::Value::Null);
            }
            if let Some(own) = desired.rollout.as_ref().and_then(|r| r.replicas.get(me)) {
                replicas.insert(me.into(), serde_json::to_value(own).expect("a count serializes"));
            }
            rollout.insert("replicas".into(), serde_json::Value::Object(replicas));
        }
        let patch = serde_json::json!({ "status": fields });
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        ctx.with_memo(&uid, |m| m.written = Some((desired, Instant::now())));
    }
    ctx.with_memo(&uid, |m| m.failures = 0);
    Ok(Action::requeue(requeue))
}

/// A replica that does not write the rule set's status writes its own count of the
/// candidate's decisions into it (its entry only: a merge patch leaves the others'), while
/// the rollout the status records is of the same candidate and still going on; at most once
/// every [`STATUS_EVERY`], but at once when it has found the candidate failing too often (the
/// writer records the rollback on it). Through the plain client: the entry is this replica's
/// alone, so a late write cannot overwrite anyone else's.
async fn count_own(ctx: &Context, zr: &ZundokoRules, uid: &str, me: &str, rollout: Option<&crate::crd::RolloutStatus>) -> Result<(), Error> {
    let Some(own) = rollout.and_then(|r| r.replicas.get(me)) else { return Ok(()) };
    let recorded = zr.status.as_ref().and_then(|s| s.rollout.as_ref());
    let current = recorded.is_some_and(|r| r.digest == own.digest && r.state == PROGRESSING);
    let written = recorded.and_then(|r| r.replicas.get(me));
    if !current || written == Some(own) {
        return Ok(());
    }
    // Within a second of its last write, only a judgement that write did not carry goes out.
    let judged = |c: &ReplicaCount| c.failed_too_often.is_some();
    if ctx.with_memo(uid, |m| m.counted.as_ref().is_some_and(|(last, at)| at.elapsed() < STATUS_EVERY && (judged(last) || !judged(own)))) {
        return Ok(());
    }
    let patch = serde_json::json!({ "status": { "rollout": { "replicas": { me: own } } } });
    Api::<ZundokoRules>::all(ctx.client.clone()).patch_status(&zr.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    ctx.with_memo(uid, |m| m.counted = Some((own.clone(), Instant::now())));
    Ok(())
}

fn unavailable(status: &ZundokoRulesStatus, problem: Option<&Problem>) -> Unavailable {
    Unavailable {
        phase: status.phase.clone().unwrap_or_else(|| status::PENDING.into()),
        reason: problem.map_or_else(|| "Checking".into(), |p| p.reason.clone()),
        message: problem.map_or_else(|| "its source has not been checked yet".into(), |p| p.message.clone()),
    }
}

fn error_policy(zr: Arc<ZundokoRules>, error: &Error, ctx: Arc<Context>) -> Action {
    let failures = ctx.with_memo(&zr.uid().unwrap_or_default(), |m| {
        m.failures = m.failures.saturating_add(1);
        m.failures
    });
    let delay = Duration::from_millis(250).saturating_mul(1 << (failures - 1).min(7)).min(Duration::from_secs(30));
    // Never checked: its Hikawas hear why, instead of waiting for a first check in silence.
    let name = zr.name_any();
    if ctx.sets.serving(&name).is_none() {
        let why = Unavailable { phase: status::PENDING.into(), reason: "CheckFailed".into(), message: crate::text::printable(&error.to_string(), 1024) };
        ctx.sets.publish(&name, Serving { stable: Err(why), candidate: None });
    }
    ctx.metrics.reconcile_failed("RulesApiError");
    warn!(rules = %zr.name_any(), %error, retry_in_ms = delay.as_millis() as u64, "rule set reconcile failed");
    Action::requeue(delay)
}
