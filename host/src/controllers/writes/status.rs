//! Conditions and status patches, as both controllers write them: times in RFC 3339 with
//! milliseconds, a condition set in its place (its lastTransitionTime moving only when its
//! status does), and a status as a merge patch that drops what the new status lacks.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde::Serialize;
use zundoko_rules::TimestampMs;

pub fn timestamp(ms: TimestampMs) -> jiff::Timestamp {
    jiff::Timestamp::from_millisecond(ms).unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

/// RFC 3339 with milliseconds, in UTC.
pub fn rfc3339_millis(ms: TimestampMs) -> String {
    format!("{:.3}", timestamp(ms))
}

/// Set a condition, in its place in the list; its lastTransitionTime moves only when its
/// status does.
pub fn set_condition(conditions: &mut Vec<Condition>, type_: &str, value: &str, reason: &str, message: &str, generation: i64, now: TimestampMs) {
    let transition = conditions
        .iter()
        .find(|c| c.type_ == type_ && c.status == value)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or(Time(timestamp(now - now.rem_euclid(1000))));
    let condition = Condition {
        type_: type_.into(),
        status: value.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: Some(generation),
        last_transition_time: transition,
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => *existing = condition,
        None => conditions.push(condition),
    }
}

/// `desired` as a merge patch over `current`: fields `current` has and `desired` lacks become null.
pub fn replacing_patch<T: Serialize>(current: Option<&T>, desired: &T) -> serde_json::Value {
    let mut patch = serde_json::to_value(desired).expect("a status serializes");
    if let (Some(current), Some(fields)) = (current.map(serde_json::to_value), patch.as_object_mut())
        && let Ok(serde_json::Value::Object(current)) = current
    {
        for key in current.keys() {
            fields.entry(key.clone()).or_insert(serde_json::Value::Null);
        }
    }
    patch
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::HikawaStatus;

    #[test]
    fn a_dropped_status_field_is_patched_to_null() {
        let current = HikawaStatus { message: Some("failed".into()), phase: Some("Failed".into()), ..HikawaStatus::default() };
        let desired = HikawaStatus { phase: Some("Singing".into()), ..HikawaStatus::default() };
        let patch = replacing_patch(Some(&current), &desired);
        assert_eq!(patch["message"], serde_json::Value::Null);
        assert_eq!(patch["phase"], "Singing");
        assert_eq!(replacing_patch(None, &desired).get("message"), None);
    }
}
