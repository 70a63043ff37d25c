//! The Warning Event last published for each Hikawa, so a repeat of the same reason and note
//! becomes a count on that Event instead of a new one. The Event sink
//! (`controllers/writes/events.rs`) asks for it through its [`WarningMemory`] trait.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::controllers::writes::events::WarningMemory;

/// A Warning Event already published for a Hikawa, so a repeat becomes a count on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WarningSeries {
    pub reason: String,
    pub note: String,
    pub name: String,
    pub count: i32,
}

/// By Hikawa uid.
#[derive(Default)]
pub struct Warnings(Mutex<HashMap<String, WarningSeries>>);

impl Warnings {
    /// The Warning Event last published for this Hikawa, if it had this reason and note.
    pub fn repeated(&self, uid: &str, reason: &str, note: &str) -> Option<WarningSeries> {
        let series = self.0.lock().unwrap_or_else(|p| p.into_inner());
        series.get(uid).filter(|w| w.reason == reason && w.note == note).cloned()
    }

    pub fn warned(&self, uid: &str, series: WarningSeries) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).insert(uid.into(), series);
    }

    pub(super) fn forget(&self, uid: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(uid);
    }

    pub(super) fn retain(&self, alive: &impl Fn(&str) -> bool) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).retain(|uid, _| alive(uid));
    }
}

impl WarningMemory for Warnings {
    fn repeated(&self, uid: &str, reason: &str, note: &str) -> Option<(String, i32)> {
        Warnings::repeated(self, uid, reason, note).map(|series| (series.name, series.count))
    }

    fn remember(&self, uid: &str, reason: &str, note: &str, name: String, count: i32) {
        self.warned(uid, WarningSeries { reason: reason.into(), note: note.into(), name, count });
    }
}
