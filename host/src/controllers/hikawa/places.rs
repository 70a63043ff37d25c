//! Each module's places: how many of the controller's reconciles may be deciding with one
//! module at once.
//!
//! Why: the controller runs `--concurrency` reconciles at once (16), shared by every rule set,
//! while a module's calls run no more at once than its turns (the node's cores, see
//! `supply/sandbox/in_flight.rs`). Without places, a slow module's Hikawas fill the
//! controller's slots waiting for its turns (14 of 16 on two cores), and the Hikawas of every
//! other rule set wait behind calls that are not theirs: a slow or hostile module would slow
//! the whole operator. With places, a slow module (its calls take more than [`SLOW_CALL`])
//! decides for at most twice its turns at once (its calls running and the next ones ready), and
//! the slow modules together for at most half the slots, however many there are; their other
//! Hikawas wait in their module's line without holding a slot, and are woken one by one as
//! places free, whoever waited longest first. Between tenants (`supply/tenant.rs`, the owner
//! of the rules), the slow modules' half is shared: while two or more tenants have slow modules
//! deciding or waiting, each tenant's slow modules together hold at most an equal part of it,
//! and a place freed goes first to the tenant holding fewest: a tenant with ten slow modules
//! gets as many places as a tenant with one, not ten times as many (alone, it may take all). A quick module's Hikawas take a slot each as
//! before: the slots they hold waiting for a turn free within milliseconds, and a line would
//! only cost a reconcile per word to join it (measured: 3.3 reconciles per word instead of 1.05
//! for JavaScript rules at 1,000 Hikawas). Native rules have no turns, and no line.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc;
use tracing::info;

use crate::crd::Hikawa;
use crate::supply::contract::rules::Rules;
use crate::supply::tenant::Tenant;

/// A module whose calls take longer than this (its turns' waits aside) is slow: its Hikawas
/// line up. Below, the slots its Hikawas hold while waiting for a turn free at least every
/// `SLOW_CALL / turns`.
pub const SLOW_CALL: Duration = Duration::from_millis(10);
/// A slow module is quick again once its calls take less than this (not at once below
/// `SLOW_CALL`: a module near it would line up and not by turns).
const QUICK_AGAIN: Duration = Duration::from_millis(5);
/// How long a Hikawa in line waits before it looks again by itself, however long the line: a
/// wake-up can be lost (the Hikawa woken is gone, or its shard).
const LONGEST_WAIT: Duration = Duration::from_secs(10);
/// The shortest, so that a long line is not a loop of reconciles.
const SHORTEST_WAIT: Duration = Duration::from_millis(50);
/// An empty line's measures are kept this long (a slow module's next burst lines up at once).
const KEPT_IDLE: Duration = Duration::from_secs(600);

pub struct Places {
    state: Mutex<State>,
    /// What the slow modules may hold together, and each at most: half the controller's slots.
    most: usize,
    /// The Hikawas woken when a place frees (a stream of the controller, `wakes.rs`).
    wake: mpsc::UnboundedSender<ObjectRef<Hikawa>>,
}

#[derive(Default)]
struct State {
    /// By tenant and module digest: a module serving several of a tenant's rule sets (or the
    /// default) has one line.
    lines: HashMap<(Tenant, String), Line>,
    /// Places held by slow modules, all of them: however many slow rule sets there are, the
    /// other half of the slots stays with the quick ones.
    slow_deciding: usize,
    /// Of those, by tenant.
    slow_by_tenant: HashMap<Tenant, usize>,
}

impl State {
    /// What a tenant's slow modules may hold together now: the slow modules' half shared
    /// equally by the tenants with a slow module deciding or waiting (`tenant` counted), at
    /// least one place.
    fn tenant_places(&self, tenant: &Tenant, most: usize) -> usize {
        let mut active: HashSet<&Tenant> = self.lines.iter().filter(|(_, line)| line.slow && (line.deciding > 0 || !line.waiting.is_empty())).map(|((t, _), _)| t).collect();
        active.insert(tenant);
        (most / active.len()).max(1)
    }

    fn slow_held_by(&self, tenant: &Tenant) -> usize {
        self.slow_by_tenant.get(tenant).copied().unwrap_or(0)
    }
}

