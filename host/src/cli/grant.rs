//! `grant-reads`: the Role a tenant's namespace gives the operator, so it may read the pull
//! secrets and ConfigMaps the tenant's rule sets name, by name and only `get` (docs/tenants.md,
//! RBAC). The operator holds no read of Secrets or ConfigMaps outside its own namespace: each
//! tenant grants exactly what its rule sets need, and a rule set naming one not granted says
//! so in its status (`PullSecretUnreadable`, `SourceUnreadable`).

use anyhow::{Result, ensure};
use serde_json::{Value, json};

use crate::cli::args::GrantReadsArgs;
use crate::crd::names::{is_dns_label, is_dns_subdomain};

/// The Role's and RoleBinding's name in the tenant's namespace.
pub const NAME: &str = "zundoko-operator-reads";

/// Print the two objects as one YAML stream, for `kubectl apply -f -`.
pub fn grant_reads(args: &GrantReadsArgs, out: &mut dyn std::io::Write) -> Result<()> {
    for (docs, yaml) in objects(args)?.iter().map(|o| ("---", serde_yaml::to_string(o))) {
        write!(out, "{docs}\n{}", yaml?)?;
    }
    Ok(())
}

/// The Role and its RoleBinding, every name checked as the API server would.
pub fn objects(args: &GrantReadsArgs) -> Result<[Value; 2]> {
    dns_label("--namespace", &args.namespace)?;
    dns_label("--operator-namespace", &args.operator_namespace)?;
    dns_subdomain("--operator-account", &args.operator_account)?;
    ensure!(!args.secrets.is_empty() || !args.configmaps.is_empty(), "name at least one --secret or --configmap to grant: a Role of no rules grants nothing");
    let mut rules = Vec::new();
    for (resource, names, flag) in [("secrets", &args.secrets, "--secret"), ("configmaps", &args.configmaps, "--configmap")] {
        for name in names {
            dns_subdomain(flag, name)?;
        }
        let mut names = names.clone();
        names.sort();
        names.dedup();
        if !names.is_empty() {
            rules.push(json!({"apiGroups": [""], "resources": [resource], "resourceNames": names, "verbs": ["get"]}));
        }
    }
    let labels = json!({"app.kubernetes.io/name": "zundoko-operator"});
    Ok([
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": NAME, "namespace": args.namespace, "labels": labels},
            "rules": rules,
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": NAME, "namespace": args.namespace, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
            "subjects": [{"kind": "ServiceAccount", "name": args.operator_account, "namespace": args.operator_namespace}],
        }),
    ])
}

/// A namespace's name, as the API server checks it.
fn dns_label(flag: &str, name: &str) -> Result<()> {
    ensure!(is_dns_label(name), "{flag} {}: not a namespace name (at most 63 of a-z, 0-9 and '-', a letter or digit at both ends)", crate::text::printable(name, 80));
    Ok(())
}

/// An object's name, as the API server checks it.
fn dns_subdomain(flag: &str, name: &str) -> Result<()> {
    ensure!(is_dns_subdomain(name), "{flag} {}: not an object name (at most 253 of a-z, 0-9, '-' and '.', a letter or digit at both ends of each part)", crate::text::printable(name, 80));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(ns: &str, secrets: &[&str], configmaps: &[&str]) -> GrantReadsArgs {
        GrantReadsArgs {
            namespace: ns.into(),
            secrets: secrets.iter().map(|s| s.to_string()).collect(),
            configmaps: configmaps.iter().map(|s| s.to_string()).collect(),
            operator_namespace: "zundoko-system".into(),
            operator_account: "zundoko-operator".into(),
        }
    }

    #[test]
    fn names_at_their_limits_pass_and_one_past_them_is_refused_by_flag() {
        let label = "a".repeat(63);
        let subdomain = format!("{}.{}.{}.{}", "b".repeat(63), "c".repeat(63), "d".repeat(63), "e".repeat(61));
        assert_eq!(subdomain.len(), 253);
        assert!(objects(&args(&label, &[&subdomain], &[])).is_ok());
        let error = objects(&args(&"a".repeat(64), &["s"], &[])).unwrap_err().to_string();
        assert!(error.starts_with("--namespace "), "{error}");
        let error = objects(&args("team-a", &[&format!("{subdomain}x")], &[])).unwrap_err().to_string();
        assert!(error.starts_with("--secret "), "{error}");
        for bad in ["Rules", "-rules", "rules-", "ru..les", "ru\u{1b}[31mles", ""] {
            let error = objects(&args("team-a", &[], &[bad])).unwrap_err().to_string();
            assert!(error.starts_with("--configmap ") && !error.contains('\u{1b}'), "{bad:?}: {error}");
        }
        assert!(objects(&args("team-a", &[], &[])).unwrap_err().to_string().contains("at least one"));
    }

    #[test]
    fn each_name_is_granted_once_and_only_get() {
        let [role, binding] = objects(&args("team-a", &["a-pull", "a-pull"], &["rules-a"])).unwrap();
        assert_eq!(role["rules"], json!([
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a-pull"], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["rules-a"], "verbs": ["get"]},
        ]));
        assert_eq!(binding["subjects"], json!([{"kind": "ServiceAccount", "name": "zundoko-operator", "namespace": "zundoko-system"}]));
        assert_eq!((role["metadata"]["namespace"].as_str(), binding["roleRef"]["name"].as_str()), (Some("team-a"), Some(NAME)));
    }
}
