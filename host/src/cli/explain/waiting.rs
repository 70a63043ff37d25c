//! "Why is it not singing?": what the operator waits for, in its own terms, read only from the
//! cluster (the Hikawa's status and conditions, its rule set's status, the Events about it),
//! never from the operator's memory, so it answers with the operator down. When it is decided
//! for next is `pacing.rs`'s.

use k8s_openapi::api::events::v1::Event;
use serde::Serialize;

use crate::cli::explain::read::Read;
use crate::controllers::hikawa::status::CONDITION_READY;

/// The most Warning Events shown.
const MAX_WARNINGS: usize = 5;

/// What the Hikawa is doing, or waiting for.
#[derive(Clone, Debug, Default, Serialize)]
pub struct State {
    /// `singing`, `done` (Kiyoshi said), `waiting` (for its rule set, a module, the operator) or
    /// `failing` (the rules, a plan or a write failed).
    pub state: String,
    /// In one sentence.
    pub summary: String,
    pub phase: Option<String>,
    pub message: Option<String>,
    pub generation: i64,
    pub observed_generation: Option<i64>,
    pub words_said: u32,
    pub last_word_time: Option<String>,
    pub decided_by: Option<String>,
    pub module: Option<String>,
    /// The Ready condition: status, reason, message.
    pub ready: Option<(String, String, String)>,
    /// The rule set: name, phase, reason, message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ruleset: Option<RuleSetState>,
    /// The newest Warning Events about the Hikawa: reason, note, count.
    pub warnings: Vec<(String, String, i32)>,
    /// Its shard and the replica that holds it.
    pub shard: crate::cli::explain::read::Shard,
    /// For a Hikawa that names no rule set: the default module its replica recorded, and where
    /// it may be had (or why that is not recorded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_module: Option<String>,
    /// When it is decided for next (`pacing.rs`; filled once the last word is replayed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pacing: Option<crate::cli::explain::pacing::Pacing>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct RuleSetState {
    pub name: String,
    pub phase: Option<String>,
    pub reason: Option<String>,
    pub message: Option<String>,
    /// Its Ready condition is True: a module serves its Hikawas.
    pub serving: bool,
}

/// Read what the Hikawa waits for from what `read` found.
pub fn state(read: &Read) -> State {
    let hikawa = &read.hikawa;
    let status = hikawa.status.clone().unwrap_or_default();
    let ready = status.conditions.iter().find(|c| c.type_ == CONDITION_READY).map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()));
    let ruleset = read.ruleset.as_ref().map(|r| match r {
        Ok(r) => {
            let s = r.status.clone().unwrap_or_default();
            // Serving is its Ready condition (Active, RollingOut and RolledBack all serve).
            let serving = s.conditions.iter().any(|c| c.type_ == CONDITION_READY && c.status == "True");
            RuleSetState { name: kube::ResourceExt::name_any(r), phase: s.phase, reason: s.reason, message: s.message, serving }
        }
        Err(why) => RuleSetState { name: crate::supply::tenant::key_of_hikawa(hikawa).unwrap_or_default(), phase: None, reason: Some("RuleSetNotReadable".into()), message: Some(why.clone()), serving: false },
    });
    let warnings: Vec<(String, String, i32)> = read
        .events
        .iter()
        .rev()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .take(MAX_WARNINGS)
        .map(|e: &Event| (e.reason.clone().unwrap_or_default(), e.note.clone().unwrap_or_default(), e.series.as_ref().map_or(1, |s| s.count)))
        .collect();
    let kiyoshied = status.kiyoshied || read.children.iter().any(|c| c.kiyoshi);
    let generation = hikawa.metadata.generation.unwrap_or(0);
    let (state, summary) = if kiyoshied {
        ("done".to_string(), "the song is over: Kiyoshi was said".to_string())
    } else if let Some(rs) = ruleset.as_ref().filter(|rs| !rs.serving) {
        let phase = rs.phase.as_deref().unwrap_or("not checked yet");
        let reason = rs.reason.as_deref().unwrap_or("no reason given");
        let message = rs.message.as_deref().unwrap_or("");
        ("waiting".into(), format!("waiting on its rule set {}: {phase} ({reason}) {message}", rs.name))
    } else if let Some((value, reason, message)) = ready.as_ref().filter(|r| r.0 != "True") {
        ("failing".into(), format!("the last decision failed (Ready={value}, {reason}): {message}"))
    } else if status.observed_generation.is_none() && read.shard.unread.is_none() && read.shard.holder.is_none() {
        ("waiting".into(), format!("no decision yet: no replica holds its shard {} (Lease {})", read.shard.shard, read.shard.lease))
    } else if status.observed_generation.is_none() {
        ("waiting".into(), "no decision yet: no operator has reconciled it (is one running, and does it hold the shard?)".into())
    } else if status.observed_generation != Some(generation) {
        ("waiting".into(), format!("the spec is at generation {generation}, the last decision saw {}: the operator has not decided since", status.observed_generation.unwrap_or(0)))
    } else {
        ("singing".into(), format!("singing: {} words so far, the last at {}", status.num_zundokos_said, status.last_word_time.as_deref().unwrap_or("-")))
    };
    State {
        state,
        summary: summary.trim_end().to_string(),
        phase: status.phase,
        message: status.message,
        generation,
        observed_generation: status.observed_generation,
        words_said: status.num_zundokos_said,
        last_word_time: status.last_word_time,
        decided_by: status.decided_by,
        module: status.module.map(|m| format!("{} {} ({})", m.name, m.version, m.digest)),
        ready,
        ruleset,
        warnings,
        shard: read.shard.clone(),
        default_module: read.default_module.as_ref().map(|d| match d {
            Ok(d) => format!("replica {} serves {} (from {})", d.replica, d.record.digest, serde_json::to_string(&d.record.sources).unwrap_or_default()),
            Err(why) => why.clone(),
        }),
        pacing: None,
    }
}
