//! A hostile registry of the tests' own (docs/threat-model.md, "A registry"): a small HTTP/1.1
//! server on 127.0.0.1 answering each request as a route says, with endless bodies, a tarpit,
//! redirects and whatever a test needs, recording every request it gets and how many bytes of
//! body it wrote to each connection. No mock of the client: the operator speaks to it over TCP
//! as to any registry.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// What every body of the hostile registry is made of: never to be printed.
pub const MARK: &[u8] = b"HOSTILE-BODY-";
/// What an internal origin answers: never to be read.
pub const SECRET: &str = "INTERNAL-SECRET-d41d8cd9";

#[derive(Clone)]
pub enum Answer {
    Fixed { status: u16, headers: Vec<(String, String)>, body: Vec<u8> },
    /// The status and headers, then the mark forever (no length, no end).
    Endless { status: u16, headers: Vec<(String, String)> },
    /// 200 (no length: until the connection closes), then one byte every 2 s.
    Tarpit,
}

pub fn fixed(status: u16, headers: &[(&str, &str)], body: &[u8]) -> Answer {
    Answer::Fixed { status, headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(), body: body.to_vec() }
}

pub fn endless(status: u16, headers: &[(&str, &str)]) -> Answer {
    Answer::Endless { status, headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect() }
}

/// Each connection's request line and the bytes of body written to it so far.
type Written = Arc<Mutex<Vec<(String, Arc<AtomicU64>)>>>;

/// An HTTP/1.1 server on 127.0.0.1 answering each request (one per connection) as `route`
/// says from its method and path, recording every request it gets.
pub struct Server {
    pub addr: String,
    hits: Arc<Mutex<Vec<String>>>,
    written: Written,
    /// Connections accepted, a request sent on them or not.
    connections: Arc<AtomicU64>,
}

/// The send buffer of each connection: small, so that what the server has written is what the
/// client took in (its receive window) and little more.
const SEND_BUFFER_BYTES: libc::c_int = 4 << 10;

impl Server {
    pub fn start(route: impl Fn(&str, &str) -> Answer + Send + Sync + 'static) -> Server {
        Self::start_seeing(move |method, path, _| route(method, path))
    }

    /// `start`, `route` also given the request's `Authorization` header, if any. A request that
    /// carried one is recorded with ` +authorization` after its path, one that carried a
    /// `Referer` with ` +referer`.
    pub fn start_seeing(route: impl Fn(&str, &str, Option<&str>) -> Answer + Send + Sync + 'static) -> Server {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let hits = Arc::new(Mutex::new(Vec::new()));
        let written: Written = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicU64::new(0));
        let (route, recorded, counted, accepted) = (Arc::new(route), hits.clone(), written.clone(), connections.clone());
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let Ok((mut socket, _)) = listener.accept().await else { continue };
                    accepted.fetch_add(1, Ordering::SeqCst);
                    shrink_send_buffer(&socket);
                    let (route, recorded, counted) = (route.clone(), recorded.clone(), counted.clone());
                    tokio::spawn(async move {
                        let mut head = Vec::new();
                        let mut buf = [0u8; 1024];
                        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 << 10 {
                            match socket.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => head.extend_from_slice(&buf[..n]),
                            }
                        }
                        let head = String::from_utf8_lossy(&head).into_owned();
                        let mut first = head.lines().next().unwrap_or("").split(' ');
                        let (method, path) = (first.next().unwrap_or("").to_string(), first.next().unwrap_or("").to_string());
                        let header = |wanted: &str| {
                            head.lines().find_map(|l| {
                                let (name, value) = l.split_once(':')?;
                                name.trim().eq_ignore_ascii_case(wanted).then(|| value.trim().to_string())
                            })
                        };
                        let authorization = header("authorization");
                        let mut seen = format!("{method} {path}");
                        if authorization.is_some() {
                            seen.push_str(" +authorization");
                        }
                        if header("referer").is_some() {
                            seen.push_str(" +referer");
                        }
                        recorded.lock().unwrap().push(seen);
                        let bytes = Arc::new(AtomicU64::new(0));
                        counted.lock().unwrap().push((format!("{method} {path}"), bytes.clone()));
                        let answer = route(&method, &path, authorization.as_deref());
                        let _ = answer_with(&mut socket, &method, answer, &bytes).await;
                    });
                }
            });
        });
        Server { addr, hits, written, connections }
    }

    /// Connections accepted so far (a client that connected and sent nothing counts).
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::SeqCst)
    }

    /// `HOST:PORT` as `localhost:PORT`: the same listener under a host name, another host than
    /// `127.0.0.1` to a client, resolving to loopback.
    pub fn localhost(&self) -> String {
        self.addr.replacen("127.0.0.1", "localhost", 1)
    }

    /// Every request so far, as `METHOD PATH[ +authorization][ +referer]`.
    pub fn hits(&self) -> Vec<String> {
        self.hits.lock().unwrap().clone()
    }

    /// The most bytes of body written to one connection whose request line starts with
    /// `request` (`GET /token`): what a client that read it took in, and at most the client's
    /// receive window and this side's send buffer more.
    pub fn most_written(&self, request: &str) -> u64 {
        let written = self.written.lock().unwrap();
        written.iter().filter(|(r, _)| r.starts_with(request)).map(|(_, bytes)| bytes.load(Ordering::SeqCst)).max().unwrap_or(0)
    }
}

