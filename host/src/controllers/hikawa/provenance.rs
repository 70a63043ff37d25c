//! The decision behind each child, recorded on it (issue 54): a compact, versioned annotation
//! that names the module, the contract, the entropy, the time, the Hikawa's generation and
//! status as the rules saw them, the replica that decided, and a digest of the whole input in a
//! canonical encoding. With it `explain` rebuilds the input from the cluster and proves it equal
//! (the digest), then replays the call; without it (a child written by someone else) it says so.
//!
//! The format, version `v1` (docs/debugging.md documents it; a change of any field's meaning
//! is a new version, and a reader refuses a version it does not know):
//!
//! ```text
//! v1 m=<module digest> c=<contract version> e=<entropy, 16 hex> t=<now, ms> g=<generation>
//!    n=<status numZundokosSaid> k=<status kiyoshied 0|1> [p=<status phase>] r=<replica>
//!    i=<sha256 of the canonical input, 64 hex>
//! ```
//!
//! Fields in that order, one space between; `p` is absent when the status had no phase. Values
//! are percent-encoded outside `A-Z a-z 0-9 . _ : / -`, so no value holds a space.

use std::fmt;

use serde::Serialize;
use sha2::{Digest, Sha256};
use zundoko_rules::{Observed, Said};

/// The annotation on each child that records the decision that made it.
pub const DECISION: &str = "zundokokiyoshi.kaitoy.github.com/decision";

/// The version of the annotation's format this host writes and reads.
pub const FORMAT: &str = "v1";

/// The contract version the host speaks (the WIT package's version, `wit/zundoko-rules.wit`).
pub const CONTRACT: &str = "0.1.0";

/// One decision, as recorded on the children it made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provenance {
    /// `sha256:<hex>` of the module (`native:<name>` for rules linked into the host).
    pub module: String,
    pub contract: String,
    pub entropy: u64,
    /// The `now` the rules observed, in milliseconds.
    pub now: i64,
    pub generation: i64,
    /// The Hikawa's status as the rules saw it (not in the cluster any more once it moved on).
    pub status: zundoko_rules::HikawaStatus,
    /// The replica (its identity: the pod name) that decided.
    pub replica: String,
    /// sha256 of [`canonical_input`] of what the rules observed, 64 hex digits.
    pub input: String,
}

impl Provenance {
    /// The record of a decision by `module` from `observed`, made by `replica`.
    pub fn of(observed: &Observed, module: &str, replica: &str) -> Provenance {
        Provenance {
            module: module.into(),
            contract: CONTRACT.into(),
            entropy: observed.entropy,
            now: observed.now,
            generation: observed.hikawa.generation,
            status: observed.hikawa.status.clone(),
            replica: replica.into(),
            input: input_digest(observed),
        }
    }

    /// Read an annotation's value.
    pub fn parse(value: &str) -> Result<Provenance, ProvenanceError> {
        let mut fields = value.split(' ');
        match fields.next() {
            Some(FORMAT) => {}
            other => return Err(ProvenanceError::Version(other.unwrap_or_default().chars().take(16).collect())),
        }
        let mut next = |key: &'static str, optional: bool| -> Result<Option<String>, ProvenanceError> {
            let mut peek = fields.clone();
            match peek.next().and_then(|f| f.split_once('=')) {
                Some((k, v)) if k == key => {
                    fields = peek;
                    decode(v).map(Some).ok_or(ProvenanceError::Field(key))
                }
                _ if optional => Ok(None),
                _ => Err(ProvenanceError::Missing(key)),
            }
        };
        let required = |value: Option<String>, key| value.ok_or(ProvenanceError::Missing(key));
        let module = required(next("m", false)?, "m")?;
        let contract = required(next("c", false)?, "c")?;
        let entropy = u64::from_str_radix(&required(next("e", false)?, "e")?, 16).map_err(|_| ProvenanceError::Field("e"))?;
        let now = required(next("t", false)?, "t")?.parse().map_err(|_| ProvenanceError::Field("t"))?;
        let generation = required(next("g", false)?, "g")?.parse().map_err(|_| ProvenanceError::Field("g"))?;
        let num_zundokos_said = required(next("n", false)?, "n")?.parse().map_err(|_| ProvenanceError::Field("n"))?;
        let kiyoshied = match required(next("k", false)?, "k")?.as_str() {
            "0" => false,
            "1" => true,
            _ => return Err(ProvenanceError::Field("k")),
        };
        let phase = next("p", true)?;
        let replica = required(next("r", false)?, "r")?;
        let input = required(next("i", false)?, "i")?;
        if input.len() != 64 || !input.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ProvenanceError::Field("i"));
        }
        if fields.next().is_some() {
            return Err(ProvenanceError::Trailing);
        }
        let status = zundoko_rules::HikawaStatus { num_zundokos_said, kiyoshied, phase };
        Ok(Provenance { module, contract, entropy, now, generation, status, replica, input })
    }
}

