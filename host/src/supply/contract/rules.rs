//! Deciding: one call of the rules (a wasm module, or the same rules linked natively for
//! comparison), then the plan check. A decision that fails either is an error, and nothing
//! of its plan is applied.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use zundoko_rules::{Observed, Plan, RuleSet};

use crate::supply::sandbox::{GuestError, GuestLog, GuestOutcome, GuestThreads, ModuleIdentity, RulesModule, Turns};
use crate::supply::tenant::Tenant;
use crate::supply::contract::plan_check::{self, PlanLimits};

/// Something that can make a decision: the wasm sandbox or native rules.
pub trait Rules: Send + Sync + 'static {
    fn identity(&self) -> &Arc<ModuleIdentity>;
    /// Blocking; the async callers use [`decide_async`].
    fn reconcile(&self, observed: &Observed) -> Result<GuestOutcome<Plan>, GuestError>;
    /// The decision if it takes no more than a small slice of CPU (fit for an async worker),
    /// else `None`, and [`Rules::reconcile`] is called off the async runtime.
    fn reconcile_quick(&self, _observed: &Observed) -> Option<Result<GuestOutcome<Plan>, GuestError>> {
        None
    }
    /// How many calls run at once at most, the others waiting for a turn; `None`: no bound.
    fn calls_at_once(&self) -> Option<usize> {
        None
    }
    /// The threads a decision that leaves the async runtime runs on, and the turns awaited
    /// before one is handed to them; `None`: tokio's blocking pool.
    fn own_threads(&self) -> Option<(&Arc<GuestThreads>, &Turns)> {
        None
    }
}

impl Rules for RulesModule {
    fn identity(&self) -> &Arc<ModuleIdentity> {
        RulesModule::identity(self)
    }

    fn reconcile(&self, observed: &Observed) -> Result<GuestOutcome<Plan>, GuestError> {
        RulesModule::reconcile(self, observed)
    }

    fn reconcile_quick(&self, observed: &Observed) -> Option<Result<GuestOutcome<Plan>, GuestError>> {
        RulesModule::reconcile_quick(self, observed)
    }

    fn calls_at_once(&self) -> Option<usize> {
        Some(RulesModule::calls_at_once(self))
    }

    fn own_threads(&self) -> Option<(&Arc<GuestThreads>, &Turns)> {
        RulesModule::own_threads(self)
    }
}

/// The rules crate linked into the host: the baseline the sandbox is measured against.
pub struct NativeRules {
    rules: RuleSet,
    identity: Arc<ModuleIdentity>,
}

impl NativeRules {
    pub fn new(rules: RuleSet) -> Self {
        let info = rules.module_info();
        let identity = Arc::new(ModuleIdentity { digest: format!("native:{}", info.name), info, size: 0 });
        NativeRules { rules, identity }
    }
}

impl Rules for NativeRules {
    fn identity(&self) -> &Arc<ModuleIdentity> {
        &self.identity
    }

    fn reconcile(&self, observed: &Observed) -> Result<GuestOutcome<Plan>, GuestError> {
        let plan = self.rules.reconcile(observed).map_err(GuestError::Rules)?;
        Ok(GuestOutcome { value: plan, fuel_used: 0, logs: Vec::new(), dropped_log_lines: 0, peak_memory_bytes: 0 })
    }

    /// Native rules are the host's own code and take microseconds: always quick.
    fn reconcile_quick(&self, observed: &Observed) -> Option<Result<GuestOutcome<Plan>, GuestError>> {
        Some(self.reconcile(observed))
    }
}

/// One decision and what it cost.
#[derive(Debug)]
pub struct Decision {
    pub module: Arc<ModuleIdentity>,
    /// The checked plan, or why there is none.
    pub outcome: Result<Plan, GuestError>,
    pub fuel_used: Option<u64>,
    pub logs: Vec<GuestLog>,
    /// The guest's time: instance, call and plan check; a call made again, both tries'.
    pub elapsed: Duration,
}

/// Call the rules and check the plan. Blocking.
pub fn decide(rules: &dyn Rules, observed: &Observed, limits: &PlanLimits) -> Decision {
    let started = Instant::now();
    checked(rules, observed, limits, rules.reconcile(observed), started)
}

