//! The kubeconfig written for the server.

pub const CONTEXT: &str = "zundoko-local";

pub fn kubeconfig_yaml(url: &str) -> String {
    let token = crate::authn::ADMIN_TOKEN;
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: {CONTEXT}
  cluster:
    server: {url}
contexts:
- name: {CONTEXT}
  context:
    cluster: {CONTEXT}
    user: {CONTEXT}
    namespace: default
current-context: {CONTEXT}
preferences: {{}}
users:
- name: {CONTEXT}
  user:
    token: {token}
"
    )
}
