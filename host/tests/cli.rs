//! The command line as a user runs it: `check`, `simulate` (replayable by seed), `crd`, and
//! `run` refusing to start without a usable module, and on the worker threads it is given.

mod common;

use std::process::{Command, Output};

use common::{fixture_path, module_path, operator_cli};

const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/samples/hikawa-sample.yaml");

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn check_prints_metadata_digest_and_world() {
    let path = module_path("zundoko-strict-ja");
    let out = operator_cli(&["check", "--module", path.to_str().unwrap()], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for needle in ["name:        zundoko-strict-ja", "version:     0.1.0", "world:       zundokokiyoshi:rules/zundoko-rules@0.1.0", "digest:      sha256:", "smoke test:  ok (say #1 ズン"] {
        assert!(text.contains(needle), "{needle:?} in\n{text}");
    }
}

#[test]
fn check_rejects_a_bad_module_naming_the_file_and_the_reason() {
    let dir = std::env::temp_dir().join(format!("zundoko-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("garbage.wasm");
    std::fs::write(&bad, b"definitely not wasm").unwrap();
    let out = operator_cli(&["check", "--module", bad.to_str().unwrap()], &[]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("garbage.wasm") && err.contains("rejected (NotAComponent)") && err.contains("magic"), "{err}");

    let out = operator_cli(&["check", "--module", dir.join("missing.wasm").to_str().unwrap()], &[]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("cannot read module"), "{}", stderr(&out));
}

#[test]
fn check_refuses_bad_metadata_with_a_short_escaped_reason() {
    for (fixture, needle) in [
        ("zundoko-huge-name", "info() name is refused: 8388608 bytes, more than 64"),
        ("zundoko-escape-name", "info() name is refused: has a control character (U+001B) at byte 4"),
    ] {
        let out = operator_cli(&["check", "--module", fixture_path(fixture).to_str().unwrap()], &[]);
        assert!(!out.status.success(), "{fixture} accepted:\n{}", stdout(&out));
        let err = stderr(&out);
        assert!(err.contains("rejected (BadModuleMetadata)") && err.contains(needle), "{fixture}: {err}");
        // Short, and not one raw control character from the module.
        assert!(err.len() < 600, "{fixture}: {} bytes on stderr", err.len());
        assert!(!err.contains('\x1b') && !stdout(&out).contains('\x1b'), "{fixture}: {err:?}");
    }
    let err = stderr(&operator_cli(&["check", "--module", fixture_path("zundoko-escape-name").to_str().unwrap()], &[]));
    assert!(err.contains(r#"it starts "evil\u{1b}[31mred\u{1b}[0m""#), "{err}");
}

#[test]
fn simulate_sings_to_kiyoshi_and_the_seed_replays_it_exactly() {
    let module = module_path("zundoko-classic");
    let args = ["simulate", "--module", module.to_str().unwrap(), "--hikawa", SAMPLE, "--seed", "42"];
    let first = operator_cli(&args, &[]);
    assert!(first.status.success(), "{}", stderr(&first));
    let text = stdout(&first);
    assert_eq!(text, stdout(&operator_cli(&args, &[])), "the same seed replays the same run");
    let song = text.lines().find_map(|l| l.strip_prefix("song: ")).expect("a song line");
    let words: Vec<&str> = song.split(' ').collect();
    assert_eq!(words.last(), Some(&"Ki-yo-shi!"));
    assert_eq!(&words[words.len() - 6..words.len() - 1], ["Zun", "Zun", "Zun", "Zun", "Doko"]);
    assert!(text.contains("intervalMillis 500, seed 42"));
    // Every decision line shows its entropy; words come 500 virtual ms apart.
    let decisions: Vec<&str> = text.lines().filter(|l| l.contains("entropy 0x")).collect();
    assert!(decisions.len() >= words.len());
    assert!(decisions[1].trim_start().starts_with("500 ms"), "{}", decisions[1]);
    let other = stdout(&operator_cli(&["simulate", "--module", module.to_str().unwrap(), "--hikawa", SAMPLE, "--seed", "43"], &[]));
    assert_ne!(text, other, "another seed, another song");
}

#[test]
fn simulate_refuses_a_manifest_that_is_not_a_hikawa() {
    let dir = std::env::temp_dir().join(format!("zundoko-cli-sim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = dir.join("cm.yaml");
    std::fs::write(&manifest, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n").unwrap();
    let module = module_path("zundoko-classic");
    let out = operator_cli(&["simulate", "--module", module.to_str().unwrap(), "--hikawa", manifest.to_str().unwrap()], &[]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("expected apiVersion zundokokiyoshi.kaitoy.github.com/v1beta1 and kind Hikawa"), "{}", stderr(&out));
}

/// Files a user names are read within a bound, checked before they are buffered: a module over
/// the sandbox's 64 MiB, a FIFO in a module's place (which would block a plain read for ever), a
/// `--registry-ca` bigger than any CA bundle.
#[test]
fn files_named_on_the_command_line_are_read_within_their_bounds() {
    let dir = std::env::temp_dir().join(format!("zundoko-cli-bounds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let big = dir.join("big.wasm");
    // Sparse: nothing is written, and with the bound nothing is read.
    std::fs::File::create(&big).unwrap().set_len((64 << 20) + 1).unwrap();
    let out = operator_cli(&["simulate", "--module", big.to_str().unwrap(), "--hikawa", SAMPLE], &[]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("big.wasm") && stderr(&out).contains("over the 67108864-byte limit"), "{}", stderr(&out));
    let fifo = dir.join("fifo.wasm");
    let _ = std::fs::remove_file(&fifo);
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let out = operator_cli(&["simulate", "--module", fifo.to_str().unwrap(), "--hikawa", SAMPLE], &[]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("fifo.wasm") && stderr(&out).contains("not a regular file"), "{}", stderr(&out));
    let ca = dir.join("ca.pem");
    let mut pem = b"-----BEGIN CERTIFICATE-----\n".to_vec();
    pem.resize((1 << 20) + 1, b'A');
    std::fs::write(&ca, pem).unwrap();
    let out = operator_cli(&["check", "127.0.0.1:1/rules/x:v1", "--registry-ca", ca.to_str().unwrap()], &[]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--registry-ca") && stderr(&out).contains("over the 1048576-byte limit"), "{}", stderr(&out));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn crd_prints_every_crd_once() {
    let out = operator_cli(&["crd"], &[]);
    assert!(out.status.success());
    let documents = common::deploy::documents(&stdout(&out));
    let mut names: Vec<&str> = documents.iter().map(|d| d["metadata"]["name"].as_str().unwrap_or("?")).collect();
    names.sort_unstable();
    let expected = ["hikawas", "kiyoshis", "zundokonamespacedrules", "zundokorules", "zundokos", "zundokotenantpolicies"].map(|plural| format!("{plural}.zundokokiyoshi.kaitoy.github.com"));
    assert_eq!(names, expected, "one CustomResourceDefinition each, nothing else");
    assert!(documents.iter().all(|d| d["kind"] == "CustomResourceDefinition"));
}

/// A local API server, a directory of the test's own and a kubeconfig for the server in it.
async fn local_api_server(name: &str) -> (zundoko_apiserver::ApiServer, std::path::PathBuf, std::path::PathBuf) {
    let server = zundoko_apiserver::ApiServer::start(zundoko_apiserver::ServerConfig::default()).await.unwrap();
    let dir = common::kubelet::temp_dir(name);
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, server.kubeconfig_yaml()).unwrap();
    (server, dir, kubeconfig)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_without_a_usable_module_exits_naming_each_source_and_reason() {
    let (_server, dir, kubeconfig) = local_api_server("cli-run").await;
    let bad = dir.join("rules.wasm");
    std::fs::write(&bad, b"definitely not wasm").unwrap();
    let run = move |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_zundoko-operator"))
            .arg("run")
            .args(args)
            .args(["--http-addr", "off"])
            .env("KUBECONFIG", &kubeconfig)
            .env("RUST_LOG", "off")
            .output()
            .unwrap()
    };
    let out = tokio::task::spawn_blocking(move || run(&["--module", bad.to_str().unwrap(), "--module-configmap", "default/nothing-here"]))
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    for needle in ["no usable rules module", "rules.wasm rejected (NotAComponent)", "cannot read ConfigMap default/nothing-here:rules.wasm", "--wait-for-module"] {
        assert!(err.contains(needle), "{needle:?} in\n{err}");
    }
    let out = operator_cli(&["run", "--module-configmap", "no-slash"], &[]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("is not NAMESPACE/NAME[:KEY]"), "{}", stderr(&out));
}

/// `run` builds its runtime with the async worker threads `--worker-threads` asks for, one by
/// default (it says so once started, from the runtime itself); zero is refused by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_works_on_the_threads_asked_and_one_by_default() {
    use std::io::BufRead as _;
    let (_server, _dir, kubeconfig) = local_api_server("cli-workers").await;
    let module = module_path("zundoko-classic");
    for (asked, expected) in [(None, 1), (Some("3"), 3)] {
        let (kubeconfig, module) = (kubeconfig.clone(), module.clone());
        let started = tokio::task::spawn_blocking(move || {
            let mut child = Command::new(env!("CARGO_BIN_EXE_zundoko-operator"))
                .arg("run")
                .args(["--module", module.to_str().unwrap(), "--http-addr", "off"])
                .args(asked.map(|n| ["--worker-threads", n]).into_iter().flatten())
                .env("KUBECONFIG", &kubeconfig)
                .env("RUST_LOG", "info")
                .env("ZUNDOKO_LOG_FORMAT", "text")
                .env_remove("ZUNDOKO_WORKER_THREADS")
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
            let line = lines.map_while(Result::ok).find(|l| l.contains(" started "));
            let _ = child.kill();
            let _ = child.wait();
            line.expect("a `started` line before the operator's stderr ended")
        })
        .await
        .unwrap();
        assert!(started.contains(&format!("worker_threads={expected} ")), "{asked:?}: {started}");
    }
    let out = operator_cli(&["run", "--worker-threads", "0", "--module", module.to_str().unwrap()], &[]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--worker-threads"), "{}", stderr(&out));
}

/// `command` run with no capabilities, as in the Deployment (which drops them all), whoever
/// runs the test: dropping the bounding set (allowed to root, refused to others, who hold none
/// anyway) leaves a program root runs none. A process may read another's `/proc/PID/` only if
/// it holds every capability the other does.
fn without_capabilities(command: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: only prctl between fork and exec.
    unsafe {
        command.pre_exec(|| {
            for capability in 0..64 {
                libc::prctl(libc::PR_CAPBSET_DROP, capability, 0, 0, 0);
            }
            Ok(())
        })
    }
}

/// `cat /proc/PID/environ` from a process of this UID with no capabilities (as a compiler
/// process has none): how many bytes it read, or what it said.
fn read_environ_without_capabilities(pid: u32) -> Result<usize, String> {
    let out = without_capabilities(Command::new("cat").arg(format!("/proc/{pid}/environ"))).output().unwrap();
    if out.status.success() { Ok(out.stdout.len()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) }
}

/// `run` makes the operator not dumpable (PR_SET_DUMPABLE 0): a process of its UID without
/// capabilities (a compiler process whose compile turned into code execution) cannot open its
/// `/proc/PID/environ` (nor its fd/, where a memfd of code waits for its seal), while it can
/// that of any other process of the UID.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_running_operator_is_not_dumpable() {
    use std::io::BufRead as _;
    let (_server, _dir, kubeconfig) = local_api_server("cli-dumpable").await;
    let module = module_path("zundoko-classic");
    let (started, operator, other) = tokio::task::spawn_blocking(move || {
        let mut child = without_capabilities(Command::new(env!("CARGO_BIN_EXE_zundoko-operator")).arg("run"))
            .args(["--module", module.to_str().unwrap(), "--http-addr", "off"])
            .env("KUBECONFIG", &kubeconfig)
            .env("RUST_LOG", "info")
            .env("ZUNDOKO_LOG_FORMAT", "text")
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let started = std::io::BufReader::new(child.stderr.take().unwrap()).lines().map_while(Result::ok).any(|l| l.contains(" started "));
        let operator = read_environ_without_capabilities(child.id());
        let mut sleeper = without_capabilities(Command::new("sleep").arg("60")).spawn().unwrap();
        let other = read_environ_without_capabilities(sleeper.id());
        for process in [&mut child, &mut sleeper] {
            let _ = process.kill();
            let _ = process.wait();
        }
        (started, operator, other)
    })
    .await
    .unwrap();
    assert!(started, "the operator started");
    assert!(other.is_ok(), "the reader reads another process's environment of the same UID: {other:?}");
    let refused = operator.expect_err("the operator's environment was read");
    assert!(refused.contains("Permission denied"), "{refused}");
}
