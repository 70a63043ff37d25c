//! `run`: the flags turned into the operator's configuration (`RunArgs::operator_config`), a
//! client built, and the operator started (`crate::operator`) until SIGTERM or Ctrl-C.

use std::time::Duration;

use anyhow::{Context, Result};

use crate::cli::args::{RunArgs, rules_namespaces};
use crate::supply::sources::file::FileSource;

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
            entropy_seed: self.entropy_seed,
            rules_namespaces: rules_namespaces(&self.rules_namespaces, self.operator_namespace.as_deref()),
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
    forbid_dumping()?;
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

/// The operator not dumpable (`PR_SET_DUMPABLE 0`): no core file of its memory, and its
/// `/proc/PID/` (environ, fd, mem, maps) is root's, closed to every other process of its UID,
/// a compiler process whose compile turned into code execution included (it could otherwise
/// open a memfd of compiled code before its seal, or read the environment).
fn forbid_dumping() -> Result<()> {
    // SAFETY: prctl with PR_SET_DUMPABLE and a plain integer argument.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error()).context("cannot make the operator not dumpable (PR_SET_DUMPABLE)");
    }
    Ok(())
}

/// Resolves on SIGTERM (what Kubernetes sends) or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        // Without a SIGTERM handler (the process may not be allowed one), the operator still
        // runs: SIGTERM then ends it at once, as it ends any process, and Ctrl-C stops it well.
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => tokio::select! { _ = ctrl_c => {}, _ = term.recv() => {} },
            Err(error) => {
                tracing::warn!(%error, "cannot handle SIGTERM: it will stop the operator without finishing the reconciles in flight");
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    tracing::info!("shutting down: finishing the reconciles in flight");
}
