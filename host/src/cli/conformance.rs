//! `test`: the conformance suite for any rules module. Whole songs over many seeds on a
//! virtual clock (as `simulate` plays them), each decision made twice and checked by the
//! host's own plan check, plus the checks a swap makes (size, world, metadata, smoke test).
//!
//! Fuel: every call's fuel is counted, failed calls too (one that runs out counts the whole
//! budget), plus one call at the child cap, the longest history a valid song can hand a
//! module. A call that runs out fails the suite; so does one that needs more than half the
//! budget ([`FUEL_MARGIN`]), as a module that close to it would run out on some other song.
//!
//! A module declares its words by singing them: the suite takes the Kiyoshi's word from
//! the child of kind `kiyoshi` it creates, and its ordinary words from the Zundokos. A valid
//! song ends with exactly one Kiyoshi, the same word in every song and never an ordinary
//! word, within the host's child cap; nothing is said after it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use rand::{RngCore, SeedableRng, rngs::StdRng};
use serde::Serialize;
use zundoko_rules::{ChildKind, Hikawa, NextCall, Observed, Plan};

use crate::supply::contract::rules::smoke_test;
use crate::supply::sandbox::{GuestError, RulesModule, SandboxEngine, WORLD, metadata};
use crate::supply::contract::plan_check::{self, PlanLimits};
use crate::text::printable;

/// `test`: run the conformance suite and print its report; an error when a check failed.
pub fn test(args: &crate::cli::args::TestArgs, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
    use anyhow::Context as _;
    anyhow::ensure!(args.seeds > 0, "--seeds must be at least 1");
    let engine = args.sandbox.cli_engine(args.cache_dir.as_deref())?;
    let bytes = std::fs::read(&args.module).with_context(|| format!("cannot read module {}", args.module.display()))?;
    let report = run(&engine, &bytes, &args.module.display().to_string(), args.seeds, &args.sandbox.plan_limits());
    match args.format {
        crate::cli::args::ReportFormat::Text => report.write_text(out)?,
        crate::cli::args::ReportFormat::Json => writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?,
    }
    anyhow::ensure!(report.passed, "module {} failed {} conformance checks", report.module, report.failures());
    Ok(())
}

/// A module must fit a ConfigMap many times over: the product's budget.
pub const MAX_MODULE_BYTES: usize = 64 << 10;
/// Where each song's virtual clock starts (2026-01-01T00:00:00Z).
const START_MS: i64 = 1_767_225_600_000;
/// Intervals the songs use in turn: immediate, tiny, the sample's, long.
const INTERVALS: [u64; 4] = [500, 0, 1, 60_000];
/// How much of any module-made text (a word, an error message) a report quotes.
const QUOTE_BYTES: usize = 400;
/// The fuel check fails a call that needs more than 1/FUEL_MARGIN of the budget: songs and
/// entropies other than the suite's may well cost that much more (a rule set's cost grows
/// with the history it reads), so such a module is caught before it ships, not when it runs
/// out of fuel in a cluster.
pub const FUEL_MARGIN: u64 = 2;
/// Songs that may fail before the suite plays no more: a module that fails every song is
/// reported in seconds, not after all of them. A song that never ends plays to the child cap,
/// about 2,000 calls: seconds for an interpreter's module, so 200 of them took minutes.
pub const MAX_FAILED_SONGS: u64 = 3;
/// What a module that never sings a Kiyoshi is told may be why: in an interpreter, counting
/// the song on an object or in a global is how a long-running program would do it.
const FRESH_CALLS_HINT: &str = "every call starts from the module as it was built, so what a call keeps (on an object, in a global) is gone by the next: a song is what `observed` holds";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Fail,
    Skip,
}

/// One line of the report.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub status: Status,
    pub detail: String,
    /// The figures behind the detail, for CI.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub numbers: BTreeMap<&'static str, u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub module: String,
    pub name: Option<String>,
    pub version: Option<String>,
    pub digest: Option<String>,
    pub seeds: u64,
    pub passed: bool,
    pub checks: Vec<Check>,
    pub elapsed_ms: u64,
}

impl Report {
    pub fn failures(&self) -> usize {
        self.checks.iter().filter(|c| c.status == Status::Fail).count()
    }

    /// One line per check, then the verdict: read at a glance.
    pub fn write_text(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        let who = match (&self.name, &self.version) {
            (Some(name), Some(version)) => format!(" ({name} {version})"),
            _ => String::new(),
        };
        writeln!(out, "conformance of {}{who}, {} seeds", self.module, self.seeds)?;
        for check in &self.checks {
            let status = match check.status {
                Status::Pass => "PASS",
                Status::Fail => "FAIL",
                Status::Skip => "SKIP",
            };
            writeln!(out, "  {status}  {:<12} {}", check.name, check.detail)?;
        }
        let total = self.checks.iter().filter(|c| c.status != Status::Skip).count();
        match self.failures() {
            0 => writeln!(out, "PASS: all {total} checks passed in {:.1} s", self.elapsed_ms as f64 / 1000.0),
            n => writeln!(out, "FAIL: {n} of {total} checks failed in {:.1} s", self.elapsed_ms as f64 / 1000.0),
        }
    }
}

