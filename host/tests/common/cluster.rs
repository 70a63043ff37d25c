//! A local "cluster" for end-to-end tests: the in-memory API server with the CRDs installed,
//! and the operator running in-process (so a test can kill it at any point).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use zundoko_apiserver::{ApiServer, ServerConfig};
use zundoko_operator::crd::SAID_AT;
use zundoko_operator::crd::{self, Hikawa, HikawaSpec, Kiyoshi, Zundoko};
use zundoko_operator::supply::ModuleLoader;
use zundoko_operator::supply::contract::rules::{Rules, RulesSlot};
use zundoko_operator::supply::sandbox::{SandboxEngine, SandboxLimits};
use zundoko_operator::controllers::hikawa::apply::{HIKAWA_LABEL, label_value};
use zundoko_operator::controllers::hikawa::context::Shared;
use zundoko_operator::controllers::hikawa::controller::Settings;
use zundoko_operator::controllers::hikawa::pace::PaceSettings;
use zundoko_rules::RuleSet;
use zundoko_rules::naming::{kiyoshi_name, zundoko_index};

/// The controller's defaults with quick retries (50 ms doubling to 500 ms), for tests.
pub fn quick_settings() -> Settings {
    let pace = PaceSettings { backoff_base: Duration::from_millis(50), backoff_max: Duration::from_millis(500), ..PaceSettings::default() };
    Settings { pace, ..Settings::default() }
}

pub struct Cluster {
    pub server: ApiServer,
    pub client: Client,
}

impl Cluster {
    pub async fn start() -> Cluster {
        Self::start_with(ServerConfig::default()).await
    }

    pub async fn start_with(config: ServerConfig) -> Cluster {
        // ZUNDOKO_TEST_LOG=<filter>: the in-process operator's log, shown with a failing test.
        if let Ok(filter) = std::env::var("ZUNDOKO_TEST_LOG") {
            let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
        }
        let server = ApiServer::start(config).await.unwrap();
        // The kubeconfig's admin (read only with `--authorization-mode RBAC`).
        let mut config = kube::Config::new(server.url().parse().unwrap());
        config.auth_info.token = Some(zundoko_apiserver::ADMIN_TOKEN.to_string().into());
        let client = Client::try_from(config).unwrap();
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for crd in crd::all() {
            crds.create(&PostParams::default(), &crd).await.unwrap();
        }
        Cluster { server, client }
    }

    /// The controller in-process, `rules` as its default module (rule sets get their modules
    /// from a default sandbox).
    pub fn operator(&self, rules: Arc<dyn Rules>, settings: Settings) -> Operator {
        self.operator_with_registry(rules, settings, zundoko_operator::supply::oci::RegistrySettings::default())
    }

    /// The same, reaching registries as `registry` says (rule sets from OCI sources).
    pub fn operator_with_registry(&self, rules: Arc<dyn Rules>, settings: Settings, registry: zundoko_operator::supply::oci::RegistrySettings) -> Operator {
        self.operator_as("in-process", rules, settings, registry)
    }

    /// The same under another identity (the `decidedBy` of the statuses it writes): what one
    /// process did can be told from another's.
    pub fn operator_as(&self, identity: &str, rules: Arc<dyn Rules>, settings: Settings, registry: zundoko_operator::supply::oci::RegistrySettings) -> Operator {
        self.operator_with_client(self.client.clone(), identity, rules, settings, registry)
    }

    /// A client of the admin acting as `user` in `groups` (impersonation, as `kubectl --as`):
    /// with `--authorization-mode RBAC`, allowed what RBAC grants that user.
    pub fn client_as(&self, user: &str, groups: &[&str]) -> Client {
        let mut config = kube::Config::new(self.server.url().parse().unwrap());
        config.auth_info.token = Some(zundoko_apiserver::ADMIN_TOKEN.to_string().into());
        config.auth_info.impersonate = Some(user.into());
        config.auth_info.impersonate_groups = (!groups.is_empty()).then(|| groups.iter().map(|g| g.to_string()).collect());
        Client::try_from(config).unwrap()
    }