fn shrink_send_buffer(socket: &tokio::net::TcpStream) {
    use std::os::fd::AsRawFd as _;
    let size = SEND_BUFFER_BYTES;
    // SAFETY: setsockopt on a socket this server owns, with a valid pointer and length.
    let set = unsafe {
        libc::setsockopt(socket.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUF, &size as *const libc::c_int as *const libc::c_void, size_of::<libc::c_int>() as libc::socklen_t)
    };
    assert_eq!(set, 0, "SO_SNDBUF: {}", std::io::Error::last_os_error());
}

/// Writes `bytes` whole, counting in `written` what the socket took.
async fn write_counted(socket: &mut tokio::net::TcpStream, mut bytes: &[u8], written: &AtomicU64) -> std::io::Result<()> {
    while !bytes.is_empty() {
        let n = socket.write(bytes).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        written.fetch_add(n as u64, Ordering::SeqCst);
        bytes = &bytes[n..];
    }
    Ok(())
}

async fn answer_with(socket: &mut tokio::net::TcpStream, method: &str, answer: Answer, written: &AtomicU64) -> std::io::Result<()> {
    let head = |status: u16, headers: &[(String, String)], length: Option<usize>| {
        let mut head = format!("HTTP/1.1 {status} Whatever\r\nConnection: close\r\n");
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        if let Some(length) = length {
            head.push_str(&format!("Content-Length: {length}\r\n"));
        }
        head + "\r\n"
    };
    match answer {
        Answer::Fixed { status, headers, body } => {
            socket.write_all(head(status, &headers, Some(body.len())).as_bytes()).await?;
            if method != "HEAD" {
                write_counted(socket, &body, written).await?;
            }
        }
        Answer::Endless { status, headers } => {
            socket.write_all(head(status, &headers, None).as_bytes()).await?;
            if method != "HEAD" {
                let chunk: Vec<u8> = MARK.iter().copied().cycle().take(64 << 10).collect();
                loop {
                    write_counted(socket, &chunk, written).await?;
                }
            }
        }
        Answer::Tarpit => {
            let headers = [("Content-Type".to_string(), MANIFEST.to_string())];
            socket.write_all(head(200, &headers, None).as_bytes()).await?;
            if method != "HEAD" {
                loop {
                    write_counted(socket, b"H", written).await?;
                    socket.flush().await?;
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
            }
        }
    }
    socket.flush().await
}

pub const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}
