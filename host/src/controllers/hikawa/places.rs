//! Each module's places: how many of the controller's reconciles may be deciding with one
//! module at once.
//!
//! Why: the controller runs `--concurrency` reconciles at once (16), shared by every rule set,
//! while a module's calls run no more at once than its turns (the node's cores, see
//! `supply/sandbox/in_flight.rs`). Without places, a slow module's Hikawas fill the
//! controller's slots waiting for its turns (14 of 16 on two cores), and the Hikawas of every
//! other rule set wait behind calls that are not theirs: a slow or hostile module would slow
//! the whole operator. With places, a module decides for at most twice its turns at once (its
//! calls running and the next ones ready) and never for more than half the slots; its other
//! Hikawas wait in its line without holding a slot, and are woken one by one, oldest first, as
//! places free. Native rules have no turns, and no line.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc;

use crate::crd::Hikawa;
use crate::supply::contract::rules::Rules;

/// How long a Hikawa in line waits before it looks again by itself, however long the line: a
/// wake-up can be lost (the Hikawa woken is gone, or its shard).
const LONGEST_WAIT: Duration = Duration::from_secs(10);
/// The shortest, so that a long line of quick calls is not a loop of reconciles.
const SHORTEST_WAIT: Duration = Duration::from_millis(50);
/// A place's hold until one has been measured.
const FIRST_GUESS: Duration = Duration::from_millis(100);

pub struct Places {
    /// By module digest: a module serving several rule sets (or the default) has one line.
    lines: Mutex<HashMap<String, Line>>,
    /// At most this many places per module: half the controller's slots.
    most: usize,
    /// The Hikawas woken when a place frees (a stream of the controller, `wakes.rs`).
    wake: mpsc::UnboundedSender<ObjectRef<Hikawa>>,
}

#[derive(Default)]
struct Line {
    deciding: usize,
    waiting: VecDeque<ObjectRef<Hikawa>>,
    queued: HashSet<ObjectRef<Hikawa>>,
    /// How long a place is held, smoothed: what a wait in line is guessed from.
    hold: Option<Duration>,
}

