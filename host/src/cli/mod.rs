//! The command line. Every flag has an environment-variable twin. `simulate` and `test`
//! (the conformance suite) run a module offline.

pub mod conformance;
pub mod simulate;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};

use crate::supply::sandbox::{RulesModule, SandboxEngine, SandboxLimits, WORLD};
use crate::supply::sources::configmap::ConfigMapRef;
use crate::supply::sources::file::FileSource;
use crate::process::telemetry::LogFormat;
use crate::supply::contract::plan_check::PlanLimits;

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
    #[arg(long = "log", env = "RUST_LOG", default_value = "info", global = true)]
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
    /// (Internal: what `run` starts to compile a big module in a child process.) Compile the
    /// module on stdin into DIR/compiled/, within --max-compile-mib of memory.
    #[command(hide = true)]
    CompileModule(CompileModuleArgs),
}

#[derive(Args, Debug)]
pub struct CompileModuleArgs {
    #[arg(long, value_name = "DIR")]
    pub cache_dir: PathBuf,
    #[arg(long)]
    pub max_compile_mib: usize,
    /// The engine's limits, as the operator has them (the code must fit its engine).
    #[arg(long)]
    pub limits_json: String,
}

/// `compile-module`: the compiler process's whole life.
pub fn compile_module(args: &CompileModuleArgs) -> Result<()> {
    use std::io::Read as _;
    crate::supply::sandbox::compiler_process::limit_own_memory(args.max_compile_mib << 20)
        .context("cannot set the compiler process's memory limit")?;
    let limits: SandboxLimits = serde_json::from_str(&args.limits_json).context("--limits-json")?;
    let mut bytes = Vec::new();
    std::io::stdin().read_to_end(&mut bytes).context("reading the module from stdin")?;
    let engine = SandboxEngine::new(limits)?.with_compiled_cache(&args.cache_dir)?;
    let cache = engine.compiled_cache().expect("just set");
    cache.compile_into(engine.engine(), &bytes).map_err(|e| anyhow::anyhow!("{e:#}"))
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
    /// Trusted public keys (PEM, as cosign.pub): a file, or a directory of *.pub / *.pem files
    /// (a mounted Secret). With any, a module from a registry serves only if a cosign-style
    /// signature by one of them verifies.
    #[arg(long = "trusted-keys", env = "ZUNDOKO_TRUSTED_KEYS", value_delimiter = ',', value_name = "PATH")]
    pub trusted_keys: Vec<PathBuf>,
    /// The longest one try of a pull may take, in seconds (every request in it).
    #[arg(long, env = "ZUNDOKO_REGISTRY_TIMEOUT_SECS", default_value_t = crate::supply::oci::RegistrySettings::default().timeout.as_secs_f64())]
    pub registry_timeout_secs: f64,
    /// The largest module accepted from a registry, in MiB (refused from the manifest, before
    /// its bytes are read).
    #[arg(long, env = "ZUNDOKO_MAX_MODULE_MIB", default_value_t = crate::supply::oci::RegistrySettings::default().max_module_bytes >> 20)]
    pub max_module_mib: u64,
    /// Pulls from registries at once.
    #[arg(long, env = "ZUNDOKO_CONCURRENT_PULLS", default_value_t = crate::supply::oci::RegistrySettings::default().concurrent_pulls)]
    pub concurrent_pulls: usize,
    /// Certificate authorities (PEM files) trusted for registries beside the system's: a
    /// registry whose certificate an internal CA issued.
    #[arg(long = "registry-ca", env = "ZUNDOKO_REGISTRY_CA", value_delimiter = ',', value_name = "PEM")]
    pub registry_ca: Vec<PathBuf>,
    /// Registry credentials: a docker config.json (`{"auths": {...}}`, a pull secret's
    /// .dockerconfigjson), for --module-oci, push and check.
    #[arg(long, env = "ZUNDOKO_REGISTRY_AUTH", value_name = "FILE")]
    pub registry_auth: Option<PathBuf>,
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
        let mut extra_ca_pem = Vec::new();
        for path in &self.registry_ca {
            let pem = std::fs::read(path).with_context(|| format!("cannot read --registry-ca {}", path.display()))?;
            anyhow::ensure!(pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----"), "--registry-ca {} holds no PEM certificate", path.display());
            extra_ca_pem.push(pem);
        }
        Ok(crate::supply::oci::RegistrySettings {
            insecure: self.insecure_registries.iter().map(|r| r.trim().to_string()).filter(|r| !r.is_empty()).collect(),
            timeout,
            max_module_bytes: self.max_module_mib << 20,
            concurrent_pulls: self.concurrent_pulls.max(1),
            cache_dir: self.cache_dir.clone(),
            trusted_keys,
            extra_ca_pem,
            ..crate::supply::oci::RegistrySettings::default()
        })
    }

    pub fn auth(&self, reference: &crate::supply::oci::ModuleRef) -> Result<oci_client::secrets::RegistryAuth> {
        match &self.registry_auth {
            None => Ok(oci_client::secrets::RegistryAuth::Anonymous),
            Some(path) => {
                let json = std::fs::read(path).with_context(|| format!("cannot read registry credentials {}", path.display()))?;
                crate::supply::oci::auth::from_docker_config(&json, &reference.registry)
                    .map_err(|e| anyhow::anyhow!("registry credentials {}: {e}", path.display()))
            }
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
}

impl SandboxArgs {
    pub fn sandbox_limits(&self) -> SandboxLimits {
        SandboxLimits {
            fuel: self.fuel,
            memory_bytes: self.memory_limit_mib << 20,
            // The defaults are within the ceilings whatever the flags say.
            max_fuel: self.max_fuel.max(self.fuel),
            max_memory_bytes: self.max_memory_mib.max(self.memory_limit_mib) << 20,
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
    /// Memory a module's compile may use, in MiB. Modules over 1 MiB (an interpreter's:
    /// measured peaks 345 MiB for CPython's component, 452 MiB for SpiderMonkey's) compile one
    /// at a time in a child process with this limit, so a compile past it fails naming the
    /// limit instead of getting the operator OOM-killed; size the Pod's memory limit for it
    /// (deploy/ allows 768Mi). With Rust modules only, nothing compiles there.
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
    /// Start even without a usable module and wait for one (default: exit with the reason).
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

/// Read and load a module file, naming the file in any error.
pub fn load_module(engine: &SandboxEngine, path: &Path) -> Result<RulesModule> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read module {}", path.display()))?;
    engine.load(&bytes).map_err(|e| rejected(path, e))
}

/// The one wording of a refused module: the file, the reason, the detail.
fn rejected(path: &Path, error: crate::supply::sandbox::GuestError) -> anyhow::Error {
    let detail = crate::text::printable(&error.to_string(), 1024);
    anyhow::anyhow!("module {} rejected ({}): {detail}", path.display(), error.reason())
}

pub fn simulate(args: &SimulateArgs, out: &mut dyn std::io::Write) -> Result<crate::cli::simulate::Song> {
    let engine = args.sandbox.cli_engine(args.cache_dir.as_deref())?;
    let module = load_module(&engine, &args.module)?;
    let text = std::fs::read_to_string(&args.hikawa)
        .with_context(|| format!("cannot read Hikawa manifest {}", args.hikawa.display()))?;
    let hikawa = crate::crd::parse_hikawa(&args.hikawa.display().to_string(), &text)?;
    let seed = args.seed.unwrap_or_else(rand::random);
    crate::cli::simulate::simulate(&module, &hikawa, seed, &args.sandbox.plan_limits(), args.max_decisions, out)
}

/// `test`: run the conformance suite and print its report; an error when a check failed.
pub fn test(args: &TestArgs, out: &mut dyn std::io::Write) -> Result<()> {
    anyhow::ensure!(args.seeds > 0, "--seeds must be at least 1");
    let engine = args.sandbox.cli_engine(args.cache_dir.as_deref())?;
    let bytes = std::fs::read(&args.module).with_context(|| format!("cannot read module {}", args.module.display()))?;
    let report = crate::cli::conformance::run(&engine, &bytes, &args.module.display().to_string(), args.seeds, &args.sandbox.plan_limits());
    match args.format {
        ReportFormat::Text => report.write_text(out)?,
        ReportFormat::Json => writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?,
    }
    anyhow::ensure!(report.passed, "module {} failed {} conformance checks", report.module, report.failures());
    Ok(())
}

/// A module from a registry, pulled and checked against its digest and signature: its bytes,
/// and the lines that say where it came from.
async fn pull(reference: &crate::supply::oci::ModuleRef, registry: &RegistryArgs) -> Result<(Vec<u8>, Vec<String>)> {
    let settings = registry.settings()?;
    let auth = registry.auth(reference)?;
    let client = crate::supply::oci::Registry::new(settings).map_err(anyhow::Error::msg)?;
    let fail = |e: crate::supply::oci::PullError| anyhow::anyhow!("{reference} refused ({}): {e}", e.reason());
    let digest = client.resolve(reference, &auth).await.map_err(fail)?;
    let fetched = client.fetch(reference, &digest, &auth, &[]).await.map_err(fail)?;
    let mut lines = vec![format!("reference:   {reference}"), format!("pinned:      {}", fetched.pinned)];
    // With trusted keys a module is fetched only if one verified: no signer means no keys.
    lines.push(match &fetched.signed_by {
        Some(signer) => format!("signed by:   {signer}"),
        None => "signature:   not checked (no --trusted-keys)".into(),
    });
    if fetched.from_cache {
        lines.push("from:        the cache (--cache-dir)".into());
    }
    Ok((fetched.bytes, lines))
}

pub async fn check(args: &CheckArgs, out: &mut dyn std::io::Write) -> Result<()> {
    let engine = args.sandbox.cli_engine(args.registry.cache_dir.as_deref())?;
    let (name, module, lines) = match (&args.module, &args.reference) {
        (Some(path), _) => (path.display().to_string(), load_module(&engine, path)?, Vec::new()),
        (None, Some(reference)) => {
            let (bytes, lines) = pull(reference, &args.registry).await?;
            let module = engine.load(&bytes).map_err(|e| rejected(Path::new(&reference.to_string()), e))?;
            (reference.to_string(), module, lines)
        }
        (None, None) => anyhow::bail!("give a module: --module FILE or a registry REF"),
    };
    let id = module.identity();
    // Within bounds since `load` checked them; escaped all the same, as all module text is.
    let safe = |s: &str| crate::text::printable(s, 512);
    writeln!(out, "module:      {}", safe(&name))?;
    for line in lines {
        writeln!(out, "{}", safe(&line))?;
    }
    writeln!(out, "name:        {}", safe(&id.info.name))?;
    writeln!(out, "version:     {}", safe(&id.info.version))?;
    writeln!(out, "description: {}", safe(&id.info.description))?;
    writeln!(out, "world:       {WORLD}")?;
    writeln!(out, "digest:      {}", id.digest)?;
    writeln!(out, "size:        {} bytes", id.size)?;
    let limits = module.limits();
    writeln!(out, "budget:      {} fuel, {} MiB of memory per call", limits.fuel, limits.memory_bytes >> 20)?;
    let imports = if module.uses_wasi() { "the log, and WASI (served by the virtual WASI: no capabilities)" } else { "the log only" };
    writeln!(out, "imports:     {imports}")?;
    let decision = crate::supply::contract::rules::smoke_test(&module, &args.sandbox.plan_limits()).map_err(|e| rejected(Path::new(&name), e))?;
    writeln!(
        out,
        "smoke test:  ok ({} for a new Hikawa, {} fuel, {:?})",
        safe(&decision.outcome.as_ref().expect("smoke test passed").to_string()),
        decision.fuel_used.unwrap_or(0),
        decision.elapsed
    )?;
    Ok(())
}

/// `push`: check the module as `check` does, then publish it (and its signature).
pub async fn push(args: &PushArgs, out: &mut dyn std::io::Write) -> Result<()> {
    let engine = SandboxEngine::new(args.sandbox.sandbox_limits())?;
    let bytes = std::fs::read(&args.module).with_context(|| format!("cannot read module {}", args.module.display()))?;
    let module = engine.load(&bytes).map_err(|e| rejected(&args.module, e))?;
    crate::supply::contract::rules::smoke_test(&module, &args.sandbox.plan_limits()).map_err(|e| rejected(&args.module, e))?;
    let sign = match &args.sign {
        Some(path) => {
            let pem = std::fs::read_to_string(path).with_context(|| format!("cannot read signing key {}", path.display()))?;
            Some(crate::supply::oci::SignKey::from_pem(&path.display().to_string(), &pem).map_err(anyhow::Error::msg)?)
        }
        None => None,
    };
    let settings = args.registry.settings()?;
    let auth = args.registry.auth(&args.reference)?;
    let registry = crate::supply::oci::Registry::new(settings).map_err(anyhow::Error::msg)?;
    let info = &module.identity().info;
    let digest = registry
        .push(&args.reference, &bytes, &info.name, &info.version, sign.as_ref(), &auth)
        .await
        .map_err(|e| anyhow::anyhow!("cannot push to {} ({}): {e}", args.reference, e.reason()))?;
    let safe = |s: &str| crate::text::printable(s, 512);
    writeln!(out, "pushed:      {} {} ({} bytes, module {})", safe(&info.name), safe(&info.version), bytes.len(), module.identity().digest)?;
    writeln!(out, "reference:   {}", args.reference)?;
    writeln!(out, "pinned:      {}", args.reference.pinned(&digest))?;
    if let Some(key) = &sign {
        writeln!(out, "signed:      {}", key.trusted(&args.sign.as_ref().expect("a key was given").display().to_string()).name)?;
    }
    Ok(())
}

/// `keygen`: a new signing key pair, never overwriting one.
pub fn keygen(args: &KeygenArgs, out: &mut dyn std::io::Write) -> Result<()> {
    let key = crate::supply::oci::SignKey::generate();
    let (private, public) = (args.out.with_extension("key"), args.out.with_extension("pub"));
    for path in [&private, &public] {
        anyhow::ensure!(!path.exists(), "{} exists: not overwriting a key", path.display());
    }
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&private).with_context(|| format!("cannot write {}", private.display()))?;
    file.write_all(key.private_pem().as_bytes())?;
    std::fs::write(&public, key.public_pem()).with_context(|| format!("cannot write {}", public.display()))?;
    writeln!(out, "private key: {} (sign with: zundoko-operator push --sign {} ...)", private.display(), private.display())?;
    writeln!(out, "public key:  {} (trust it: --trusted-keys, or a Secret mounted there)", public.display())?;
    writeln!(out, "fingerprint: {}", key.trusted("key").fingerprint())?;
    Ok(())
}

impl RunArgs {
    pub fn operator_config(&self) -> Result<crate::operator::OperatorConfig> {
        let defaults = crate::controllers::hikawa::controller::Settings::default();
        let instance = self.pod_name.clone().unwrap_or(defaults.instance.clone());
        let controller = crate::controllers::hikawa::controller::Settings {
            namespace: self.namespace.clone(),
            concurrency: self.concurrency,
            plan_limits: self.sandbox.plan_limits(),
            pace: crate::controllers::hikawa::pace::PaceSettings {
                backoff_base: Duration::from_millis(self.backoff_base_ms),
                backoff_max: Duration::from_millis(self.backoff_max_ms),
                requeue_floor: Duration::from_millis(self.requeue_floor_ms),
                idle_burst: self.idle_burst.max(1),
                idle_per_sec: self.idle_decisions_per_sec,
                cache_wait: Duration::from_millis(self.cache_wait_ms),
            },
            instance: instance.clone(),
            rules_namespaces: match &self.rules_namespaces {
                given if !given.is_empty() => given.iter().map(|ns| ns.trim().to_string()).filter(|ns| !ns.is_empty()).collect(),
                _ => vec![self.operator_namespace.clone().unwrap_or_else(|| crate::controllers::hikawa::controller::DEFAULT_RULES_NAMESPACE.into())],
            },
        };
        let http_addr = match self.http_addr.as_str() {
            "off" | "" => None,
            addr => Some(addr.parse().with_context(|| format!("--http-addr {addr} is not an address like 0.0.0.0:8080"))?),
        };
        let secs = |flag: &str, value: f64| -> Result<Duration> {
            Duration::try_from_secs_f64(value)
                .ok()
                .filter(|d| !d.is_zero() && value <= 86_400.0)
                .with_context(|| format!("{flag} {value} is not a number of seconds between 0 and 86400"))
        };
        let durations = crate::process::leader::Durations {
            lease: secs("--lease-duration-secs", self.lease_duration_secs)?,
            renew_deadline: secs("--lease-renew-deadline-secs", self.lease_renew_deadline_secs)?,
            retry: secs("--lease-retry-period-secs", self.lease_retry_period_secs)?,
        };
        let api_timeout = secs("--api-timeout-secs", self.api_timeout_secs)?;
        if self.leader_election {
            durations.validate().map_err(|why| anyhow::anyhow!("leader election: {why}"))?;
            anyhow::ensure!(
                api_timeout < durations.renew_deadline,
                "--api-timeout-secs ({:?}) must be shorter than --lease-renew-deadline-secs ({:?}): a write must be able to end before the deadline",
                api_timeout,
                durations.renew_deadline
            );
            // Writes start only while they would end before the deadline: with a renewal every
            // retry period, that window must outlast the pause between renewals.
            anyhow::ensure!(
                api_timeout + durations.retry < durations.renew_deadline,
                "--api-timeout-secs ({:?}) plus --lease-retry-period-secs ({:?}) must be shorter than --lease-renew-deadline-secs ({:?}): otherwise writes pause between renewals",
                api_timeout,
                durations.retry,
                durations.renew_deadline
            );
        }
        anyhow::ensure!(
            (1..=crate::process::leader::assign::MAX_SHARDS).contains(&self.shards),
            "--shards {} is not between 1 and {}",
            self.shards,
            crate::process::leader::assign::MAX_SHARDS
        );
        let leader = self.leader_election.then(|| crate::process::leader::ShardSettings {
            namespace: self.operator_namespace.clone().unwrap_or_else(|| "default".into()),
            lease_prefix: self.lease_name.clone(),
            identity: instance,
            durations,
            count: self.shards,
        });
        let modules = crate::operator::ModuleSources {
            file: self.module.clone().map(|path| FileSource {
                path,
                settle: Duration::from_millis(self.module_settle_ms),
                poll: Duration::from_millis(self.module_poll_ms.max(1)),
            }),
            configmap: self.module_configmap.clone(),
            oci: self.module_oci.clone().map(|reference| crate::supply::sources::oci::OciSource {
                reference,
                auth_file: self.registry.registry_auth.clone(),
                poll: (self.module_oci_poll_secs > 0).then(|| Duration::from_secs(self.module_oci_poll_secs)),
            }),
            pin: self.module_sha256.clone(),
            wait: self.wait_for_module,
            native: self.native_rules.as_deref().map(|name| match name {
                "strict-ja" => zundoko_rules::strict_japanese(),
                _ => zundoko_rules::classic(),
            }),
        };
        Ok(crate::operator::OperatorConfig {
            controller,
            sandbox: self.sandbox.sandbox_limits(),
            compiler: Some(crate::supply::sandbox::compiler_process::CompilerProcess {
                exe: std::env::current_exe().context("cannot find the operator's own binary (to compile big modules in a child)")?,
                max_memory_bytes: self.max_compile_mib << 20,
                timeout: Duration::from_secs(self.compile_timeout_secs),
            }),
            modules,
            registry: self.registry.settings()?,
            http_addr,
            leader,
            shards: self.shards,
            api_timeout,
            namespace: self.operator_namespace.clone(),
            pod_name: self.pod_name.clone(),
        })
    }
}

/// `run`: load and check the first module, connect, and reconcile until SIGTERM or Ctrl-C.
pub async fn run(args: &RunArgs) -> Result<()> {
    let config = args.operator_config()?;
    let mut kube_config = kube::Config::infer()
        .await
        .context("cannot connect to Kubernetes (no usable kubeconfig or in-cluster service account)")?;
    // Name ourselves, and this replica, in the API server's audit log (and in the tests'
    // request log). The field manager stays `zundoko-operator` (the part before the `/`).
    let instance: String = config.controller.instance.chars().filter(|c| c.is_ascii_graphic()).take(253).collect();
    let agent = format!("zundoko-operator/{} ({instance})", env!("CARGO_PKG_VERSION"));
    kube_config.headers.push((http::header::USER_AGENT, http::HeaderValue::from_str(&agent).context("User-Agent")?));
    let client = kube::Client::try_from(kube_config).context("cannot build the Kubernetes client")?;
    let concurrency = config.controller.concurrency;
    let running = crate::operator::start(client, config, shutdown_signal()).await?;
    // What it runs on, as main built it (--worker-threads). Only once started: a start that
    // fails ends with its one error line.
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        worker_threads = tokio::runtime::Handle::current().metrics().num_workers(),
        concurrency,
        "started"
    );
    running.task.await.context("the operator task failed")?
}

/// Resolves on SIGTERM (what Kubernetes sends) or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! { _ = ctrl_c => {}, _ = term.recv() => {} }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    tracing::info!("shutting down: finishing the reconciles in flight");
}