/// The plan of a call, checked.
fn checked(rules: &dyn Rules, observed: &Observed, limits: &PlanLimits, outcome: Result<GuestOutcome<Plan>, GuestError>, started: Instant) -> Decision {
    let module = rules.identity().clone();
    match outcome {
        Ok(GuestOutcome { value: plan, fuel_used, logs, .. }) => {
            let outcome = plan_check::check(&plan, observed, limits).map(|()| plan).map_err(GuestError::from);
            Decision { module, outcome, fuel_used: Some(fuel_used), logs, elapsed: started.elapsed() }
        }
        Err(error) => Decision { module, outcome: Err(error), fuel_used: None, logs: Vec::new(), elapsed: started.elapsed() },
    }
}

/// [`decide`] without blocking the async workers: a quick call (nearly all: microseconds, see
/// `SandboxLimits::inline_fuel`) is made here, without a thread handoff; one that needs more is
/// made again, whole, off the async runtime (on the module's own threads if it has them, else
/// on tokio's blocking pool), so a slow guest never stalls the async workers. Its turn is
/// `tenant`'s: the owner of the rules (`supply/tenant.rs`), whose modules share their calls.
/// The decision's `elapsed` is the guest time of both tries (not the wait for a turn between
/// them): the tenant's call time and the call duration metric count what its guest ran.
pub async fn decide_async(rules: Arc<dyn Rules>, observed: Arc<Observed>, limits: PlanLimits, tenant: Tenant) -> Decision {
    let started = Instant::now();
    if let Some(outcome) = rules.reconcile_quick(&observed) {
        return checked(rules.as_ref(), &observed, &limits, outcome, started);
    }
    let first_try = started.elapsed();
    let mut decision = made_again(rules, observed, limits, tenant).await;
    decision.elapsed += first_try;
    decision
}

/// A call out of its quick slice, made again whole off the async runtime; `elapsed`: this try's.
async fn made_again(rules: Arc<dyn Rules>, observed: Arc<Observed>, limits: PlanLimits, tenant: Tenant) -> Decision {
    let span = tracing::Span::current();
    let module = rules.identity().clone();
    let not_finished = |why: String| Decision {
        module,
        outcome: Err(GuestError::Host(format!("the guest call did not finish: {why}"))),
        fuel_used: None,
        logs: Vec::new(),
        elapsed: Duration::ZERO,
    };
    let own = rules.own_threads().map(|(threads, turns)| (threads.clone(), turns.clone()));
    let decision = move || {
        let _entered = span.enter();
        decide(rules.as_ref(), &observed, &limits)
    };
    match own {
        // The module's turn awaited here, holding no thread; then straight to the thread the
        // call runs on: one handoff each way (guest_threads.rs). The call is made holding that
        // turn (it takes no other), which is given back once its result is on its way: the
        // thread is listed as idle by then, and the next call finds it.
        Some((threads, turns)) => {
            let turn = turns.acquire(tenant).await;
            let (send, receive) = tokio::sync::oneshot::channel();
            let delivered = threads.start(
                move || (turn.holding(decision), turn),
                move |decided| {
                    let (decision, turn) = decided.ok().unzip();
                    let _ = send.send(decision);
                    drop(turn);
                },
            );
            if let Err(why) = delivered {
                return not_finished(why);
            }
            match receive.await {
                Ok(Some(decision)) => decision,
                _ => not_finished("the guest call's thread panicked".into()),
            }
        }
        None => tokio::task::spawn_blocking(decision).await.unwrap_or_else(|join_error| not_finished(join_error.to_string())),
    }
}

/// A module must be able to decide for a brand-new Hikawa, within the limits, with a plan
/// that passes the check, before it may serve.
pub fn smoke_test(rules: &dyn Rules, limits: &PlanLimits) -> Result<Decision, GuestError> {
    let observed = Observed {
        hikawa: zundoko_rules::Hikawa {
            namespace: "smoke-test".into(),
            name: "smoke-test".into(),
            uid: "00000000-0000-0000-0000-000000000000".into(),
            generation: 1,
            created_at: Some(0),
            interval_millis: 1000,
            ..Default::default()
        },
        now: 0,
        entropy: 0x5eed,
        ..Observed::default()
    };
    let decision = decide(rules, &observed, limits);
    match &decision.outcome {
        Ok(_) => Ok(decision),
        Err(error) => Err(GuestError::SmokeTestFailed(format!("{error} [{}]", error.reason()))),
    }
}

