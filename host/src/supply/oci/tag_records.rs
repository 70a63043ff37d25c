//! Which tag records (`oci/tags/`, `cache.rs`) a source still names; the others are removed.
//! A record lets a start with the registry down resolve its tag to the digest it had last; it
//! is worth its place only while a source names the tag: `--module-oci`, or a rule set's
//! `spec.source.oci` or `spec.candidate.source.oci` reference (a tag, not a digest). A rule set
//! that names a new tag at every edit, or many rule sets made and deleted, would otherwise
//! leave records that only the cache's least-recently-used bound ever took away.
//!
//! Decided only once the operator has seen every source: `--module-oci` is known at start, the
//! rule sets once their first list is done. Before that (and in the commands run by hand, which
//! never list rule sets) nothing is removed: a record is not known to be unnamed. Then a record
//! no source names is removed once this process has seen it unnamed for [`GRACE`]: a rule set
//! deleted and created again (a GitOps tool replacing it, a `kubectl replace --force`) finds
//! its record, and with the registry down still resolves its tag to the digest it had. The
//! grace is counted from when this process first saw the record unnamed, so a restart counts
//! it again: an unnamed record outlives at most the process that saw it named.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// How long a record no source names is kept: long enough for a rule set deleted and created
/// again, short against a churn of tags.
pub const GRACE: Duration = Duration::from_secs(10 * 60);

/// How often the rule sets' watch may make a look at the records when what they name has not
/// changed: their every event (status writes included) would otherwise read the tags folder.
/// A record unnamed is then removed between its grace and its grace and this.
pub const LOOK_AT_MOST_EVERY: Duration = Duration::from_secs(60);

/// The tags the sources name, by their records' file names, and since when the others have
/// been seen unnamed.
#[derive(Debug)]
pub struct TagSources {
    /// How long a record is kept once seen unnamed ([`GRACE`]).
    grace: Duration,
    /// Named for the process's life (`--module-oci`).
    fixed: HashSet<String>,
    /// Named by the rule sets as last listed; `None` until they are.
    rule_sets: Option<HashSet<String>>,
    /// Records seen unnamed, and when first.
    unnamed_since: HashMap<String, Instant>,
    /// When the records were last looked at (`due_for_removal`).
    looked_at: Option<Instant>,
}

impl TagSources {
    pub fn new(grace: Duration) -> Self {
        TagSources { grace, fixed: HashSet::new(), rule_sets: None, unnamed_since: HashMap::new(), looked_at: None }
    }

    /// `record` is named for the process's life (`--module-oci`'s tag).
    pub fn name_always(&mut self, record: String) {
        self.fixed.insert(record);
    }

    /// The rule sets, as listed now, name these records (and no others). Whether the records
    /// are worth a look now: what the rule sets name changed, or no look for
    /// [`LOOK_AT_MOST_EVERY`].
    pub fn rule_sets_name(&mut self, records: HashSet<String>, now: Instant) -> bool {
        let changed = self.rule_sets.as_ref() != Some(&records);
        self.rule_sets = Some(records);
        changed || self.looked_at.is_none_or(|at| now.saturating_duration_since(at) >= LOOK_AT_MOST_EVERY)
    }

    /// Which of the records `present` to remove at `now`: those no source names that were seen
    /// unnamed at least the grace ago. None while the rule sets have not been listed.
    pub fn due_for_removal(&mut self, present: &[String], now: Instant) -> Vec<String> {
        let Some(rule_sets) = &self.rule_sets else { return Vec::new() };
        self.looked_at = Some(now);
        let unnamed: HashSet<&String> = present.iter().filter(|r| !self.fixed.contains(*r) && !rule_sets.contains(*r)).collect();
        // A record named again, or gone, starts afresh.
        self.unnamed_since.retain(|record, _| unnamed.contains(record));
        let mut remove = Vec::new();
        for record in unnamed {
            let since = *self.unnamed_since.entry(record.clone()).or_insert(now);
            if now.saturating_duration_since(since) >= self.grace {
                remove.push(record.clone());
            }
        }
        for record in &remove {
            self.unnamed_since.remove(record);
        }
        remove.sort();
        remove
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(records: &[&str]) -> Vec<String> {
        records.iter().map(|r| r.to_string()).collect()
    }

    #[test]
    fn nothing_is_removed_before_the_rule_sets_are_listed() {
        let mut sources = TagSources::new(GRACE);
        sources.name_always("module-oci".into());
        let start = Instant::now();
        let present = names(&["module-oci", "rule-set-a", "gone"]);
        assert!(sources.due_for_removal(&present, start).is_empty());
        assert!(sources.due_for_removal(&present, start + GRACE * 10).is_empty(), "unlisted rule sets may name any of them");
        sources.rule_sets_name(HashSet::from(["rule-set-a".to_string()]), start);
        // Listed now: the grace starts now, not at the first look.
        assert!(sources.due_for_removal(&present, start + GRACE * 10).is_empty());
        assert_eq!(sources.due_for_removal(&present, start + GRACE * 11), ["gone"]);
    }

    #[test]
    fn a_record_no_source_names_goes_after_its_grace_and_one_named_again_within_it_stays() {
        let mut sources = TagSources::new(GRACE);
        sources.name_always("module-oci".into());
        let start = Instant::now();
        sources.rule_sets_name(HashSet::from(["a".to_string(), "b".to_string()]), start);
        let present = names(&["module-oci", "a", "b", "old"]);
        assert!(sources.due_for_removal(&present, start).is_empty(), "within its grace");
        // The rule set naming b is deleted, then created again within the grace.
        sources.rule_sets_name(HashSet::from(["a".to_string()]), start);
        assert!(sources.due_for_removal(&present, start + GRACE / 2).is_empty());
        sources.rule_sets_name(HashSet::from(["a".to_string(), "b".to_string()]), start);
        assert_eq!(sources.due_for_removal(&present, start + GRACE), ["old"], "unnamed since the start: its grace is over");
        // b unnamed again later: a grace of its own from then, not from its first.
        sources.rule_sets_name(HashSet::from(["a".to_string()]), start);
        let present = names(&["module-oci", "a", "b"]);
        assert!(sources.due_for_removal(&present, start + GRACE * 2).is_empty());
        assert_eq!(sources.due_for_removal(&present, start + GRACE * 3), ["b"]);
        // What the sources name stays, however long.
        assert!(sources.due_for_removal(&names(&["module-oci", "a"]), start + GRACE * 100).is_empty());
    }

    #[test]
    fn the_records_are_looked_at_when_what_the_rule_sets_name_changes_or_a_minute_has_passed() {
        let mut sources = TagSources::new(GRACE);
        let start = Instant::now();
        let named = || HashSet::from(["a".to_string()]);
        assert!(sources.rule_sets_name(named(), start), "the first list");
        sources.due_for_removal(&names(&["a"]), start);
        // A status write of a rule set: the same names, a moment later.
        assert!(!sources.rule_sets_name(named(), start + Duration::from_secs(1)));
        assert!(sources.rule_sets_name(HashSet::from(["a".to_string(), "b".to_string()]), start + Duration::from_secs(2)), "b is named now");
        sources.due_for_removal(&names(&["a"]), start + Duration::from_secs(2));
        assert!(!sources.rule_sets_name(HashSet::from(["a".to_string(), "b".to_string()]), start + Duration::from_secs(3)));
        assert!(sources.rule_sets_name(HashSet::from(["a".to_string(), "b".to_string()]), start + Duration::from_secs(2) + LOOK_AT_MOST_EVERY), "a grace may be over by now");
    }
}
