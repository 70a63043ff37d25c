//! Watch streams: newline-delimited JSON watch events over a chunked response, resuming from
//! a resourceVersion out of the event history, with bookmarks, timeouts, the streaming-list
//! initial events (`sendInitialEvents=true`), `410 Expired` for a too-old resourceVersion and
//! selector transitions (an object leaving a selector is DELETED, entering it is ADDED).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use crate::convert::to_external;
use crate::ops::{ListQuery, Target, selectors};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::status::{ApiError, ApiResult, FieldError};
use crate::store::{EventType, Store, Watching, meta_str};
use crate::table;

#[derive(Debug, Clone, Default)]
pub struct WatchParams {
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
    pub send_initial_events: Option<bool>,
    pub allow_bookmarks: bool,
    pub timeout: Option<Duration>,
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub table: bool,
    /// Objects as meta.k8s.io/v1 PartialObjectMetadata.
    pub partial: bool,
}

struct Filter {
    target: Target,
    ls: LabelSelector,
    fs: FieldSelector,
}

impl Filter {
    fn matches(&self, obj: &Value) -> bool {
        if let Some(ns) = &self.target.namespace
            && meta_str(obj, "namespace") != ns {
                return false;
            }
        if let Some(n) = &self.target.name
            && meta_str(obj, "name") != n {
                return false;
            }
        self.ls.matches(obj) && self.fs.matches(obj)
    }
}

pub fn expired_event(requested: u64, oldest: u64) -> Value {
    json!({"type": "ERROR", "object": ApiError::expired(format!("too old resource version: {requested} ({oldest})")).to_status()})
}

fn line(v: &Value) -> Bytes {
    let mut b = serde_json::to_vec(v).unwrap_or_default();
    b.push(b'\n');
    Bytes::from(b)
}

struct Emitter {
    filter: Filter,
    partial: bool,
    table: bool,
    first_table: bool,
}

impl Emitter {
    fn object(&mut self, obj: &Value) -> Value {
        let ext = to_external(&self.filter.target.def, &self.filter.target.version, obj);
        if self.partial {
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": ext["metadata"]})
        } else if self.table {
            let with_defs = self.first_table;
            self.first_table = false;
            table::to_table(&self.filter.target.def, &self.filter.target.version, std::slice::from_ref(&ext), with_defs, None)
        } else {
            ext
        }
    }
    fn event(&mut self, typ: &str, obj: &Value) -> Bytes {
        let o = self.object(obj);
        line(&json!({"type": typ, "object": o}))
    }
    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let t = &self.filter.target;
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let (kind, av) = if self.partial {
            ("PartialObjectMetadata".to_string(), "meta.k8s.io/v1".to_string())
        } else {
            (t.def.kind.clone(), t.def.api_version(&t.version))
        };
        line(&json!({"type": "BOOKMARK", "object": {"kind": kind, "apiVersion": av, "metadata": meta}}))
    }
}

