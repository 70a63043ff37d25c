//! `explain NAMESPACE/HIKAWA [--word N | --song]`: a song's decisions explained from the
//! cluster alone (issue 54). It reads the Hikawa, its children and their decision annotations
//! (`read`), says what the Hikawa does or waits for (`waiting`) and when it is decided for next
//! (`pacing`), and for `--word`/`--song` (and the last word of a Hikawa singing) rebuilds each
//! word's input, proves it by its digest, fetches the module by digest (`module`) and replays
//! the call in the sandbox (`replay`). Text for people, JSON for tools;
//! everything that came from the cluster or a module is escaped before it reaches a terminal.

pub mod module;
pub mod pacing;
pub mod read;
pub mod replay;
pub mod tenant;
pub mod waiting;

use std::io::Write;

use anyhow::{Context, Result};
use kube::Client;
use serde::Serialize;

use crate::cli::args::{ExplainArgs, ExplainFormat, rules_namespaces};
use crate::controllers::hikawa::provenance::Provenance;
use crate::text::printable;

/// The longest piece of cluster- or module-made text printed in one place.
const MAX_PRINTED_BYTES: usize = 1024;

/// What `explain` found.
#[derive(Debug, Serialize)]
pub struct Report {
    pub hikawa: String,
    #[serde(flatten)]
    pub state: waiting::State,
    /// The words explained (replayed for `--word` and `--song`; for neither, the last word with
    /// its recorded decision, not replayed).
    pub words: Vec<replay::Word>,
    /// For `--song`: the first word that does not replay to what was written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_difference: Option<Difference>,
    /// Each pull secret of the (cluster) rule set that could not be used to fetch its module:
    /// which, why, and what was tried instead; said also when the words replay.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pull_secrets_unused: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct Difference {
    pub position: u32,
    pub verdict: replay::Verdict,
    pub reason: String,
}

/// The verb: connect with the kubeconfig (or in-cluster account), explain, print. A `--song`
/// or `--word` that does not replay ends with an error naming the word (exit status 1).
pub async fn run(args: &ExplainArgs, out: &mut dyn Write) -> Result<()> {
    let config = kube::Config::infer().await.context("cannot connect to Kubernetes (no usable kubeconfig or in-cluster service account)")?;
    let client = Client::try_from(config).context("cannot build the Kubernetes client")?;
    let report = explain(&client, args).await?;
    print(&report, args.output, out)?;
    let replayed = args.song || args.word.is_some();
    match report.words.iter().find(|w| replayed && w.verdict != replay::Verdict::Matches) {
        Some(w) => anyhow::bail!("word {} ({}) does not replay: {}", w.position, printable(&w.word, 256), printable(&w.reason, MAX_PRINTED_BYTES)),
        None => Ok(()),
    }
}

/// Explain the Hikawa `args.hikawa` from what `client` reads.
pub async fn explain(client: &Client, args: &ExplainArgs) -> Result<Report> {
    let leases = read::Leases { namespace: &args.operator_namespace, name: &args.lease_name, shards: args.shards };
    let read = read::read(client, &args.hikawa, &leases).await?;
    let state = waiting::state(&read);
    let (ns, name) = read::split_key(&args.hikawa);
    let mut report = Report { hikawa: format!("{ns}/{name}"), state, words: Vec::new(), first_difference: None, pull_secrets_unused: Vec::new() };
    let singing = report.state.state == "singing";
    let chosen: Vec<usize> = match (args.word, args.song) {
        (Some(n), _) => {
            let at = read.children.iter().position(|c| c.index == n).with_context(|| format!("{ns}/{name} has no word {n} ({} children)", read.children.len()))?;
            vec![at]
        }
        (None, true) => (0..read.children.len()).collect(),
        // While it sings, its last word is replayed: its plan says when the rules are called next.
        (None, false) if singing && !read.children.is_empty() => vec![read.children.len() - 1],
        (None, false) => {
            report.words.extend(read.children.last().map(recorded));
            report.state.pacing = pace(&read, &report, None);
            return Ok(report);
        }
    };
    let engine = args.sandbox.cli_engine(args.registry.cache_dir.as_deref())?;
    let ruleset = read.ruleset.as_ref().and_then(|r| r.as_ref().ok()).cloned();
    let limits = args.sandbox.plan_limits();
    let mut modules = module::Modules::new(&engine, limits.clone(), &args.registry, client, args.module.clone(), ruleset, read.default_module.clone())
        .reading_pull_secrets_from(rules_namespaces(&args.rules_namespaces, Some(&args.operator_namespace)));
    for at in chosen {
        report.words.push(replay::replay(&read.hikawa, &read.children, at, &mut modules, &limits).await);
    }
    report.pull_secrets_unused = modules.pull_secrets_unused();
    let last = read.children.last().and_then(|child| report.words.iter().find(|w| w.name == child.name));
    report.state.pacing = pace(&read, &report, last);
    report.first_difference = report
        .words
        .iter()
        .find(|w| w.verdict != replay::Verdict::Matches)
        .filter(|_| args.song)
        .map(|w| Difference { position: w.position, verdict: w.verdict.clone(), reason: w.reason.clone() });
    Ok(report)
}

/// When the Hikawa is decided for next; `last`: its last word, replayed.
fn pace(read: &read::Read, report: &Report, last: Option<&replay::Word>) -> Option<pacing::Pacing> {
    let ready = report.state.ready.as_ref().map(|(value, reason, _)| (value.as_str(), reason.as_str()));
    pacing::pacing(read, &report.state.state, ready, last, jiff::Timestamp::now().as_millisecond())
}

