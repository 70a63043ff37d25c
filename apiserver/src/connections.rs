//! The TCP connections the server accepted, by client. A client speaking HTTP/1.1 (kube-rs,
//! client-go for most requests) needs a connection for each request in flight; a real
//! kube-apiserver pays a TLS handshake for each new one. So a client that closes and opens
//! connections (churn: a timeout that drops one, a pool that keeps too few) costs a real server
//! more than its requests say, and a client that keeps many requests in flight holds many open.
//! Counted here per client: accepted, open now, and the most open at once.
//!
//! A client is the User-Agent of a connection's first request (as the faults tell clients
//! apart); a connection closed before any request is counted only in the total.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// One client's connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientConnections {
    /// Connections whose first request was this client's.
    pub accepted: u64,
    /// Of those, open now.
    pub open: u64,
    /// The most open at once.
    pub most_open: u64,
}

#[derive(Default)]
pub struct Connections {
    accepted: AtomicU64,
    by_client: Mutex<HashMap<String, ClientConnections>>,
}

impl Connections {
    fn clients(&self) -> std::sync::MutexGuard<'_, HashMap<String, ClientConnections>> {
        self.by_client.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A connection was accepted (its client is not known before its first request).
    pub(crate) fn accepted(&self) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection's first request came, from `client`.
    pub(crate) fn first_request(&self, client: &str) {
        let mut clients = self.clients();
        let c = clients.entry(client.to_string()).or_default();
        c.accepted += 1;
        c.open += 1;
        c.most_open = c.most_open.max(c.open);
    }

    /// A connection whose first request was `client`'s was closed.
    pub(crate) fn closed(&self, client: &str) {
        if let Some(c) = self.clients().get_mut(client) {
            c.open = c.open.saturating_sub(1);
        }
    }

    /// Every connection accepted so far, with or without a request.
    pub fn total(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    /// Each client's connections, by User-Agent, sorted.
    pub fn by_client(&self) -> Vec<(String, ClientConnections)> {
        let mut all: Vec<_> = self.clients().iter().map(|(k, c)| (k.clone(), *c)).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }
}