    /// The operator making its requests with `client` (say, as its service account).
    pub fn operator_with_client(&self, client: Client, identity: &str, rules: Arc<dyn Rules>, settings: Settings, registry: zundoko_operator::supply::oci::RegistrySettings) -> Operator {
        self.operator_with_engine(client, identity, rules, settings, registry, SandboxEngine::new(SandboxLimits::default()).unwrap())
    }

    /// The same with its compiled modules and pulled blobs kept in `dir` (`--cache-dir`), as
    /// `operator::start` keeps them: one cache, whose bytes each tenant keeps are counted.
    pub fn operator_with_cache(&self, rules: Arc<dyn Rules>, settings: Settings, dir: &std::path::Path) -> Operator {
        let engine = SandboxEngine::new(SandboxLimits::default()).unwrap().with_compiled_cache(dir).unwrap();
        let registry = zundoko_operator::supply::oci::RegistrySettings { cache_dir: Some(dir.to_path_buf()), ..Default::default() };
        self.operator_with_engine(self.client.clone(), "in-process", rules, settings, registry, engine)
    }

    /// The same on `engine` (say, one whose WASI modules get a set number of turns).
    pub fn operator_with_engine(&self, client: Client, identity: &str, rules: Arc<dyn Rules>, settings: Settings, registry: zundoko_operator::supply::oci::RegistrySettings, engine: SandboxEngine) -> Operator {
        let slot = Arc::new(RulesSlot::new(rules));
        let mut shared = Shared::new(slot.clone(), Arc::new(ModuleLoader::new(engine, settings.plan_limits.clone())));
        shared.registry = zundoko_operator::supply::oci::Registry::new(registry).unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        // One process: every shard is its own.
        let shards = zundoko_operator::process::leader::ShardTable::all(32, identity, client.clone());
        let task = tokio::spawn(zundoko_operator::operator::controllers::run(client, shards, shared.clone(), settings, async move {
            let _ = stopped.await;
        }));
        Operator { task, stop, slot, shared }
    }

    pub fn hikawas(&self, ns: &str) -> Api<Hikawa> {
        Api::namespaced(self.client.clone(), ns)
    }

    pub async fn create_hikawa(&self, ns: &str, name: &str, interval_millis: u64, params: &[(&str, &str)]) -> Hikawa {
        let mut hikawa = Hikawa::new(
            name,
            HikawaSpec {
                interval_millis,
                params: params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
                ..HikawaSpec::default()
            },
        );
        hikawa.metadata.namespace = Some(ns.into());
        self.hikawas(ns).create(&PostParams::default(), &hikawa).await.unwrap()
    }