/// The rules currently serving (none until the first module is accepted). Swapped
/// atomically: a reconcile takes its `Arc` at the start and finishes on that module whatever
/// happens to the slot meanwhile. Subscribers hear of every swap (to reconcile everything).
pub struct RulesSlot(watch::Sender<Option<Arc<dyn Rules>>>);

impl RulesSlot {
    pub fn new(rules: Arc<dyn Rules>) -> Self {
        RulesSlot(watch::Sender::new(Some(rules)))
    }

    /// A slot with nothing serving yet.
    pub fn empty() -> Self {
        RulesSlot(watch::Sender::new(None))
    }

    pub fn current(&self) -> Option<Arc<dyn Rules>> {
        self.0.borrow().clone()
    }

    /// Put `rules` in the slot; returns the rules it replaced.
    pub fn swap(&self, rules: Arc<dyn Rules>) -> Option<Arc<dyn Rules>> {
        self.0.send_replace(Some(rules))
    }

    /// Take the rules out of the slot (they are no longer trusted): nothing serves until the
    /// next swap; returns what served.
    pub fn clear(&self) -> Option<Arc<dyn Rules>> {
        self.0.send_replace(None)
    }

    /// Resolves once some rules are serving.
    pub async fn loaded(&self) -> Arc<dyn Rules> {
        let mut rx = self.0.subscribe();
        let rules = rx.wait_for(Option::is_some).await.expect("the slot owns its sender");
        rules.clone().expect("waited for Some")
    }

    /// One item per swap from now on.
    pub fn swaps(&self) -> impl futures::Stream<Item = ()> + Send + 'static {
        let rx = self.0.subscribe();
        futures::stream::unfold(rx, |mut rx| async move { rx.changed().await.ok().map(|()| ((), rx)) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::thread::ThreadId;

    /// Rules whose calls take a while, on threads of their own with two turns: how many ran
    /// at once at most, and on which threads.
    struct Slow {
        identity: Arc<ModuleIdentity>,
        threads: Arc<GuestThreads>,
        turns: Turns,
        running: AtomicUsize,
        most: AtomicUsize,
        on: Mutex<HashSet<ThreadId>>,
    }

    impl Rules for Slow {
        fn identity(&self) -> &Arc<ModuleIdentity> {
            &self.identity
        }

        fn reconcile(&self, _: &Observed) -> Result<GuestOutcome<Plan>, GuestError> {
            let now = self.running.fetch_add(1, SeqCst) + 1;
            self.most.fetch_max(now, SeqCst);
            self.on.lock().unwrap().insert(std::thread::current().id());
            // A slow guest's call (this is the fake guest, on its own thread, not a reconcile).
            std::thread::sleep(Duration::from_millis(20));
            self.running.fetch_sub(1, SeqCst);
            Ok(GuestOutcome { value: Plan::default(), fuel_used: 0, logs: Vec::new(), dropped_log_lines: 0, peak_memory_bytes: 0 })
        }

        fn own_threads(&self) -> Option<(&Arc<GuestThreads>, &Turns)> {
            Some((&self.threads, &self.turns))
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn decisions_waiting_for_a_turn_hold_no_thread_and_the_threads_are_kept() {
        let info = zundoko_rules::ModuleInfo { name: "slow".into(), version: "0".into(), description: String::new() };
        let slow = Arc::new(Slow {
            identity: Arc::new(ModuleIdentity { info, digest: "native:slow".into(), size: 0 }),
            threads: GuestThreads::new(1 << 20, 2),
            turns: Turns::new(2),
            running: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
            on: Mutex::new(HashSet::new()),
        });
        let rules: Arc<dyn Rules> = slow.clone();
        let observed = Arc::new(Observed::default());
        let decisions: Vec<_> =
            (0..12).map(|_| tokio::spawn(decide_async(rules.clone(), observed.clone(), PlanLimits::default(), Tenant::Cluster))).collect();
        for decision in decisions {
            let decision = decision.await.unwrap();
            assert!(decision.outcome.is_ok(), "{:?}", decision.outcome.err());
        }
        assert_eq!(slow.most.load(SeqCst), 2, "two turns: two calls at once, the other ten waiting");
        let threads = slow.on.lock().unwrap().len();
        assert!(threads <= 2, "12 calls, two at once, made on {threads} threads: a call waiting for its turn took a thread");
    }
}
