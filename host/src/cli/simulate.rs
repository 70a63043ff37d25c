//! `simulate`: play a module against a Hikawa manifest on a virtual clock, without a cluster.
//! Each decision is printed with its entropy, so any run can be replayed with `--seed`.

use std::io::Write;

use rand::{RngCore, SeedableRng, rngs::StdRng};
use zundoko_rules::{ChildKind, NextCall, Observed};

use crate::crd::Hikawa;
use crate::supply::contract::rules::{Rules, decide};
use crate::controllers::hikawa::observe::hikawa_view;
use crate::supply::contract::plan_check::PlanLimits;
use crate::text::printable;

/// Longest line of module-made text (an error, a name) printed; longer is cut.
const MAX_PRINTED_BYTES: usize = 512;

/// Where the virtual clock starts when the manifest has no creationTimestamp.
const DEFAULT_START_MS: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

/// How a simulated song went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Song {
    /// The words in order, Kiyoshi (if said) last.
    pub words: Vec<String>,
    pub kiyoshied: bool,
    /// Virtual milliseconds from the start to each word.
    pub times: Vec<i64>,
    pub decisions: usize,
}

/// Play the song. Stops at Kiyoshi, when the rules wait for nothing, after `max_decisions`,
/// or at the first failed decision (an error naming it).
pub fn simulate(
    rules: &dyn Rules,
    hikawa: &Hikawa,
    seed: u64,
    limits: &PlanLimits,
    max_decisions: usize,
    out: &mut dyn Write,
) -> anyhow::Result<Song> {
    let mut rng = StdRng::seed_from_u64(seed);
    let view = hikawa_view(hikawa);
    let start = view.created_at.unwrap_or(DEFAULT_START_MS);
    let module = rules.identity();
    writeln!(
        out,
        "module {} {} ({}), hikawa {}/{}, intervalMillis {}, seed {seed}",
        printable(&module.info.name, MAX_PRINTED_BYTES),
        printable(&module.info.version, MAX_PRINTED_BYTES),
        module.digest,
        if view.namespace.is_empty() { "default" } else { &view.namespace },
        view.name,
        view.interval_millis
    )?;
    let mut observed = Observed {
        hikawa: zundoko_rules::Hikawa {
            namespace: if view.namespace.is_empty() { "default".into() } else { view.namespace.clone() },
            ..view
        },
        now: start,
        ..Observed::default()
    };
    let mut song = Song { words: Vec::new(), kiyoshied: false, times: Vec::new(), decisions: 0 };

    while song.decisions < max_decisions {
        observed.entropy = rng.next_u64();
        let decision = decide(rules, &observed, limits);
        song.decisions += 1;
        let at = observed.now - start;
        let plan = match decision.outcome {
            Ok(plan) => plan,
            Err(error) => {
                let (reason, error) = (error.reason(), printable(&error.to_string(), MAX_PRINTED_BYTES));
                writeln!(out, "{:>8} ms  entropy {:#018x}  FAILED: {error}", at, observed.entropy)?;
                anyhow::bail!("decision {} at +{at} ms failed ({reason}): {error}", song.decisions);
            }
        };
        writeln!(
            out,
            "{:>8} ms  entropy {:#018x}  {}  [fuel {}]",
            at,
            observed.entropy,
            printable(&plan.to_string(), MAX_PRINTED_BYTES),
            decision.fuel_used.unwrap_or(0)
        )?;
        for say in plan.says() {
            song.words.push(say.word.clone());
            song.times.push(at);
            song.kiyoshied |= say.kind == ChildKind::Kiyoshi;
        }
        let next = plan.next_call(&observed);
        observed.apply(&plan);
        match next {
            NextCall::After(ms) => observed.now += ms as i64,
            NextCall::WhenSomethingChanges => break,
        }
    }
    writeln!(out, "song: {}", printable(&song.words.join(" "), 64 << 10))?;
    if song.kiyoshied {
        writeln!(out, "{} words, then {} at +{} ms, in {} decisions", song.words.len() - 1, printable(song.words.last().unwrap(), MAX_PRINTED_BYTES), song.times.last().unwrap(), song.decisions)?;
    } else {
        writeln!(out, "{} words, no Kiyoshi after {} decisions", song.words.len(), song.decisions)?;
    }
    Ok(song)
}
