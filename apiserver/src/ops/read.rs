//! get and list (with selectors and `limit`/`continue` paging).

use serde_json::{Value, json};

use super::{Target, external};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::status::{ApiError, ApiResult};
use crate::store::{Store, meta_str};

pub fn get(store: &Store, t: &Target) -> ApiResult<Value> {
    let st = store.lock();
    st.get(&t.def.storage, t.ns(), t.name()).map(|o| external(t, o)).ok_or_else(|| t.not_found(t.name()))
}

#[derive(Debug, Default, Clone)]
pub struct ListQuery {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
}

pub struct ListResult {
    pub items: Vec<Value>,
    pub resource_version: u64,
    pub continue_token: Option<String>,
    pub remaining: Option<usize>,
}

pub const CONTINUE_TOO_OLD: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

pub fn selectors(t: &Target, q: &ListQuery) -> ApiResult<(LabelSelector, FieldSelector)> {
    let ls = LabelSelector::parse(q.label_selector.as_deref().unwrap_or(""))?;
    let fs = FieldSelector::parse(q.field_selector.as_deref().unwrap_or(""), &t.def)?;
    Ok((ls, fs))
}

pub fn list(store: &Store, t: &Target, q: &ListQuery) -> ApiResult<ListResult> {
    let (ls, fs) = selectors(t, q)?;
    let st = store.lock();
    let mut list_rv = st.rv;
    let mut start: Option<(String, String)> = None;
    if let Some(c) = q.continue_token.as_deref().filter(|c| !c.is_empty()) {
        let tok: Value = hex::decode(c)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or_else(|| ApiError::bad_request(format!("continue key is not valid: {c}")))?;
        let rv = tok["rv"].as_u64().unwrap_or(0);
        if rv < st.compacted_rv {
            let mut e = ApiError::expired(CONTINUE_TOO_OLD);
            e.details = None;
            return Err(e);
        }
        list_rv = rv;
        start = Some((tok["ns"].as_str().unwrap_or("").into(), tok["name"].as_str().unwrap_or("").into()));
    } else if let Some(rv) = q.resource_version.as_deref().filter(|r| !r.is_empty() && *r != "0") {
        let n: u64 = rv.parse().map_err(|_| ApiError::bad_request(format!("invalid resource version: {}", crate::goquote::Quoted(rv))))?;
        if q.resource_version_match.as_deref() == Some("Exact") && n < st.compacted_rv {
            return Err(ApiError::expired(format!("too old resource version: {n} ({})", st.compacted_rv)));
        }
    }
    let ns = t.namespace.as_deref();
    let mut matched = st
        .list(&t.def.storage, ns)
        .filter(|o| start.as_ref().is_none_or(|(sn, sname)| (meta_str(o, "namespace"), meta_str(o, "name")) > (sn.as_str(), sname.as_str())))
        .filter(|o| ls.matches(o) && fs.matches(o));
    let mut items = vec![];
    let limit = q.limit.filter(|l| *l > 0);
    let mut next = None;
    let mut remaining = None;
    for o in matched.by_ref() {
        if limit.is_some_and(|l| items.len() >= l) {
            let last: &Value = items.last().unwrap();
            next = Some(hex::encode(serde_json::to_vec(&json!({"rv": list_rv, "ns": meta_str(last, "namespace"), "name": meta_str(last, "name")})).unwrap()));
            remaining = Some(1 + matched.count());
            break;
        }
        items.push(external(t, o));
    }
    Ok(ListResult { items, resource_version: list_rv, continue_token: next, remaining: if ls.is_empty() && q.field_selector.is_none() { remaining } else { None } })
}
