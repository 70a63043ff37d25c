//! The clap grammar: every verb's flags, each with its environment-variable twin and help
//! text (the user's interface: names and words kept as they are). What the verbs do is in a
//! file each (`check`, `simulate`, `conformance` for `test`, `oci` for `push` and `keygen`,
//! `crd`, `run`, `compile`); the sandbox's and registries' flags also turn into their settings
//! here (`SandboxArgs`, `RegistryArgs`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};

use crate::supply::contract::plan_check::PlanLimits;
use crate::supply::sandbox::{SandboxEngine, SandboxLimits};
use crate::supply::sources::configmap::ConfigMapRef;
use crate::process::telemetry::LogFormat;

/// The log filter when none is given (`--log`, `RUST_LOG`).
pub const DEFAULT_LOG_FILTER: &str = "info";

#[derive(Parser, Debug)]
#[command(
    name = "zundoko-operator",
    version,
    about = "The Zundoko Kiyoshi operator: Hikawa resources sing, decided by a sandboxed wasm rules module"
)]
pub struct Cli {
    /// Log format on stderr.
    #[arg(long, env = "ZUNDOKO_LOG_FORMAT", value_enum, default_value = "text", global = true)]
    pub log_format: LogFormat,
    /// Log filter, in RUST_LOG syntax (for example `info,zundoko_operator=debug`).
    #[arg(long = "log", env = "RUST_LOG", default_value = DEFAULT_LOG_FILTER, global = true)]
    pub log_filter: String,
    #[command(subcommand)]
    pub command: Command,
}

// `run` has many flags; the command is parsed once, so its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the operator: watch Hikawas and sing, from a kubeconfig (out of cluster) or the
    /// in-cluster service account.
    Run(RunArgs),
    /// Run a module against a Hikawa manifest on a virtual clock, without a cluster, and print
    /// the song and every decision (with its entropy, so `--seed` replays it exactly).
    Simulate(SimulateArgs),
    /// Validate a module: print its metadata, digest and world, or why it is rejected.
    Check(CheckArgs),
    /// Print the CustomResourceDefinitions (Hikawa, Zundoko, Kiyoshi) as YAML.
    Crd,
    /// The conformance suite for any module: whole songs over many seeds on a virtual clock,
    /// every plan through the host's plan check, each input decided twice, fuel and size
    /// within budget, metadata within bounds. One line per check; exits non-zero on failure.
    Test(TestArgs),
    /// Publish a module to an OCI registry as a Wasm artifact (config
    /// application/vnd.wasm.config.v0+json, one application/wasm layer), checked first, signed
    /// with --sign KEY if given; prints the digest to pin.
    Push(PushArgs),
    /// Write a new ECDSA P-256 key pair for signing modules: OUT.key (private, PKCS#8 PEM) and
    /// OUT.pub (public: give it to the operator as a trusted key).
    Keygen(KeygenArgs),
    /// Sign a module file for --require-signatures: an ECDSA signature over its SHA-256 (what
    /// `cosign sign-blob --key` makes), written beside it as MODULE.sig and printed as the
    /// ConfigMap annotation that carries it.
    Sign(SignArgs),
    /// Explain a Hikawa's song from the cluster: each word's recorded decision (module, entropy,
    /// time, input digest), replayed in the sandbox and compared with what was written; or why
    /// it is not singing (status, conditions, Events, rule set). Needs only read access.
    Explain(ExplainArgs),
    /// Print the Role and RoleBinding a tenant's namespace admin applies so the operator may
    /// read the pull secrets and ConfigMaps its rule sets name there, and nothing else
    /// (`get` by name: the operator has no read of Secrets or ConfigMaps of its own).
    GrantReads(GrantReadsArgs),
    /// (Internal: what `run` starts to compile a big module in a child process.) Compile the
    /// module on stdin, within --max-compile-mib of memory, and write its code to stdout.
    #[command(hide = true, name = crate::supply::sandbox::compiler_process::VERB)]
    CompileModule(crate::cli::compile::CompileModuleArgs),
}