struct Line {
    deciding: usize,
    /// Its places while it is slow.
    places: usize,
    /// Oldest first, with when each came.
    waiting: VecDeque<(ObjectRef<Hikawa>, Instant)>,
    queued: HashSet<ObjectRef<Hikawa>>,
    /// How long a call takes, its wait for a turn aside, smoothed (`None`: none made yet).
    call: Option<Duration>,
    /// How long a place is held, smoothed: what a wait in line is guessed from.
    hold: Option<Duration>,
    /// Whether the module is slow now: its Hikawas line up.
    slow: bool,
    last_used: Instant,
}

/// A place taken: given back (and the next in line woken) when dropped.
pub struct Place<'a> {
    held: Option<Held<'a>>,
}

struct Held<'a> {
    places: &'a Places,
    line: (Tenant, String),
    since: Instant,
    /// Hikawas deciding with the module when this one entered, itself included.
    deciding: usize,
    turns: usize,
    /// Taken while the module was slow: counted among the slow modules' places.
    slow: bool,
}

/// Not now: the Hikawa waits in the module's line, and looks again by itself after `retry_in`
/// if no place woke it first.
pub struct InLine {
    pub retry_in: Duration,
}

impl Places {
    /// Places for a controller running `concurrency` reconciles at once; the Hikawas woken go
    /// to `wake`.
    pub fn new(concurrency: u16, wake: mpsc::UnboundedSender<ObjectRef<Hikawa>>) -> Self {
        Places { state: Mutex::default(), most: (usize::from(concurrency) / 2).max(1), wake }
    }

    /// How many decisions of a module with `turns` may be made at once while it is slow.
    fn for_turns(&self, turns: usize) -> usize {
        turns.saturating_mul(2).clamp(1, self.most)
    }

