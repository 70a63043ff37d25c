//! What wakes a Hikawa besides its own watch events: each stream gives the Hikawas to
//! reconcile again, from the Hikawa store.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::{mpsc, watch};

use crate::controllers::hikawa::context::Context;
use crate::crd::Hikawa;
use crate::process::leader::ShardTable;
use crate::supply::tenant::key_of_hikawa;

/// A swap of the default module concerns the Hikawas that name no rules; a change in what a
/// rule set serves (or the rule sets listed at last), those that name it.
pub fn swapped(hikawas: Store<Hikawa>, default_swaps: impl Stream<Item = ()> + Send + 'static, changed: mpsc::UnboundedReceiver<String>) -> impl Stream<Item = ObjectRef<Hikawa>> + Send {
    let default_swaps = default_swaps.map(|()| None);
    let rule_sets = futures::stream::unfold(changed, |mut rx| async move { rx.recv().await.map(|name| (Some(name), rx)) });
    futures::stream::select(default_swaps, rule_sets).flat_map(move |rules: Option<String>| {
        let concerned: Vec<ObjectRef<Hikawa>> = hikawas.state().iter().filter(|h| key_of_hikawa(h) == rules).map(|h| ObjectRef::from_obj(h.as_ref())).collect();
        futures::stream::iter(concerned)
    })
}

/// A shard just taken: its Hikawas are decided afresh, from the API server's state (the
/// children are the truth), as after a restart: what this replica remembered of them from an
/// earlier hold is forgotten.
pub fn taken(hikawas: Store<Hikawa>, ctx: Arc<Context>) -> impl Stream<Item = ObjectRef<Hikawa>> + Send {
    ctx.shards.taken().flat_map(move |shard| {
        let mine: Vec<ObjectRef<Hikawa>> = hikawas
            .state()
            .iter()
            .filter(|h| h.uid().is_some_and(|uid| ctx.shards.shard_of(&uid) == shard))
            .inspect(|h| ctx.pace.forget(&h.uid().unwrap_or_default()))
            .map(|h| ObjectRef::from_obj(h.as_ref()))
            .collect();
        futures::stream::iter(mine)
    })
}

/// A shard whose children are listed now (`coverage`: the shards covered): its Hikawas, which
/// waited for that without polling, are decided.
pub fn covered(hikawas: Store<Hikawa>, coverage: watch::Receiver<BTreeSet<u16>>, shards: Arc<ShardTable>) -> impl Stream<Item = ObjectRef<Hikawa>> + Send {
    futures::stream::unfold((coverage, BTreeSet::new()), |(mut rx, before)| async move {
        rx.changed().await.ok()?;
        let now = rx.borrow_and_update().clone();
        let new: BTreeSet<u16> = now.difference(&before).copied().collect();
        Some((new, (rx, now)))
    })
    .flat_map(move |new| {
        let waited: Vec<ObjectRef<Hikawa>> = if new.is_empty() {
            Vec::new()
        } else {
            hikawas.state().iter().filter(|h| h.uid().is_some_and(|uid| new.contains(&shards.shard_of(&uid)))).map(|h| ObjectRef::from_obj(h.as_ref())).collect()
        };
        futures::stream::iter(waited)
    })
}

/// A place freed among those deciding with a module: the Hikawa next in its line
/// (`places.rs`), which waited without polling.
pub fn place_free(woken: mpsc::UnboundedReceiver<ObjectRef<Hikawa>>) -> impl Stream<Item = ObjectRef<Hikawa>> + Send {
    futures::stream::unfold(woken, |mut rx| async move { rx.recv().await.map(|hikawa| (hikawa, rx)) })
}
