//! Each tenant's share of the cache's bound (`--cache-max-mib`, `disk_cache.rs`): while two or
//! more tenants keep files in it, each may keep an equal part. Collection takes first from the
//! tenants over their part, least recently used first (what serves is spared as ever), then
//! from everyone; and a tenant's compiled code that would not fit its part of the room is
//! refused naming the tenant (`sandbox/module.rs`), a blob not kept: a tenant that pulls and
//! compiles module after module cannot push the others' modules out. Alone, a tenant may fill
//! the cache.
//!
//! Who owns a file survives a restart: before a file is put in place, its owner is written
//! beside it (`DIR/owners/FOLDER-NAME`, [`record_text`]): the tenant's label and an HMAC of it
//! under the cache's key bound to the file's folder and name, so a record copied to another
//! file, or written by anyone but the operator, does not verify. A file found without an owner
//! record that verifies (a record missing, too big, malformed, forged; a cache from before
//! owners were kept) is dropped, never counted as the cluster's: a tenant's module would
//! otherwise take the cluster's part after a restart, and its tenant would get its part again.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::supply::tenant::Tenant;

/// An owner record is a label (63 bytes at most), a space, 64 hex digits and a newline: never
/// more than this.
pub const MAX_OWNER_RECORD: u64 = 160;

/// Why an owner record is not believed.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadOwnerRecord {
    #[error("it is not one line of text: a label, a space and 64 hex digits")]
    Malformed,
    #[error("{0:?} names no tenant (_cluster, or a namespace's name)")]
    NoTenant(String),
    #[error("its MAC does not verify under the cache's key for this file (another file's record, or not the operator's)")]
    NotOurs,
}

/// The owner record's file name for entry `name` of `folder` (`blobs`, `tags`, ...).
pub fn record_name(folder: &str, name: &str) -> String {
    format!("{folder}-{name}")
}

/// What an owner record's MAC is bound to: the file it is for.
pub fn record_context(folder: &str, name: &str) -> Vec<u8> {
    format!("zundoko-operator cache owner v1\0{folder}/{name}").into_bytes()
}

/// The record's text: the owner's label and `mac`, the MAC of that label.
pub fn record_text(tenant: &Tenant, mac: &[u8]) -> String {
    format!("{} {}\n", tenant.label(), hex::encode(mac))
}

/// A record read back (at most [`MAX_OWNER_RECORD`] bytes), parsed strictly: the owner, once
/// `verify(label, mac)` holds.
pub fn parse_record(bytes: &[u8], verify: impl FnOnce(&[u8], &[u8]) -> bool) -> Result<Tenant, BadOwnerRecord> {
    let text = std::str::from_utf8(bytes).map_err(|_| BadOwnerRecord::Malformed)?;
    let line = text.strip_suffix('\n').filter(|l| !l.contains('\n')).ok_or(BadOwnerRecord::Malformed)?;
    let (label, mac) = line.split_once(' ').ok_or(BadOwnerRecord::Malformed)?;
    if mac.len() != 64 || !mac.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return Err(BadOwnerRecord::Malformed);
    }
    let tenant = Tenant::from_label(label).ok_or_else(|| BadOwnerRecord::NoTenant(crate::text::printable(label, 64)))?;
    let mac = hex::decode(mac).map_err(|_| BadOwnerRecord::Malformed)?;
    if !verify(label.as_bytes(), &mac) {
        return Err(BadOwnerRecord::NotOurs);
    }
    Ok(tenant)
}

/// Files by folder and name, and whose they are, as this process knows them (what it wrote,
/// and what it read the owner records of).
#[derive(Default)]
pub struct Owners(Mutex<HashMap<(u8, String), Tenant>>);

impl Owners {
    pub fn record(&self, folder: u8, name: &str, tenant: &Tenant) {
        self.lock().insert((folder, name.to_owned()), tenant.clone());
    }

    /// Whose the file is, if this process knows.
    pub fn of(&self, folder: u8, name: &str) -> Option<Tenant> {
        self.lock().get(&(folder, name.to_owned())).cloned()
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
    fn an_owner_record_is_believed_only_strictly_formed_and_verified() {
        let verify_all = |_: &[u8], _: &[u8]| true;
        let mac = [0xabu8; 32];
        let a = Tenant::Namespace("team-a".into());
        assert_eq!(parse_record(record_text(&a, &mac).as_bytes(), verify_all), Ok(a.clone()));
        assert_eq!(parse_record(record_text(&Tenant::Cluster, &mac).as_bytes(), verify_all), Ok(Tenant::Cluster));
        // The MAC is checked over the label as written, against what it says.
        let checked = parse_record(record_text(&a, &mac).as_bytes(), |label, m| label == b"team-a" && m == mac);
        assert_eq!(checked, Ok(a.clone()));
        assert_eq!(parse_record(record_text(&a, &mac).as_bytes(), |_, _| false), Err(BadOwnerRecord::NotOurs));
        let hex = hex::encode(mac);
        for bad in [
            format!("team-a {hex}"),               // no newline
            format!("team-a {hex}\n\n"),           // two lines
            format!("team-a  {hex}\n"),            // two spaces
            format!("team-a {}\n", &hex[..62]),    // a short MAC
            format!("team-a {}\n", hex.to_uppercase()),
        ] {
            assert_eq!(parse_record(bad.as_bytes(), verify_all), Err(BadOwnerRecord::Malformed), "{bad:?}");
        }
        for label in ["Team-A", "-a", "a_b", "", &"a".repeat(64)] {
            assert!(matches!(parse_record(format!("{label} {hex}\n").as_bytes(), verify_all), Err(BadOwnerRecord::NoTenant(_) | BadOwnerRecord::Malformed)), "{label:?}");
        }
        assert_eq!(parse_record(&[0xff, b' ', b'\n'], verify_all), Err(BadOwnerRecord::Malformed));
    }

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