    /// Poll until every named Hikawa's status says kiyoshied (tests may wait; reconciles never do).
    pub async fn wait_kiyoshied(&self, ns: &str, names: &[String], timeout: Duration) {
        let started = Instant::now();
        loop {
            // Each list bounded too: a test that waits forever tells nothing.
            let seen = match tokio::time::timeout(Duration::from_secs(10), self.hikawas(ns).list(&ListParams::default())).await {
                Ok(Ok(list)) => {
                    let done = list
                        .items
                        .iter()
                        .filter(|h| names.contains(&h.name_any()) && h.status.as_ref().is_some_and(|s| s.kiyoshied))
                        .count();
                    if done == names.len() {
                        return;
                    }
                    format!("only {done} of {} Hikawas kiyoshied", names.len())
                }
                Ok(Err(error)) => format!("the last list failed: {error}"),
                Err(_) => "the last list got no answer within 10 s".into(),
            };
            assert!(started.elapsed() < timeout, "{seen} after {timeout:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Poll until every named Hikawa has said at least `words` words.
    pub async fn wait_words(&self, ns: &str, names: &[String], words: usize, timeout: Duration) {
        let started = Instant::now();
        loop {
            let mut fewest = usize::MAX;
            for name in names {
                fewest = fewest.min(self.song(ns, name).await.words.len());
            }
            if fewest >= words {
                return;
            }
            assert!(started.elapsed() < timeout, "a song has only {fewest} of {words} words after {timeout:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Create or replace the module ConfigMap `ns/zundoko-rules` (key `rules.wasm`,
    /// binaryData) by server-side apply, as `make deploy` and `make swap` do.
    pub async fn put_module_configmap(&self, ns: &str, module: &[u8]) {
        self.put_configmap(ns, "zundoko-rules", module).await;
    }

    /// Create or replace ConfigMap `ns/name` holding `module` under `rules.wasm` (binaryData).
    pub async fn put_configmap(&self, ns: &str, name: &str, module: &[u8]) {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), ns);
        let cm = ConfigMap {
            metadata: ObjectMeta { name: Some(name.into()), ..ObjectMeta::default() },
            binary_data: Some([("rules.wasm".to_string(), ByteString(module.to_vec()))].into()),
            ..ConfigMap::default()
        };
        let params = PatchParams::apply("zundoko-test").force();
        api.patch(name, &params, &Patch::Apply(&cm)).await.unwrap();
    }

    pub async fn create_namespace(&self, ns: &str) {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let namespace = Namespace { metadata: ObjectMeta { name: Some(ns.into()), ..ObjectMeta::default() }, ..Namespace::default() };
        api.create(&PostParams::default(), &namespace).await.unwrap();
    }

    /// Wait until every named Hikawa has kiyoshied, then check each song under `rules`.
    pub async fn assert_songs_complete(&self, ns: &str, names: &[String], rules: &RuleSet, timeout: Duration) {
        self.wait_kiyoshied(ns, names, timeout).await;
        for name in names {
            self.song(ns, name).await.assert_valid(rules, name);
        }
    }

    /// The Events regarding one Hikawa, oldest first.
    pub async fn events_for(&self, ns: &str, hikawa: &str) -> Vec<Event> {
        self.events_regarding(ns, "Hikawa", hikawa).await
    }

    /// The Events in `ns` regarding the object of this kind and name, oldest first.
    pub async fn events_regarding(&self, ns: &str, kind: &str, name: &str) -> Vec<Event> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), ns);
        let mut list: Vec<Event> = events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.regarding.as_ref().is_some_and(|r| r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name)))
            .collect();
        list.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
        list
    }

    /// The song of one Hikawa as the cluster holds it.
    pub async fn song(&self, ns: &str, hikawa: &str) -> Song {
        let lp = ListParams::default().labels(&format!("{HIKAWA_LABEL}={}", label_value(hikawa)));
        let zundokos = Api::<Zundoko>::namespaced(self.client.clone(), ns).list(&lp).await.unwrap().items;
        let kiyoshis = Api::<Kiyoshi>::namespaced(self.client.clone(), ns).list(&lp).await.unwrap().items;
        let mut words: Vec<(u32, String, i64)> = zundokos
            .iter()
            .map(|z| {
                let index = zundoko_index(hikawa, &z.name_any()).unwrap_or_else(|| panic!("foreign child name {}", z.name_any()));
                (index, z.spec.say.clone(), said_at(z.annotations()))
            })
            .collect();
        words.sort_by_key(|w| w.0);
        for k in &kiyoshis {
            assert_eq!(k.name_any(), kiyoshi_name(hikawa));
        }
        Song {
            indexes: words.iter().map(|w| w.0).collect(),
            words: words.iter().map(|w| w.1.clone()).collect(),
            times: words.iter().map(|w| w.2).collect(),
            kiyoshis: kiyoshis.iter().map(|k| (k.spec.say.clone(), said_at(k.annotations()))).collect(),
        }
    }
}

fn said_at(annotations: &BTreeMap<String, String>) -> i64 {
    annotations.get(SAID_AT).expect("said-at annotation").parse::<jiff::Timestamp>().unwrap().as_millisecond()
}