impl fmt::Display for Provenance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{FORMAT} m={} c={} e={:016x} t={} g={}", encode(&self.module), encode(&self.contract), self.entropy, self.now, self.generation)?;
        write!(f, " n={} k={}", self.status.num_zundokos_said, u8::from(self.status.kiyoshied))?;
        if let Some(phase) = &self.status.phase {
            write!(f, " p={}", encode(phase))?;
        }
        write!(f, " r={} i={}", encode(&self.replica), self.input)
    }
}

/// Why an annotation cannot be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProvenanceError {
    #[error("the decision annotation is of format {0:?}; this host reads {FORMAT}")]
    Version(String),
    #[error("the decision annotation lacks its field {0}=")]
    Missing(&'static str),
    #[error("the decision annotation's field {0}= is malformed")]
    Field(&'static str),
    #[error("the decision annotation has fields past i=")]
    Trailing,
}

fn plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'/' | b'-')
}

fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if plain(b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn decode(value: &str) -> Option<String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else if plain(bytes[i]) {
            out.push(bytes[i]);
            i += 1;
        } else {
            return None;
        }
    }
    String::from_utf8(out).ok()
}

/// The canonical encoding of what the rules observed: JSON with the keys of every object in
/// bytewise order, no whitespace, strings escaped as RFC 8785 escapes them, integers as
/// integers, the entropy as 16 lowercase hex digits (a u64 is no JSON number every reader
/// holds exactly), absent values as `null`, params as `[key, value]` pairs in key order. The
/// structs below declare their fields in that order: the serializer writes them so.
pub fn canonical_input(observed: &Observed) -> Vec<u8> {
    #[derive(Serialize)]
    struct Input<'a> {
        entropy: String,
        hikawa: HikawaIn<'a>,
        kiyoshi: Option<SaidIn<'a>>,
        now: i64,
        zundokos: Vec<SaidIn<'a>>,
    }
    #[derive(Serialize)]
    struct HikawaIn<'a> {
        #[serde(rename = "createdAt")]
        created_at: Option<i64>,
        generation: i64,
        #[serde(rename = "intervalMillis")]
        interval_millis: u64,
        name: &'a str,
        namespace: &'a str,
        params: &'a [(String, String)],
        status: StatusIn<'a>,
        uid: &'a str,
    }
    #[derive(Serialize)]
    struct StatusIn<'a> {
        kiyoshied: bool,
        #[serde(rename = "numZundokosSaid")]
        num_zundokos_said: u32,
        phase: Option<&'a str>,
    }
    #[derive(Serialize)]
    struct SaidIn<'a> {
        index: u32,
        name: &'a str,
        #[serde(rename = "saidAt")]
        said_at: Option<i64>,
        word: &'a str,
    }
    fn said(s: &Said) -> SaidIn<'_> {
        SaidIn { index: s.index, name: &s.name, said_at: s.said_at, word: &s.word }
    }
    let h = &observed.hikawa;
    let input = Input {
        entropy: format!("{:016x}", observed.entropy),
        hikawa: HikawaIn {
            created_at: h.created_at,
            generation: h.generation,
            interval_millis: h.interval_millis,
            name: &h.name,
            namespace: &h.namespace,
            params: &h.params,
            status: StatusIn { kiyoshied: h.status.kiyoshied, num_zundokos_said: h.status.num_zundokos_said, phase: h.status.phase.as_deref() },
            uid: &h.uid,
        },
        kiyoshi: observed.kiyoshi.as_ref().map(said),
        now: observed.now,
        zundokos: observed.zundokos.iter().map(said).collect(),
    };
    // Plain data of strings and integers: serializing cannot fail.
    serde_json::to_vec(&input).unwrap_or_default()
}

