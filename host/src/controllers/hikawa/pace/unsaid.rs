//! Words said whose Said Event could not be published yet (its connection failed twice): they
//! are published at the Hikawa's next reconcile (an Event's name makes a second copy
//! impossible), which comes back soon for them even when the song is over.

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::ObjectReference;

/// By Hikawa uid: (word, child) of each Said Event owed.
#[derive(Default)]
pub struct Unsaid(Mutex<HashMap<String, Vec<(String, ObjectReference)>>>);

impl Unsaid {
    /// A word's Said Event could not be published.
    pub fn push(&self, uid: &str, word: String, child: ObjectReference) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).entry(uid.into()).or_default().push((word, child));
    }

    pub fn any(&self, uid: &str) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).get(uid).is_some_and(|owed| !owed.is_empty())
    }

    /// The Said Events still to publish for a Hikawa, taken.
    pub fn take(&self, uid: &str) -> Vec<(String, ObjectReference)> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(uid).unwrap_or_default()
    }

    pub(super) fn forget(&self, uid: &str) {
        self.take(uid);
    }

    pub(super) fn retain(&self, alive: &impl Fn(&str) -> bool) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).retain(|uid, _| alive(uid));
    }
}
