//! Each tenant's share of the cache's bound (`--cache-max-mib`, `disk_cache.rs`): while two or
//! more tenants keep files in it, each may keep an equal part. Collection takes first from the
//! tenants over their part, least recently used first (what serves is spared as ever), then
//! from everyone; and a tenant's compiled code that would not fit its part of the room is
//! refused naming the tenant (`sandbox/module.rs`), a blob not kept: a tenant that pulls and
//! compiles module after module cannot push the others' modules out. Alone, a tenant may fill
//! the cache.
//!
//! Who owns a file is remembered when the operator writes it; a file found in the directory at
//! start (written before a restart) is the cluster's until it is written again.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::supply::tenant::Tenant;

/// Files by folder and name, and whose they are.
#[derive(Default)]
pub struct Owners(Mutex<HashMap<(u8, String), Tenant>>);

impl Owners {
    pub fn record(&self, folder: u8, name: &str, tenant: &Tenant) {
        self.lock().insert((folder, name.to_owned()), tenant.clone());
    }

    pub fn of(&self, folder: u8, name: &str) -> Tenant {
        self.lock().get(&(folder, name.to_owned())).cloned().unwrap_or_default()
    }

    /// Forget files no longer there.
    pub fn retain(&self, there: impl Fn(u8, &str) -> bool) {
        self.lock().retain(|(folder, name), _| there(*folder, name));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(u8, String), Tenant>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A file as collection weighs it.
pub struct Weighed<'a> {
    pub owner: &'a Tenant,
    pub size: u64,
    /// Last used (modification time, nanoseconds).
    pub used: i64,
}

/// Each tenant's part of `max` bytes with `tenants` keeping files (`None`: one alone, no part).
pub fn part(max: u64, tenants: usize) -> Option<u64> {
    (tenants > 1).then(|| max / tenants as u64)
}

/// The tenants keeping files, and `also` (a tenant about to write).
pub fn tenants<'a>(files: &[Weighed<'a>], also: &'a Tenant) -> HashMap<&'a Tenant, u64> {
    let mut kept: HashMap<&Tenant, u64> = HashMap::from([(also, 0)]);
    for file in files {
        *kept.entry(file.owner).or_default() += file.size;
    }
    kept
}

/// The order to remove `files` in until the cache fits `max`: first the least recently used of
/// the tenants over their part (each while it still is), then everyone's least recently used.
pub fn removal_order(files: &[Weighed<'_>], max: u64, writer: &Tenant) -> Vec<usize> {
    let mut held = tenants(files, writer);
    let mut by_use: Vec<usize> = (0..files.len()).collect();
    by_use.sort_by_key(|&at| files[at].used);
    let Some(part) = part(max, held.len()) else { return by_use };
    let mut order = Vec::with_capacity(files.len());
    let mut rest = Vec::new();
    for at in by_use {
        let owner = held.get_mut(files[at].owner).expect("every owner counted");
        if *owner > part {
            *owner -= files[at].size;
            order.push(at);
        } else {
            rest.push(at);
        }
    }
    order.extend(rest);
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tenant_over_its_part_loses_its_files_first_even_the_newer_ones() {
        let (a, b) = (Tenant::Namespace("a".into()), Tenant::Namespace("b".into()));
        // 100 bytes: 50 each. a keeps 80 (four newer files), b 30 (the oldest files).
        let files = [
            Weighed { owner: &b, size: 15, used: 1 },
            Weighed { owner: &b, size: 15, used: 2 },
            Weighed { owner: &a, size: 20, used: 3 },
            Weighed { owner: &a, size: 20, used: 4 },
            Weighed { owner: &a, size: 20, used: 5 },
            Weighed { owner: &a, size: 20, used: 6 },
        ];
        // Least recently used alone: b's two files go first.
        assert_eq!(removal_order(&files, 100, &a), [2, 3, 0, 1, 4, 5], "a's oldest two, until a is within 50, then by use");
        // Alone, a tenant has no part: by use.
        let alone: Vec<_> = files.iter().map(|f| Weighed { owner: &a, size: f.size, used: f.used }).collect();
        assert_eq!(removal_order(&alone, 100, &a), [0, 1, 2, 3, 4, 5]);
        assert_eq!(part(100, 1), None);
        assert_eq!(part(100, 4), Some(25));
    }
}
