//! PATCH: JSON merge patch, JSON patch and strategic merge patch (apply is in `apply`).

use serde_json::Value;

use super::apply::apply;
use super::write::finish_patch;
use super::{Resp, Target, WriteOpts, external};
use crate::patch;
use crate::status::{ApiError, ApiResult};
use crate::store::Store;

pub const APPLY: &str = "application/apply-patch+yaml";
pub const MERGE: &str = "application/merge-patch+json";
pub const JSONPATCH: &str = "application/json-patch+json";
pub const STRATEGIC: &str = "application/strategic-merge-patch+json";

pub fn patch(store: &Store, t: &Target, content_type: &str, body: &[u8], opts: &WriteOpts) -> ApiResult<Resp> {
    let ct = content_type.split(';').next().unwrap_or("").trim();
    let accepted: &[&str] = if t.def.is_custom() { &[JSONPATCH, MERGE, APPLY] } else { &[JSONPATCH, MERGE, STRATEGIC, APPLY] };
    if !accepted.contains(&ct) {
        return Err(ApiError::unsupported_media_type(accepted));
    }
    if ct == APPLY {
        return apply(store, t, body, opts);
    }
    let mut st = store.lock();
    let existing = st.get(&t.def.storage, t.ns(), t.name()).cloned().ok_or_else(|| t.not_found(t.name()))?;
    let mut obj = external(t, &existing);
    match ct {
        JSONPATCH => patch::json_patch(&mut obj, body)?,
        _ => {
            let p: Value = serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            if !p.is_object() {
                return Err(ApiError::bad_request("json: cannot unmarshal into Go value of type map[string]interface {}"));
            }
            patch::merge_patch(&mut obj, &p);
        }
    }
    let r = finish_patch(&mut st, t, obj, &existing, opts)?;
    store.changed(st.rv);
    Ok(r)
}
