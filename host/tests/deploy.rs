//! deploy/ as a cluster gets it from `make deploy`: rendered offline by `kubectl kustomize`
//! with the built classic module, then checked. Every object is there; the pod meets Pod
//! Security "restricted"; the module ConfigMap is mounted so a swap reaches the running pod; the
//! CRDs are the binary's. Its RBAC: deploy_rbac.rs; its network policy: deploy_network_policy.rs.

mod common;

use std::collections::BTreeMap;
use std::process::Command;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Container, PodSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::de::DeserializeOwned;
use serde_json::Value;

use common::deploy::{ACCOUNT, DOCS, MODULE_CONFIGMAP, NAMESPACE, RENDERED, documents, env, of_kind, operator_rbac};

const MODULE_KEY: &str = "rules.wasm";

fn one<T: DeserializeOwned>(kind: &str) -> T {
    let found = of_kind(kind);
    assert_eq!(found.len(), 1, "exactly one {kind} in the render");
    serde_json::from_value(found[0].clone()).unwrap_or_else(|e| panic!("the {kind} does not parse: {e}"))
}

fn pod() -> PodSpec {
    one::<Deployment>("Deployment").spec.unwrap().template.spec.unwrap()
}

fn operator_container() -> Container {
    let pod = pod();
    assert_eq!(pod.containers.len(), 1, "one container");
    pod.containers[0].clone()
}

/// A setting of the operator's: its flag in command/args (`--f V` or `--f=V`), else its env twin.
fn setting(c: &Container, flag: &str, env_name: &str) -> Option<String> {
    let args: Vec<&String> = c.command.iter().flatten().chain(c.args.iter().flatten()).collect();
    for (i, arg) in args.iter().enumerate() {
        if *arg == flag {
            return args.get(i + 1).map(|v| v.to_string());
        }
        if let Some(value) = arg.strip_prefix(flag).and_then(|rest| rest.strip_prefix('=')) {
            return Some(value.to_string());
        }
    }
    env(c, env_name)
}

#[test]
fn every_object_is_rendered_once_with_a_kind_a_name_and_its_namespace() {
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for doc in DOCS.iter() {
        let kind = doc["kind"].as_str().unwrap_or_else(|| panic!("a document without kind: {doc}"));
        assert!(doc["apiVersion"].as_str().is_some_and(|v| !v.is_empty()), "{kind} without apiVersion");
        let name = doc["metadata"]["name"].as_str().unwrap_or_else(|| panic!("{kind} without metadata.name"));
        let cluster_scoped = ["Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"].contains(&kind);
        let namespace = doc["metadata"]["namespace"].as_str();
        assert_eq!(namespace, (!cluster_scoped).then_some(NAMESPACE), "{kind} {name}'s namespace");
        *kinds.entry(kind.to_string()).or_default() += 1;
    }
    let expected: BTreeMap<String, usize> = [
        // The operator's, and the tenants' roles aggregated to edit/admin and view (rule sets,
        // Hikawas).
        ("ClusterRole", 5),
        ("ClusterRoleBinding", 1),
        ("ConfigMap", 1),
        ("CustomResourceDefinition", 6),
        ("Deployment", 1),
        ("Namespace", 1),
        ("PodDisruptionBudget", 1),
        ("Role", 1),
        ("RoleBinding", 1),
        ("Service", 1),
        ("ServiceAccount", 1),
    ]
    .into_iter()
    .map(|(k, n)| (k.to_string(), n))
    .collect();
    assert_eq!(kinds, expected);
    assert_eq!(of_kind("Namespace")[0]["metadata"]["name"], NAMESPACE);
    assert_eq!(of_kind("ServiceAccount")[0]["metadata"]["name"], ACCOUNT);
}