fn check(name: &'static str, passed: bool, detail: String) -> Check {
    Check { name, status: if passed { Status::Pass } else { Status::Fail }, detail, numbers: BTreeMap::new() }
}

fn skipped(name: &'static str, why: &str) -> Check {
    Check { name, status: Status::Skip, detail: why.into(), numbers: BTreeMap::new() }
}

impl Check {
    fn with(mut self, numbers: &[(&'static str, u64)]) -> Check {
        self.numbers.extend(numbers.iter().copied());
        self
    }
}

/// Run the whole suite on a module's bytes. `label` names the module in the report.
pub fn run(engine: &SandboxEngine, bytes: &[u8], label: &str, seeds: u64, limits: &PlanLimits) -> Report {
    let started = Instant::now();
    // The product's budget, or what the module's budget section asked for (within ceilings).
    let size_budget = crate::supply::sandbox::budget::read(bytes)
        .and_then(|budget| crate::supply::sandbox::budget::grant(budget, engine.limits()))
        .map_or(MAX_MODULE_BYTES, |limits| limits.module_bytes);
    let mut checks = vec![check(
        "size",
        bytes.len() <= size_budget,
        format!("{} bytes (budget {size_budget})", bytes.len()),
    )
    .with(&[("bytes", bytes.len() as u64), ("budget", size_budget as u64)])];
    let mut report = Report {
        module: printable(label, 512),
        name: None,
        version: None,
        digest: None,
        seeds,
        passed: false,
        checks: Vec::new(),
        elapsed_ms: 0,
    };
    let later = ["smoke test", "calls", "plan check", "songs", "words", "determinism", "fuel"];
    match engine.load(bytes) {
        Ok(module) => {
            let imports = if module.uses_wasi() { "its log and the virtual WASI" } else { "only its log" };
            checks.push(check("loads", true, format!("a component of {WORLD}, importing {imports}")));
            let info = &module.identity().info;
            checks.push(check(
                "metadata",
                true,
                format!(
                    "name {} B, version {} B, description {} B (bounds {}/{}/{}), printable",
                    info.name.len(),
                    info.version.len(),
                    info.description.len(),
                    metadata::MAX_NAME_BYTES,
                    metadata::MAX_VERSION_BYTES,
                    metadata::MAX_DESCRIPTION_BYTES
                ),
            ));
            report.name = Some(printable(&info.name, QUOTE_BYTES));
            report.version = Some(printable(&info.version, QUOTE_BYTES));
            report.digest = Some(module.identity().digest.clone());
            checks.push(match smoke_test(&module, limits) {
                Ok(_) => check("smoke test", true, "decides for a new Hikawa, as a swap requires".into()),
                Err(e) => check("smoke test", false, format!("{} (a swap would refuse this module)", quote(&e.to_string()))),
            });
            // The fuel the module runs with: the operator's, or what its budget asked for.
            checks.extend(sing_all(&module, seeds, limits, module.limits().fuel));
        }
        Err(error @ GuestError::BadModuleMetadata { .. }) => {
            checks.push(check("loads", true, format!("a component of {WORLD}")));
            checks.push(check("metadata", false, quote(&error.to_string())));
            checks.extend(later.iter().map(|name| skipped(name, "the module does not load")));
        }
        Err(error) => {
            checks.push(check("loads", false, format!("{}: {}", error.reason(), quote(&error.to_string()))));
            checks.push(skipped("metadata", "the module does not load"));
            checks.extend(later.iter().map(|name| skipped(name, "the module does not load")));
        }
    }
    report.passed = checks.iter().all(|c| c.status != Status::Fail);
    report.checks = checks;
    report.elapsed_ms = started.elapsed().as_millis() as u64;
    report
}

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
struct Tally {
    calls: u64,
    call_failures: u64,
    first_call_failure: Option<String>,
    plans: u64,
    plan_rejections: u64,
    first_plan_rejection: Option<String>,
    doubles: u64,
    nondeterministic: u64,
    first_nondeterministic: Option<String>,
    songs_ok: u64,
    first_bad_song: Option<String>,
    /// Songs played: all the seeds, unless [`MAX_FAILED_SONGS`] failed first.
    played: u64,
    lengths: Vec<usize>,
    words: BTreeSet<String>,
    kiyoshi_words: BTreeSet<String>,
    /// Every call's fuel, failed calls included (all of the budget when it ran out).
    fuel: Vec<u64>,
    out_of_fuel: u64,
    first_out_of_fuel: Option<String>,
    /// The ordinary words of the longest valid song, for the call at the child cap.
    longest_song: Vec<String>,
    /// The call at the child cap: its fuel, and why it failed if it did.
    at_cap: Option<(u64, Option<String>)>,
    elapsed: Duration,
}

fn sing_all(module: &RulesModule, seeds: u64, limits: &PlanLimits, budget: u64) -> Vec<Check> {
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
    report_tally(tally, seeds, limits, budget)
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

fn report_tally(t: Tally, seeds: u64, limits: &PlanLimits, budget: u64) -> Vec<Check> {
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

/// Module-made text, quoted, bounded and escaped for a terminal.
fn quote(s: &str) -> String {
    format!("\"{}\"", printable(s, QUOTE_BYTES))
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
