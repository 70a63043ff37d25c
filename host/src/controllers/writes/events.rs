//! Events on Hikawas and rule sets (events.k8s.io/v1), published directly. kube's `Recorder` keeps every
//! Event it sends for six minutes to count repeats; at hundreds of words a second that is
//! most of the operator's memory, and a word's Event never repeats. Here nothing is kept for
//! Normal Events, and for Warnings only the last one per Hikawa (in the Hikawa controller's
//! pacing, through [`WarningMemory`]), so a failure that repeats becomes a count on one Event
//! instead of a new object each time.
//!
//! Every field is cut to what kube-apiserver accepts (note 1 KiB, reason and action 128
//! bytes, names 253 characters), so an Event is never refused for its size.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource, ResourceExt};

use crate::crd::Hikawa;
use crate::text::{printable, truncate_bytes};

const MAX_NOTE_BYTES: usize = 1024;
const MAX_FIELD_BYTES: usize = 128;
const MAX_NAME_CHARS: usize = 253;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// Where the last Warning per object is remembered, so a repeat of it becomes a count on the
/// Event already there: the Hikawa controller's pacing implements it. Plain values only, so
/// this module needs nothing of the controller above it.
pub trait WarningMemory {
    /// The Event already published for `uid` with this reason and note: its name and count.
    fn repeated(&self, uid: &str, reason: &str, note: &str) -> Option<(String, i32)>;
    /// Remember that the Event `name`, with this reason and note, now counts `count` for `uid`.
    fn remember(&self, uid: &str, reason: &str, note: &str, name: String, count: i32);
}

pub struct EventSink {
    client: Client,
    controller: String,
    instance: String,
}

impl EventSink {
    pub fn new(client: Client, controller: &str, instance: &str) -> Self {
        EventSink {
            client,
            controller: truncate_bytes(controller, MAX_FIELD_BYTES).into(),
            instance: truncate_bytes(instance, MAX_FIELD_BYTES).into(),
        }
    }

    /// Publish an Event on `object` (in its namespace; a cluster-scoped object's go to
    /// `default`, as kube-apiserver's own do). Best effort: a lost Event must not fail the
    /// reconcile. An Event about a `related` object (a word's, naming its child) is named after
    /// that object and `object`'s uid, so it is sent again once when its connection fails
    /// (a cut connection, a timeout, a 429 or 5xx answer) and still never makes two: the
    /// second finds it there. Returns false only if such an Event could not be sent for want
    /// of a connection or a server that takes it (the caller may try it again later); every
    /// other outcome is final.
    pub async fn publish<K>(&self, object: &K, type_: EventType, reason: &str, note: &str, action: &str, related: Option<ObjectReference>) -> bool
    where
        K: Resource<DynamicType = ()>,
    {
        let ns = object.namespace().unwrap_or_else(|| "default".into());
        let now = jiff::Timestamp::now();
        let note = truncate_bytes(note, MAX_NOTE_BYTES);
        let reason = truncate_bytes(reason, MAX_FIELD_BYTES);
        let once = related.as_ref().and_then(|r| r.name.clone()).map(|name| {
            let uid = object.meta().uid.clone().unwrap_or_default();
            (name, uid.chars().filter(char::is_ascii_hexdigit).take(8).collect::<String>())
        });
        let mut event = self.event(object, type_, reason, note, action, related, now);
        if let Some((name, uid)) = &once {
            let suffix = format!(".{uid}");
            event.metadata.name = Some(truncate_bytes(name, MAX_NAME_CHARS - suffix.len()).trim_end_matches(['.', '-']).to_string() + &suffix);
        }
        let tries = if once.is_some() { 2 } else { 1 };
        for attempt in 1..=tries {
            // Nothing of the answer is needed: it is not decoded.
            match crate::controllers::writes::lean::create::<Event, serde::de::IgnoredAny>(&self.client, &ns, &event).await {
                Ok(_) => return true,
                // Named after its word: an earlier try landed after all.
                Err(kube::Error::Api(status)) if status.is_already_exists() && once.is_some() => return true,
                // An answer about the Event itself is final. One that says the server could not
                // take it just now is, for a word's Event, like a broken connection: tried
                // again, then left for the next reconcile.
                Err(error) if matches!(&error, kube::Error::Api(status) if !(once.is_some() && retry_later(status))) => {
                    tracing::warn!(object = %object.name_any(), %error, reason, "could not publish an Event");
                    return true;
                }
                Err(error) if attempt == tries => tracing::warn!(object = %object.name_any(), %error, reason, "could not publish an Event yet"),
                Err(error) => tracing::debug!(%error, reason, "publishing an Event again"),
            }
        }
        once.is_none()
    }

