//! The songs of the conformance suite: each seed's whole song on a virtual clock, every input
//! decided twice, and a [`Tally`] of what they told ([`super::verdicts`] turns it into checks).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use rand::{RngCore, SeedableRng, rngs::StdRng};
use zundoko_rules::{ChildKind, Hikawa, NextCall, Observed, Plan};

use super::{Check, INTERVALS, MAX_FAILED_SONGS, START_MS, quote, verdicts};
use crate::supply::contract::plan_check::{self, PlanLimits};
use crate::supply::sandbox::{GuestError, RulesModule};

/// What went wrong in a song, first failure only.
enum SongFault {
    Call(String),
    Plan(String),
    Nondeterministic(String),
    AfterKiyoshi(String),
    NoKiyoshi(String),
}

/// Everything the songs tell, gathered over all seeds.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) calls: u64,
    pub(super) call_failures: u64,
    pub(super) first_call_failure: Option<String>,
    pub(super) plans: u64,
    pub(super) plan_rejections: u64,
    pub(super) first_plan_rejection: Option<String>,
    pub(super) doubles: u64,
    pub(super) nondeterministic: u64,
    pub(super) first_nondeterministic: Option<String>,
    pub(super) songs_ok: u64,
    pub(super) first_bad_song: Option<String>,
    /// Songs played: all the seeds, unless [`MAX_FAILED_SONGS`] failed first.
    pub(super) played: u64,
    pub(super) lengths: Vec<usize>,
    pub(super) words: BTreeSet<String>,
    pub(super) kiyoshi_words: BTreeSet<String>,
    /// Every call's fuel, failed calls included (all of the budget when it ran out).
    pub(super) fuel: Vec<u64>,
    pub(super) out_of_fuel: u64,
    pub(super) first_out_of_fuel: Option<String>,
    /// The ordinary words of the longest valid song, for the call at the child cap.
    pub(super) longest_song: Vec<String>,
    /// The call at the child cap: its fuel, and why it failed if it did.
    pub(super) at_cap: Option<(u64, Option<String>)>,
    pub(super) elapsed: Duration,
}

pub(super) fn sing_all(module: &RulesModule, seeds: u64, limits: &PlanLimits, budget: u64) -> Vec<Check> {
    let mut tally = Tally::default();
    let started = Instant::now();
    for seed in 0..seeds {
        if tally.played - tally.songs_ok >= MAX_FAILED_SONGS {
            break;
        }
        tally.played += 1;
        match sing(module, seed, limits, budget, &mut tally) {
            Ok(()) => tally.songs_ok += 1,
            Err((at, fault)) => {
                let (slot, count, text) = match fault {
                    SongFault::Call(t) => (&mut tally.first_call_failure, &mut tally.call_failures, t),
                    SongFault::Plan(t) => (&mut tally.first_plan_rejection, &mut tally.plan_rejections, t),
                    SongFault::Nondeterministic(t) => (&mut tally.first_nondeterministic, &mut tally.nondeterministic, t),
                    SongFault::AfterKiyoshi(t) | SongFault::NoKiyoshi(t) => {
                        tally.first_bad_song.get_or_insert(format!("seed {seed}, {at}: {t}"));
                        continue;
                    }
                };
                *count += 1;
                slot.get_or_insert(format!("seed {seed}, {at}: {text}"));
                tally.first_bad_song.get_or_insert(format!("seed {seed}, {at}: {text}"));
            }
        }
    }
    call_at_the_cap(module, limits, budget, &mut tally);
    tally.elapsed = started.elapsed();
    verdicts::report_tally(tally, seeds, limits, budget)
}