/// How the operator reaches OCI registries (modules from `--module-oci` and `ZundokoRules`).
#[derive(Args, Debug, Clone)]
pub struct RegistryArgs {
    /// Registries spoken to over plain HTTP, as HOST:PORT (comma-separated or repeated): for a
    /// registry on loopback or in tests. Every other registry is spoken to over TLS.
    #[arg(long = "insecure-registry", env = "ZUNDOKO_INSECURE_REGISTRIES", value_delimiter = ',', value_name = "HOST:PORT")]
    pub insecure_registries: Vec<String>,
    /// Keep pulled modules here by digest (in DIR/oci/), so a restart with the registry down
    /// still serves the last module verified. An emptyDir in a Pod.
    #[arg(long, env = "ZUNDOKO_CACHE_DIR", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// The most the cache (--cache-dir, or the private one made without it) may hold, in MiB:
    /// pulled modules and compiled code together. Past it, the least recently used are removed,
    /// never a module that serves now. Keep it well under the volume's size (an emptyDir's
    /// sizeLimit): a compile writes its code beside what is kept before collecting.
    #[arg(long, env = "ZUNDOKO_CACHE_MAX_MIB", default_value_t = crate::supply::disk_cache::DEFAULT_MAX_MIB, value_name = "MIB")]
    pub cache_max_mib: u64,
    /// The shortest interval a rule set's followed tag is resolved again at: a `pollSeconds`
    /// under it is read as it (each new artifact a poll finds is pulled, compiled and kept).
    #[arg(long, env = "ZUNDOKO_MIN_POLL_SECS", default_value_t = crate::supply::oci::registry::DEFAULT_MIN_POLL.as_secs(), value_name = "SECONDS")]
    pub min_poll_secs: u64,
    /// Trusted public keys (PEM, as cosign.pub): a file, or a directory of *.pub / *.pem files
    /// (a mounted Secret). With any, a module from a registry serves only if a cosign-style
    /// signature by one of them verifies.
    #[arg(long = "trusted-keys", env = "ZUNDOKO_TRUSTED_KEYS", value_delimiter = ',', value_name = "PATH")]
    pub trusted_keys: Vec<PathBuf>,
    /// With --trusted-keys: a module from a file (--module, a mounted ConfigMap) or a ConfigMap
    /// (--module-configmap, a rule set's configMap source) serves only if signed too, by a
    /// signature over its SHA-256 beside it (`zundoko-operator sign`: the file MODULE.sig, the
    /// ConfigMap's annotation zundokokiyoshi.kaitoy.github.com/signature.KEY or entry KEY.sig).
    /// Refused otherwise (SignatureRequired, SignatureNotVerified), so signing cannot be
    /// bypassed by switching a rule set's source to a ConfigMap.
    #[arg(long, env = "ZUNDOKO_REQUIRE_SIGNATURES")]
    pub require_signatures: bool,
    /// The longest one try of a pull may take, in seconds (every request in it).
    #[arg(long, env = "ZUNDOKO_REGISTRY_TIMEOUT_SECS", default_value_t = crate::supply::oci::RegistrySettings::default().timeout.as_secs_f64())]
    pub registry_timeout_secs: f64,
    /// The largest module accepted from a registry, in MiB (refused from the manifest, before
    /// its bytes are read).
    #[arg(long, env = "ZUNDOKO_MAX_MODULE_MIB", default_value_t = crate::supply::oci::RegistrySettings::default().max_module_bytes >> 20)]
    pub max_module_mib: u64,
    /// Pulls at once from any one registry (per registry: one that never answers holds only its own).
    #[arg(long, env = "ZUNDOKO_CONCURRENT_PULLS", default_value_t = crate::supply::oci::RegistrySettings::default().concurrent_pulls)]
    pub concurrent_pulls: usize,
    /// Pulls at once across every registry: N registries that never answer hold at most this
    /// many tries (each a connection and up to --max-module-mib of layer), not N times
    /// --concurrent-pulls; past it a pull waits, within its --registry-timeout-secs.
    #[arg(long, env = "ZUNDOKO_MAX_PULLS_IN_FLIGHT", default_value_t = crate::supply::oci::RegistrySettings::default().max_pulls_in_flight)]
    pub max_pulls_in_flight: usize,
    /// Certificate authorities (PEM files) trusted for registries beside the system's: a
    /// registry whose certificate an internal CA issued.
    #[arg(long = "registry-ca", env = "ZUNDOKO_REGISTRY_CA", value_delimiter = ',', value_name = "PEM")]
    pub registry_ca: Vec<PathBuf>,
    /// Registry credentials: a docker config.json (`{"auths": {...}}`, a pull secret's
    /// .dockerconfigjson), for --module-oci, push and check.
    #[arg(long, env = "ZUNDOKO_REGISTRY_AUTH", value_name = "FILE")]
    pub registry_auth: Option<PathBuf>,
    /// Registries modules may come from, as HOST[:PORT] (comma-separated or repeated; `*` in
    /// the host matches any run of characters, `HOST:*` any port, a HOST without a port only
    /// the default one): a reference naming any other is refused (RegistryNotAllowed) before
    /// anything is asked of it, and so is a redirect target or token realm on another host
    /// than the registry's that none allows (a registry's CDN must be named too). None given:
    /// any registry a ZundokoRules names.
    #[arg(long = "allowed-registries", env = "ZUNDOKO_ALLOWED_REGISTRIES", value_delimiter = ',', value_name = "HOST[:PORT]")]
    pub allowed_registries: Vec<String>,
    /// Token realms on another host than their registry's that may be at an internal address
    /// (loopback, link-local, private), as HOST[:PORT] (comma-separated or repeated): a
    /// self-hosted registry whose token service is another internal host, as GitLab's
    /// (registry.gitlab.example.com hands out tokens from gitlab.example.com:
    /// --trusted-token-realm gitlab.example.com). They also get the registry's credentials.
    /// Any other realm on another host is asked without credentials, and never at an internal
    /// address (TokenRealmRefused).
    #[arg(long = "trusted-token-realm", env = "ZUNDOKO_TRUSTED_TOKEN_REALMS", value_delimiter = ',', value_name = "HOST[:PORT]")]
    pub trusted_token_realms: Vec<String>,
}

