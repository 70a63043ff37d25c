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

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Serialize;

use crate::supply::contract::rules::smoke_test;
use crate::supply::sandbox::{GuestError, SandboxEngine, WORLD, metadata};
use crate::supply::contract::plan_check::PlanLimits;
use crate::text::printable;

mod songs;
mod verdicts;

/// `test`: run the conformance suite and print its report; an error when a check failed.
pub fn test(args: &crate::cli::args::TestArgs, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
    anyhow::ensure!(args.seeds > 0, "--seeds must be at least 1");
    let engine = args.sandbox.cli_engine(args.cache_dir.as_deref())?;
    let bytes = crate::cli::read_module_file(&args.module, engine.limits().max_module_bytes)?;
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

/// What the size check adds when a module over the product's budget asked for none.
const NO_BUDGET_HINT: &str = ": the module carries no zundoko:budget section, which a Python or JavaScript component needs; `make rules` writes it, or `python3 sdk/budget.py RULES_DIR MODULE.wasm` after a build by hand (docs/writing-rules.md)";

/// Run the whole suite on a module's bytes. `label` names the module in the report.
pub fn run(engine: &SandboxEngine, bytes: &[u8], label: &str, seeds: u64, limits: &PlanLimits) -> Report {
    let started = Instant::now();
    // The product's budget, or what the module's budget section asked for (within ceilings).
    let budget = crate::supply::sandbox::budget::read(bytes);
    let asked_no_size = matches!(&budget, Ok(budget) if budget.module_mib.is_none());
    let size_budget = budget
        .and_then(|budget| crate::supply::sandbox::budget::grant(budget, engine.limits()))
        .map_or(MAX_MODULE_BYTES, |limits| limits.module_bytes);
    let fits = bytes.len() <= size_budget;
    // A component built by hand (componentize-py or jco alone) carries no budget, so it is held
    // to the product's: say where an interpreter's comes from.
    let unasked = if !fits && asked_no_size { NO_BUDGET_HINT } else { "" };
    let mut checks = vec![
        check("size", fits, format!("{} bytes (budget {size_budget}){unasked}", bytes.len()))
            .with(&[("bytes", bytes.len() as u64), ("budget", size_budget as u64)]),
    ];
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
            checks.extend(songs::sing_all(&module, seeds, limits, module.limits().fuel));
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

/// Module-made text, quoted, bounded and escaped for a terminal.
fn quote(s: &str) -> String {
    format!("\"{}\"", printable(s, QUOTE_BYTES))
}