/// One call with the longest history a valid song can have: the child cap's worth of the
/// module's own words (its longest song's, over and over), no Kiyoshi yet. Its fuel is what
/// the module needs at worst; its plan is not checked (the history is made up).
fn call_at_the_cap(module: &RulesModule, limits: &PlanLimits, budget: u64, tally: &mut Tally) {
    let words: Vec<String> = match tally.longest_song.is_empty() {
        false => tally.longest_song.clone(),
        true => tally.words.iter().cloned().collect(),
    };
    if words.is_empty() || limits.max_children == 0 {
        return;
    }
    let interval = INTERVALS[0];
    let name = "conformance-cap";
    let children = limits.max_children as i64;
    let zundokos = (1..=limits.max_children)
        .map(|index| zundoko_rules::Said {
            name: format!("{name}-zundoko-{index:03}"),
            index,
            word: words[(index as usize - 1) % words.len()].clone(),
            said_at: Some(START_MS + (index as i64 - 1) * interval as i64),
        })
        .collect();
    let observed = Observed {
        hikawa: Hikawa {
            namespace: "default".into(),
            name: name.into(),
            uid: "00000000-0000-0000-0000-0000000ca9ca".into(),
            generation: 1,
            created_at: Some(START_MS),
            interval_millis: interval,
            ..Hikawa::default()
        },
        zundokos,
        kiyoshi: None,
        now: START_MS + children * interval as i64,
        entropy: StdRng::seed_from_u64(u64::MAX).next_u64(),
    };
    let (result, fuel) = module.reconcile_metered(&observed, budget);
    tally.fuel.push(fuel);
    let failed = result.err().map(|e| {
        if matches!(e, GuestError::OutOfCpuBudget { .. }) {
            tally.out_of_fuel += 1;
            tally.first_out_of_fuel.get_or_insert(format!("the call at the cap of {} children", limits.max_children));
        }
        format!("{}: {}", e.reason(), quote(&e.to_string()))
    });
    tally.at_cap = Some((fuel, failed));
}

/// One song on a virtual clock; `Err` names the decision and the first fault.
fn sing(module: &RulesModule, seed: u64, limits: &PlanLimits, budget: u64, tally: &mut Tally) -> Result<(), (String, SongFault)> {
    let mut rng = StdRng::seed_from_u64(seed);
    let interval = INTERVALS[(seed % INTERVALS.len() as u64) as usize];
    let mut observed = Observed {
        hikawa: Hikawa {
            namespace: "default".into(),
            name: format!("conformance-{seed}"),
            uid: format!("00000000-0000-0000-0000-{seed:012}"),
            generation: 1,
            created_at: Some(START_MS),
            interval_millis: interval,
            ..Hikawa::default()
        },
        now: START_MS,
        ..Observed::default()
    };
    // Enough for the longest valid song (the child cap) with a wait before every word.
    let max_decisions = 2 * limits.max_children as usize + 16;
    let mut probed_later = false;
    for decision in 1..=max_decisions {
        observed.entropy = rng.next_u64();
        let at = format!("decision {decision} after {} words", observed.zundokos.len());
        let plan = decide_twice(module, &observed, budget, tally, &|| format!("seed {seed}, {at}")).map_err(|f| (at.clone(), f))?;
        // Before the plan check, which refuses it too: the song's own fault, named as such.
        if observed.kiyoshi.is_some()
            && let Some(say) = plan.says().next()
        {
            return Err((at, SongFault::AfterKiyoshi(format!("said {} after its Kiyoshi", quote(&say.word)))));
        }
        tally.plans += 1;
        plan_check::check(&plan, &observed, limits).map_err(|e| (at.clone(), SongFault::Plan(quote(&e.to_string()))))?;
        for say in plan.says() {
            match say.kind {
                ChildKind::Zundoko => tally.words.insert(say.word.clone()),
                ChildKind::Kiyoshi => tally.kiyoshi_words.insert(say.word.clone()),
            };
        }
        let next = plan.next_call(&observed);
        observed.apply(&plan);
        match next {
            NextCall::After(ms) => observed.now = observed.now.saturating_add(ms as i64),
            NextCall::WhenSomethingChanges if observed.kiyoshi.is_some() && !probed_later => {
                // Settled after its Kiyoshi: one more look much later must say nothing either.
                probed_later = true;
                observed.now = observed.now.saturating_add(interval as i64 + 60_000);
            }
            NextCall::WhenSomethingChanges if observed.kiyoshi.is_some() => {
                tally.lengths.push(observed.zundokos.len());
                if observed.zundokos.len() > tally.longest_song.len() {
                    tally.longest_song = observed.zundokos.iter().map(|z| z.word.clone()).collect();
                }
                return Ok(());
            }
            NextCall::WhenSomethingChanges => {
                return Err((at, SongFault::NoKiyoshi("stopped (no requeue, nothing changed) without a Kiyoshi".into())));
            }
        }
    }
    let said = observed.zundokos.len();
    let why = match observed.kiyoshi {
        Some(_) => format!("still requeueing {max_decisions} decisions after its start, though its Kiyoshi is said"),
        None => format!("no Kiyoshi after {max_decisions} decisions and {said} words"),
    };
    Err((format!("decision {max_decisions}"), SongFault::NoKiyoshi(why)))
}