impl RegistryArgs {
    pub fn settings(&self) -> Result<crate::supply::oci::RegistrySettings> {
        let timeout = Duration::try_from_secs_f64(self.registry_timeout_secs)
            .ok()
            .filter(|d| !d.is_zero() && self.registry_timeout_secs <= 3600.0)
            .with_context(|| format!("--registry-timeout-secs {} is not a number of seconds between 0 and 3600", self.registry_timeout_secs))?;
        let mut trusted_keys = Vec::new();
        for path in &self.trusted_keys {
            trusted_keys.extend(crate::supply::oci::TrustedKey::load(path).map_err(anyhow::Error::msg)?);
        }
        anyhow::ensure!(self.max_module_mib >= 1, "--max-module-mib must be at least 1");
        anyhow::ensure!((1..=1 << 20).contains(&self.cache_max_mib), "--cache-max-mib must be between 1 and 1048576");
        let mut extra_ca_pem = Vec::new();
        for path in &self.registry_ca {
            let pem = crate::supply::oci::given_files::read_within(path, crate::supply::oci::MAX_CA_FILE_BYTES)
                .with_context(|| format!("cannot read --registry-ca {}", path.display()))?;
            anyhow::ensure!(pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----"), "--registry-ca {} holds no PEM certificate", path.display());
            extra_ca_pem.push(pem);
        }
        Ok(crate::supply::oci::RegistrySettings {
            insecure: self.insecure_registries.iter().map(|r| r.trim().to_string()).filter(|r| !r.is_empty()).collect(),
            timeout,
            max_module_bytes: self.max_module_mib << 20,
            concurrent_pulls: self.concurrent_pulls.max(1),
            max_pulls_in_flight: self.max_pulls_in_flight.max(1),
            cache_dir: self.cache_dir.clone(),
            cache_max_bytes: self.cache_max_mib << 20,
            min_poll: Duration::from_secs(self.min_poll_secs),
            trusted_keys,
            trusted_key_paths: self.trusted_keys.clone(),
            extra_ca_pem,
            require_signatures: self.require_signatures,
            allowed: self.allowed_registries.iter().map(|r| r.trim().to_string()).filter(|r| !r.is_empty()).collect(),
            trusted_realms: self.trusted_token_realms.iter().map(|r| r.trim().to_string()).filter(|r| !r.is_empty()).collect(),
            ..crate::supply::oci::RegistrySettings::default()
        })
    }

    pub fn auth(&self, reference: &crate::supply::oci::ModuleRef) -> Result<oci_client::secrets::RegistryAuth> {
        match &self.registry_auth {
            None => Ok(oci_client::secrets::RegistryAuth::Anonymous),
            Some(path) => crate::supply::oci::auth::from_docker_config_file(path, &reference.registry).map_err(anyhow::Error::msg),
        }
    }
}

/// Limits on each guest call and on each plan.
#[derive(Args, Debug, Clone)]
pub struct SandboxArgs {
    /// CPU budget per guest call, in wasmtime fuel units (about one per wasm instruction).
    #[arg(long, env = "ZUNDOKO_FUEL", default_value_t = SandboxLimits::default().fuel)]
    pub fuel: u64,
    /// Cap on a guest's linear memory, in MiB; growing past it fails the call.
    #[arg(long, env = "ZUNDOKO_MEMORY_LIMIT_MIB", default_value_t = SandboxLimits::default().memory_bytes >> 20)]
    pub memory_limit_mib: usize,
    /// The most fuel per call a module may ask for in its `zundoko:budget` section (an
    /// interpreter's module needs more than the default); a module asking for more is refused.
    #[arg(long, env = "ZUNDOKO_MAX_FUEL", default_value_t = SandboxLimits::default().max_fuel)]
    pub max_fuel: u64,
    /// The most memory, in MiB, a module may ask for in its `zundoko:budget` section.
    #[arg(long, env = "ZUNDOKO_MAX_MEMORY_MIB", default_value_t = SandboxLimits::default().max_memory_bytes >> 20)]
    pub max_memory_mib: usize,
    /// Most actions one plan may hold.
    #[arg(long, env = "ZUNDOKO_MAX_PLAN_ACTIONS", default_value_t = PlanLimits::default().max_actions)]
    pub max_plan_actions: usize,
    /// Most Zundoko children one Hikawa may have (at most 9999: child names have at most
    /// four digits of index).
    #[arg(long, env = "ZUNDOKO_MAX_CHILDREN", default_value_t = PlanLimits::default().max_children,
          value_parser = clap::value_parser!(u32).range(1..=crate::supply::contract::plan_check::MAX_CHILDREN_LIMIT as i64))]
    pub max_children: u32,
    /// How used instance slots are reset between calls: `auto` copies back only the pages a
    /// call changed (Linux's PAGEMAP_SCAN, 6.7+) when the fresh-instance self-check at start
    /// passes with it; `off` resets the whole used part of every slot (slower, never relies on
    /// the scan). Either way every call starts from the module's image (docs/operating.md).
    #[arg(long, env = "ZUNDOKO_PAGEMAP_SCAN", value_enum, default_value_t = PagemapScanArg::Auto)]
    pub pagemap_scan: PagemapScanArg,
}