#[test]
fn the_pod_meets_pod_security_restricted() {
    let namespace = of_kind("Namespace")[0];
    assert_eq!(
        namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "restricted",
        "the namespace enforces the restricted profile"
    );
    let deployment: Deployment = one("Deployment");
    let pod = pod();
    for (what, set) in [("hostNetwork", pod.host_network), ("hostPID", pod.host_pid), ("hostIPC", pod.host_ipc)] {
        assert_ne!(set, Some(true), "{what}");
    }
    let pod_sc = pod.security_context.clone().unwrap_or_default();
    assert!(pod_sc.sysctls.as_deref().unwrap_or_default().is_empty(), "sysctls");
    assert!(pod_sc.se_linux_options.is_none(), "seLinuxOptions");
    let pod_seccomp = pod_sc.seccomp_profile.as_ref().map(|s| s.type_.clone());
    let pod_apparmor = pod_sc.app_armor_profile.as_ref().map(|s| s.type_.clone());
    // Volumes: only the types the restricted profile allows.
    let allowed = ["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"];
    let template_spec = &serde_json::to_value(&deployment).unwrap()["spec"]["template"]["spec"];
    for volume in template_spec["volumes"].as_array().into_iter().flatten() {
        for key in volume.as_object().unwrap().keys().filter(|k| *k != "name") {
            assert!(allowed.contains(&key.as_str()), "volume {} is a {key}", volume["name"]);
        }
    }
    let containers = pod.containers.iter().chain(pod.init_containers.iter().flatten());
    for c in containers {
        let sc = c.security_context.clone().unwrap_or_default();
        let name = &c.name;
        assert_ne!(sc.privileged, Some(true), "{name}: privileged");
        assert_eq!(sc.allow_privilege_escalation, Some(false), "{name}: allowPrivilegeEscalation");
        assert_eq!(sc.run_as_non_root.or(pod_sc.run_as_non_root), Some(true), "{name}: runAsNonRoot");
        assert_ne!(sc.run_as_user.or(pod_sc.run_as_user), Some(0), "{name}: runAsUser 0");
        let seccomp = sc.seccomp_profile.as_ref().map(|s| s.type_.clone()).or(pod_seccomp.clone());
        assert!(matches!(seccomp.as_deref(), Some("RuntimeDefault" | "Localhost")), "{name}: seccompProfile {seccomp:?}");
        let apparmor = sc.app_armor_profile.as_ref().map(|s| s.type_.clone()).or(pod_apparmor.clone());
        assert_ne!(apparmor.as_deref(), Some("Unconfined"), "{name}: appArmorProfile");
        assert!(sc.se_linux_options.is_none(), "{name}: seLinuxOptions");
        assert!(sc.proc_mount.as_deref().is_none_or(|m| m == "Default"), "{name}: procMount");
        let caps = sc.capabilities.clone().unwrap_or_default();
        assert!(caps.drop.iter().flatten().any(|c| c == "ALL"), "{name}: capabilities must drop ALL");
        assert!(caps.add.as_deref().unwrap_or_default().is_empty(), "{name}: capabilities added: {:?}", caps.add);
        assert_eq!(sc.read_only_root_filesystem, Some(true), "{name}: readOnlyRootFilesystem");
        for port in c.ports.iter().flatten() {
            assert!(port.host_port.is_none_or(|p| p == 0), "{name}: hostPort");
        }
        let resources = c.resources.clone().unwrap_or_default();
        for (what, quantities) in [("requests", resources.requests), ("limits", resources.limits)] {
            let quantities = quantities.unwrap_or_default();
            for resource in ["cpu", "memory"] {
                assert!(quantities.contains_key(resource), "{name}: resources.{what}.{resource}");
            }
        }
    }
}

#[test]
fn probes_hit_healthz_and_readyz_on_the_declared_port_the_operator_listens_on() {
    let c = operator_container();
    let ports = c.ports.clone().unwrap_or_default();
    for (probe, path) in [(c.liveness_probe.clone(), "/healthz"), (c.readiness_probe.clone(), "/readyz")] {
        let get = probe.and_then(|p| p.http_get).unwrap_or_else(|| panic!("an httpGet probe on {path}"));
        assert_eq!(get.path.as_deref(), Some(path));
        let port = ports
            .iter()
            .find(|p| match &get.port {
                IntOrString::Int(n) => p.container_port == *n,
                IntOrString::String(s) => p.name.as_deref() == Some(s.as_str()),
            })
            .unwrap_or_else(|| panic!("the {path} probe's port {:?} is not a declared containerPort", get.port));
        let addr = setting(&c, "--http-addr", "ZUNDOKO_HTTP_ADDR").unwrap_or_else(|| "0.0.0.0:8080".into());
        assert!(addr.ends_with(&format!(":{}", port.container_port)), "the operator listens on {addr}, the {path} probe asks {}", port.container_port);
    }
}

