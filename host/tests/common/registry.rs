//! A real OCI registry for the tests: Debian's `docker-registry` (the CNCF distribution
//! registry) on a free loopback port, with htpasswd authentication when asked. Without the
//! binary the tests that need it say so loudly and pass; with CI=true they fail instead.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use oci_client::secrets::RegistryAuth;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use zundoko_operator::supply::oci::{ModuleRef, Registry, RegistrySettings, SignKey};

pub const USER: &str = "zundoko";
pub const PASSWORD: &str = "s3cret-pass";

/// Base64, as `docker login` writes `user:password` in config.json and a Secret carries it.
pub fn base64(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

pub struct TestRegistry {
    child: Option<Child>,
    pub addr: String,
    pub dir: PathBuf,
    config: PathBuf,
    pub authenticated: bool,
    pub tls: bool,
}

/// The registry binary, or `None` after saying why the test cannot run (a failure in CI).
fn binary() -> Option<&'static str> {
    let found = Command::new("docker-registry").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    if found {
        return Some("docker-registry");
    }
    let why = "docker-registry is not installed (apt-get install docker-registry apache2-utils): this registry test did not run";
    super::ci::cannot_run(why);
    None
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl TestRegistry {
    /// A registry on a free port; with `auth`, only `USER`/`PASSWORD` may pull or push.
    pub fn start(auth: bool) -> Option<TestRegistry> {
        Self::start_with(auth, false)
    }

    /// A registry over TLS, its certificate (for 127.0.0.1) issued by a CA of its own:
    /// `ca.pem` in its directory.
    pub fn start_tls() -> Option<TestRegistry> {
        Self::start_with(false, true)
    }

    fn start_with(auth: bool, tls: bool) -> Option<TestRegistry> {
        binary()?;
        let dir = std::env::temp_dir().join(format!("zundoko-registry-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(dir.join("data")).unwrap();
        let addr = format!("127.0.0.1:{}", free_port());
        let mut config = format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {addr}\n",
            dir.join("data").display()
        );
        if tls {
            let dir = dir.display().to_string();
            let openssl = |args: &[&str]| {
                let out = Command::new("openssl").args(args).current_dir(&dir).output().expect("openssl (a TLS registry)");
                assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
            };
            std::fs::write(format!("{dir}/leaf.ext"), "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n").unwrap();
            openssl(&["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=zundoko test CA"]);
            openssl(&["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "leaf.key", "-out", "leaf.csr", "-subj", "/CN=127.0.0.1"]);
            openssl(&["x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "leaf.pem", "-days", "2", "-extfile", "leaf.ext"]);
            config.push_str(&format!("  tls:\n    certificate: {dir}/leaf.pem\n    key: {dir}/leaf.key\n"));
        }
        if auth {
            let out = Command::new("htpasswd").args(["-Bbn", USER, PASSWORD]).output().expect("htpasswd (apache2-utils) for an authenticated registry");
            assert!(out.status.success(), "htpasswd failed");
            std::fs::write(dir.join("htpasswd"), out.stdout).unwrap();
            config.push_str(&format!("auth:\n  htpasswd:\n    realm: zundoko\n    path: {}\n", dir.join("htpasswd").display()));
        }
        let config_path = dir.join("config.yml");
        std::fs::write(&config_path, config).unwrap();
        let mut registry = TestRegistry { child: None, addr, dir, config: config_path, authenticated: auth, tls };
        registry.resume();
        Some(registry)
    }

    /// Start it (again, on the same port and storage).
    pub fn resume(&mut self) {
        let log = std::fs::File::create(self.dir.join("registry.log")).unwrap();
        let child = Command::new("docker-registry").arg("serve").arg(&self.config).stdout(log.try_clone().unwrap()).stderr(log).spawn().unwrap();
        self.child = Some(child);
        let started = Instant::now();
        while std::net::TcpStream::connect(&self.addr).is_err() {
            assert!(started.elapsed() < Duration::from_secs(20), "the registry did not listen on {} within 20 s", self.addr);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kill it: the registry is down (connections refused) until `resume`.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn reference(&self, repository_and_tag: &str) -> ModuleRef {
        format!("{}/{repository_and_tag}", self.addr).parse().unwrap()
    }

    pub fn auth(&self) -> RegistryAuth {
        if self.authenticated { RegistryAuth::Basic(USER.into(), PASSWORD.into()) } else { RegistryAuth::Anonymous }
    }

    /// What the operator's settings name for this registry: plain HTTP, short timeouts.
    pub fn settings(&self) -> RegistrySettings {
        if self.tls {
            let ca = std::fs::read(self.dir.join("ca.pem")).unwrap();
            return RegistrySettings { extra_ca_pem: vec![ca], timeout: Duration::from_secs(3), tries: 2, min_poll: Duration::from_secs(1), ..RegistrySettings::default() };
        }
        // Tests follow tags every second (--min-poll-secs 1).
        RegistrySettings { insecure: vec![self.addr.clone()], timeout: Duration::from_secs(3), tries: 2, min_poll: Duration::from_secs(1), ..RegistrySettings::default() }
    }

    /// Push a module (signed with `sign` if given): its manifest digest.
    pub async fn push(&self, repository_and_tag: &str, module: &[u8], sign: Option<&SignKey>) -> String {
        let registry = Registry::new(self.settings()).unwrap();
        registry.push(&self.reference(repository_and_tag), module, "test", "0", sign, &self.auth()).await.unwrap()
    }

    /// Push any bytes as a module layer, unchecked (push checks a module before sending it).
    pub async fn push_raw_module(&self, repository_and_tag: &str, bytes: &[u8]) -> String {
        let registry = Registry::new(self.settings()).unwrap();
        let client = oci_client::Client::new(oci_client::client::ClientConfig {
            protocol: oci_client::client::ClientProtocol::HttpsExcept(vec![self.addr.clone()]),
            ..Default::default()
        });
        drop(registry);
        let layer = oci_client::client::ImageLayer::new(bytes.to_vec(), "application/wasm".into(), None);
        let config = oci_client::client::Config::new(b"{}".to_vec(), "application/vnd.wasm.config.v0+json".into(), None);
        let reference = self.reference(repository_and_tag).to_oci();
        client.push(&reference, &[layer], config, &self.auth(), None).await.unwrap();
        client.fetch_manifest_digest(&reference, &self.auth()).await.unwrap()
    }

    /// Where the registry keeps a blob (to corrupt it: a registry that serves other bytes).
    pub fn blob_path(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap();
        self.dir.join("data/docker/registry/v2/blobs/sha256").join(&hex[..2]).join(hex).join("data")
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A listener that accepts connections, reads what is asked and never answers: a registry
/// behind a partition. It records each request line it read (the proof a pull was in flight)
/// and holds every connection until `release`, after which connections are refused.
pub struct SilentRegistry {
    pub addr: String,
    requests: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl SilentRegistry {
    pub async fn start() -> SilentRegistry {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = requests.clone();
        let task = tokio::spawn(async move {
            let mut held = tokio::task::JoinSet::new();
            while let Ok((mut socket, _)) = listener.accept().await {
                let recorded = recorded.clone();
                held.spawn(async move {
                    // The request's head (bounded), then nothing: the socket stays open, unanswered.
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 << 10 {
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let line = String::from_utf8_lossy(&head).lines().next().unwrap_or("").to_string();
                    recorded.lock().unwrap().push(line);
                    std::future::pending::<()>().await;
                    drop(socket);
                });
            }
        });
        SilentRegistry { addr, requests, task }
    }

    /// The request lines read so far (`GET /v2/... HTTP/1.1`).
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }

    /// Close every connection held and stop listening: a pull in flight ends at once.
    pub fn release(&self) {
        self.task.abort();
    }
}

impl Drop for SilentRegistry {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A TCP proxy in front of a registry that keeps every byte the client sent: what a request
/// carried (credentials included) can be shown to have been sent.
pub struct RecordingProxy {
    pub addr: String,
    sent: Arc<Mutex<Vec<u8>>>,
    task: tokio::task::JoinHandle<()>,
}

impl RecordingProxy {
    pub async fn start(upstream: &str) -> RecordingProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let sent = Arc::new(Mutex::new(Vec::new()));
        let (recorded, upstream) = (sent.clone(), upstream.to_string());
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (recorded, upstream) = (recorded.clone(), upstream.clone());
                tokio::spawn(async move {
                    let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else { return };
                    let (mut client_read, mut client_write) = client.into_split();
                    let (mut server_read, mut server_write) = server.into_split();
                    let up = async {
                        let mut buf = [0u8; 8192];
                        while let Ok(n) = client_read.read(&mut buf).await {
                            if n == 0 || server_write.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                            recorded.lock().unwrap().extend_from_slice(&buf[..n]);
                        }
                        let _ = server_write.shutdown().await;
                    };
                    let down = async {
                        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
                        let _ = client_write.shutdown().await;
                    };
                    tokio::join!(up, down);
                });
            }
        });
        RecordingProxy { addr, sent, task }
    }

    /// Whether some request carried `needle`.
    pub fn sent(&self, needle: &str) -> bool {
        let sent = self.sent.lock().unwrap();
        sent.windows(needle.len()).any(|w| w == needle.as_bytes())
    }
}

impl Drop for RecordingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