/// A word with its recorded decision, not replayed.
fn recorded(child: &read::Child) -> replay::Word {
    let decision = child.decision.as_deref().map(Provenance::parse);
    replay::Word {
        position: child.index,
        kind: if child.kiyoshi { "Kiyoshi" } else { "Zundoko" },
        name: child.name.clone(),
        word: child.word.clone(),
        verdict: match &decision {
            None => replay::Verdict::NoProvenance,
            Some(Err(_)) => replay::Verdict::UnreadableProvenance,
            Some(Ok(_)) => replay::Verdict::Matches,
        },
        reason: match &decision {
            None => "no decision annotation: written by someone else".into(),
            Some(Err(e)) => e.to_string(),
            Some(Ok(_)) => "recorded (not replayed: give --word N or --song)".into(),
        },
        decision: decision.and_then(Result::ok).as_ref().map(replay::Decision::from),
        rebuilt_input: None,
        plan: None,
        logs: Vec::new(),
        next_call: None,
    }
}

pub fn print(report: &Report, format: ExplainFormat, out: &mut dyn Write) -> Result<()> {
    if format == ExplainFormat::Json {
        // JSON escapes every control character itself.
        serde_json::to_writer_pretty(&mut *out, report)?;
        writeln!(out)?;
        return Ok(());
    }
    let safe = |s: &str| printable(s, MAX_PRINTED_BYTES);
    let s = &report.state;
    writeln!(out, "Hikawa {}: {}", safe(&report.hikawa), safe(&s.state))?;
    writeln!(out, "  {}", safe(&s.summary))?;
    writeln!(out, "  words said {}, generation {} (last decided at {})", s.words_said, s.generation, s.observed_generation.map_or("-".into(), |g| g.to_string()))?;
    for (label, value) in [("phase", &s.phase), ("message", &s.message), ("decided by", &s.decided_by), ("module", &s.module), ("default module", &s.default_module)] {
        if let Some(value) = value {
            writeln!(out, "  {label}: {}", safe(value))?;
        }
    }
    if let Some((value, reason, message)) = &s.ready {
        writeln!(out, "  Ready={} ({}): {}", safe(value), safe(reason), safe(message))?;
    }
    if let Some(rs) = &s.ruleset {
        let opt = |v: &Option<String>| v.as_deref().map_or("-".to_string(), safe);
        writeln!(out, "  rule set {}: {} ({}) {}", safe(&rs.name), opt(&rs.phase), opt(&rs.reason), opt(&rs.message))?;
    }
    let shard = &s.shard;
    match (&shard.holder, &shard.unread) {
        (Some((holder, renewed)), _) => {
            writeln!(out, "  shard {} of {}: Lease {} held by {} (renewed {})", shard.shard, shard.count, safe(&shard.lease), safe(holder), renewed.as_deref().map_or("never".into(), safe))?
        }
        (None, Some(why)) => writeln!(out, "  shard {} of {}: Lease {}: {}", shard.shard, shard.count, safe(&shard.lease), safe(why))?,
        (None, None) => writeln!(out, "  shard {} of {}: Lease {} held by no replica: no operator decides for it now", shard.shard, shard.count, safe(&shard.lease))?,
    }
    if let Some(p) = &s.pacing {
        writeln!(out, "  next call: {} ({})", p.next_call_at.as_deref().map_or("none due".into(), safe), safe(&p.basis))?;
        if let Some(late) = p.overdue_ms {
            writeln!(out, "  overdue by {}.{:03} s: no decision has changed the Hikawa since (is the replica holding its shard deciding?)", late / 1000, late % 1000)?;
        }
    }
    for (reason, note, count) in &s.warnings {
        writeln!(out, "  Warning {} (x{count}): {}", safe(reason), safe(note))?;
    }
    for unused in &report.pull_secrets_unused {
        writeln!(out, "  not the rule set's pull secret: {}", safe(unused))?;
    }
    for w in &report.words {
        writeln!(out, "word {} {} {}: {}", w.position, w.kind, safe(&w.word), verdict_text(&w.verdict))?;
        writeln!(out, "  child {}", safe(&w.name))?;
        if let Some(d) = &w.decision {
            writeln!(out, "  decided by {} (contract {}) on {}, generation {}", safe(&d.module), safe(&d.contract), safe(&d.replica), d.generation)?;
            writeln!(out, "  now {} ({}), entropy {}, input sha256:{}", d.now, crate::controllers::writes::status::rfc3339_millis(d.now), d.entropy, d.input)?;
        }
        for line in &w.logs {
            writeln!(out, "  guest: {}", safe(line))?;
        }
        if let Some(plan) = &w.plan {
            writeln!(out, "  plan: {}", safe(plan))?;
        }
        if !w.reason.is_empty() {
            writeln!(out, "  {}", safe(&w.reason))?;
        }
    }
    if let Some(d) = &report.first_difference {
        writeln!(out, "first difference: word {}: {}", d.position, safe(&d.reason))?;
    } else if report.words.len() > 1 {
        writeln!(out, "every word replays to what was written")?;
    }
    Ok(())
}

fn verdict_text(verdict: &replay::Verdict) -> &'static str {
    use replay::Verdict::*;
    match verdict {
        Matches => "matches",
        NoProvenance => "NOT BY THE OPERATOR (no decision recorded)",
        UnreadableProvenance => "DECISION UNREADABLE",
        NotOwned => "NOT THE HIKAWA'S",
        SpecChanged => "SPEC CHANGED SINCE",
        InputDiffers => "INPUT DIFFERS FROM THE RECORD",
        ModuleUnavailable => "MODULE UNAVAILABLE",
        PlanDiffers => "REPLAY DIFFERS",
        ReplayFailed => "REPLAY FAILED",
    }
}
