//! Shared by the host's integration tests: the shipped components `make guest` builds into
//! target/modules/, and the test fixtures `make fixtures` builds into target/fixtures/.
#![allow(dead_code)]

use std::path::PathBuf;

/// A shipped module, `target/modules/<name>.wasm` (`zundoko-classic`, `zundoko-strict-ja`).
pub fn module_path(name: &str) -> PathBuf {
    built("modules", name, "make guest")
}

pub fn module_bytes(name: &str) -> Vec<u8> {
    std::fs::read(module_path(name)).unwrap()
}

/// A test fixture, `target/fixtures/<name>.wasm` (`zundoko-hostile`, `zundoko-huge-name`, ...).
pub fn fixture_path(name: &str) -> PathBuf {
    built("fixtures", name, "make fixtures")
}

pub fn fixture_bytes(name: &str) -> Vec<u8> {
    std::fs::read(fixture_path(name)).unwrap()
}

/// A Hikawa `default/hk` (interval 500 ms, created at 0) with these params and no children, as
/// a guest call sees it at 1 s with entropy 7.
pub fn observed_with(params: &[(&str, &str)]) -> zundoko_rules::Observed {
    zundoko_rules::Observed {
        hikawa: zundoko_rules::Hikawa {
            namespace: "default".into(),
            name: "hk".into(),
            uid: "u".into(),
            generation: 1,
            created_at: Some(0),
            interval_millis: 500,
            params: params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ..Default::default()
        },
        now: 1_000,
        entropy: 7,
        ..zundoko_rules::Observed::default()
    }
}

/// The module with a custom section appended: the same rules, other bytes, another digest.
pub fn with_custom_section(bytes: Vec<u8>, n: u64) -> Vec<u8> {
    zundoko_operator::supply::sandbox::budget::append_custom_section(bytes, "zundoko-test", &n.to_le_bytes())
}

/// The operator's binary run as a user types it, with these arguments and environment; its
/// logs off, so stderr holds only what it says to the user.
pub fn operator_cli(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_zundoko-operator"))
        .args(args)
        .envs(env.iter().copied())
        .env("RUST_LOG", "off")
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .output()
        .unwrap()
}

/// What a command printed: (stdout, stderr).
pub fn output_text(out: &std::process::Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn built(dir: &str, name: &str, how: &str) -> PathBuf {
    let target = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target");
    let path = target.join(dir).join(format!("{name}.wasm"));
    if !path.exists() && dir == "modules" && target.join("fixtures").join(format!("{name}.wasm")).exists() {
        panic!("{name} is a test fixture, in target/fixtures/: load it with fixture_path/fixture_bytes");
    }
    assert!(path.exists(), "{} is missing: run `{how}` (or `make test`, which builds it)", path.display());
    path
}

pub mod ci;
pub mod cluster;
pub mod deploy;
pub mod explain;
pub mod hostile;
pub mod rbac;
pub mod kubelet;
pub mod compile_once;
pub mod langs;
pub mod registry;
pub mod replica;
pub mod rules;
pub mod wasi_calls;
pub mod running;
pub mod tenants;

/// The component without its `zundoko:budget` section (what scripts/set-budget.py removes), for the tests of what a module asks for.
pub fn without_budget(bytes: &[u8]) -> Vec<u8> {
    fn leb(data: &[u8], mut at: usize) -> (usize, usize) {
        let (mut value, mut shift) = (0usize, 0);
        loop {
            let byte = data[at];
            at += 1;
            value |= ((byte & 0x7f) as usize) << shift;
            shift += 7;
            if byte & 0x80 == 0 {
                return (value, at);
            }
        }
    }
    let mut kept = bytes[..8].to_vec();
    let mut at = 8;
    while at < bytes.len() {
        let start = at;
        let (size, body) = leb(bytes, at + 1);
        at = body + size;
        if bytes[start] == 0 {
            let (name_len, name_at) = leb(bytes, body);
            if &bytes[name_at..name_at + name_len] == zundoko_operator::supply::sandbox::budget::SECTION.as_bytes() {
                continue;
            }
        }
        kept.extend_from_slice(&bytes[start..at]);
    }
    assert!(zundoko_operator::supply::sandbox::budget::read(&kept).unwrap() == zundoko_operator::supply::sandbox::budget::Budget::default(), "the section is gone");
    kept
}

/// The status message of a plan (what a fixture reports its findings in).
pub fn status_message(plan: &zundoko_rules::Plan) -> String {
    plan.actions
        .iter()
        .find_map(|a| match a {
            zundoko_rules::Action::SetStatus(status) => Some(status.message.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no status in {plan:?}"))
}

/// The status and body of GET `path` on 127.0.0.1:`port` (an operator's HTTP port).
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Some((status, body))
}

/// Cap a process's data segment at `bytes` (RLIMIT_DATA), so that a runaway allocation in it
/// fails there instead of taking the machine's memory.
pub fn limit_data(command: &mut std::process::Command, bytes: u64) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
            if libc::setrlimit(libc::RLIMIT_DATA, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