/// `--pagemap-scan`'s values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PagemapScanArg {
    Auto,
    Off,
}

impl SandboxArgs {
    pub fn sandbox_limits(&self) -> SandboxLimits {
        SandboxLimits {
            fuel: self.fuel,
            memory_bytes: self.memory_limit_mib << 20,
            // The defaults are within the ceilings whatever the flags say.
            max_fuel: self.max_fuel.max(self.fuel),
            max_memory_bytes: self.max_memory_mib.max(self.memory_limit_mib) << 20,
            pagemap_scan: match self.pagemap_scan {
                PagemapScanArg::Auto => crate::supply::sandbox::PagemapScan::Auto,
                PagemapScanArg::Off => crate::supply::sandbox::PagemapScan::Off,
            },
            ..SandboxLimits::default()
        }
    }

    /// The engine for a command run by hand (`check`, `test`, `simulate`, `push`): compiled
    /// modules kept in `cache_dir`, or in the user's cache directory, so the second run of an
    /// interpreter's module (seconds to compile) starts at once. No cache if neither works.
    pub fn cli_engine(&self, cache_dir: Option<&Path>) -> Result<SandboxEngine> {
        let engine = SandboxEngine::new(self.sandbox_limits())?;
        let dir = cache_dir.map(Path::to_path_buf).or_else(|| {
            let base = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))?;
            Some(base.join("zundoko-operator"))
        });
        match dir {
            Some(dir) => match engine.clone().with_compiled_cache(&dir) {
                Ok(cached) => Ok(cached),
                Err(error) if cache_dir.is_none() => {
                    tracing::debug!(%error, "no compiled-module cache");
                    Ok(engine)
                }
                Err(error) => Err(error),
            },
            None => Ok(engine),
        }
    }

    pub fn plan_limits(&self) -> PlanLimits {
        PlanLimits { max_actions: self.max_plan_actions, max_children: self.max_children, ..PlanLimits::default() }
    }
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The rules module (a wasm component), normally in a ConfigMap mounted as a directory.
    /// Watched: a new module there is checked and, if it passes, swapped in.
    #[arg(long, env = "ZUNDOKO_MODULE", required_unless_present_any = ["native_rules", "module_configmap", "module_oci"])]
    pub module: Option<PathBuf>,
    /// Or the module from an OCI registry: REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]. A tag is
    /// resolved to a digest at start, and that digest serves (the cache serves it if the
    /// registry is down).
    #[arg(long, env = "ZUNDOKO_MODULE_OCI", value_name = "REF")]
    pub module_oci: Option<crate::supply::oci::ModuleRef>,
    /// Resolve --module-oci's tag again this often (seconds) and swap in what it points at,
    /// checked as any new module (0: never; the digest resolved at start serves).
    #[arg(long, env = "ZUNDOKO_MODULE_OCI_POLL_SECS", default_value_t = 0)]
    pub module_oci_poll_secs: u64,
    /// Memory a module's compile may use, in MiB. Every module (an interpreter's: measured
    /// peaks 345 MiB for CPython's component, 452 MiB for SpiderMonkey's; a Rust one's a few
    /// MiB) compiles one at a time in a child process with this limit and
    /// --compile-timeout-secs, so a compile past it fails naming the limit instead of getting
    /// the operator OOM-killed; size the Pod's memory limit for it (deploy/ allows 768Mi).
    #[arg(long, env = "ZUNDOKO_MAX_COMPILE_MIB", default_value_t = 640)]
    pub max_compile_mib: usize,
    /// The longest one compile in the child process may take (seconds) before it is stopped.
    #[arg(long, env = "ZUNDOKO_COMPILE_TIMEOUT_SECS", default_value_t = 300)]
    pub compile_timeout_secs: u64,
    /// Also (or instead) watch the module in a ConfigMap through the API, as
    /// NAMESPACE/NAME[:KEY] (key default `rules.wasm`, in binaryData): swaps in about a second.
    #[arg(long, env = "ZUNDOKO_MODULE_CONFIGMAP", value_name = "NAMESPACE/NAME[:KEY]")]
    pub module_configmap: Option<ConfigMapRef>,
    /// Accept only the module with this sha256 (hex, optionally `sha256:`-prefixed).
    #[arg(long, env = "ZUNDOKO_MODULE_SHA256")]
    pub module_sha256: Option<String>,
    /// Start even without a usable module and wait for one (default: exit with the reason;
    /// a --module-oci registry that may give it later, down say, is always waited for).
    #[arg(long, env = "ZUNDOKO_WAIT_FOR_MODULE")]
    pub wait_for_module: bool,
    /// Quiet time after the module file changes before it is read (ms), so a file being
    /// written is read once, whole. (After a rename into place or a writer closing the file,
    /// 1 ms is enough.)
    #[arg(long, env = "ZUNDOKO_MODULE_SETTLE_MS", default_value_t = 10)]
    pub module_settle_ms: u64,
    /// Re-read the module file this often even without change notifications (ms).
    #[arg(long, env = "ZUNDOKO_MODULE_POLL_MS", default_value_t = 5000)]
    pub module_poll_ms: u64,
    /// Benchmarking only: use the shipped rules linked natively instead of a module, to
    /// measure what the sandbox costs (`classic` or `strict-ja`).
    #[arg(long, hide = true, value_parser = ["classic", "strict-ja"])]
    pub native_rules: Option<String>,
    /// Watch only this namespace (default: all namespaces).
    #[arg(long, env = "ZUNDOKO_NAMESPACE")]
    pub namespace: Option<String>,
    /// Namespaces whose ConfigMaps ZundokoRules may name as module sources, comma-separated
    /// (default: --operator-namespace, else zundoko-system). The operator watches those
    /// namespaces' ConfigMaps by metadata and reads the data of the ones a rule set names: grant
    /// it get, list and watch on configmaps there.
    #[arg(long, env = "ZUNDOKO_RULES_NAMESPACES", value_delimiter = ',')]
    pub rules_namespaces: Vec<String>,
    /// Threads running the operator's async work (watches, reconciles, API requests). One by
    /// default: the work is waiting on the API server, and one thread spends a sixth less CPU
    /// per word than two (measured at 1,000 Hikawas: no wake-ups handed between threads), about
    /// 0.3 ms, so one core still serves several times what a real API server takes; a Pod
    /// limited to one CPU gets one from tokio's default anyway. Guest calls that need more
    /// than a slice of fuel, interpreters' calls and compiles run on threads of their own.
    #[arg(long, env = "ZUNDOKO_WORKER_THREADS", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub worker_threads: u16,
    /// Hikawas reconciled at once.
    #[arg(long, env = "ZUNDOKO_CONCURRENCY", default_value_t = crate::controllers::hikawa::controller::Settings::default().concurrency)]
    pub concurrency: u16,
    /// First retry delay after a failure, in ms; doubled per failure in a row.
    #[arg(long, env = "ZUNDOKO_BACKOFF_BASE_MS", default_value_t = crate::controllers::hikawa::pace::PaceSettings::default().backoff_base.as_millis() as u64)]
    pub backoff_base_ms: u64,
    /// Longest retry delay, in ms.
    #[arg(long, env = "ZUNDOKO_BACKOFF_MAX_MS", default_value_t = crate::controllers::hikawa::pace::PaceSettings::default().backoff_max.as_millis() as u64)]
    pub backoff_max_ms: u64,
    /// Shortest requeue after a plan that says no word, in ms: a module asking to be called
    /// back at once, again and again, is called at most this often.
    #[arg(long, env = "ZUNDOKO_REQUEUE_FLOOR_MS", default_value_t = crate::controllers::hikawa::pace::PaceSettings::default().requeue_floor.as_millis() as u64)]
    pub requeue_floor_ms: u64,
    /// Decisions that say no word a Hikawa may make in a burst; past it, it is slowed to
    /// --idle-decisions-per-sec and a Warning Event says so.
    #[arg(long, env = "ZUNDOKO_IDLE_BURST", default_value_t = crate::controllers::hikawa::pace::PaceSettings::default().idle_burst)]
    pub idle_burst: u32,
    /// Decisions that say no word a Hikawa may make per second after the burst.
    #[arg(long, env = "ZUNDOKO_IDLE_DECISIONS_PER_SEC", default_value_t = crate::controllers::hikawa::pace::PaceSettings::default().idle_per_sec)]
    pub idle_decisions_per_sec: f64,
    /// Longest wait, in ms, for the caches to show the operator's own last writes for a
    /// Hikawa before it decides anyway.
    #[arg(long, env = "ZUNDOKO_CACHE_WAIT_MS", default_value_t = crate::controllers::hikawa::pace::PaceSettings::default().cache_wait.as_millis() as u64)]
    pub cache_wait_ms: u64,
    /// For tests and replays, never in production: every Hikawa draws its decisions' entropy
    /// from a generator seeded with this, so its n-th decision gets the entropy the n-th
    /// decision of `simulate --seed N` gets, and a module sings the same song in both (and
    /// every Hikawa the same song).
    #[arg(long, env = "ZUNDOKO_ENTROPY_SEED")]
    pub entropy_seed: Option<u64>,
    /// Serve /metrics, /healthz and /readyz here (`off` to serve nothing).
    #[arg(long, env = "ZUNDOKO_HTTP_ADDR", default_value = "0.0.0.0:8080")]
    pub http_addr: String,
    /// Share the Hikawas with the other replicas: each decides only for the shards whose
    /// coordination.k8s.io Lease it holds (its fair share), so no Hikawa has two deciders.
    #[arg(long, env = "ZUNDOKO_LEADER_ELECTION")]
    pub leader_election: bool,
    /// The Leases' name prefix (in --operator-namespace): `<name>-shard-NN`, one per shard,
    /// and `<name>-members`, where the replicas say they are alive.
    #[arg(long, env = "ZUNDOKO_LEASE_NAME", default_value = "zundoko-operator")]
    pub lease_name: String,
    /// Shards the Hikawas fall into (by a hash of their uid), 1 to 256. One replica at most
    /// per shard works; with 1, one replica decides for all and the others stand by.
    #[arg(long, env = "ZUNDOKO_SHARDS", default_value_t = 32)]
    pub shards: u16,
    /// Seconds a lease lasts without renewal: how long a crashed leader holds up the others
    /// (another replica takes it once the Lease has not changed for this long, as it observes
    /// it on its own clock).
    #[arg(long, env = "ZUNDOKO_LEASE_DURATION_SECS", default_value_t = 15.0)]
    pub lease_duration_secs: f64,
    /// A leader that has not renewed its Lease for this long stops every write and stands by,
    /// before anyone else may take over. Shorter than --lease-duration-secs.
    #[arg(long, env = "ZUNDOKO_LEASE_RENEW_DEADLINE_SECS", default_value_t = 10.0)]
    pub lease_renew_deadline_secs: f64,
    /// Pause between two tries to acquire or renew the Lease.
    #[arg(long, env = "ZUNDOKO_LEASE_RETRY_PERIOD_SECS", default_value_t = 2.0)]
    pub lease_retry_period_secs: f64,
    /// The longest any API request may take, retries included (kube retries 429 and 503,
    /// honouring Retry-After). Shorter than --lease-renew-deadline-secs: a leader starts a
    /// write only if it ends before its renew deadline.
    #[arg(long, env = "ZUNDOKO_API_TIMEOUT_SECS", default_value_t = 5.0)]
    pub api_timeout_secs: f64,
    /// The operator's own namespace (the Lease, swap Events); in a Pod, from the downward API.
    #[arg(long, env = "POD_NAMESPACE")]
    pub operator_namespace: Option<String>,
    /// The operator's Pod name (the Lease holder, the Events' reporting instance, the
    /// object of swap Events); in a Pod, from the downward API. Default: the host name.
    #[arg(long, env = "POD_NAME")]
    pub pod_name: Option<String>,
    #[command(flatten)]
    pub sandbox: SandboxArgs,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