/// A quantity in MiB ("256Mi", "1Gi").
fn mib(quantity: &str) -> u64 {
    match quantity.trim() {
        q if q.ends_with("Mi") => q.trim_end_matches("Mi").parse().unwrap(),
        q if q.ends_with("Gi") => q.trim_end_matches("Gi").parse::<u64>().unwrap() << 10,
        q => panic!("{q}: write the cache's sizeLimit in Mi or Gi"),
    }
}

#[test]
fn the_cache_is_bounded_well_under_its_volumes_size_limit() {
    let (pod, c) = (pod(), operator_container());
    let dir = setting(&c, "--cache-dir", "ZUNDOKO_CACHE_DIR").expect("--cache-dir or ZUNDOKO_CACHE_DIR");
    // At --cache-dir or above it (a folder the operator makes in the volume, whose root is root's).
    let under = |m: &&k8s_openapi::api::core::v1::VolumeMount| std::path::Path::new(&dir).starts_with(m.mount_path.trim_end_matches('/'));
    let mount = c.volume_mounts.iter().flatten().find(under).expect("a volume mounted at --cache-dir or above it");
    assert_ne!(mount.read_only, Some(true), "the cache is written");
    let volume = pod.volumes.iter().flatten().find(|v| v.name == mount.name).expect("the cache's volume");
    let limit = volume.empty_dir.as_ref().and_then(|e| e.size_limit.as_ref()).expect("the cache is an emptyDir with a sizeLimit");
    let limit = mib(&limit.0);
    let max = setting(&c, "--cache-max-mib", "ZUNDOKO_CACHE_MAX_MIB").expect("--cache-max-mib or ZUNDOKO_CACHE_MAX_MIB: unset, the default is not tied to this volume");
    let max: u64 = max.parse().unwrap();
    // Collection runs after a write: the volume holds the bound plus what is being written (a
    // big module's compiled code, tens of MiB). A third of the volume is kept for that.
    assert!(max >= 1 && max * 3 <= limit * 2, "--cache-max-mib {max} is not well under the cache volume's sizeLimit of {limit} MiB");
}

#[test]
fn the_module_configmap_is_mounted_as_a_directory_where_the_operator_reads_it() {
    let pod = pod();
    let volume = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.config_map.as_ref().is_some_and(|c| c.name == MODULE_CONFIGMAP))
        .expect("a volume of the module ConfigMap");
    let source = volume.config_map.as_ref().unwrap();
    assert!(source.items.is_none(), "items would rename or drop the module's key");
    assert_ne!(source.optional, Some(true), "the pod must not start without its module");
    let c = operator_container();
    let mounts = c.volume_mounts.clone().unwrap_or_default();
    for m in &mounts {
        // A subPath mount is a copy kubelet never updates: a swap would never arrive.
        assert!(m.sub_path.is_none() && m.sub_path_expr.is_none(), "volumeMount {} uses subPath", m.name);
    }
    let mount = mounts.iter().find(|m| m.name == volume.name).expect("the module volume is mounted");
    assert_eq!(mount.read_only, Some(true), "the module mount is read-only");
    let module = setting(&c, "--module", "ZUNDOKO_MODULE").expect("--module or ZUNDOKO_MODULE");
    assert_eq!(module, format!("{}/{MODULE_KEY}", mount.mount_path.trim_end_matches('/')));
}

#[test]
fn the_module_configmap_carries_the_built_component_byte_for_byte() {
    let mut doc = of_kind("ConfigMap")[0].clone();
    // kustomize wraps base64 at 76 columns; the API server's decoder (Go's encoding/base64)
    // skips line breaks, k8s-openapi's does not.
    for value in doc["binaryData"].as_object_mut().expect("binaryData").values_mut() {
        if let Value::String(s) = value {
            s.retain(|c| c != '\n' && c != '\r');
        }
    }
    let cm: ConfigMap = serde_json::from_value(doc).unwrap();
    assert!(cm.data.unwrap_or_default().is_empty(), "the module is binary: binaryData, not data");
    assert_ne!(cm.immutable, Some(true), "`make swap` replaces the module in place");
    let binary = cm.binary_data.unwrap_or_default();
    assert_eq!(binary.keys().collect::<Vec<_>>(), [MODULE_KEY]);
    assert!(binary[MODULE_KEY].0 == common::module_bytes("zundoko-classic"), "binaryData.{MODULE_KEY} is not target/modules/zundoko-classic.wasm");
}