/// A place taken: given back (and the next in line woken) when dropped.
pub struct Place<'a> {
    held: Option<(&'a Places, String, Instant)>,
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
        Places { lines: Mutex::default(), most: (usize::from(concurrency) / 2).max(1), wake }
    }

    /// How many of `rules`' decisions may be made at once, `None` for no bound.
    pub fn of(&self, rules: &dyn Rules) -> Option<usize> {
        rules.calls_at_once().map(|turns| turns.saturating_mul(2).clamp(1, self.most))
    }

    /// A place to decide for `hikawa` with `rules`, or its place in their line.
    pub fn enter(&self, rules: &dyn Rules, hikawa: ObjectRef<Hikawa>) -> Result<Place<'_>, InLine> {
        let Some(places) = self.of(rules) else {
            return Ok(Place { held: None });
        };
        let digest = &rules.identity().digest;
        let mut lines = self.lock();
        let line = lines.entry(digest.clone()).or_default();
        if line.deciding < places {
            line.deciding += 1;
            // Its turn came (or it never waited): out of the line.
            if line.queued.remove(&hikawa) {
                line.waiting.retain(|h| h != &hikawa);
            }
            return Ok(Place { held: Some((self, digest.clone(), Instant::now())) });
        }
        let position = match line.waiting.iter().position(|h| h == &hikawa) {
            Some(at) => at + 1,
            None => {
                line.queued.insert(hikawa.clone());
                line.waiting.push_back(hikawa);
                line.waiting.len()
            }
        };
        // Its turn should come when the places ahead of it have been held once more each.
        let hold = line.hold.unwrap_or(FIRST_GUESS);
        let ahead = u32::try_from(position.div_ceil(places) + 1).unwrap_or(u32::MAX);
        Err(InLine { retry_in: hold.saturating_mul(ahead).clamp(SHORTEST_WAIT, LONGEST_WAIT) })
    }

    /// A Hikawa that is gone leaves every line.
    pub fn forget(&self, hikawa: &ObjectRef<Hikawa>) {
        let mut lines = self.lock();
        for line in lines.values_mut() {
            if line.queued.remove(hikawa) {
                line.waiting.retain(|h| h != hikawa);
            }
        }
        lines.retain(|_, line| line.deciding > 0 || !line.waiting.is_empty());
    }

    /// Hikawas deciding and waiting with the module `digest`.
    pub fn counts(&self, digest: &str) -> (usize, usize) {
        self.lock().get(digest).map_or((0, 0), |line| (line.deciding, line.waiting.len()))
    }

    fn leave(&self, digest: &str, held: Duration) {
        let mut lines = self.lock();
        let Some(line) = lines.get_mut(digest) else { return };
        line.deciding -= 1;
        line.hold = Some(line.hold.map_or(held, |hold| (hold * 7 + held) / 8));
        match line.waiting.pop_front() {
            Some(next) => {
                line.queued.remove(&next);
                // The receiver is gone only when the controller is: nothing to wake then.
                let _ = self.wake.send(next);
            }
            None if line.deciding == 0 => {
                lines.remove(digest);
            }
            None => {}
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Line>> {
        self.lines.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        if let Some((places, digest, since)) = self.held.take() {
            places.leave(&digest, since.elapsed());
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
        Turns(turns, Arc::new(ModuleIdentity { digest: digest.into(), info: zundoko_rules::ModuleInfo { name: digest.into(), version: String::new(), description: String::new() }, size: 0 }))
    }

    fn hikawa(name: &str) -> ObjectRef<Hikawa> {
        ObjectRef::new(name).within("default")
    }

    #[test]
    fn a_module_decides_for_twice_its_turns_at_once_and_the_rest_wait_in_line_then_are_woken_oldest_first() {
        let (tx, mut woken) = mpsc::unbounded_channel();
        let places = Places::new(16, tx);
        let slow = rules(Some(2), "slow");
        let held: Vec<Place<'_>> = (0..4).map(|i| places.enter(&slow, hikawa(&format!("s{i}"))).ok().expect("a place")).collect();
        let first = places.enter(&slow, hikawa("s4")).err().expect("in line: 4 places for 2 turns");
        assert!(first.retry_in >= SHORTEST_WAIT && first.retry_in <= LONGEST_WAIT, "{:?}", first.retry_in);
        let second = places.enter(&slow, hikawa("s5")).err().expect("in line");
        assert!(second.retry_in >= first.retry_in, "further back, a longer wait: {:?} < {:?}", second.retry_in, first.retry_in);
        // Looking again while in line keeps its place in it.
        assert!(places.enter(&slow, hikawa("s4")).is_err());
        assert_eq!(places.counts("slow"), (4, 2));
        // Another module has places of its own.
        let other = rules(Some(2), "other");
        let _other = places.enter(&other, hikawa("o0")).ok().expect("another module's place");
        // Native rules: no line at all.
        let native = rules(None, "native");
        assert!((0..100).all(|i| places.enter(&native, hikawa(&format!("n{i}"))).is_ok()));

        // Each place given back wakes the next in line, oldest first, once.
        let mut held = held.into_iter();
        drop(held.next());
        assert_eq!(woken.try_recv().unwrap(), hikawa("s4"));
        assert!(woken.try_recv().is_err());
        // The one woken takes the free place.
        let s4 = places.enter(&slow, hikawa("s4")).ok().expect("woken into a free place");
        assert_eq!(places.counts("slow"), (4, 1));
        drop(held.next());
        assert_eq!(woken.try_recv().unwrap(), hikawa("s5"));
        drop(held);
        drop(s4);
        assert!(woken.try_recv().is_err(), "nobody else waited");
        assert_eq!(places.counts("slow"), (0, 0), "an empty line is forgotten");
    }

    #[test]
    fn places_are_at_most_half_the_controllers_slots_and_at_least_one() {
        let (tx, _woken) = mpsc::unbounded_channel();
        assert_eq!(Places::new(16, tx.clone()).of(&rules(Some(64), "m")), Some(8));
        assert_eq!(Places::new(16, tx.clone()).of(&rules(Some(2), "m")), Some(4));
        assert_eq!(Places::new(1, tx.clone()).of(&rules(Some(2), "m")), Some(1));
        assert_eq!(Places::new(16, tx.clone()).of(&rules(Some(0), "m")), Some(1));
        assert_eq!(Places::new(16, tx).of(&rules(None, "m")), None);
    }

    #[test]
    fn a_hikawa_gone_leaves_the_line_and_is_not_woken() {
        let (tx, mut woken) = mpsc::unbounded_channel();
        let places = Places::new(2, tx);
        let slow = rules(Some(1), "slow");
        let held = places.enter(&slow, hikawa("a")).ok().expect("the one place");
        assert!(places.enter(&slow, hikawa("gone")).is_err());
        assert!(places.enter(&slow, hikawa("b")).is_err());
        places.forget(&hikawa("gone"));
        drop(held);
        assert_eq!(woken.try_recv().unwrap(), hikawa("b"));
    }

    #[test]
    fn a_wait_is_guessed_from_how_long_places_are_held() {
        let (tx, _woken) = mpsc::unbounded_channel();
        let places = Places::new(16, tx);
        let slow = rules(Some(1), "slow");
        let held: Vec<_> = (0..2).map(|i| places.enter(&slow, hikawa(&format!("h{i}"))).ok().unwrap()).collect();
        // Places held for 2 s each, as measured: the tenth in line waits up to the longest.
        places.lock().get_mut("slow").unwrap().hold = Some(Duration::from_secs(2));
        for i in 0..9 {
            let _ = places.enter(&slow, hikawa(&format!("w{i}")));
        }
        assert_eq!(places.enter(&slow, hikawa("w9")).err().unwrap().retry_in, LONGEST_WAIT);
        // Quick places: the first in line looks again soon, never sooner than the shortest.
        places.lock().get_mut("slow").unwrap().hold = Some(Duration::from_micros(10));
        assert_eq!(places.enter(&slow, hikawa("w0")).err().unwrap().retry_in, SHORTEST_WAIT);
        drop(held);
    }
}
