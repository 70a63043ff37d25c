//! The operator's registry commands as a rules author types them, against a real registry
//! (Debian's docker-registry on a free loopback port, with credentials): `keygen` never
//! overwrites a key, `push --sign` prints the digest to pin, `check` by tag and by digest
//! verifies the signature with the key trusted and refuses another key, missing credentials, a
//! module that is not a component and a name without a registry, each in one line naming why.

mod common;

use common::registry::{PASSWORD, TestRegistry, USER, base64};
use common::{operator_cli, output_text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_check_and_keygen_as_a_rules_author_types_them() {
    let Some(registry) = TestRegistry::start(true) else { return };
    let dir = registry.dir().join("author");
    std::fs::create_dir_all(&dir).unwrap();
    // Credentials as `docker login` writes them.
    let auth = base64(&format!("{USER}:{PASSWORD}"));
    let config = dir.join("config.json");
    std::fs::write(&config, serde_json::json!({"auths": {registry.addr.clone(): {"auth": auth}}}).to_string()).unwrap();
    let env = [("ZUNDOKO_INSECURE_REGISTRIES", registry.addr.as_str()), ("ZUNDOKO_REGISTRY_AUTH", config.to_str().unwrap())];
    let key = dir.join("team");
    let out = operator_cli(&["keygen", "--out", key.to_str().unwrap()], &[]);
    assert!(out.status.success(), "{}", output_text(&out).1);
    let (private, public) = (dir.join("team.key"), dir.join("team.pub"));
    // Never overwrites a key: refused, and both files as they were (either one there is enough).
    let pair = || (std::fs::read(&private).unwrap(), std::fs::read(&public).unwrap());
    let before = pair();
    let out = operator_cli(&["keygen", "--out", key.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(1), "keygen over a key: {}", output_text(&out).1);
    assert!(output_text(&out).1.contains("team.key"), "names the file: {}", output_text(&out).1);
    assert!(pair() == before, "a second keygen changed the key pair");
    std::fs::remove_file(&public).unwrap();
    assert_eq!(operator_cli(&["keygen", "--out", key.to_str().unwrap()], &[]).status.code(), Some(1), "keygen over a private key alone");
    assert!(std::fs::read(&private).unwrap() == before.0 && !public.exists(), "keygen over a private key alone changed it");
    std::fs::write(&public, &before.1).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(std::fs::metadata(&private).unwrap().permissions().mode() & 0o777, 0o600);

    let module = common::module_path("zundoko-strict-ja");
    let reference = format!("{}/rules/ja:0.1.0", registry.addr);
    let out = operator_cli(&["push", "--module", module.to_str().unwrap(), &reference, "--sign", private.to_str().unwrap()], &env);
    let (stdout, stderr) = output_text(&out);
    assert!(out.status.success(), "{stderr}");
    let pinned = stdout.lines().find_map(|l| l.strip_prefix("pinned:      ")).expect("push prints the digest to pin").to_string();
    assert!(pinned.starts_with(&format!("{}/rules/ja@sha256:", registry.addr)), "{stdout}");

    // check by tag and by the pinned digest, with the key trusted.
    for r in [reference.as_str(), pinned.as_str()] {
        let out = operator_cli(&["check", r, "--trusted-keys", public.to_str().unwrap()], &env);
        let (stdout, stderr) = output_text(&out);
        assert!(out.status.success(), "{stderr}");
        for needle in ["name:        zundoko-strict-ja", &format!("pinned:      {pinned}"), "signed by:   ", "smoke test:  ok"] {
            assert!(stdout.contains(needle), "{needle:?} in\n{stdout}");
        }
    }
    // Another key trusted: refused, in one line naming the reason and the key tried.
    let other = dir.join("other");
    assert!(operator_cli(&["keygen", "--out", other.to_str().unwrap()], &[]).status.success());
    let out = operator_cli(&["check", &reference, "--trusted-keys", dir.join("other.pub").to_str().unwrap()], &env);
    let (_, stderr) = output_text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("SignatureNotVerified") && stderr.contains("other.pub"), "{stderr}");
    // Without credentials: refused by name.
    let out = operator_cli(&["check", &reference], &[("ZUNDOKO_INSECURE_REGISTRIES", registry.addr.as_str())]);
    assert!(output_text(&out).1.contains("RegistryUnauthorized"), "{}", output_text(&out).1);
    // Not a component: refused before anything is sent.
    let junk = dir.join("junk.wasm");
    std::fs::write(&junk, b"\0asm junk").unwrap();
    let out = operator_cli(&["push", "--module", junk.to_str().unwrap(), &format!("{}/rules/junk:1", registry.addr)], &env);
    assert_eq!(out.status.code(), Some(1));
    let out = operator_cli(&["check", &format!("{}/rules/junk:1", registry.addr)], &env);
    assert!(output_text(&out).1.contains("ModuleNotFound"), "nothing was pushed: {}", output_text(&out).1);
    // A bare name would mean Docker Hub: refused, saying so.
    let out = operator_cli(&["check", "rules/ja:0.1.0"], &[]);
    assert!(output_text(&out).1.contains("must name a registry"), "{}", output_text(&out).1);
}