#[test]
fn the_module_configmap_keeps_its_name_and_the_operator_watches_it() {
    let cm = of_kind("ConfigMap")[0];
    // No kustomize name-suffix hash: the name must stay put for a swap to reach the running pod.
    assert_eq!(cm["metadata"]["name"], MODULE_CONFIGMAP);
    assert_eq!(cm["metadata"]["namespace"], NAMESPACE);
    let deployment = of_kind("Deployment")[0];
    assert_eq!(deployment["metadata"]["namespace"], NAMESPACE);
    assert!(pod().volumes.iter().flatten().any(|v| v.config_map.as_ref().is_some_and(|c| c.name == MODULE_CONFIGMAP)));
    let c = operator_container();
    assert_eq!(
        setting(&c, "--module-configmap", "ZUNDOKO_MODULE_CONFIGMAP"),
        Some(format!("{NAMESPACE}/{MODULE_CONFIGMAP}:{MODULE_KEY}"))
    );
    assert!(setting(&c, "--module-sha256", "ZUNDOKO_MODULE_SHA256").is_none(), "a pin would refuse every swap");
}

/// kube-apiserver's limit on a ConfigMap's values, decoded (corev1.MaxSecretSize), and its
/// text when a ConfigMap passes it (field.TooLong on the whole object, printed as `[]`).
const CONFIGMAP_MAX_BYTES: usize = 1 << 20;
const CONFIGMAP_TOO_LONG: &str = "ConfigMap \"zundoko-rules\" is invalid: []: Too long: may not be more than 1048576 bytes";

/// A module-sized blob kustomize puts under binaryData (not valid UTF-8), nothing in it repeated.
fn blob(len: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut bytes: Vec<u8> = b"\0asm\x0d\0\x01\0\xff".to_vec();
    while bytes.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        bytes.extend_from_slice(&x.to_le_bytes());
    }
    bytes.truncate(len);
    bytes
}

/// A scratch directory under the test target directory, removed when dropped.
struct ScratchDir(std::path::PathBuf);

