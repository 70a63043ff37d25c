//! Which WASI interfaces a module may import: the ones language runtimes (componentize-py's
//! CPython on wasi-libc, componentize-js's StarlingMonkey) import whether or not the rules use
//! them. Each is satisfied by the virtual WASI, which grants nothing through any of them.

/// Interfaces of WASI 0.2 (any 0.2.x: the host implements 0.2.12 and wasmtime's linker
/// serves older patch versions from it).
const ALLOWED: [&str; 27] = [
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:clocks/wall-clock",
    "wasi:clocks/monotonic-clock",
    "wasi:random/random",
    "wasi:random/insecure",
    "wasi:random/insecure-seed",
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    // No directory is preopened: a descriptor can never be had, so these grant nothing.
    "wasi:filesystem/types",
    "wasi:filesystem/preopens",
    // wasi-libc imports them for every program; creating a socket and looking up a name
    // always fail with access-denied.
    "wasi:sockets/network",
    "wasi:sockets/instance-network",
    "wasi:sockets/tcp",
    "wasi:sockets/tcp-create-socket",
    "wasi:sockets/udp",
    "wasi:sockets/udp-create-socket",
    "wasi:sockets/ip-name-lookup",
];

/// The WASI version line the host implements.
const VERSION_LINE: &str = "0.2.";

/// Whether `import` (a component import name such as `wasi:io/poll@0.2.9`) is a WASI
/// interface at all: such a module gets the virtual WASI.
pub fn is_wasi(import: &str) -> bool {
    import.starts_with("wasi:")
}

/// Why the host refuses a WASI import, or `None` if the virtual WASI serves it.
pub fn refusal(import: &str) -> Option<String> {
    let (interface, version) = import.split_once('@').unwrap_or((import, ""));
    if !ALLOWED.contains(&interface) {
        return Some(format!(
            "{import}: not an interface the sandbox serves (WASI 0.2's io, clocks, random, cli, filesystem and sockets are, without capabilities; nothing else, such as wasi:http, is)"
        ));
    }
    if !version.starts_with(VERSION_LINE) {
        let found = if version.is_empty() {
            "no version".to_string()
        } else {
            format!("version {version}")
        };
        return Some(format!(
            "{import}: {found}, while the sandbox serves WASI 0.2.x (build with a toolchain that targets WASI 0.2, wasip2)"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_componentize_py_imports_is_served_and_nothing_else() {
        for ok in [
            "wasi:io/poll@0.2.9",
            "wasi:sockets/tcp@0.2.0",
            "wasi:cli/terminal-stderr@0.2.12",
        ] {
            assert_eq!(refusal(ok), None, "{ok}");
        }
        let http = refusal("wasi:http/outgoing-handler@0.2.0").unwrap();
        assert!(
            http.contains("wasi:http/outgoing-handler@0.2.0") && http.contains("not an interface"),
            "{http}"
        );
        let p3 = refusal("wasi:io/poll@0.3.0").unwrap();
        assert!(p3.contains("version 0.3.0"), "{p3}");
        assert!(refusal("wasi:io/poll").unwrap().contains("no version"));
        assert!(is_wasi("wasi:io/poll@0.2.9") && !is_wasi("zundokokiyoshi:rules/log@0.1.0"));
    }
}