/// The same input twice, each call in a fresh instance: both must succeed with the same plan
/// and the same fuel. Every call's fuel is tallied, failed ones included.
fn decide_twice(
    module: &RulesModule,
    observed: &Observed,
    budget: u64,
    tally: &mut Tally,
    at: &dyn Fn() -> String,
) -> Result<Plan, SongFault> {
    let first = module.reconcile_metered(observed, budget);
    let second = module.reconcile_metered(observed, budget);
    tally.calls += 2;
    tally.doubles += 1;
    for (result, fuel) in [&first, &second] {
        tally.fuel.push(*fuel);
        if let Err(e @ GuestError::OutOfCpuBudget { .. }) = result {
            tally.out_of_fuel += 1;
            if tally.first_out_of_fuel.is_none() {
                tally.first_out_of_fuel = Some(format!("{}: {}", at(), e.reason()));
            }
        }
    }
    let outcome = |(result, fuel): (Result<crate::supply::sandbox::GuestOutcome<Plan>, GuestError>, u64)| {
        (result.map(|o| o.value), fuel)
    };
    same_decision(outcome(first), outcome(second))
}

/// Two calls made with the same input: the plan, if both made the same decision with the same
/// fuel (a pure function of its input runs the same instructions); else what differed.
fn same_decision(
    (first, first_fuel): (Result<Plan, GuestError>, u64),
    (second, second_fuel): (Result<Plan, GuestError>, u64),
) -> Result<Plan, SongFault> {
    let describe = |r: &Result<Plan, GuestError>| match r {
        Ok(plan) => plan.to_string(),
        Err(e) => format!("{}: {}", e.reason(), e),
    };
    let differ = |what: &str| {
        SongFault::Nondeterministic(format!(
            "same input, {what}: {} ({first_fuel} fuel) / {} ({second_fuel} fuel)",
            quote(&describe(&first)),
            quote(&describe(&second))
        ))
    };
    match (&first, &second) {
        (Ok(a), Ok(b)) if a != b => Err(differ("two plans")),
        (Err(a), Err(b)) if a.reason() != b.reason() => Err(differ("two failures")),
        (Ok(_), Err(_)) | (Err(_), Ok(_)) => Err(differ("one call failed and the other did not")),
        _ if first_fuel != second_fuel => Err(differ("the same decision for two different fuels")),
        (Ok(a), _) => Ok(a.clone()),
        (Err(a), _) => Err(SongFault::Call(format!("{}: {}", a.reason(), quote(&a.to_string())))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zundoko_rules::Action;

    fn requeue(ms: u64) -> Plan {
        Plan { actions: vec![Action::RequeueAfter(ms)] }
    }

    fn trap() -> GuestError {
        GuestError::Trap { trap: "unreachable".into(), guest_message: None }
    }

    fn nondeterministic(fault: Result<Plan, SongFault>) -> String {
        match fault {
            Err(SongFault::Nondeterministic(why)) => why,
            Ok(plan) => panic!("the same decision: {plan}"),
            Err(_) => panic!("another fault"),
        }
    }

    #[test]
    fn the_same_decision_twice_passes() {
        assert_eq!(same_decision((Ok(requeue(500)), 100), (Ok(requeue(500)), 100)).ok(), Some(requeue(500)));
        // Two identical failures are the call's fault, not nondeterminism.
        assert!(matches!(same_decision((Err(trap()), 7), (Err(trap()), 7)), Err(SongFault::Call(_))));
    }

    #[test]
    fn any_difference_between_the_two_calls_is_nondeterminism() {
        let why = nondeterministic(same_decision((Ok(requeue(500)), 100), (Ok(requeue(501)), 100)));
        assert!(why.starts_with("same input, two plans") && why.contains("500") && why.contains("501"), "{why}");
        let why = nondeterministic(same_decision((Ok(requeue(500)), 100), (Err(trap()), 100)));
        assert!(why.contains("one call failed") && why.contains("GuestTrapped"), "{why}");
        let why = nondeterministic(same_decision((Err(trap()), 100), (Ok(requeue(500)), 100)));
        assert!(why.contains("one call failed"), "{why}");
        let why = nondeterministic(same_decision((Err(trap()), 100), (Err(GuestError::OutOfCpuBudget { budget: 100 }), 100)));
        assert!(why.contains("two failures") && why.contains("OutOfCpuBudget"), "{why}");
        let why = nondeterministic(same_decision((Ok(requeue(500)), 100), (Ok(requeue(500)), 101)));
        assert!(why.contains("two different fuels") && why.contains("(101 fuel)"), "{why}");
    }
}
