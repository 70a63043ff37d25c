//! What `explain` reads from the cluster, each read bounded: the Hikawa, its children (by label,
//! paged, then by name for any index the label missed: a child made by hand may carry none),
//! its rule set, the Events about it, its shard's Lease and, for the default module, the
//! record the replicas keep in the members Lease.

use anyhow::{Context, Result};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{ListParams, ObjectMeta};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use zundoko_rules::naming::{kiyoshi_name, zundoko_index, zundoko_name};

use crate::controllers::hikawa::apply::{HIKAWA_LABEL, label_value};
use crate::controllers::hikawa::children::said_at;
use crate::controllers::hikawa::provenance::DECISION;
use crate::crd::{Hikawa, Kiyoshi, Zundoko, ZundokoNamespacedRules, ZundokoRules};
use crate::supply::tenant::Tenant;
use crate::process::leader::assign::{SHARD_LABEL, lease_name, members_lease_name, shard_of};
use crate::process::leader::members::records_of;
use crate::supply::sources::recorded::DefaultModuleRecord;

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
    /// The Hikawa's shard (number, count) and its Lease's holder and renew time, if any.
    pub shard: Shard,
    /// For a Hikawa that names no rule set: the default module as a replica recorded it in
    /// the members Lease, or why none could be read.
    pub default_module: Option<std::result::Result<DefaultModule, String>>,
}

/// The default module one replica recorded (`supply/sources/recorded.rs`).
#[derive(Clone, Debug)]
pub struct DefaultModule {
    pub replica: String,
    pub record: DefaultModuleRecord,
}

/// The Hikawa's shard and who holds it, as the Leases say.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Shard {
    pub shard: u16,
    pub count: u16,
    pub lease: String,
    /// The holder and its last renewal; `None`: no Lease, or none held.
    pub holder: Option<(String, Option<String>)>,
    /// Why the Lease could not be read (absent: leader election off, or another namespace).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unread: Option<String>,
}

/// `NAMESPACE/NAME`, or `NAME` in `default`.
pub fn split_key(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("default", key))
}

/// Where the operator's Leases are: its namespace, lease name and shard count.
pub struct Leases<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub shards: u16,
}

pub async fn read(client: &Client, key: &str, leases: &Leases<'_>) -> Result<Read> {
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
    // The rule set named as the operator reads it (`spec.rules`, or `spec.rulesRef` for a
    // tenant's `ZundokoNamespacedRules`, which is read as the cluster kind: one spec, one status).
    let named = crate::supply::tenant::of_hikawa(&hikawa);
    let ruleset = match &named {
        Err(refused) => Some(Err(refused.message.clone())),
        Ok(None) => None,
        Ok(Some(key)) => Some(match &key.tenant {
            Tenant::Cluster => match Api::<ZundokoRules>::all(client.clone()).get_opt(&key.name).await {
                Ok(Some(r)) => Ok(r),
                Ok(None) => Err(format!("the rule set {} does not exist", key.describe())),
                Err(e) => Err(format!("cannot read the rule set {}: {e}", key.describe())),
            },
            Tenant::Namespace(own) => match Api::<ZundokoNamespacedRules>::namespaced(client.clone(), own).get_opt(&key.name).await {
                Ok(Some(r)) => Ok(ZundokoRules { metadata: r.metadata, spec: r.spec.rules, status: r.status }),
                Ok(None) => Err(format!("the rule set {} does not exist", key.describe())),
                Err(e) => Err(format!("cannot read the rule set {}: {e}", key.describe())),
            },
        }),
    };
    let events = events(client, ns, &hikawa).await;
    // The count the children were labelled under (`NN-of-COUNT`), else the one given.
    let count = zundokos
        .iter()
        .find_map(|z| z.labels().get(SHARD_LABEL).and_then(|v| v.split_once("-of-")).and_then(|(_, c)| c.parse::<u16>().ok()))
        .unwrap_or(leases.shards);
    let shard = shard(client, hikawa.metadata.uid.as_deref().unwrap_or_default(), count, leases).await;
    let default_module = match named {
        Ok(Some(_)) | Err(_) => None,
        Ok(None) => Some(default_module(client, leases, shard.holder.as_ref().map(|h| h.0.as_str())).await),
    };
    Ok(Read { hikawa, children, ruleset, events, shard, default_module })
}

/// The default module recorded in the members Lease: the shard holder's record, else
/// another replica's (they run the same Deployment), else why there is none.
async fn default_module(client: &Client, leases: &Leases<'_>, holder: Option<&str>) -> std::result::Result<DefaultModule, String> {
    let name = members_lease_name(leases.name);
    let lease = match Api::<Lease>::namespaced(client.clone(), leases.namespace).get_opt(&name).await {
        Ok(Some(lease)) => lease,
        Ok(None) => return Err(format!("no Lease {}/{name}: leader election is off, or the operator runs in another namespace (--operator-namespace)", leases.namespace)),
        Err(error) => return Err(format!("cannot read the Lease {}/{name}: {error}", leases.namespace)),
    };
    let records = records_of(&lease);
    let chosen = holder.and_then(|h| records.get_key_value(h)).or_else(|| records.iter().next());
    let Some((replica, value)) = chosen else {
        return Err(format!("the Lease {}/{name} holds no default module record (no replica serves one, or the operator predates the record)", leases.namespace));
    };
    let record = DefaultModuleRecord::from_value(value).map_err(|why| format!("replica {replica}'s record in {}/{name}: {why}", leases.namespace))?;
    Ok(DefaultModule { replica: replica.clone(), record })
}

/// The Hikawa's shard and its Lease's holder.
async fn shard(client: &Client, uid: &str, count: u16, leases: &Leases<'_>) -> Shard {
    let number = shard_of(uid, count);
    let name = lease_name(leases.name, number, count);
    let mut shard = Shard { shard: number, count, lease: format!("{}/{name}", leases.namespace), holder: None, unread: None };
    match Api::<Lease>::namespaced(client.clone(), leases.namespace).get_opt(&name).await {
        Ok(Some(lease)) => {
            let spec = lease.spec.unwrap_or_default();
            shard.holder = spec.holder_identity.filter(|h| !h.is_empty()).map(|h| (h, spec.renew_time.map(|t| format!("{:.3}", t.0))));
        }
        Ok(None) => shard.unread = Some("no such Lease: leader election is off, or the operator runs in another namespace (--operator-namespace)".into()),
        Err(error) => shard.unread = Some(format!("cannot read it: {error}")),
    }
    shard
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
