//! Shards as pure rules: which shard a Hikawa is in, what the shard Leases and the children's
//! shard label are called, and what a replica should take or hand back.

use std::collections::BTreeSet;

use sha2::{Digest, Sha256};

/// The label every child carries: its Hikawa's shard, as `NN-of-COUNT` (the count is part of
/// the value, so children labelled under another `--shards` are never mistaken for a shard of
/// this count: a replica's watch leaves out only the shards it does not hold *of this count*).
pub const SHARD_LABEL: &str = "zundokokiyoshi.kaitoy.github.com/shard";

/// The most shards: each is a Lease renewed every retry period.
pub const MAX_SHARDS: u16 = 256;

/// A Hikawa's shard: bytes 8..16 of sha256(uid), big-endian, modulo the count. The same in
/// every replica and across restarts. (The rollout's share takes bytes 0..8: the two do not
/// line up, so a candidate's Hikawas spread over every shard.)
pub fn shard_of(uid: &str, count: u16) -> u16 {
    let hash = Sha256::digest(uid.as_bytes());
    let bytes: [u8; 8] = hash[8..16].try_into().expect("sha256 has 32 bytes");
    (u64::from_be_bytes(bytes) % u64::from(count.max(1))) as u16
}

/// The shard whose holder writes rule set `name`'s status.
pub fn shard_of_rules(name: &str, count: u16) -> u16 {
    shard_of(&format!("zundokorules/{name}"), count)
}

fn width(count: u16) -> usize {
    (count.saturating_sub(1).max(1).ilog10() as usize + 1).max(2)
}

/// `<prefix>-shard-NN`, NN zero-padded to the width of the largest shard (at least 2).
pub fn lease_name(prefix: &str, shard: u16, count: u16) -> String {
    format!("{prefix}-shard-{shard:0w$}", w = width(count))
}

/// `<prefix>-members`: the Lease the replicas beat in.
pub fn members_lease_name(prefix: &str) -> String {
    format!("{prefix}-members")
}

/// Every Lease name the replicas use, for the Role's `resourceNames`.
pub fn lease_names(prefix: &str, count: u16) -> Vec<String> {
    let mut names: Vec<String> = (0..count).map(|s| lease_name(prefix, s, count)).collect();
    names.push(members_lease_name(prefix));
    names
}

/// The shard label's value: `NN-of-COUNT`.
pub fn label_value(shard: u16, count: u16) -> String {
    format!("{shard:0w$}-of-{count}", w = width(count))
}

/// The label selector for the children of `held` shards: the Hikawa label, and the shard
/// label not one of the shards held elsewhere. `notin` also matches children with no shard
/// label (written before shards existed), so none is ever missed. None if nothing is held.
pub fn children_selector(hikawa_label: &str, held: &BTreeSet<u16>, count: u16) -> Option<String> {
    if held.is_empty() {
        return None;
    }
    let others: Vec<String> = (0..count).filter(|s| !held.contains(s)).map(|s| label_value(s, count)).collect();
    Some(if others.is_empty() { hikawa_label.to_string() } else { format!("{hikawa_label},{SHARD_LABEL} notin ({})", others.join(",")) })
}

/// A replica's fair share: ceil(shards / live replicas).
pub fn fair_share(count: u16, members: usize) -> usize {
    (count as usize).div_ceil(members.max(1))
}

/// What a replica does about its shares this round.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Moves {
    /// Take these (free or expired) shards.
    pub take: Vec<u16>,
    /// Hand this one back (drained first).
    pub release: Option<u16>,
}

/// Up to its fair share: take free or expired shards (all it needs at once: a lone replica
/// starts with every shard); above it, hand back one shard per round, the highest, so shares
/// move gradually and a handover never overlaps another. `taking` are shards already being
/// taken (counted as held), `releasing` whether a handover is under way.
pub fn balance(held: &BTreeSet<u16>, taking: &BTreeSet<u16>, takeable: &BTreeSet<u16>, fair: usize, releasing: bool) -> Moves {
    let mut moves = Moves::default();
    let have = held.len() + taking.len();
    if have < fair {
        moves.take = takeable.iter().filter(|s| !held.contains(s) && !taking.contains(s)).take(fair - have).copied().collect();
    } else if held.len() > fair && !releasing {
        moves.release = held.iter().next_back().copied();
    }
    moves
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[u16]) -> BTreeSet<u16> {
        items.iter().copied().collect()
    }

    #[test]
    fn shards_are_stable_and_spread_evenly() {
        let hash = Sha256::digest(b"a");
        let expected = u64::from_be_bytes(hash[8..16].try_into().unwrap()) % 32;
        assert_eq!(shard_of("a", 32) as u64, expected);
        let uids: Vec<String> = (0..32_000).map(|i| format!("00000000-0000-0000-0000-{i:012}")).collect();
        let mut per = [0u32; 32];
        for uid in &uids {
            per[shard_of(uid, 32) as usize] += 1;
        }
        assert!(per.iter().all(|&n| (800..=1200).contains(&n)), "{per:?}");
        assert_eq!(shard_of("anything", 1), 0);
        assert_eq!(shard_of("anything", 0), 0, "no shards behaves as one");
    }

    #[test]
    fn names_and_labels_are_predictable_and_valid() {
        assert_eq!(lease_name("zundoko-operator", 7, 32), "zundoko-operator-shard-07");
        assert_eq!(lease_name("z", 7, 256), "z-shard-007");
        assert_eq!(lease_name("z", 0, 1), "z-shard-00");
        assert_eq!(label_value(3, 32), "03-of-32");
        assert_eq!(lease_names("z", 2), ["z-shard-00", "z-shard-01", "z-members"]);
        // A label value has at most 63 characters: the longest is 7.
        assert!(label_value(MAX_SHARDS - 1, MAX_SHARDS).len() <= 63);
    }

    #[test]
    fn the_selector_leaves_out_only_the_shards_held_elsewhere() {
        let all: BTreeSet<u16> = (0..4).collect();
        assert_eq!(children_selector("h", &all, 4).as_deref(), Some("h"));
        assert_eq!(children_selector("h", &set(&[1, 2]), 4).as_deref(), Some("h,zundokokiyoshi.kaitoy.github.com/shard notin (00-of-4,03-of-4)"));
        assert_eq!(children_selector("h", &BTreeSet::new(), 4), None);
    }

    #[test]
    fn balance_takes_up_to_the_fair_share_and_hands_back_one_at_a_time() {
        assert_eq!(fair_share(32, 3), 11);
        assert_eq!(fair_share(32, 0), 32);
        // Alone: every free shard at once.
        let free: BTreeSet<u16> = (0..32).collect();
        assert_eq!(balance(&BTreeSet::new(), &BTreeSet::new(), &free, 32, false).take.len(), 32);
        // Two taken already, one on its way: one more.
        assert_eq!(balance(&set(&[0, 1]), &set(&[2]), &set(&[2, 3, 4]), 4, false), Moves { take: vec![3], release: None });
        // Over the share: the highest goes back, one per round, never two at once.
        let held: BTreeSet<u16> = (0..16).collect();
        assert_eq!(balance(&held, &BTreeSet::new(), &BTreeSet::new(), 11, false), Moves { take: vec![], release: Some(15) });
        assert_eq!(balance(&held, &BTreeSet::new(), &BTreeSet::new(), 11, true), Moves::default());
        // At the share: nothing.
        assert_eq!(balance(&set(&[0, 1]), &BTreeSet::new(), &set(&[5]), 2, false), Moves::default());
    }
}
