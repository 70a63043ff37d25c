//! deploy/network-policy, the NetworkPolicy component a user opts into: rendered as its own
//! kustomization's comments show, it allows the operator's egress to DNS, the API server and the
//! registries only, and its placeholders reach nothing until they are filled in.

mod common;

use k8s_openapi::api::core::v1::Container;
use serde_json::Value;

use common::deploy::{documents, env, of_kind};

/// The overlay deploy/network-policy/kustomization.yaml shows in its comments (the lines from
/// `resources:` to the first bare `#`), as a user copies it.
fn network_policy_example() -> String {
    let text = std::fs::read_to_string(common::deploy::deploy_dir().join("network-policy/kustomization.yaml")).unwrap();
    let example: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("#   resources:"))
        .take_while(|l| l.trim_end() != "#")
        .map(|l| l.strip_prefix("#   ").unwrap_or_else(|| panic!("an example line not indented as the rest: {l:?}")))
        .collect();
    assert!(example.len() > 3, "deploy/network-policy/kustomization.yaml shows an overlay using it");
    format!("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n{}\n", example.join("\n"))
}

/// Every (protocol, port, destination) an egress rule allows: each rule must name both, since a
/// rule without `to` allows every destination and one without `ports` every port.
fn egress(policy: &Value) -> Vec<(String, i64, Value)> {
    let mut allowed = Vec::new();
    for (i, rule) in policy["spec"]["egress"].as_array().expect("egress rules").iter().enumerate() {
        let to = rule["to"].as_array().filter(|t| !t.is_empty()).unwrap_or_else(|| panic!("egress rule {i} names no destination: it would allow all"));
        let ports = rule["ports"].as_array().filter(|p| !p.is_empty()).unwrap_or_else(|| panic!("egress rule {i} names no port: it would allow all"));
        for peer in to {
            for port in ports {
                assert!(port["endPort"].is_null(), "egress rule {i}: no port ranges");
                allowed.push((port["protocol"].as_str().unwrap_or("TCP").to_string(), port["port"].as_i64().expect("a numbered port"), peer.clone()));
            }
        }
    }
    allowed
}

#[test]
fn the_network_policy_component_allows_egress_to_dns_the_api_server_and_the_registries_only() {
    assert!(of_kind("NetworkPolicy").is_empty(), "deploy/ includes no NetworkPolicy unless opted into");
    let docs = documents(&common::deploy::render_overlay(&network_policy_example(), &common::module_bytes("zundoko-classic")));
    let kind = |k: &str| docs.iter().filter(|d| d["kind"] == k).collect::<Vec<_>>();
    let (policies, deployments) = (kind("NetworkPolicy"), kind("Deployment"));
    assert_eq!((policies.len(), deployments.len()), (1, 1), "one NetworkPolicy and the Deployment in the overlay's render");
    let (policy, deployment) = (policies[0], deployments[0]);

    // It applies to the operator's Pods, in their namespace, and to their egress only.
    assert_eq!(policy["metadata"]["namespace"], deployment["metadata"]["namespace"]);
    let selector = policy["spec"]["podSelector"]["matchLabels"].as_object().expect("the policy selects by labels");
    assert!(!selector.is_empty());
    for (key, value) in selector {
        assert_eq!(&deployment["spec"]["template"]["metadata"]["labels"][key], value, "the policy selects the operator's Pods by {key}={value}");
    }
    assert_eq!(policy["spec"]["policyTypes"], serde_json::json!(["Egress"]), "egress restricted, ingress (probes, scrapes) not");

    let allowed = egress(policy);
    let cidr = |peer: &Value| peer["ipBlock"]["cidr"].as_str().map(str::to_owned);
    for (protocol, port, peer) in &allowed {
        let cidr = cidr(peer);
        assert!(!matches!(cidr.as_deref(), Some("0.0.0.0/0" | "::/0")), "{protocol}/{port} to anywhere");
        match port {
            // DNS: to the cluster's resolver only, not to any address.
            53 => assert_eq!(peer["podSelector"]["matchLabels"]["k8s-app"], "kube-dns", "DNS to the kube-dns Pods: {peer}"),
            // The API server (443 or 6443) and the registries (443), by the addresses patched in.
            443 | 6443 => assert!(cidr.is_some() && protocol == "TCP", "TCP/{port} to an ipBlock: {peer}"),
            other => panic!("egress to port {other} allowed: {peer}"),
        }
    }
    let reaches = |cidr_: &str, port: i64| allowed.iter().any(|(p, n, peer)| p == "TCP" && *n == port && cidr(peer).as_deref() == Some(cidr_));
    assert!(reaches("10.0.0.10/32", 443) && reaches("10.0.0.10/32", 6443), "the API server patched in is reached on 443 and 6443: {allowed:?}");
    assert!(reaches("140.82.112.0/20", 443) && !reaches("140.82.112.0/20", 6443), "the registry patched in is reached on 443 only: {allowed:?}");
    for protocol in ["UDP", "TCP"] {
        assert!(allowed.iter().any(|(p, n, _)| p == protocol && *n == 53), "DNS over {protocol}");
    }
    // Only the patched addresses: the placeholders are gone (they reach nothing).
    let documentation = ["192.0.2.", "198.51.100.", "203.0.113."];
    assert!(allowed.iter().filter_map(|(_, _, peer)| cidr(peer)).all(|c| !documentation.iter().any(|d| c.starts_with(d))), "a placeholder left: {allowed:?}");

    // The operator is told the same registries by name.
    let container: Container = serde_json::from_value(deployment["spec"]["template"]["spec"]["containers"][0].clone()).unwrap();
    assert_eq!(env(&container, "ZUNDOKO_ALLOWED_REGISTRIES").as_deref(), Some("ghcr.io,pkg-containers.githubusercontent.com"));
}

#[test]
fn the_network_policy_component_s_placeholders_reach_nothing() {
    let kustomization = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../deploy]\ncomponents: [../deploy/network-policy]\n";
    let docs = documents(&common::deploy::render_overlay(kustomization, &common::module_bytes("zundoko-classic")));
    let policy = docs.iter().find(|d| d["kind"] == "NetworkPolicy").expect("the component adds the NetworkPolicy");
    let documentation = ["192.0.2.", "198.51.100.", "203.0.113."];
    for (_, port, peer) in egress(policy) {
        if let Some(cidr) = peer["ipBlock"]["cidr"].as_str() {
            assert!(documentation.iter().any(|d| cidr.starts_with(d)), "port {port}: {cidr} is a real address left in the component (RFC 5737 ranges only)");
        }
    }
}