#[derive(Args, Debug)]
pub struct SimulateArgs {
    /// The rules module (a wasm component).
    #[arg(long, env = "ZUNDOKO_MODULE")]
    pub module: PathBuf,
    /// A Hikawa manifest (YAML or JSON).
    #[arg(long, env = "ZUNDOKO_HIKAWA")]
    pub hikawa: PathBuf,
    /// Seed for the entropy of each decision; a random one (printed) if not given.
    #[arg(long, env = "ZUNDOKO_SEED")]
    pub seed: Option<u64>,
    /// Stop after this many decisions even without a Kiyoshi.
    #[arg(long, env = "ZUNDOKO_MAX_DECISIONS", default_value_t = 10_000)]
    pub max_decisions: usize,
    /// Keep compiled modules here (default: the user's cache directory, ~/.cache/zundoko-operator).
    #[arg(long, env = "ZUNDOKO_CACHE_DIR", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    #[command(flatten)]
    pub sandbox: SandboxArgs,
}

#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// The Hikawa, NAMESPACE/NAME (or NAME in `default`).
    #[arg(value_name = "NAMESPACE/HIKAWA")]
    pub hikawa: String,
    /// Replay word N (1 is the first word; the Kiyoshi is the word after the last Zundoko).
    #[arg(long, value_name = "N", conflicts_with = "song")]
    pub word: Option<u32>,
    /// Replay every word, and name the first that does not replay to what was written.
    #[arg(long)]
    pub song: bool,
    /// Output: `text` for people, `json` for tools.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub output: ExplainFormat,
    /// Replay with this local copy of the module (its digest must be the recorded one), when
    /// the module's source no longer serves it or names no source in the cluster (the
    /// operator's default module comes from its own flags).
    #[arg(long, value_name = "FILE")]
    pub module: Option<PathBuf>,
    /// Where the operator's shard Leases are (its --operator-namespace), to say which replica
    /// holds the Hikawa's shard.
    #[arg(long, env = "ZUNDOKO_OPERATOR_NAMESPACE", default_value = "zundoko-system")]
    pub operator_namespace: String,
    /// The operator's --lease-name.
    #[arg(long, default_value = "zundoko-operator")]
    pub lease_name: String,
    /// The operator's --shards, when no child's shard label says it.
    #[arg(long, default_value_t = 32)]
    pub shards: u16,
    /// The operator's --rules-namespaces: the pull secret a ZundokoRules names is read (with
    /// your own credentials) only from these, as the operator reads it (default:
    /// --operator-namespace).
    #[arg(long, env = "ZUNDOKO_RULES_NAMESPACES", value_delimiter = ',')]
    pub rules_namespaces: Vec<String>,
    #[command(flatten)]
    pub sandbox: SandboxArgs,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// The namespaces rules are read from: `given` (`--rules-namespaces`), else the operator's own