    /// A place to decide for `hikawa` with `rules` (`tenant`'s), or its place in their line.
    pub fn enter(&self, rules: &dyn Rules, tenant: &Tenant, hikawa: ObjectRef<Hikawa>) -> Result<Place<'_>, InLine> {
        self.enter_at(rules, tenant, hikawa, Instant::now())
    }

    fn enter_at(&self, rules: &dyn Rules, tenant: &Tenant, hikawa: ObjectRef<Hikawa>, now: Instant) -> Result<Place<'_>, InLine> {
        // Native rules: no bound ever.
        let Some(turns) = rules.calls_at_once() else {
            return Ok(Place { held: None });
        };
        let places = self.for_turns(turns);
        let digest = &rules.identity().digest;
        let mut state = self.lock();
        let pool_free = state.slow_deciding < self.most;
        let tenant_free = state.slow_held_by(tenant) < state.tenant_places(tenant, self.most);
        let key = (tenant.clone(), digest.clone());
        let line = state.lines.entry(key.clone()).or_insert_with(|| Line::new(places, now));
        (line.places, line.last_used) = (places, now);
        if !line.slow || (line.deciding < places && pool_free && tenant_free) {
            line.deciding += 1;
            // Its turn came (or it never waited): out of the line.
            if line.queued.remove(&hikawa) {
                line.waiting.retain(|(h, _)| h != &hikawa);
            }
            let held = Held { places: self, line: key, since: now, deciding: line.deciding, turns: turns.max(1), slow: line.slow };
            if held.slow {
                state.slow_deciding += 1;
                *state.slow_by_tenant.entry(tenant.clone()).or_default() += 1;
            }
            return Ok(Place { held: Some(held) });
        }
        let position = match line.waiting.iter().position(|(h, _)| h == &hikawa) {
            Some(at) => at + 1,
            None => {
                line.queued.insert(hikawa.clone());
                line.waiting.push_back((hikawa, now));
                line.waiting.len()
            }
        };
        // Its turn should come when the places ahead of it have been held once more each.
        let ahead = u32::try_from(position.div_ceil(places) + 1).unwrap_or(u32::MAX);
        let hold = line.hold.unwrap_or(SHORTEST_WAIT);
        Err(InLine { retry_in: hold.saturating_mul(ahead).clamp(SHORTEST_WAIT, LONGEST_WAIT) })
    }

    /// A Hikawa that is gone leaves every line.
    pub fn forget(&self, hikawa: &ObjectRef<Hikawa>) {
        let mut state = self.lock();
        for line in state.lines.values_mut() {
            if line.queued.remove(hikawa) {
                line.waiting.retain(|(h, _)| h != hikawa);
            }
        }
        let now = Instant::now();
        state.lines.retain(|_, line| !line.idle_since_long(now));
    }

    /// Hikawas deciding and waiting with the cluster's module `digest`, and whether it is slow
    /// now.
    #[cfg(test)]
    fn counts(&self, digest: &str) -> (usize, usize, bool) {
        self.counts_of(&Tenant::Cluster, digest)
    }

    #[cfg(test)]
    fn counts_of(&self, tenant: &Tenant, digest: &str) -> (usize, usize, bool) {
        let key = (tenant.clone(), digest.to_owned());
        self.lock().lines.get(&key).map_or((0, 0, false), |line| (line.deciding, line.waiting.len(), line.slow))
    }

    fn leave_at(&self, held: Held<'_>, now: Instant) {
        let mut state = self.lock();
        if held.slow {
            state.slow_deciding -= 1;
            if let Some(count) = state.slow_by_tenant.get_mut(&held.line.0) {
                *count -= 1;
                if *count == 0 {
                    state.slow_by_tenant.remove(&held.line.0);
                }
            }
        }
        let digest = &held.line.1;
        if let Some(line) = state.lines.get_mut(&held.line) {
            line.deciding -= 1;
            line.last_used = now;
            // With `deciding` Hikawas in, `turns` calls at a time, the place was held for about
            // deciding / turns calls.
            let hold = now.saturating_duration_since(held.since);
            let call = hold * u32::try_from(held.turns).unwrap_or(u32::MAX) / u32::try_from(held.deciding.max(held.turns)).unwrap_or(u32::MAX);
            let smoothed = |before: Option<Duration>, now: Duration| before.map_or(now, |before| (before * 3 + now) / 4);
            let call = smoothed(line.call, call);
            (line.call, line.hold) = (Some(call), Some(smoothed(line.hold, hold)));
            let slow = if line.slow { call >= QUICK_AGAIN } else { call > SLOW_CALL };
            if slow != line.slow {
                let call_ms = call.as_secs_f64() * 1e3;
                if slow {
                    info!(module = %digest, call_ms, places = line.places, "the module's calls are slow: its Hikawas decide {} at a time at most, the others wait in its line", line.places);
                } else {
                    info!(module = %digest, call_ms, "the module's calls are quick again: its Hikawas no longer wait in line");
                }
            }
            line.slow = slow;
            // A quick module's Hikawas never wait: a line left from when it was slow is woken
            // whole.
            if !line.slow {
                line.queued.clear();
                for (next, _) in line.waiting.drain(..) {
                    // The receiver is gone only when the controller is: nothing to wake then.
                    let _ = self.wake.send(next);
                }
            }
        }
        // The place freed goes to the tenant holding fewest, then to whoever waited longest, of
        // any slow module that has a place of its own free and whose tenant is within its part:
        // a slow rule set never keeps another's Hikawas waiting for places it refills.
        if state.slow_deciding < self.most {
            let part: HashMap<Tenant, (usize, usize)> = state
                .lines
                .keys()
                .map(|(tenant, _)| (tenant.clone(), (state.slow_held_by(tenant), state.tenant_places(tenant, self.most))))
                .collect();
            let longest = state
                .lines
                .iter_mut()
                .filter(|(_, line)| line.deciding < line.places)
                .filter_map(|((tenant, _), line)| {
                    let (held, may) = part[tenant];
                    (held < may).then_some((held, line))
                })
                .filter_map(|(held, line)| Some(((held, line.waiting.front()?.1), line)))
                .min_by_key(|(order, _)| *order);
            if let Some((_, line)) = longest
                && let Some((next, _)) = line.waiting.pop_front()
            {
                line.queued.remove(&next);
                let _ = self.wake.send(next);
            }
        }
        state.lines.retain(|_, line| !line.idle_since_long(now));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Line {
    fn new(places: usize, now: Instant) -> Self {
        Line {
            deciding: 0,
            places,
            waiting: VecDeque::new(),
            queued: HashSet::new(),
            call: None,
            hold: None,
            slow: false,
            last_used: now,
        }
    }

    fn idle_since_long(&self, now: Instant) -> bool {
        self.deciding == 0 && self.waiting.is_empty() && now.duration_since(self.last_used) > KEPT_IDLE
    }
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        if let Some(held) = self.held.take() {
            held.places.leave_at(held, Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use zundoko_rules::{Observed, Plan};

    use crate::supply::sandbox::{GuestError, GuestOutcome, ModuleIdentity};

    /// Rules that are never called: only their turns and digest matter here.
    struct Turns(Option<usize>, Arc<ModuleIdentity>);

    impl Rules for Turns {
        fn identity(&self) -> &Arc<ModuleIdentity> {
            &self.1
        }
        fn reconcile(&self, _: &Observed) -> Result<GuestOutcome<Plan>, GuestError> {
            unreachable!("places never call the rules")
        }
        fn calls_at_once(&self) -> Option<usize> {
            self.0
        }
    }

    fn rules(turns: Option<usize>, digest: &str) -> Turns {
        let info = zundoko_rules::ModuleInfo { name: digest.into(), version: String::new(), description: String::new() };
        Turns(turns, Arc::new(ModuleIdentity { digest: digest.into(), info, size: 0 }))
    }

    fn hikawa(name: &str) -> ObjectRef<Hikawa> {
        ObjectRef::new(name).within("default")
    }

    /// One call made alone, `took` long, `at` the start of it: what makes a module slow or
    /// quick.
    fn call(places: &Places, rules: &Turns, at: Instant, took: Duration) {
        let mut place = places.enter_at(rules, &Tenant::Cluster, hikawa("measured"), at).ok().expect("a place");
        places.leave_at(place.held.take().expect("a bounded module's place"), at + took);
    }

    #[test]
    fn a_quick_modules_hikawas_never_wait_and_native_rules_have_no_line() {
        let (tx, mut woken) = mpsc::unbounded_channel();
        let places = Places::new(16, tx);
        let quick = rules(Some(2), "quick");
        let t0 = Instant::now();
        call(&places, &quick, t0, Duration::from_millis(2));
        let held: Vec<_> = (0..16).map(|i| places.enter(&quick, &Tenant::Cluster, hikawa(&format!("q{i}"))).ok().expect("a quick module: a place for all")).collect();
        assert_eq!(places.counts("quick"), (16, 0, false));
        let native = rules(None, "native");
        assert!((0..100).all(|i| places.enter(&native, &Tenant::Cluster, hikawa(&format!("n{i}"))).is_ok()));
        drop(held);
        assert!(woken.try_recv().is_err(), "nobody waited");
    }

    #[test]
    fn a_slow_module_decides_for_twice_its_turns_at_once_and_the_rest_wait_in_line_then_are_woken_oldest_first() {
        let (tx, mut woken) = mpsc::unbounded_channel();
        let places = Places::new(16, tx);
        let slow = rules(Some(2), "slow");
        call(&places, &slow, Instant::now(), Duration::from_millis(150));
        assert_eq!(places.counts("slow"), (0, 0, true), "a call of 150 ms: slow");
        let held: Vec<Place<'_>> = (0..4).map(|i| places.enter(&slow, &Tenant::Cluster, hikawa(&format!("s{i}"))).ok().expect("a place")).collect();
        let first = places.enter(&slow, &Tenant::Cluster, hikawa("s4")).err().expect("in line: 4 places for 2 turns");
        assert!(first.retry_in >= SHORTEST_WAIT && first.retry_in <= LONGEST_WAIT, "{:?}", first.retry_in);
        let second = places.enter(&slow, &Tenant::Cluster, hikawa("s5")).err().expect("in line");
        assert!(second.retry_in >= first.retry_in, "further back, a longer wait: {:?} < {:?}", second.retry_in, first.retry_in);
        // Looking again while in line keeps its place in it.
        assert!(places.enter(&slow, &Tenant::Cluster, hikawa("s4")).is_err());
        assert_eq!(places.counts("slow"), (4, 2, true));
        // Another module has places of its own.
        let other = rules(Some(2), "other");
        let _other = places.enter(&other, &Tenant::Cluster, hikawa("o0")).ok().expect("another module's place");

        // Each place given back wakes the next in line, oldest first, once.
        let mut held = held.into_iter();
        drop(held.next());
        assert_eq!(woken.try_recv().unwrap(), hikawa("s4"));
        assert!(woken.try_recv().is_err());
        // The one woken takes the free place.
        let s4 = places.enter(&slow, &Tenant::Cluster, hikawa("s4")).ok().expect("woken into a free place");
        assert_eq!(places.counts("slow").0, 4);
        assert_eq!(places.counts("slow").1, 1);
        drop(held.next());
        assert_eq!(woken.try_recv().unwrap(), hikawa("s5"));
        drop(held);
        drop(s4);
        assert!(woken.try_recv().is_err(), "nobody else waited");
    }

    #[test]
    fn a_modules_call_is_told_from_its_wait_for_a_turn_and_it_is_slow_until_its_calls_are_quick_again() {
        let (tx, mut woken) = mpsc::unbounded_channel();
        let places = Places::new(16, tx);
        let module = rules(Some(2), "m");
        let t0 = Instant::now();
        // Sixteen Hikawas in at once, two calls at a time: the last place held 8 calls long.
        // 48 ms held with 16 in: a call of 6 ms, not slow.
        let mut held: Vec<_> = (0..16).map(|i| places.enter_at(&module, &Tenant::Cluster, hikawa(&format!("h{i}")), t0).ok().unwrap()).collect();
        let last = held.pop().unwrap().held.take().unwrap();
        places.leave_at(last, t0 + Duration::from_millis(48));
        assert!(!places.counts("m").2, "6 ms calls waiting their turns are not slow");
        for mut place in held {
            places.leave_at(place.held.take().unwrap(), t0 + Duration::from_millis(48));
        }
        // Calls of 20 ms: slow. Its Hikawas line up.
        for i in 0..4 {
            call(&places, &module, t0 + Duration::from_secs(i), Duration::from_millis(20));
        }
        assert!(places.counts("m").2, "20 ms calls are slow");
        let t1 = t0 + Duration::from_secs(10);
        let mut in_place: VecDeque<_> = (0..4).map(|i| places.enter_at(&module, &Tenant::Cluster, hikawa(&format!("p{i}")), t1).ok().unwrap()).collect();
        for i in 0..20 {
            assert!(places.enter_at(&module, &Tenant::Cluster, hikawa(&format!("w{i:02}")), t1).is_err(), "in line");
        }
        // A place held `hold` with 4 in and 2 turns: a call of half that. The one woken takes
        // the place freed.
        let mut woke = Vec::new();
        let mut cycle = |hold: Duration, woken: &mut mpsc::UnboundedReceiver<ObjectRef<Hikawa>>| {
            let mut place = in_place.pop_front().unwrap();
            places.leave_at(place.held.take().unwrap(), t1 + hold);
            while let Ok(next) = woken.try_recv() {
                woke.push(next.clone());
                if let Ok(place) = places.enter_at(&module, &Tenant::Cluster, next, t1) {
                    in_place.push_back(place);
                }
            }
        };
        // Calls of 7 ms, between the two bounds: still slow (no flapping at the bound).
        for _ in 0..8 {
            cycle(Duration::from_millis(14), &mut woken);
        }
        assert!(places.counts("m").2, "7 ms calls after 20 ms ones: still slow");
        assert_eq!(places.counts("m").1, 12, "one woken per place given back");
        // Calls of 1 ms: quick again, and the line is woken whole.
        for _ in 0..8 {
            cycle(Duration::from_millis(2), &mut woken);
        }
        assert!(!places.counts("m").2, "1 ms calls: quick");
        assert_eq!(places.counts("m").1, 0, "nobody waits for a quick module");
        woke.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(woke, (0..20).map(|i| hikawa(&format!("w{i:02}"))).collect::<Vec<_>>(), "each woken once");
    }

    #[test]
    fn slow_modules_together_hold_at_most_half_the_slots_and_a_place_freed_goes_to_whoever_waited_longest() {
        let (tx, mut woken) = mpsc::unbounded_channel();
        // 8 slots: the slow modules hold 4 together, each up to 4.
        let places = Places::new(8, tx);
        let (a, b, quick) = (rules(Some(2), "a"), rules(Some(2), "b"), rules(Some(2), "quick"));
        let t0 = Instant::now();
        call(&places, &a, t0, Duration::from_millis(150));
        call(&places, &b, t0, Duration::from_millis(150));
        let t1 = t0 + Duration::from_secs(1);
        let mut held: VecDeque<_> = (0..4).map(|i| places.enter_at(&a, &Tenant::Cluster, hikawa(&format!("a{i}")), t1).ok().expect("a's places")).collect();
        // b has a place of its own free, but the slow modules' are all taken.
        assert!(places.enter_at(&b, &Tenant::Cluster, hikawa("b0"), t1 + Duration::from_millis(1)).is_err(), "b waits: the slow modules' half is held");
        assert!(places.enter_at(&a, &Tenant::Cluster, hikawa("a4"), t1 + Duration::from_millis(2)).is_err());
        // The quick module's Hikawas still take the other half, and more.
        let quick_held: Vec<_> = (0..8).map(|i| places.enter(&quick, &Tenant::Cluster, hikawa(&format!("q{i}"))).ok().expect("a quick module never waits")).collect();
        // a's place freed goes to b0, which waited longer than a's own a4.
        drop(held.pop_front());
        assert_eq!(woken.try_recv().unwrap(), hikawa("b0"));
        assert!(woken.try_recv().is_err(), "one place, one woken");
        held.push_back(places.enter(&b, &Tenant::Cluster, hikawa("b0")).ok().expect("b0 takes the place freed"));
        assert!(places.enter(&a, &Tenant::Cluster, hikawa("a4")).is_err(), "a4 still waits: the half is held again");
        drop(held.pop_front());
        assert_eq!(woken.try_recv().unwrap(), hikawa("a4"));
        drop(quick_held);
        assert!(woken.try_recv().is_err(), "a quick module's places wake nobody in no line");
        drop(held);
    }

    #[test]
    fn a_tenant_with_ten_slow_modules_gets_as_many_places_as_a_tenant_with_one() {
        let (tx, mut woken) = mpsc::unbounded_channel();
        // 16 slots: the slow modules' half is 8, each module up to 4 (2 turns).
        let places = Places::new(16, tx);
        let (a, b) = (Tenant::Namespace("a".into()), Tenant::Namespace("b".into()));
        let modules: Vec<(Tenant, Turns)> = (0..10).map(|i| (a.clone(), rules(Some(2), &format!("a{i}")))).chain([(b.clone(), rules(Some(2), "b0"))]).collect();
        let t0 = Instant::now();
        for (tenant, module) in &modules {
            let mut place = places.enter_at(module, tenant, hikawa("measured"), t0).ok().expect("a place");
            places.leave_at(place.held.take().expect("a bounded module's place"), t0 + Duration::from_millis(150));
        }
        // Four Hikawas per module, every module's in turn, a's modules first: a alone at first
        // takes the whole half.
        let module_of = |name: &str| &modules[if name.starts_with('b') { 10 } else { name[1..name.find('-').unwrap()].parse::<usize>().unwrap() }];
        let mut t = t0 + Duration::from_secs(1);
        let mut held = VecDeque::new();
        for round in 0..4 {
            for (tenant, module) in &modules {
                t += Duration::from_millis(1);
                let name = format!("{}-{round}", module.1.digest);
                if let Ok(place) = places.enter_at(module, tenant, hikawa(&name), t) {
                    held.push_back((tenant.clone(), name, place));
                }
            }
        }
        let holding = |held: &VecDeque<(Tenant, String, Place<'_>)>, tenant: &Tenant| held.iter().filter(|(t, _, _)| t == tenant).count();
        assert_eq!((holding(&held, &a), holding(&held, &b)), (8, 0), "a, alone at first, took the half");
        // Each place given back: the one woken takes it. b's Hikawas get half the places, not a
        // tenth.
        let mut given = HashMap::<Tenant, usize>::new();
        for _ in 0..40 {
            t += Duration::from_millis(1);
            let (tenant, name, mut place) = held.pop_front().expect("places held");
            places.leave_at(place.held.take().unwrap(), t);
            while let Ok(next) = woken.try_recv() {
                let (tenant, module) = module_of(&next.name);
                let place = places.enter_at(module, tenant, next.clone(), t).ok().expect("woken into a free place");
                *given.entry(tenant.clone()).or_default() += 1;
                held.push_back((tenant.clone(), next.name.clone(), place));
            }
            // Its Hikawa comes back at once (a busy song): in line, or into a place still free.
            if let Ok(place) = places.enter_at(&module_of(&name).1, &tenant, hikawa(&name), t) {
                *given.entry(tenant.clone()).or_default() += 1;
                held.push_back((tenant, name, place));
            }
        }
        assert_eq!((holding(&held, &a), holding(&held, &b)), (4, 4), "each tenant holds half the slow modules' places");
        let (to_a, to_b) = (given[&a], given.get(&b).copied().unwrap_or(0));
        assert!(to_b * 2 >= to_a, "of 40 places freed, b's one module got {to_b}, a's ten {to_a}");
    }

    #[test]
    fn places_are_at_most_half_the_controllers_slots_and_at_least_one() {
        let (tx, _woken) = mpsc::unbounded_channel();
        assert_eq!(Places::new(16, tx.clone()).for_turns(64), 8);
        assert_eq!(Places::new(16, tx.clone()).for_turns(2), 4);
        assert_eq!(Places::new(1, tx.clone()).for_turns(2), 1);
        assert_eq!(Places::new(16, tx.clone()).for_turns(0), 1);
        // Native rules: no bound, nothing measured.
        let places = Places::new(16, tx);
        assert!(places.enter(&rules(None, "m"), &Tenant::Cluster, hikawa("n")).ok().expect("a place").held.is_none());
    }

    #[test]
    fn a_hikawa_gone_leaves_the_line_and_is_not_woken() {
        let (tx, mut woken) = mpsc::unbounded_channel();
        let places = Places::new(2, tx);
        let slow = rules(Some(1), "slow");
        call(&places, &slow, Instant::now(), Duration::from_secs(1));
        let held = places.enter(&slow, &Tenant::Cluster, hikawa("a")).ok().expect("the one place");
        assert!(places.enter(&slow, &Tenant::Cluster, hikawa("gone")).is_err());
        assert!(places.enter(&slow, &Tenant::Cluster, hikawa("b")).is_err());
        places.forget(&hikawa("gone"));
        drop(held);
        assert_eq!(woken.try_recv().unwrap(), hikawa("b"));
    }

    #[test]
    fn a_wait_is_guessed_from_how_long_places_are_held() {
        let (tx, _woken) = mpsc::unbounded_channel();
        let places = Places::new(16, tx);
        let slow = rules(Some(1), "slow");
        let t0 = Instant::now();
        // Places held 2 s each: the tenth in line waits up to the longest.
        call(&places, &slow, t0, Duration::from_secs(2));
        let held: Vec<_> = (0..2).map(|i| places.enter(&slow, &Tenant::Cluster, hikawa(&format!("h{i}"))).ok().unwrap()).collect();
        for i in 0..9 {
            let _ = places.enter(&slow, &Tenant::Cluster, hikawa(&format!("w{i}")));
        }
        assert_eq!(places.enter(&slow, &Tenant::Cluster, hikawa("w9")).err().unwrap().retry_in, LONGEST_WAIT);
        drop(held);
        // 30 ms calls: slow, and the first in line looks again within a few of them.
        let places = Places::new(16, mpsc::unbounded_channel().0);
        call(&places, &slow, t0, Duration::from_millis(30));
        let held: Vec<_> = (0..2).map(|i| places.enter(&slow, &Tenant::Cluster, hikawa(&format!("h{i}"))).ok().unwrap()).collect();
        let wait = places.enter(&slow, &Tenant::Cluster, hikawa("w0")).err().unwrap().retry_in;
        assert_eq!(wait, Duration::from_millis(60), "one place ahead held once more, and its own");
        drop(held);
    }
}
