//! When the rules are called next, from the cluster alone (never the operator's memory, so it
//! answers with the operator down): after a failure, the backoff its Warning Event records
//! (`controllers/hikawa/retry.rs`); while singing, the next call of the last word's plan,
//! replayed (the rules decide their pacing: a requeue-after, or none), from the `now` its
//! decision recorded. The operator decides again then, or sooner if something else changes.

use serde::Serialize;

use crate::cli::explain::read::Read;
use crate::cli::explain::replay::{Next, Verdict, Word};
use crate::controllers::hikawa::retry::{RETRY, Retry};
use crate::controllers::writes::status::rfc3339_millis;

/// When the Hikawa is decided for next, as far as the cluster says.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Pacing {
    /// The next call's time (RFC 3339), when one is due.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_call_at: Option<String>,
    /// Where that comes from, or why it is not known.
    pub basis: String,
    /// After a failure: its backoff, as its Warning Event records it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff: Option<Retry>,
    /// How long ago the next call was due, by this machine's clock (none if it is not due yet):
    /// no decision has changed the Hikawa since.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overdue_ms: Option<i64>,
}

/// The pacing of a Hikawa whose state is `state` (`ready`: its Ready condition's status and
/// reason), with `last` the replay of its last word if it was replayed; `now` in milliseconds.
/// `None` when nothing is due: the song is over, or no decision was made yet.
pub fn pacing(read: &Read, state: &str, ready: Option<(&str, &str)>, last: Option<&Word>, now: i64) -> Option<Pacing> {
    match (state, ready) {
        (_, Some(("False", reason))) => Some(backoff(read, reason, now)),
        ("singing", _) => Some(next_call(read, last, now)),
        _ => None,
    }
}

/// After a failure: the retry its newest Warning Event of the same reason records.
fn backoff(read: &Read, reason: &str, now: i64) -> Pacing {
    let recorded = read
        .events
        .iter()
        .rev()
        .filter(|e| e.type_.as_deref() == Some("Warning") && e.reason.as_deref() == Some(reason))
        .find_map(|e| e.metadata.annotations.as_ref()?.get(RETRY).and_then(|v| Retry::parse(v)));
    let Some(retry) = recorded else {
        return Pacing {
            basis: format!("the backoff is not recorded: no Warning Event of reason {reason} carries {RETRY} (it expired, or an operator older than the record wrote it)"),
            ..Pacing::default()
        };
    };
    let at = parse_millis(&retry.at);
    Pacing {
        next_call_at: Some(retry.at.clone()),
        basis: format!("retried after failure {} in a row, backoff {} ms (its Warning Event {reason}); sooner if the Hikawa changes", retry.failures, retry.backoff_ms),
        overdue_ms: at.map(|at| now - at).filter(|late| *late > 0),
        backoff: Some(retry),
    }
}

/// While singing: the next call of the last word's plan, replayed.
fn next_call(read: &Read, last: Option<&Word>, now: i64) -> Pacing {
    let interval = read.hikawa.spec.interval_millis;
    let Some(word) = last else {
        return Pacing { basis: format!("not known: no word said yet to replay (spec.intervalMillis is {interval} ms; the rules decide what they make of it)"), ..Pacing::default() };
    };
    let (Verdict::Matches, Some(next), Some(decision)) = (&word.verdict, word.next_call, word.decision.as_ref()) else {
        return Pacing {
            basis: format!(
                "not known: word {}'s decision does not replay ({}); spec.intervalMillis is {interval} ms, the rules decide what they make of it",
                word.position, word.reason
            ),
            ..Pacing::default()
        };
    };
    match next {
        Next::AfterMs(ms) => {
            let at = decision.now.saturating_add(ms as i64);
            Pacing {
                next_call_at: Some(rfc3339_millis(at)),
                basis: format!("word {}'s plan, replayed, asks to be called again {ms} ms after its decision at {}", word.position, rfc3339_millis(decision.now)),
                overdue_ms: Some(now - at).filter(|late| *late > 0),
                backoff: None,
            }
        }
        Next::WhenSomethingChanges => Pacing {
            basis: format!("word {}'s plan, replayed, asks for no call back: the rules are called again only when something changes (the Hikawa, its children, the module)", word.position),
            ..Pacing::default()
        },
    }
}

fn parse_millis(rfc3339: &str) -> Option<i64> {
    rfc3339.parse::<jiff::Timestamp>().ok().map(|t| t.as_millisecond())
}