/// Validates the request and starts the stream; the receiver yields the response body chunks.
pub fn start(
    store: Arc<Store>,
    target: Target,
    p: WatchParams,
    bookmark_every: Duration,
    mut drops: watch::Receiver<u64>,
) -> ApiResult<mpsc::Receiver<Bytes>> {
    let q = ListQuery { label_selector: p.label_selector.clone(), field_selector: p.field_selector.clone(), ..Default::default() };
    let (ls, fs) = selectors(&target, &q)?;
    if p.send_initial_events == Some(true) {
        let mut errs = vec![];
        if p.resource_version_match.as_deref() != Some("NotOlderThan") {
            errs.push(FieldError::forbidden("resourceVersionMatch", "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"));
        }
        if !p.allow_bookmarks {
            errs.push(FieldError::forbidden("allowWatchBookmarks", "sendInitialEvents requires setting allowWatchBookmarks to true"));
        }
        if !errs.is_empty() {
            return Err(ApiError::invalid("meta.k8s.io", "ListOptions", "", &errs));
        }
    } else if p.resource_version_match.is_some() {
        return Err(ApiError::invalid(
            "meta.k8s.io",
            "ListOptions",
            "",
            &[FieldError::forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided")],
        ));
    }
    let mut em = Emitter { filter: Filter { target, ls, fs }, partial: p.partial, table: p.table, first_table: true };
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let mut initial: Vec<Bytes> = vec![];
    let mut rv_rx = store.rv_tx.subscribe();
    let last: u64;
    {
        let st = store.lock();
        let gr = em.filter.target.def.storage.clone();
        let rv_param = p.resource_version.clone().unwrap_or_default();
        let start_at_any = rv_param.is_empty() || rv_param == "0";
        let send_initial = p.send_initial_events.unwrap_or(start_at_any);
        if start_at_any || p.send_initial_events == Some(true) {
            if send_initial {
                let objs: Vec<Value> = st.list(&gr, em.filter.target.namespace.as_deref()).filter(|o| em.filter.matches(o)).cloned().collect();
                for o in &objs {
                    initial.push(em.event("ADDED", o));
                }
            }
            last = st.rv;
            if p.send_initial_events == Some(true) {
                initial.push(em.bookmark(st.rv, true));
            }
        } else {
            let n: u64 = rv_param.parse().map_err(|_| ApiError::bad_request(format!("invalid resource version: {}", crate::goquote::Quoted(&rv_param))))?;
            if n < st.compacted_rv {
                initial.push(line(&expired_event(n, st.compacted_rv)));
                let _ = tx.try_send(initial.remove(0));
                return Ok(rx);
            }
            last = n;
        }
    }
    let timeout = p.timeout.unwrap_or(Duration::from_secs(1800));
    let bookmarks = p.allow_bookmarks;
    drops.borrow_and_update();
    let watching = Watching::new(store.clone(), em.filter.target.def.storage.clone());
    tokio::spawn(async move {
        let _watching = watching;
        for b in initial {
            store.watch_sent(b.len());
            if tx.send(b).await.is_err() {
                return;
            }
        }
        let mut last = last;
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + bookmark_every, bookmark_every);
        loop {
            // Send whatever happened after `last`.
            let out: Result<Vec<Bytes>, (u64, u64)> = {
                let st = store.lock();
                if st.registry.by_gr(&em.filter.target.def.gr()).is_none() {
                    // The resource went away (its CRD was deleted): end the watch.
                    return;
                }
                match st.events_after(last) {
                    Err(oldest) => Err((last, oldest)),
                    Ok(evs) => {
                        let mut out = vec![];
                        let gr = em.filter.target.def.storage.clone();
                        for ev in evs {
                            last = ev.rv;
                            if ev.gr != gr {
                                continue;
                            }
                            let now = em.filter.matches(&ev.object);
                            let typ = match ev.typ {
                                EventType::Added if now => "ADDED",
                                EventType::Deleted if now => "DELETED",
                                EventType::Modified => {
                                    let before = ev.prev.as_ref().is_some_and(|p| em.filter.matches(p));
                                    match (before, now) {
                                        (true, true) => "MODIFIED",
                                        (true, false) => "DELETED",
                                        (false, true) => "ADDED",
                                        _ => continue,
                                    }
                                }
                                _ => continue,
                            };
                            out.push(em.event(typ, &ev.object));
                        }
                        last = last.max(st.rv);
                        Ok(out)
                    }
                }
            };
            match out {
                Err((req, oldest)) => {
                    let _ = tx.send(line(&expired_event(req, oldest))).await;
                    return;
                }
                Ok(lines) => {
                    for l in lines {
                        store.watch_sent(l.len());
                        if tx.send(l).await.is_err() {
                            return;
                        }
                    }
                }
            }
            tokio::select! {
                r = rv_rx.changed() => { if r.is_err() { return; } }
                _ = tick.tick(), if bookmarks => {
                    let rv = store.lock().rv;
                    // Only report progress that has been delivered.
                    let rv = rv.min(last);
                    let bookmark = em.bookmark(rv, false);
                    store.watch_sent(bookmark.len());
                    if tx.send(bookmark).await.is_err() { return; }
                }
                _ = &mut deadline => { return; }
                _ = drops.changed() => { return; }
                _ = tx.closed() => { return; }
            }
        }
    });
    Ok(rx)
}
