//! Background controllers kube-controller-manager and apiextensions-apiserver would run:
//! the garbage collector (background cascading deletion of objects whose owners are all
//! gone, removal of dangling owner references, the `orphan` and `foregroundDeletion`
//! finalizers), namespace termination and CRD instance cleanup; and, in the same pass, the
//! clusterrole-aggregation controller (`rbac_bootstrap::aggregate`). All but the CRD cleanup
//! are kube-controller-manager's, and stop when the server runs without it
//! (`ServerConfig::controller_manager`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::ops::{controller_delete, controller_update};
use crate::registry::GroupResource;
use crate::store::{EventType, ObjKey, State, Store, meta_str, obj_key};

enum Action {
    Delete(GroupResource, ObjKey, Option<&'static str>),
    RemoveRefs(GroupResource, ObjKey, Vec<String>),
    RemoveFinalizer(GroupResource, ObjKey, &'static str),
    RemoveNamespace(String),
}

fn refs(obj: &Value) -> Vec<Value> {
    obj.pointer("/metadata/ownerReferences").and_then(Value::as_array).cloned().unwrap_or_default()
}

fn has_finalizer(obj: &Value, f: &str) -> bool {
    obj.pointer("/metadata/finalizers").and_then(Value::as_array).is_some_and(|a| a.iter().any(|x| x == f))
}

fn deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp").is_some()
}

/// The owner uid as a string borrowed from the dependent object itself.
fn meta_uid_ref<'a>(o: &'a Value, uid: &str) -> &'a str {
    o.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().find_map(|r| r["uid"].as_str().filter(|u| *u == uid)))
        .unwrap_or("")
}

/// What the controllers would do now; `controller_manager`: kube-controller-manager's too.
fn plan(st: &State, controller_manager: bool) -> Vec<Action> {
    let mut uids: HashMap<&str, (&str, &str, bool)> = HashMap::new();
    for (gr, o) in st.all() {
        let namespaced = st.registry.by_gr(gr).is_some_and(|d| d.namespaced);
        uids.insert(meta_str(o, "uid"), (meta_str(o, "namespace"), meta_str(o, "name"), namespaced));
    }
    let mut dependents: HashMap<&str, Vec<(&GroupResource, &Value)>> = HashMap::new();
    let mut actions = vec![];
    // The garbage collector's (kube-controller-manager's): dependents whose owners are gone.
    if controller_manager {
        for (gr, o) in st.all() {
            let rs = refs(o);
            if rs.is_empty() {
                continue;
            }
            let ns = meta_str(o, "namespace");
            let mut dangling = vec![];
            for r in &rs {
                let uid = r["uid"].as_str().unwrap_or("");
                dependents.entry(meta_uid_ref(o, uid)).or_default().push((gr, o));
                let ok = uids.get(uid).is_some_and(|(ons, oname, namespaced)| {
                    Some(*oname) == r["name"].as_str() && (!namespaced || *ons == ns)
                });
                if !ok {
                    dangling.push(uid.to_string());
                }
            }
            if dangling.len() == rs.len() {
                if !deleting(o) {
                    actions.push(Action::Delete(gr.clone(), obj_key(o), None));
                }
            } else if !dangling.is_empty() {
                actions.push(Action::RemoveRefs(gr.clone(), obj_key(o), dangling));
            }
        }
    }
    let ns_gr = GroupResource::new("", "namespaces");
    let crd_gr = GroupResource::new("apiextensions.k8s.io", "customresourcedefinitions");
    for (gr, o) in st.all() {
        if !deleting(o) {
            continue;
        }
        let uid = meta_str(o, "uid");
        let deps = dependents.get(uid).cloned().unwrap_or_default();
        if controller_manager && has_finalizer(o, "orphan") {
            for (dgr, d) in &deps {
                actions.push(Action::RemoveRefs((*dgr).clone(), obj_key(d), vec![uid.to_string()]));
            }
            actions.push(Action::RemoveFinalizer(gr.clone(), obj_key(o), "orphan"));
        }
        if controller_manager && has_finalizer(o, "foregroundDeletion") {
            if deps.is_empty() {
                actions.push(Action::RemoveFinalizer(gr.clone(), obj_key(o), "foregroundDeletion"));
            }
            for (dgr, d) in &deps {
                if !deleting(d) {
                    actions.push(Action::Delete((*dgr).clone(), obj_key(d), Some("Foreground")));
                }
            }
        }
        if controller_manager && *gr == ns_gr {
            let name = meta_str(o, "name");
            let mut any = false;
            for (cgr, c) in st.all() {
                if meta_str(c, "namespace") == name && st.registry.by_gr(cgr).is_some_and(|d| d.namespaced) {
                    any = true;
                    if !deleting(c) {
                        actions.push(Action::Delete(cgr.clone(), obj_key(c), None));
                    }
                }
            }
            if !any && o.pointer("/metadata/finalizers").and_then(Value::as_array).is_none_or(|a| a.is_empty()) {
                actions.push(Action::RemoveNamespace(name.to_string()));
            }
        }
        if *gr == crd_gr && has_finalizer(o, "customresourcecleanup.apiextensions.k8s.io") {
            let g = o.pointer("/spec/group").and_then(Value::as_str).unwrap_or("");
            let p = o.pointer("/spec/names/plural").and_then(Value::as_str).unwrap_or("");
            let igr = GroupResource::new(g, p);
            let instances: Vec<&Value> = st.list(&igr, None).collect();
            if instances.is_empty() {
                actions.push(Action::RemoveFinalizer(gr.clone(), obj_key(o), "customresourcecleanup.apiextensions.k8s.io"));
            }
            for i in instances {
                if !deleting(i) {
                    actions.push(Action::Delete(igr.clone(), obj_key(i), None));
                }
            }
        }
    }
    actions
}

