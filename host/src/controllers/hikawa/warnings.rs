//! The pacing remembers each Hikawa's last Warning Event ([`Pace::repeated_warning`],
//! [`Pace::warned`]); the Event sink below (`controllers/writes/events.rs`) asks for it
//! through its [`WarningMemory`] trait, in plain values.

use crate::controllers::hikawa::pace::{Pace, WarningSeries};
use crate::controllers::writes::events::WarningMemory;

impl WarningMemory for Pace {
    fn repeated(&self, uid: &str, reason: &str, note: &str) -> Option<(String, i32)> {
        self.repeated_warning(uid, reason, note).map(|series| (series.name, series.count))
    }

    fn remember(&self, uid: &str, reason: &str, note: &str, name: String, count: i32) {
        self.warned(uid, WarningSeries { reason: reason.into(), note: note.into(), name, count });
    }
}
