//! The local API server as a process of its own, and the Hikawas a run sings, for the benchmarks
//! that run one (`scale`, `replica_scale`). The benchmark's binary, re-run as
//! `ZUNDOKO_BENCH_ROLE=apiserver`, is the server: a fresh process for every run, so each run
//! starts from the same state, heap included.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::PostParams;
use kube::{Api, Client};
use zundoko_apiserver::{ApiServer, ServerConfig};
use zundoko_operator::crd::{self, Hikawa, HikawaSpec};

/// Which part of the benchmark a process of its binary plays (`apiserver`, or the benchmark).
pub const ROLE: &str = "ZUNDOKO_BENCH_ROLE";
/// Where the Hikawas sing.
pub const NAMESPACE: &str = "default";
/// Hikawas created at once: the same in every run.
pub const CREATE_CONCURRENCY: usize = 16;
/// Where the server's process writes its kubeconfig (not `ZUNDOKO_BENCH_KUBECONFIG`, which
/// names a real API server for the scale benchmark to run against instead).
const KUBECONFIG: &str = "ZUNDOKO_BENCH_SERVER_KUBECONFIG";
/// Set: the server runs as kube-apiserver alone, without kube-controller-manager's controllers
/// (`ServerConfig::controller_manager`), as `make bench-real` may meet one.
const NO_CONTROLLER_MANAGER: &str = "ZUNDOKO_BENCH_SERVER_NO_CONTROLLER_MANAGER";

/// The server's side: started, writing its kubeconfig where the benchmark said, its address
/// printed on stdout for the benchmark to read. Serve until [`until_stdin_closes`].
pub async fn serve() -> ApiServer {
    let kubeconfig = PathBuf::from(std::env::var(KUBECONFIG).expect(KUBECONFIG));
    // Watch resume needs the events since the last bookmark (10 s): ~3 writes a word.
    let controller_manager = std::env::var_os(NO_CONTROLLER_MANAGER).is_none();
    let config = ServerConfig { history_size: 100_000, kubeconfig_out: Some(kubeconfig), controller_manager, ..ServerConfig::default() };
    let server = ApiServer::start(config).await.expect("the local API server starts");
    println!("{}", server.url());
    server
}

/// The server serves until the benchmark closes its stdin.
pub async fn until_stdin_closes() {
    let _ = tokio::task::spawn_blocking(|| std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new())).await;
}

/// The server's process, as the benchmark holds it.
pub struct ServerProcess {
    pub process: Child,
    pub pid: String,
    pub client: Client,
    pub kubeconfig: PathBuf,
}

/// The benchmark's side: the server's process started (`bench` names its kubeconfig file,
/// `env` is passed on), its address read, the CRDs created.
pub async fn start_server(bench: &str, env: &[(&str, String)]) -> ServerProcess {
    use std::io::BufRead as _;
    let kubeconfig = std::env::temp_dir().join(format!("zundoko-bench-{bench}-{}-{}.kubeconfig", std::process::id(), rand::random::<u32>()));
    let mut process = Command::new(std::env::current_exe().expect("the benchmark's path"))
        .env(ROLE, "apiserver")
        .env(KUBECONFIG, &kubeconfig)
        .envs(env.iter().map(|(name, value)| (name, value)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("starting the API server process");
    let mut url = String::new();
    std::io::BufReader::new(process.stdout.as_mut().unwrap()).read_line(&mut url).expect("the API server's address");
    let client = Client::try_from(kube::Config::new(url.trim().parse().expect("an address"))).unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for c in crd::all() {
        crds.create(&PostParams::default(), &c).await.expect("creating the CRDs");
    }
    let pid = process.id().to_string();
    ServerProcess { process, pid, client, kubeconfig }
}

/// The `i`th Hikawa of a run in `namespace`: a word as soon as it may.
pub fn hikawa(namespace: &str, i: usize) -> Hikawa {
    let mut h = Hikawa::new(&format!("bench-{i:05}"), HikawaSpec { interval_millis: 0, ..HikawaSpec::default() });
    h.metadata.namespace = Some(namespace.into());
    h
}

/// Create N Hikawas in `namespace`, `CREATE_CONCURRENCY` at once; `created` gets each as the
/// server returns it.
pub async fn create_hikawas(client: Client, namespace: String, n: usize, created: impl Fn(Hikawa)) {
    let api: Api<Hikawa> = Api::namespaced(client, &namespace);
    let mut creates = futures::stream::iter(0..n)
        .map(|i| {
            let (api, namespace) = (api.clone(), namespace.as_str());
            async move { api.create(&PostParams::default(), &hikawa(namespace, i)).await.expect("creating a Hikawa") }
        })
        .buffer_unordered(CREATE_CONCURRENCY);
    while let Some(h) = creates.next().await {
        created(h);
    }
}
