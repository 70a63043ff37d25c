//! What `explain` reads from the cluster, each read bounded: the Hikawa, its children (by label,
//! paged, then by name for any index the label missed: a child made by hand may carry none),
//! its rule set, and the Events about it.

use anyhow::{Context, Result};
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, ObjectMeta};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use zundoko_rules::naming::{kiyoshi_name, zundoko_index, zundoko_name};

use crate::controllers::hikawa::apply::{HIKAWA_LABEL, label_value};
use crate::controllers::hikawa::children::said_at;
use crate::controllers::hikawa::provenance::DECISION;
use crate::crd::{Hikawa, Kiyoshi, Zundoko, ZundokoRules};

/// The most children of one Hikawa read: past it, `explain` stops rather than buffer more.
pub const MAX_CHILDREN: usize = 100_000;
/// The most Events about one Hikawa read (the newest are kept).
const MAX_EVENTS: u32 = 500;
/// One page of a list.
const PAGE: u32 = 500;

/// One child as `explain` needs it.
#[derive(Clone, Debug)]
pub struct Child {
    pub kiyoshi: bool,
    /// The Zundoko's index; the Kiyoshi's is the number of Zundokos plus one.
    pub index: u32,
    pub name: String,
    pub word: String,
    pub said_at: Option<i64>,
    /// The uid of its controller owner, if any.
    pub controller: Option<String>,
    /// The decision annotation, as written.
    pub decision: Option<String>,
}

impl Child {
    fn new(meta: &ObjectMeta, kiyoshi: bool, index: u32, word: &str) -> Child {
        Child {
            kiyoshi,
            index,
            name: meta.name.clone().unwrap_or_default(),
            word: word.to_string(),
            said_at: said_at(meta),
            controller: meta.owner_references.iter().flatten().find(|r| r.controller == Some(true)).map(|r| r.uid.clone()),
            decision: meta.annotations.as_ref().and_then(|a| a.get(DECISION)).cloned(),
        }
    }
}

/// The Hikawa and everything `explain` reads about it.
pub struct Read {
    pub hikawa: Hikawa,
    /// Zundokos in index order, then the Kiyoshi.
    pub children: Vec<Child>,
    pub ruleset: Option<std::result::Result<ZundokoRules, String>>,
    /// Oldest first.
    pub events: Vec<Event>,
}

/// `NAMESPACE/NAME`, or `NAME` in `default`.
pub fn split_key(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("default", key))
}

pub async fn read(client: &Client, key: &str) -> Result<Read> {
    let (ns, name) = split_key(key);
    let hikawa = Api::<Hikawa>::namespaced(client.clone(), ns).get(name).await.with_context(|| format!("cannot read Hikawa {ns}/{name}"))?;
    let claimed = hikawa.status.as_ref().map_or(0, |s| s.num_zundokos_said);
    let selector = format!("{HIKAWA_LABEL}={}", label_value(name));
    let zundokos: Vec<Zundoko> = list(client, ns, &selector).await?;
    let mut children: Vec<Child> = zundokos
        .iter()
        .filter_map(|z| zundoko_index(name, &z.name_any()).map(|i| Child::new(&z.metadata, false, i, &z.spec.say)))
        .collect();
    // A child made by hand may lack the label: every index the status claims is looked up by name.
    let api = Api::<Zundoko>::namespaced(client.clone(), ns);
    for index in 1..=claimed.min(MAX_CHILDREN as u32) {
        if !children.iter().any(|c| c.index == index)
            && let Some(z) = api.get_opt(&zundoko_name(name, index)).await.context("cannot read a Zundoko")?
        {
            children.push(Child::new(&z.metadata, false, index, &z.spec.say));
        }
    }
    children.sort_by_key(|c| c.index);
    let kiyoshi = Api::<Kiyoshi>::namespaced(client.clone(), ns).get_opt(&kiyoshi_name(name)).await.context("cannot read the Kiyoshi")?;
    if let Some(k) = kiyoshi {
        let owned = children.iter().filter(|c| c.controller.as_deref() == hikawa.metadata.uid.as_deref()).count() as u32;
        children.push(Child::new(&k.metadata, true, owned + 1, &k.spec.say));
    }
    let ruleset = match hikawa.spec.rules.as_deref() {
        None => None,
        Some(rules) => Some(match Api::<ZundokoRules>::all(client.clone()).get_opt(rules).await {
            Ok(Some(r)) => Ok(r),
            Ok(None) => Err(format!("the rule set {rules} does not exist")),
            Err(e) => Err(format!("cannot read the rule set {rules}: {e}")),
        }),
    };
    let events = events(client, ns, &hikawa).await;
    Ok(Read { hikawa, children, ruleset, events })
}

/// Every `K` in `ns` matching `selector`, page by page, at most [`MAX_CHILDREN`].
async fn list<K>(client: &Client, ns: &str, selector: &str) -> Result<Vec<K>>
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let api = Api::<K>::namespaced(client.clone(), ns);
    let mut items = Vec::new();
    let mut params = ListParams::default().labels(selector).limit(PAGE);
    loop {
        let page = api.list(&params).await.with_context(|| format!("cannot list {}", K::plural(&())))?;
        items.extend(page.items);
        if items.len() > MAX_CHILDREN {
            anyhow::bail!("more than {MAX_CHILDREN} {} match {selector}: not read further", K::plural(&()));
        }
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(items),
        }
    }
}

/// The newest Events about the Hikawa (best effort: none if they cannot be read).
async fn events(client: &Client, ns: &str, hikawa: &Hikawa) -> Vec<Event> {
    let api = Api::<Event>::namespaced(client.clone(), ns);
    let params = ListParams::default().fields(&format!("regarding.name={}", hikawa.name_any())).limit(MAX_EVENTS);
    let mut events: Vec<Event> = match api.list(&params).await {
        Ok(list) => list.items.into_iter().filter(|e| e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == hikawa.metadata.uid.as_deref()).collect(),
        Err(error) => {
            tracing::debug!(%error, "cannot list Events");
            Vec::new()
        }
    };
    events.sort_by_key(|e| e.series.as_ref().map(|s| s.last_observed_time.0).or(e.event_time.as_ref().map(|t| t.0)));
    events
}