/// namespace, else zundoko-system; as `run` reads them and `explain` follows them.
pub fn rules_namespaces(given: &[String], operator_namespace: Option<&str>) -> Vec<String> {
    match given {
        given if !given.is_empty() => given.iter().map(|ns| ns.trim().to_string()).filter(|ns| !ns.is_empty()).collect(),
        _ => vec![operator_namespace.unwrap_or(crate::controllers::hikawa::controller::DEFAULT_RULES_NAMESPACE).to_string()],
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExplainFormat {
    Text,
    Json,
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The rules module (a wasm component).
    #[arg(long, env = "ZUNDOKO_MODULE", required_unless_present = "reference", conflicts_with = "reference")]
    pub module: Option<PathBuf>,
    /// Or a module in an OCI registry, REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]: pulled,
    /// checked against its digest (and signature, with --trusted-keys), then checked as a file is.
    #[arg(value_name = "REF")]
    pub reference: Option<crate::supply::oci::ModuleRef>,
    #[command(flatten)]
    pub sandbox: SandboxArgs,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

#[derive(Args, Debug)]
pub struct PushArgs {
    /// The module to publish (a wasm component): checked as `check` does before anything is sent.
    #[arg(long, env = "ZUNDOKO_MODULE")]
    pub module: PathBuf,
    /// Where: REGISTRY/REPOSITORY[:TAG] (without a tag, only the digest names it).
    #[arg(value_name = "REF")]
    pub reference: crate::supply::oci::ModuleRef,
    /// Sign it with this private key (PEM ECDSA P-256, as `keygen` writes): a cosign-compatible
    /// signature stored next to it (tag sha256-<digest>.sig).
    #[arg(long, value_name = "KEY")]
    pub sign: Option<PathBuf>,
    #[command(flatten)]
    pub sandbox: SandboxArgs,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

#[derive(Args, Debug)]
pub struct KeygenArgs {
    /// Write OUT.key and OUT.pub (refuses to overwrite either).
    #[arg(long, value_name = "OUT")]
    pub out: PathBuf,
}

#[derive(Args, Debug)]
pub struct GrantReadsArgs {
    /// The tenant's namespace (where its rule sets, their pull secrets and ConfigMaps are).
    #[arg(long, short = 'n', value_name = "NAMESPACE")]
    pub namespace: String,
    /// A pull secret a rule set names (`spec.source.oci.pullSecret`); repeat for more.
    #[arg(long = "secret", value_name = "NAME")]
    pub secrets: Vec<String>,
    /// A ConfigMap a rule set names (`spec.source.configMap`); repeat for more.
    #[arg(long = "configmap", value_name = "NAME")]
    pub configmaps: Vec<String>,
    /// The operator's namespace and service account (deploy/'s by default).
    #[arg(long, default_value = "zundoko-system", value_name = "NAMESPACE")]
    pub operator_namespace: String,
    #[arg(long, default_value = "zundoko-operator", value_name = "NAME")]
    pub operator_account: String,
}

#[derive(Args, Debug)]
pub struct SignArgs {
    /// The private key (PEM ECDSA P-256, as `keygen` writes OUT.key).
    #[arg(long, value_name = "KEY")]
    pub key: PathBuf,
    /// The module file to sign; its signature goes to MODULE.sig (replacing an old one).
    pub module: PathBuf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    /// One line per check, PASS/FAIL, for a person.
    Text,
    /// One JSON object, for CI.
    Json,
}

#[derive(Args, Debug)]
pub struct TestArgs {
    /// The rules module (a wasm component).
    #[arg(long, env = "ZUNDOKO_MODULE")]
    pub module: PathBuf,
    /// Songs to play, one per seed (0, 1, ...); the same seeds replay the same songs.
    #[arg(long, env = "ZUNDOKO_TEST_SEEDS", default_value_t = 200)]
    pub seeds: u64,
    /// How to print the report.
    #[arg(long, env = "ZUNDOKO_TEST_FORMAT", value_enum, default_value = "text")]
    pub format: ReportFormat,
    /// Keep compiled modules here (default: the user's cache directory, ~/.cache/zundoko-operator).
    #[arg(long, env = "ZUNDOKO_CACHE_DIR", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    #[command(flatten)]
    pub sandbox: SandboxArgs,
}