    /// Publish a Warning; the same reason and note again for the same Hikawa counts on the
    /// Event already there (its `series`) instead of making another. `annotation` (a key and
    /// its value) goes on the Event in the same write, and is replaced by each repeat's.
    pub async fn warn(&self, memory: &impl WarningMemory, hikawa: &Hikawa, reason: &str, note: &str, action: &str, annotation: Option<(&str, &str)>) {
        let (ns, uid) = (hikawa.namespace().unwrap_or_default(), hikawa.uid().unwrap_or_default());
        let api: Api<Event> = Api::namespaced(self.client.clone(), &ns);
        let now = jiff::Timestamp::now();
        // A Warning's note carries error messages from a module or the API server: escaped.
        let note = printable(note, MAX_NOTE_BYTES);
        let (note, reason) = (note.as_str(), truncate_bytes(reason, MAX_FIELD_BYTES));
        if let Some((name, count)) = memory.repeated(&uid, reason, note) {
            let count = count.saturating_add(1);
            let mut patch = serde_json::json!({ "series": EventSeries { count, last_observed_time: MicroTime(now) } });
            if let Some((key, value)) = annotation {
                patch["metadata"] = serde_json::json!({ "annotations": { key: value } });
            }
            match api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Ok(_) => return memory.remember(&uid, reason, note, name, count),
                // Gone (expired, deleted): make a new one.
                Err(error) => tracing::debug!(%error, "could not count a repeated Warning; publishing a new one"),
            }
        }
        let mut event = self.event(hikawa, EventType::Warning, reason, note, action, None, now);
        if let Some((key, value)) = annotation {
            event.metadata.annotations = Some([(key.to_string(), value.to_string())].into());
        }
        match api.create(&PostParams::default(), &event).await {
            Ok(created) => memory.remember(&uid, reason, note, created.name_any(), 1),
            Err(error) => tracing::warn!(hikawa = %hikawa.name_any(), %error, reason, "could not publish a Warning Event"),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn event<K>(&self, object: &K, type_: EventType, reason: &str, note: &str, action: &str, related: Option<ObjectReference>, now: jiff::Timestamp) -> Event
    where
        K: Resource<DynamicType = ()>,
    {
        let suffix = format!(".{:x}", now.as_nanosecond());
        // `<object>.<nanoseconds>`, as kube-runtime names them, cut so it stays a valid name.
        let prefix = truncate_bytes(&object.name_any(), MAX_NAME_CHARS - suffix.len()).trim_end_matches(['.', '-']).to_string();
        Event {
            metadata: ObjectMeta { name: Some(prefix + &suffix), namespace: Some(object.namespace().unwrap_or_else(|| "default".into())), ..ObjectMeta::default() },
            action: Some(truncate_bytes(action, MAX_FIELD_BYTES).into()),
            reason: Some(reason.into()),
            note: Some(note.into()),
            event_time: Some(MicroTime(now)),
            regarding: Some(object.object_ref(&())),
            related,
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(match type_ {
                EventType::Normal => "Normal".into(),
                EventType::Warning => "Warning".into(),
            }),
            ..Event::default()
        }
    }
}

/// An answer that says nothing about the Event itself: the server was overloaded (429),
/// failing (5xx) or in a storage conflict (409 other than AlreadyExists). Worth sending again.
fn retry_later(status: &kube::core::Status) -> bool {
    status.code == 429 || status.code >= 500 || (status.code == 409 && !status.is_already_exists())
}