/// sha256 of [`canonical_input`], 64 lowercase hex digits.
pub fn input_digest(observed: &Observed) -> String {
    hex::encode(Sha256::digest(canonical_input(observed)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observed() -> Observed {
        Observed {
            hikawa: zundoko_rules::Hikawa {
                namespace: "default".into(),
                name: "hk".into(),
                uid: "u-1".into(),
                generation: 2,
                created_at: Some(0),
                interval_millis: 500,
                params: vec![("b".into(), "x\"y".into()), ("a".into(), "1".into())],
                status: zundoko_rules::HikawaStatus { num_zundokos_said: 1, kiyoshied: false, phase: Some("Singing".into()) },
            },
            zundokos: vec![Said { name: "hk-zundoko-001".into(), index: 1, word: "Zun".into(), said_at: Some(1_000) }],
            kiyoshi: None,
            now: 1_500,
            entropy: u64::MAX - 6,
        }
    }

    #[test]
    fn the_canonical_input_is_fixed_byte_for_byte() {
        let text = String::from_utf8(canonical_input(&observed())).unwrap();
        assert_eq!(
            text,
            r#"{"entropy":"fffffffffffffff9","hikawa":{"createdAt":0,"generation":2,"intervalMillis":500,"name":"hk","namespace":"default","params":[["b","x\"y"],["a","1"]],"status":{"kiyoshied":false,"numZundokosSaid":1,"phase":"Singing"},"uid":"u-1"},"kiyoshi":null,"now":1500,"zundokos":[{"index":1,"name":"hk-zundoko-001","saidAt":1000,"word":"Zun"}]}"#
        );
    }

    #[test]
    fn every_input_field_moves_the_digest() {
        let base = input_digest(&observed());
        let changes: [fn(&mut Observed); 8] = [
            |o| o.entropy ^= 1,
            |o| o.now += 1,
            |o| o.hikawa.generation += 1,
            |o| o.hikawa.status.phase = None,
            |o| o.hikawa.params[0].1.push('!'),
            |o| o.zundokos[0].said_at = None,
            |o| o.zundokos[0].word = "Doko".into(),
            |o| o.kiyoshi = Some(Said { name: "hk-kiyoshi".into(), index: 2, word: "Ki".into(), said_at: None }),
        ];
        for (i, change) in changes.iter().enumerate() {
            let mut o = observed();
            change(&mut o);
            assert_ne!(input_digest(&o), base, "change {i}");
        }
    }

    #[test]
    fn an_annotation_reads_back_as_written() {
        let mut p = Provenance::of(&observed(), "sha256:ab", "operator-0 pod/ü");
        let text = p.to_string();
        assert!(!text.contains("pod/ü"), "{text}");
        assert_eq!(Provenance::parse(&text).unwrap(), p);
        p.status.phase = None;
        assert_eq!(Provenance::parse(&p.to_string()).unwrap(), p);
        assert_eq!(Provenance::parse("v9 m=x"), Err(ProvenanceError::Version("v9".into())));
        let no_input = text.rsplit_once(" i=").unwrap().0;
        assert_eq!(Provenance::parse(no_input), Err(ProvenanceError::Missing("i")));
        assert_eq!(Provenance::parse(&format!("{text} x=1")), Err(ProvenanceError::Trailing));
        assert_eq!(Provenance::parse(&text.replace(" k=0", " k=2")), Err(ProvenanceError::Field("k")));
    }
}