fn apply(st: &mut State, a: Action) {
    match a {
        Action::Delete(gr, (ns, name), prop) => {
            if let Some(def) = st.registry.by_gr(&gr).cloned() {
                controller_delete(st, &def, &ns, &name, prop);
            }
        }
        Action::RemoveRefs(gr, (ns, name), uids) => {
            let (Some(def), Some(mut o)) = (st.registry.by_gr(&gr).cloned(), st.get(&gr, &ns, &name).cloned()) else { return };
            let kept: Vec<Value> = refs(&o).into_iter().filter(|r| !uids.iter().any(|u| r["uid"] == u.as_str())).collect();
            if kept.is_empty() {
                o["metadata"].as_object_mut().unwrap().remove("ownerReferences");
            } else {
                o["metadata"]["ownerReferences"] = json!(kept);
            }
            controller_update(st, &def, o);
        }
        Action::RemoveFinalizer(gr, (ns, name), f) => {
            let (Some(def), Some(mut o)) = (st.registry.by_gr(&gr).cloned(), st.get(&gr, &ns, &name).cloned()) else { return };
            if let Some(a) = o["metadata"]["finalizers"].as_array_mut() {
                a.retain(|x| x != f);
                if a.is_empty() {
                    o["metadata"].as_object_mut().unwrap().remove("finalizers");
                }
            }
            controller_update(st, &def, o);
        }
        Action::RemoveNamespace(name) => {
            st.remove(&GroupResource::new("", "namespaces"), "", &name);
        }
    }
}

/// One pass; returns whether anything changed.
pub fn sweep(store: &Store, controller_manager: bool) -> bool {
    let mut st = store.lock();
    let before = st.rv;
    for a in plan(&st, controller_manager) {
        apply(&mut st, a);
    }
    if controller_manager {
        crate::rbac_bootstrap::aggregate(&mut st);
    }
    let changed = st.rv != before;
    if changed {
        let rv = st.rv;
        drop(st);
        store.changed(rv);
    }
    changed
}

/// Could anything since `after` give the collector work? A ClusterRole's change (aggregation),
/// deletions, objects being deleted (finalizers, namespaces, CRDs) and dependents whose owner
/// cannot be found do; plain
/// writes of owned children whose owners exist (nearly all writes) do not. Checking the
/// changes is O(changes); a full pass is O(objects), under the store lock.
fn needs_sweep(st: &State, after: u64) -> bool {
    let Ok(events) = st.events_after(after) else { return true };
    let cluster_roles = crate::rbac_bootstrap::cluster_roles_gr();
    events.into_iter().any(|ev| {
        ev.gr == cluster_roles || ev.typ == EventType::Deleted || deleting(&ev.object) || refs(&ev.object).iter().any(|r| !owner_exists(st, &ev.object, r))
    })
}

fn owner_exists(st: &State, dependent: &Value, r: &Value) -> bool {
    let group = r["apiVersion"].as_str().unwrap_or("").rsplit_once('/').map_or("", |(g, _)| g);
    let kind = r["kind"].as_str().unwrap_or("");
    let Some(def) = st.registry.defs.values().find(|d| d.group == group && d.kind == kind) else { return false };
    let ns = if def.namespaced { meta_str(dependent, "namespace") } else { "" };
    st.get(&def.storage, ns, r["name"].as_str().unwrap_or(""))
        .is_some_and(|owner| meta_str(owner, "uid") == r["uid"].as_str().unwrap_or(""))
}

/// A full pass at least this often (more rarely with many objects), whatever the changes say:
/// the safety net. A change that needs a pass is acted on at once.
pub const SAFETY_NET_EVERY: Duration = Duration::from_secs(5);

/// Runs the controllers until the task is aborted.
pub async fn run(store: Arc<Store>, controller_manager: bool) {
    let mut swept_rv = 0;
    let mut last_full = std::time::Instant::now();
    let mut safety_net_every = SAFETY_NET_EVERY;
    loop {
        let _ = tokio::time::timeout(Duration::from_secs(1), store.controllers.notified()).await;
        // Batch bursts of writes into one pass.
        tokio::time::sleep(Duration::from_millis(10)).await;
        let (rv, needed) = {
            let st = store.lock();
            (st.rv, needs_sweep(&st, swept_rv))
        };
        // A full pass every few seconds as a safety net, whatever the changes say; but a pass
        // is O(objects) under the store lock, so with many objects at most 1/50 of the time
        // (kube-controller-manager's collector works from its own graph, off the API server).
        if !needed && last_full.elapsed() < safety_net_every {
            swept_rv = rv;
            continue;
        }
        let started = std::time::Instant::now();
        for _ in 0..100 {
            if !sweep(&store, controller_manager) {
                break;
            }
        }
        last_full = std::time::Instant::now();
        safety_net_every = SAFETY_NET_EVERY.max(started.elapsed() * 50);
        swept_rv = rv;
    }
}