impl ScratchDir {
    fn new(name: &str) -> Self {
        let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        ScratchDir(dir)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `make deploy-module`, which `make deploy` and `make swap` run before kubectl, refuses a
/// module a ConfigMap cannot hold, naming the limit and the sources that serve a big module
/// instead; a module of exactly 1 MiB is copied. (`-o guest`: the test's modules, not a build.)
#[test]
fn make_deploy_module_refuses_a_module_over_a_configmaps_1_mib() {
    let dir = ScratchDir::new("deploy-module-size");
    std::fs::write(dir.0.join("big.wasm"), blob(CONFIGMAP_MAX_BYTES + 1)).unwrap();
    std::fs::write(dir.0.join("edge.wasm"), blob(CONFIGMAP_MAX_BYTES)).unwrap();
    let out_file = dir.0.join("rules.wasm");
    let make = |rules: &str| {
        Command::new("make")
            .current_dir(common::deploy::deploy_dir().join(".."))
            .args(["-s", "-o", "guest", "deploy-module", &format!("RULES={rules}")])
            .arg(format!("MODULES={}", dir.0.display()))
            .arg(format!("DEPLOY_MODULE={}", out_file.display()))
            .env_remove("MAKEFLAGS")
            .env_remove("MFLAGS")
            .env_remove("MAKELEVEL")
            .output()
            .expect("make is installed")
    };
    let out = make("big");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a 1 MiB + 1 module was accepted: {stderr}");
    for said in [
        "is 1048577 bytes, over the 1048576 bytes (1 MiB) a ConfigMap may hold",
        CONFIGMAP_TOO_LONG,
        "make push MODULE=",
        "spec.source.oci.reference",
        "--module-oci",
        "a volume the pod mounts (--module FILE)",
    ] {
        assert!(stderr.contains(said), "the refusal does not say {said:?}: {stderr}");
    }
    assert!(!out_file.exists(), "a refused module was copied to deploy/module/");
    let out = make("edge");
    assert!(out.status.success(), "a module of exactly 1 MiB was refused: {}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read(&out_file).unwrap() == blob(CONFIGMAP_MAX_BYTES));
}

/// Runs kubectl with the kubeconfig, `stdin` piped in, off the async workers the local API
/// server runs on; (succeeded, stdout, stderr).
async fn kubectl(kubeconfig: &std::path::Path, args: &[&str], stdin: Option<String>) -> (bool, String, String) {
    let (kubeconfig, args) = (kubeconfig.to_path_buf(), args.iter().map(|a| a.to_string()).collect::<Vec<_>>());
    tokio::task::spawn_blocking(move || {
        use std::io::Write as _;
        let mut child = Command::new("kubectl")
            .env("KUBECONFIG", &kubeconfig)
            .env("HOME", kubeconfig.parent().unwrap())
            .args(&args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("kubectl (the client) is installed");
        let mut pipe = child.stdin.take().unwrap();
        let feeder = std::thread::spawn(move || pipe.write_all(stdin.unwrap_or_default().as_bytes()));
        let out = child.wait_with_output().unwrap();
        feeder.join().unwrap().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
    })
    .await
    .unwrap()
}

/// The module ConfigMap as `make swap` applies it (`kubectl apply --server-side` of
/// deploy/module/) against the local API server, which refuses what kube-apiserver refuses: a
/// 2 MiB module (an interpreter's component is 10 to 20 MB) with the limit named, while a
/// 900 KiB one goes in byte for byte.
#[tokio::test]
async fn the_api_server_refuses_a_2_mib_module_configmap_and_takes_900_kib() {
    let server = zundoko_apiserver::ApiServer::start(zundoko_apiserver::ServerConfig::default()).await.unwrap();
    let dir = ScratchDir::new("module-configmap-size");
    let kubeconfig = dir.0.join("kubeconfig");
    std::fs::write(&kubeconfig, server.kubeconfig_yaml()).unwrap();
    let (ok, _, err) = kubectl(&kubeconfig, &["create", "namespace", NAMESPACE], None).await;
    assert!(ok, "{err}");
    let apply = ["apply", "--server-side", "--field-manager=zundoko-deploy", "--force-conflicts", "-f", "-"];
    let (ok, out, err) = kubectl(&kubeconfig, &apply, Some(common::deploy::render_dir("module", &blob(2 << 20)))).await;
    assert!(!ok, "a 2 MiB module ConfigMap was applied: {out}");
    assert!(err.contains(CONFIGMAP_TOO_LONG), "the refusal does not name the limit: {err}");
    let module = blob(900 << 10);
    let (ok, out, err) = kubectl(&kubeconfig, &apply, Some(common::deploy::render_dir("module", &module))).await;
    assert!(ok, "a 900 KiB module ConfigMap was refused: {err}");
    assert!(out.contains(&format!("configmap/{MODULE_CONFIGMAP} serverside-applied")), "{out}");
    let client = kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
    let cm = kube::Api::<ConfigMap>::namespaced(client, NAMESPACE).get(MODULE_CONFIGMAP).await.unwrap();
    assert!(cm.binary_data.unwrap_or_default()[MODULE_KEY].0 == module, "the stored module differs from the one applied");
}

#[test]
fn three_replicas_share_the_shards_with_the_pods_identity_and_rbac_for_every_lease() {
    let deployment: Deployment = one("Deployment");
    let spec = deployment.spec.unwrap();
    assert_eq!(spec.replicas, Some(3), "every replica works: three share the shards");
    let pod = pod();
    assert_eq!(pod.service_account_name.as_deref(), Some(ACCOUNT));
    assert_ne!(pod.automount_service_account_token, Some(false), "the operator needs its token");
    // Spread over nodes and zones, but never left pending for want of them.
    let spread = pod.topology_spread_constraints.unwrap_or_default();
    let keys: Vec<&str> = spread.iter().map(|t| t.topology_key.as_str()).collect();
    assert_eq!(keys, ["kubernetes.io/hostname", "topology.kubernetes.io/zone"]);
    for t in &spread {
        assert_eq!((t.max_skew, t.when_unsatisfiable.as_str()), (1, "ScheduleAnyway"), "{t:?}");
        let selects = t.label_selector.as_ref().and_then(|s| s.match_labels.clone()).unwrap_or_default();
        assert_eq!(selects.get("app.kubernetes.io/name").map(String::as_str), Some("zundoko-operator"));
    }
    // A drain takes one replica at a time, and the budget selects the Deployment's pods.
    let pdb: k8s_openapi::api::policy::v1::PodDisruptionBudget = one("PodDisruptionBudget");
    assert_eq!(pdb.metadata.namespace.as_deref(), Some(NAMESPACE));
    let pdb = pdb.spec.unwrap();
    assert_eq!(pdb.max_unavailable, Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1)));
    assert_eq!(pdb.selector.and_then(|s| s.match_labels), spec.selector.match_labels);

    let c = operator_container();
    let on = c.args.iter().flatten().any(|a| a == "--leader-election") || env(&c, "ZUNDOKO_LEADER_ELECTION").as_deref() == Some("true");
    assert!(on, "shards held through Leases, so no Hikawa has two deciders");
    for (name, field) in [("POD_NAME", "metadata.name"), ("POD_NAMESPACE", "metadata.namespace")] {
        let from = c.env.iter().flatten().find(|e| e.name == name).and_then(|e| e.value_from.clone()).and_then(|v| v.field_ref);
        assert_eq!(from.map(|f| f.field_path).as_deref(), Some(field), "{name} from the downward API");
    }
    let prefix = setting(&c, "--lease-name", "ZUNDOKO_LEASE_NAME").unwrap_or_else(|| "zundoko-operator".into());
    let shards: u16 = setting(&c, "--shards", "ZUNDOKO_SHARDS").map_or(32, |s| s.parse().unwrap());
    let rbac = operator_rbac();
    // Every Lease the replicas use, by the operator's own naming: the Role names them all.
    let names = zundoko_operator::process::leader::assign::lease_names(&prefix, shards);
    assert_eq!(names.len(), shards as usize + 1);
    for lease in &names {
        for verb in ["get", "update"] {
            assert!(rbac.allows(verb, "coordination.k8s.io", "leases", "", NAMESPACE, lease), "{verb} lease {lease}");
        }
        // Taken and renewed only by an update carrying the resourceVersion read: never a
        // patch (or a forced apply) that would overwrite another holder's record.
        assert!(!rbac.allows("patch", "coordination.k8s.io", "leases", "", NAMESPACE, lease), "no patch of {lease}");
    }
    assert!(rbac.allows("create", "coordination.k8s.io", "leases", "", NAMESPACE, ""), "create the leases");
    // Nothing beyond them: the next shard's name is not granted.
    let next = zundoko_operator::process::leader::assign::lease_name(&prefix, shards, shards + 1);
    assert!(!rbac.allows("get", "coordination.k8s.io", "leases", "", NAMESPACE, &next), "{next}");
}

/// `make deploy IMG=...` replaces the render's `image:` line with sed: there must be exactly one.
#[test]
fn the_render_has_one_image_the_images_transformer_set() {
    let lines: Vec<&str> = RENDERED
        .lines()
        .filter(|l| {
            let l = l.trim_start_matches(' ');
            l.strip_prefix("- ").unwrap_or(l).starts_with("image: ")
        })
        .collect();
    assert_eq!(lines.len(), 1, "image lines: {lines:?}");
    let image = operator_container().image.expect("image");
    assert!(lines[0].ends_with(&format!("image: {image}")));
    assert!(image.contains('/') && image.contains(':'), "{image}: kustomization.yaml's images: entry did not apply");
}

#[test]
fn the_crds_are_the_binarys() {
    let out = Command::new(env!("CARGO_BIN_EXE_zundoko-operator")).arg("crd").env("RUST_LOG", "off").output().unwrap();
    assert!(out.status.success(), "zundoko-operator crd: {}", String::from_utf8_lossy(&out.stderr));
    let by_name = |docs: Vec<Value>| -> BTreeMap<String, Value> {
        docs.into_iter().map(|d| (d["metadata"]["name"].as_str().unwrap().to_string(), numbers_as_floats(d))).collect()
    };
    let printed = by_name(documents(&String::from_utf8(out.stdout).unwrap()));
    let rendered = by_name(of_kind("CustomResourceDefinition").into_iter().cloned().collect());
    assert_eq!(rendered.keys().collect::<Vec<_>>(), printed.keys().collect::<Vec<_>>());
    for (name, crd) in &printed {
        assert!(&rendered[name] == crd, "CRD {name} in the render differs from `zundoko-operator crd`: run `make crds`");
    }
}

/// JSON numbers compared by value: kustomize re-prints the CRDs' `minimum: 0.0` as `0`,
/// which is the same number to the API server.
fn numbers_as_floats(value: Value) -> Value {
    match value {
        Value::Number(n) => serde_json::Number::from_f64(n.as_f64().unwrap()).map_or(Value::Number(n), Value::Number),
        Value::Array(items) => Value::Array(items.into_iter().map(numbers_as_floats).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, numbers_as_floats(v))).collect()),
        other => other,
    }
}
