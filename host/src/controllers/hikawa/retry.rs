//! The backoff after a failure, recorded where the failure is already written: an annotation on
//! its Warning Event (created, or its series counted, on every failure recorded on the
//! Hikawa). The backoff itself lives in the pacing's memory (`pace/`); this is its trace in the
//! cluster, so `explain` can say when the operator retries with the operator down. Nothing is
//! written for it on a word's path: a word writes no Warning.
//!
//! The value is JSON (docs/debugging.md documents it):
//! `{"v":1,"at":"2026-11-28T19:41:28.750Z","backoffMs":500,"failures":2}`: the retry is due
//! `at` (the reconcile's start plus the backoff), after the `failures`-th failure in a row.
//! Something else changing the Hikawa wakes it sooner.

use serde::{Deserialize, Serialize};

/// The annotation on a failure's Warning Event that records its backoff.
pub const RETRY: &str = "zundokokiyoshi.kaitoy.github.com/retry";

/// The version of the record's format this host writes and reads.
const VERSION: u32 = 1;

/// When a failed Hikawa is tried again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Retry {
    /// Due at, RFC 3339 with milliseconds.
    pub at: String,
    pub backoff_ms: u64,
    /// Failures in a row, this one included.
    pub failures: u32,
}

#[derive(Serialize, Deserialize)]
struct Versioned<T> {
    v: u32,
    #[serde(flatten)]
    record: T,
}

impl Retry {
    /// The annotation's value.
    pub fn value(&self) -> String {
        serde_json::to_string(&Versioned { v: VERSION, record: self }).expect("a retry record serializes")
    }

    /// Read an annotation's value; `None` if it is not a record of this version.
    pub fn parse(value: &str) -> Option<Retry> {
        serde_json::from_str::<Versioned<Retry>>(value).ok().filter(|r| r.v == VERSION).map(|r| r.record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_reads_back_and_refuses_another_version() {
        let retry = Retry { at: "2026-11-28T19:41:28.750Z".into(), backoff_ms: 500, failures: 2 };
        let value = retry.value();
        assert_eq!(value, r#"{"v":1,"at":"2026-11-28T19:41:28.750Z","backoffMs":500,"failures":2}"#);
        assert_eq!(Retry::parse(&value), Some(retry));
        assert_eq!(Retry::parse(&value.replace("\"v\":1", "\"v\":2")), None);
        assert_eq!(Retry::parse("not json"), None);
    }
}
