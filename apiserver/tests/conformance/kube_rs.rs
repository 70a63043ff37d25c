//! kube-rs `Api`, `watcher`, `Controller` and the event `Recorder`, unchanged, against the server.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::common::*;

fn hikawa(name: &str, interval: u64) -> Hikawa {
    Hikawa::new(name, HikawaSpec { interval_millis: interval, ..Default::default() })
}

#[tokio::test]
async fn api_crud_and_errors() {
    let s = server().await;
    let c = client(&s);
    install_crds(&c).await;
    let api: Api<Hikawa> = Api::namespaced(c.clone(), "default");
    let h = api.create(&PostParams::default(), &hikawa("h", 100)).await.unwrap();
    assert_eq!(h.metadata.generation, Some(1));
    let err = api.create(&PostParams::default(), &hikawa("h", 100)).await.unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert_eq!(s.reason, "AlreadyExists");
        }
        e => panic!("{e:?}"),
    }
    match api.get("missing").await.unwrap_err() {
        kube::Error::Api(s) => assert_eq!((s.code, s.reason.as_str()), (404, "NotFound")),
        e => panic!("{e:?}"),
    }
    assert!(api.get_opt("missing").await.unwrap().is_none());
    // Stale replace.
    let mut stale = h.clone();
    let mut fresh = h.clone();
    fresh.spec.interval_millis = 200;
    let fresh = api.replace("h", &PostParams::default(), &fresh).await.unwrap();
    assert_eq!(fresh.metadata.generation, Some(2));
    stale.spec.interval_millis = 300;
    match api.replace("h", &PostParams::default(), &stale).await.unwrap_err() {
        kube::Error::Api(s) => assert_eq!((s.code, s.reason.as_str()), (409, "Conflict")),
        e => panic!("{e:?}"),
    }
    // Status through the subresource, with server-side apply as kube-rs sends it.
    let ss = PatchParams::apply("zundoko-test").force();
    let patch = json!({"apiVersion": "zundokokiyoshi.kaitoy.github.com/v1beta1", "kind": "Hikawa", "status": {"numZundokosSaid": 3, "kiyoshied": false}});
    let st = api.patch_status("h", &ss, &Patch::Apply(&patch)).await.unwrap();
    assert_eq!(st.status.as_ref().unwrap().num_zundokos_said, 3);
    assert_eq!(st.metadata.generation, Some(2));
    let st = api.patch_status("h", &PatchParams::default(), &Patch::Merge(json!({"status": {"kiyoshied": true}}))).await.unwrap();
    assert!(st.status.as_ref().unwrap().kiyoshied);
    // SSA of the main resource creates and updates.
    let applied = api.patch("h2", &ss, &Patch::Apply(&hikawa("h2", 5))).await.unwrap();
    assert_eq!(applied.spec.interval_millis, 5);
    let applied = api.patch("h2", &ss, &Patch::Apply(&hikawa("h2", 6))).await.unwrap();
    assert_eq!(applied.spec.interval_millis, 6);
    assert_eq!(applied.metadata.generation, Some(2));
    let list = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 2);
    assert!(list.metadata.resource_version.is_some());
    api.delete("h2", &DeleteParams::default()).await.unwrap();
    assert!(api.get_opt("h2").await.unwrap().is_none());
    // Built-in: ConfigMaps.
    let cms: Api<ConfigMap> = Api::default_namespaced(c.clone());
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "c"}, "data": {"k": "v"}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let l = cms.list(&ListParams::default().labels("")).await.unwrap();
    assert_eq!(l.items[0].data.as_ref().unwrap()["k"], "v");
}

async fn collect_names(stream: impl futures::Stream<Item = Result<Hikawa, watcher::Error>> + Send + 'static, want: usize) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut stream = Box::pin(stream);
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(Ok(h)) = stream.next().await {
            names.insert(h.name_any());
            if names.len() >= want {
                break;
            }
        }
    })
    .await;
    names
}