pub struct Operator {
    task: JoinHandle<()>,
    stop: oneshot::Sender<()>,
    pub slot: Arc<RulesSlot>,
    pub shared: Shared,
}

impl Operator {
    /// Kill at once, mid-reconcile or wherever it is: what a crash or SIGKILL does.
    pub async fn kill(self) {
        self.task.abort();
        // Aborted is what a kill does; a panic the operator had before is the test's failure.
        if let Err(error) = self.task.await
            && error.is_panic()
        {
            std::panic::resume_unwind(error.into_panic());
        }
    }

    /// Graceful stop: reconciles in flight finish.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        // Graceful: the reconciles in flight finish first; one that never ends is a bug.
        tokio::time::timeout(Duration::from_secs(60), self.task).await.expect("the operator stops within a minute").unwrap();
    }
}

#[derive(Debug)]
pub struct Song {
    pub indexes: Vec<u32>,
    pub words: Vec<String>,
    pub times: Vec<i64>,
    pub kiyoshis: Vec<(String, i64)>,
}

impl Song {
    /// Valid: indexes 1..n without gaps or repeats, exactly one Kiyoshi, right after the
    /// first time the words called for it, and nothing after it.
    pub fn assert_valid(&self, rules: &RuleSet, who: &str) {
        let expected: Vec<u32> = (1..=self.words.len() as u32).collect();
        assert_eq!(self.indexes, expected, "{who}: indexes");
        assert_eq!(self.kiyoshis.len(), 1, "{who}: one Kiyoshi, got {:?}", self.kiyoshis);
        assert_eq!(self.kiyoshis[0].0, rules.words.kiyoshi, "{who}");
        assert!(rules.song_complete(self.words.iter().map(String::as_str)), "{who}: Kiyoshi without the call: {:?}", self.words);
        for end in 1..self.words.len() {
            assert!(
                !rules.song_complete(self.words[..end].iter().map(String::as_str)),
                "{who}: the call came at word {end} but the song went on: {:?}",
                self.words
            );
        }
        assert!(self.kiyoshis[0].1 >= *self.times.last().unwrap(), "{who}: Kiyoshi after the last word");
    }

    /// A song sung by `old` then, after a swap, by `new`: never an old word after a new one
    /// (a swap is atomic per Hikawa), and the Kiyoshi by the rules serving at the end.
    /// Returns whether the new rules said anything.
    pub fn assert_swapped(&self, old: &RuleSet, new: &RuleSet, who: &str) -> bool {
        let expected: Vec<u32> = (1..=self.words.len() as u32).collect();
        assert_eq!(self.indexes, expected, "{who}: indexes");
        assert_eq!(self.kiyoshis.len(), 1, "{who}: one Kiyoshi");
        let is = |rules: &RuleSet, w: &str| w == rules.words.zun || w == rules.words.doko;
        let split = self.words.iter().position(|w| is(new, w)).unwrap_or(self.words.len());
        assert!(self.words[..split].iter().all(|w| is(old, w)), "{who}: {:?}", self.words);
        assert!(self.words[split..].iter().all(|w| is(new, w)), "{who}: an old word after a new one: {:?}", self.words);
        let last = if split < self.words.len() || self.kiyoshis[0].0 == new.words.kiyoshi { new } else { old };
        assert_eq!(self.kiyoshis[0].0, last.words.kiyoshi, "{who}: {:?}", self.words);
        assert!(last.song_complete(self.words.iter().map(String::as_str)), "{who}: Kiyoshi without the call: {:?}", self.words);
        split < self.words.len()
    }

    /// Gaps between consecutive words (and before the Kiyoshi), in ms.
    pub fn gaps(&self) -> Vec<i64> {
        let mut times = self.times.clone();
        times.extend(self.kiyoshis.iter().map(|k| k.1));
        times.windows(2).map(|w| w[1] - w[0]).collect()
    }
}
