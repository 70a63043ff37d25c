//! The conformance suite's verdicts on what the songs told ([`super::songs::Tally`]): calls,
//! plan check, songs, words, determinism and fuel, each a [`Check`] with its numbers.

use super::songs::Tally;
use super::{Check, FRESH_CALLS_HINT, FUEL_MARGIN, MAX_FAILED_SONGS, check, quote};
use crate::supply::contract::plan_check::PlanLimits;

pub(super) fn report_tally(t: Tally, seeds: u64, limits: &PlanLimits, budget: u64) -> Vec<Check> {
    let mut checks = Vec::new();
    checks.push(
        check(
            "calls",
            t.call_failures == 0,
            match &t.first_call_failure {
                None => format!("{} calls, none trapped or returned an error", t.calls),
                Some(first) => format!("{} songs stopped by a failed call; first: {first}", t.call_failures),
            },
        )
        .with(&[("calls", t.calls), ("failed_songs", t.call_failures)]),
    );
    checks.push(
        check(
            "plan check",
            t.plan_rejections == 0,
            match &t.first_plan_rejection {
                None => format!("{} plans, all pass the host's plan check", t.plans),
                Some(first) => format!("{} songs stopped by a rejected plan; first: {first}", t.plan_rejections),
            },
        )
        .with(&[("plans", t.plans), ("rejected", t.plan_rejections)]),
    );
    let mut lengths = t.lengths.clone();
    lengths.sort_unstable();
    let kiyoshi = t.kiyoshi_words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(", ");
    checks.push(
        check(
            "songs",
            t.songs_ok == seeds,
            match &t.first_bad_song {
                None => format!(
                    "{}/{seeds} end with exactly one {kiyoshi} and nothing after it, within the cap of {} children ({}..{} words, median {})",
                    t.songs_ok,
                    limits.max_children,
                    lengths.first().unwrap_or(&0),
                    lengths.last().unwrap_or(&0),
                    lengths.get(lengths.len() / 2).unwrap_or(&0)
                ),
                Some(first) if t.played < seeds => format!(
                    "{}/{} played valid, then no more ({} seeds not played: {MAX_FAILED_SONGS} songs failed); first failure: {first}",
                    t.songs_ok,
                    t.played,
                    seeds - t.played
                ),
                Some(first) => format!("{}/{seeds} valid; first failure: {first}", t.songs_ok),
            },
        )
        .with(&[("songs", seeds), ("played", t.played), ("valid", t.songs_ok)]),
    );
    let ordinary = t.words.iter().take(8).map(|w| quote(w)).collect::<Vec<_>>().join(" ");
    let more = if t.words.len() > 8 { format!(" (+{} more)", t.words.len() - 8) } else { String::new() };
    let clash: Vec<&String> = t.kiyoshi_words.intersection(&t.words).collect();
    checks.push(match (t.kiyoshi_words.len(), clash.first()) {
        (0, _) => check("words", false, format!("never said a Kiyoshi; words: {ordinary}{more} ({FRESH_CALLS_HINT})")),
        (1, None) => check("words", true, format!("the Kiyoshi {kiyoshi} after the words {ordinary}{more}")),
        (1, Some(word)) => check("words", false, format!("the Kiyoshi word {} is also said as an ordinary word", quote(word))),
        (n, _) => check("words", false, format!("{n} different Kiyoshi words: {kiyoshi}")),
    });
    checks.push(
        check(
            "determinism",
            t.nondeterministic == 0,
            match &t.first_nondeterministic {
                None => format!("{} inputs decided twice, the same plan each time", t.doubles),
                Some(first) => format!("{} songs stopped by a decision that changed; first: {first}", t.nondeterministic),
            },
        )
        .with(&[("inputs", t.doubles), ("nondeterministic", t.nondeterministic)]),
    );
    checks.push(fuel_check(&t, limits, budget));
    checks
}

/// Every call's fuel against the budget: none may run out, none may need more than
/// 1/[`FUEL_MARGIN`] of it.
fn fuel_check(t: &Tally, limits: &PlanLimits, budget: u64) -> Check {
    let mut fuel = t.fuel.clone();
    fuel.sort_unstable();
    let pick = |pct: usize| fuel.get((fuel.len().saturating_sub(1)) * pct / 100).copied().unwrap_or(0);
    let (p50, p99, max) = (pick(50), pick(99), fuel.last().copied().unwrap_or(0));
    let near = budget / FUEL_MARGIN;
    let at_cap = match &t.at_cap {
        Some((fuel, None)) => format!("; at the cap of {} children {fuel}", limits.max_children),
        Some((fuel, Some(why))) => format!("; at the cap of {} children {fuel} (the call failed: {why})", limits.max_children),
        None => String::new(),
    };
    let figures = format!(
        "per call p50 {p50}, p99 {p99}, max {max} (budget {budget}){at_cap}; {} calls, failed ones included, in {:.1} s",
        fuel.len(),
        t.elapsed.as_secs_f64()
    );
    let (passed, detail) = if fuel.is_empty() {
        (false, "no call was made".to_string())
    } else if t.out_of_fuel > 0 {
        (
            false,
            format!(
                "{} calls ran out of fuel (budget {budget}); first: {}; {figures}",
                t.out_of_fuel,
                t.first_out_of_fuel.as_deref().unwrap_or("?")
            ),
        )
    } else if max > near {
        (false, format!("a call needs {max} fuel, more than 1/{FUEL_MARGIN} of the budget {budget}: other songs may run out of fuel; {figures}"))
    } else {
        (true, figures)
    };
    check("fuel", passed, detail).with(&[
        ("p50", p50),
        ("p99", p99),
        ("max", max),
        ("budget", budget),
        ("out_of_fuel", t.out_of_fuel),
        ("at_cap", t.at_cap.as_ref().map_or(0, |(fuel, _)| *fuel)),
    ])
}