#[tokio::test]
async fn watcher_list_watch_and_streaming_list() {
    let s = server().await;
    let c = client(&s);
    install_crds(&c).await;
    let api: Api<Hikawa> = Api::namespaced(c.clone(), "default");
    api.create(&PostParams::default(), &hikawa("before", 1)).await.unwrap();
    for (round, cfg) in [watcher::Config::default(), watcher::Config::default().streaming_lists()].into_iter().enumerate() {
        let stream = watcher(api.clone(), cfg).applied_objects();
        let task = tokio::spawn(collect_names(stream, 3 + 2 * round));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let n = format!("after-{}", rand_suffix());
        api.create(&PostParams::default(), &hikawa(&n, 1)).await.unwrap();
        let n2 = format!("after2-{}", rand_suffix());
        api.create(&PostParams::default(), &hikawa(&n2, 1)).await.unwrap();
        let names = task.await.unwrap();
        assert!(names.contains("before") && names.contains(&n) && names.contains(&n2), "{names:?}");
    }
}

fn rand_suffix() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

#[tokio::test]
async fn watcher_survives_dropped_watches_and_restarts() {
    let s = server().await;
    let c = client(&s);
    install_crds(&c).await;
    let api: Api<Hikawa> = Api::namespaced(c.clone(), "default");
    s.faults().set_watch_drop_every(Some(Duration::from_millis(150)));
    let stream = watcher(api.clone(), watcher::Config::default()).default_backoff().applied_objects();
    let task = tokio::spawn(collect_names(stream, 20));
    for i in 0..20 {
        if i == 10 {
            s.restart().await;
        }
        // Writes may hit a broken connection during restart(): retry like a client would.
        let h = hikawa(&format!("h{i}"), 1);
        let mut tries = 0;
        while api.create(&PostParams::default(), &h).await.is_err() && tries < 5 {
            tries += 1;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    let names = task.await.unwrap();
    assert_eq!(names.len(), 20, "every object seen despite dropped watches: {names:?}");
    let watches = s.requests().iter().filter(|r| r.verb == "watch" && r.resource == "hikawas").count();
    assert!(watches >= 3, "the watcher re-watched ({watches} watches)");
}

struct Ctx {
    client: kube::Client,
}

#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct ReconcileError(#[from] kube::Error);

async fn reconcile(h: Arc<Hikawa>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    let ns = h.namespace().unwrap();
    let zundokos: Api<Zundoko> = Api::namespaced(ctx.client.clone(), &ns);
    let hikawas: Api<Hikawa> = Api::namespaced(ctx.client.clone(), &ns);
    let name = format!("{}-zundoko-001", h.name_any());
    let mut z = Zundoko::new(&name, ZundokoSpec { say: "Zun".into() });
    z.metadata.owner_references = Some(vec![h.controller_owner_ref(&()).unwrap()]);
    let pp = PatchParams::apply("test-controller").force();
    zundokos.patch(&name, &pp, &Patch::Apply(&z)).await?;
    let owned = zundokos.list(&ListParams::default()).await?.items.into_iter().filter(|z| z.owner_references().iter().any(|o| Some(&o.uid) == h.uid().as_ref())).count();
    let status = json!({"apiVersion": Hikawa::api_version(&()), "kind": "Hikawa", "status": {"numZundokosSaid": owned, "kiyoshied": false, "observedGeneration": h.metadata.generation}});
    hikawas.patch_status(&h.name_any(), &pp, &Patch::Apply(&status)).await?;
    let recorder = Recorder::new(ctx.client.clone(), Reporter { controller: "test-controller".into(), instance: None });
    let ev = Event { type_: EventType::Normal, reason: "Said".into(), note: Some("Zun".into()), action: "Say".into(), secondary: None };
    recorder.publish(&ev, &h.object_ref(&())).await?;
    Ok(Action::requeue(Duration::from_secs(300)))
}

#[tokio::test]
async fn controller_reconciles_owns_children_and_gc_collects_them() {
    let s = server().await;
    let c = client(&s);
    install_crds(&c).await;
    let hikawas: Api<Hikawa> = Api::namespaced(c.clone(), "default");
    let zundokos: Api<Zundoko> = Api::namespaced(c.clone(), "default");
    let ctl = Controller::new(hikawas.clone(), watcher::Config::default())
        .owns(zundokos.clone(), watcher::Config::default())
        .run(reconcile, |_, _: &ReconcileError, _| Action::requeue(Duration::from_millis(100)), Arc::new(Ctx { client: c.clone() }))
        .for_each(|_| async {});
    let handle = tokio::spawn(ctl);
    hikawas.create(&PostParams::default(), &hikawa("h", 100)).await.unwrap();
    let ok = eventually(Duration::from_secs(5), || async {
        hikawas.get("h").await.ok().and_then(|h| h.status).is_some_and(|s| s.num_zundokos_said == 1)
    })
    .await;
    assert!(ok, "reconciled");
    let z = zundokos.get("h-zundoko-001").await.unwrap();
    assert_eq!(z.owner_references()[0].controller, Some(true));
    // The events landed, readable through both event APIs.
    let core: Api<k8s_openapi::api::core::v1::Event> = Api::default_namespaced(c.clone());
    let evs = core.list(&ListParams::default()).await.unwrap();
    assert!(evs.items.iter().any(|e| e.reason.as_deref() == Some("Said") && e.message.as_deref() == Some("Zun")), "{evs:?}");
    // Deleting the Hikawa garbage-collects its children.
    hikawas.delete("h", &DeleteParams::default()).await.unwrap();
    assert!(eventually(Duration::from_secs(2), || async { zundokos.get_opt("h-zundoko-001").await.unwrap().is_none() }).await);
    handle.abort();
    let reqs = s.requests();
    assert!(reqs.iter().any(|r| r.verb == "patch" && r.resource == "hikawas" && r.subresource == "status" && r.code == 200));
    assert!(reqs.iter().any(|r| r.verb == "watch" && r.resource == "zundokos"));
    assert!(reqs.iter().any(|r| r.verb == "create" && r.api_group == "events.k8s.io" && r.resource == "events" && r.code == 201));
}

#[tokio::test]
async fn kubeconfig_loading_works() {
    let s = server().await;
    let kc = kube::config::Kubeconfig::from_yaml(&s.kubeconfig_yaml()).unwrap();
    let opts = kube::config::KubeConfigOptions::default();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &opts).await.unwrap();
    assert_eq!(cfg.default_namespace, "default");
    assert_eq!(cfg.cluster_url.to_string(), format!("{}/", s.url()));
    let c = kube::Client::try_from(cfg).unwrap();
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(c.clone());
    assert_eq!(nss.list(&ListParams::default()).await.unwrap().items.len(), 4);
    let v = c.apiserver_version().await.unwrap();
    assert_eq!(v.major, "1");
}

#[tokio::test]
async fn finalizer_helper_and_metadata_api() {
    use kube::runtime::finalizer::{Event as Fin, finalizer};
    let s = server().await;
    let c = client(&s);
    install_crds(&c).await;
    let api: Api<Hikawa> = Api::namespaced(c.clone(), "default");
    api.create(&PostParams::default(), &hikawa("f", 1)).await.unwrap();
    let run = |obj: Hikawa| {
        let api = api.clone();
        async move {
            finalizer(&api, "test.zundoko.example/cleanup", Arc::new(obj), |ev| async move {
                match ev {
                    Fin::Apply(_) => Ok::<_, kube::Error>(Action::await_change()),
                    Fin::Cleanup(_) => Ok(Action::await_change()),
                }
            })
            .await
        }
    };
    // First pass adds the finalizer (JSON patch testing a missing path against null).
    run(api.get("f").await.unwrap()).await.unwrap();
    assert_eq!(api.get("f").await.unwrap().finalizers(), ["test.zundoko.example/cleanup"]);
    run(api.get("f").await.unwrap()).await.unwrap();
    api.delete("f", &DeleteParams::default()).await.unwrap();
    let deleting = api.get("f").await.unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());
    // Cleanup removes the finalizer and the object goes.
    run(deleting).await.unwrap();
    assert!(api.get_opt("f").await.unwrap().is_none());

    // Metadata-only API.
    api.create(&PostParams::default(), &hikawa("m", 1)).await.unwrap();
    let meta = api.get_metadata("m").await.unwrap();
    assert_eq!(meta.metadata.name.as_deref(), Some("m"));
    assert_eq!(meta.types.as_ref().unwrap().kind, "PartialObjectMetadata");
    let list = api.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    let meta_api: Api<kube::core::PartialObjectMeta<Hikawa>> = Api::namespaced(c.clone(), "default");
    let stream = watcher(meta_api, watcher::Config::default()).applied_objects();
    let mut stream = Box::pin(stream);
    let first = tokio::time::timeout(Duration::from_secs(5), stream.next()).await.unwrap().unwrap().unwrap();
    assert_eq!(first.metadata.name.as_deref(), Some("m"));
}
