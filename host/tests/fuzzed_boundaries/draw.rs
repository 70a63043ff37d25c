//! Inputs drawn from a string of bytes: the same bytes make the same observed state and plan,
//! whether a property test's generator or the fuzzer chose them (shared with fuzz/ by path).
//! Most draws are near what a module would really return (the right namespace, the next
//! index), so that a check is passed often enough for what it accepts to be checked; the rest
//! are anything. Bytes past the end read as zero, so every string of bytes makes an input.

use zundoko_operator::supply::contract::plan_check::PlanLimits;
use zundoko_operator::supply::sandbox::bindings::zundokokiyoshi::rules::types as wit;
use zundoko_rules::naming::{kiyoshi_name, zundoko_name};
use zundoko_rules::{
    Action, ChildKind, Hikawa, HikawaStatus, Observed, Plan, Said, Say, StatusUpdate,
};

/// Characters a hostile module or registry would try: markup, controls, bidirectional
/// overrides, the song's own Japanese, a BOM, a lone combining mark.
const TRICKY: &[char] = &[
    ' ',
    '-',
    '!',
    '\'',
    '.',
    ',',
    '・',
    '！',
    'ー',
    '～',
    'ズ',
    'ン',
    'ド',
    'コ',
    'キ',
    'ヨ',
    'シ',
    '<',
    '>',
    '"',
    '\\',
    '/',
    ':',
    '@',
    '=',
    '\0',
    '\n',
    '\r',
    '\t',
    '\x1b',
    '\u{7f}',
    '\u{85}',
    '\u{202e}',
    '\u{2066}',
    '\u{200b}',
    '\u{feff}',
    '\u{301}',
    'é',
    'ß',
    '٣',
    '😀',
    '\u{10ffff}',
];

pub struct Draw<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Draw<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Draw { bytes, at: 0 }
    }

    pub fn byte(&mut self) -> u8 {
        let b = self.bytes.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    /// The bytes not drawn yet (the fuzz targets' payloads).
    #[allow(dead_code)]
    pub fn rest(&self) -> &'a [u8] {
        self.bytes.get(self.at..).unwrap_or(&[])
    }

    /// True `in_256` times out of 256.
    pub fn chance(&mut self, in_256: u16) -> bool {
        u16::from(self.byte()) < in_256
    }

    pub fn u64(&mut self) -> u64 {
        (0..8).fold(0, |v, _| v << 8 | u64::from(self.byte()))
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        let v = u64::from(self.byte()) << 8 | u64::from(self.byte());
        if n == 0 { 0 } else { v % n }
    }

    /// A place or length in `0..n` (0 when `n` is 0) drawn from 8 bytes, not [`below`]'s 2, so
    /// that a file of any size is reached anywhere.
    ///
    /// [`below`]: Self::below
    pub fn place(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.u64() % n as u64) as usize }
    }

    pub fn pick<T: Clone>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u64) as usize].clone()
    }

    /// Up to `max_chars` characters: letters and digits mostly, tricky ones often, any
    /// scalar value sometimes.
    pub fn text(&mut self, max_chars: u64) -> String {
        // Now and then far longer than asked: what a module may return is bounded only by its
        // memory, and a refusal must not quote it whole.
        let len = if self.chance(2) {
            5_000
        } else {
            self.below(max_chars + 1)
        };
        (0..len)
            .map(|_| match self.byte() {
                0..=127 => self.pick(&['a', 'Z', 'u', 'n', 'D', 'o', 'k', '0', '7', 'x']),
                128..=239 => self.pick(TRICKY),
                _ => char::from_u32((self.u64() % 0x11_0000) as u32).unwrap_or('\u{fffd}'),
            })
            .collect()
    }

    /// A word: one the shipped rules say, or any text.
    pub fn word(&mut self) -> String {
        if self.chance(160) {
            self.pick(&[
                "Zun",
                "Doko",
                "Ki-yo-shi!",
                "ズン",
                "ドコ",
                "キ・ヨ・シ！",
                "Zun Doko",
            ])
            .to_string()
        } else {
            self.text(70)
        }
    }

    /// Plan limits: the defaults mostly, sometimes small ones so their edges are met.
    pub fn limits(&mut self) -> PlanLimits {
        if self.chance(200) {
            return PlanLimits::default();
        }
        PlanLimits {
            max_actions: self.below(6) as usize,
            max_word_bytes: self.below(12) as usize,
            max_children: self.below(8) as u32,
            max_requeue_ms: self.below(1000),
            max_phase_bytes: self.below(10) as usize,
            max_message_bytes: self.below(20) as usize,
        }
    }

    /// An observed state as the host builds it (its children named and numbered by the
    /// naming module, in order), of a Hikawa with any name; near the child cap sometimes.
    pub fn observed(&mut self) -> Observed {
        let name = if self.chance(200) {
            self.pick(&["h", "hikawa-sample", "a.b"]).to_string()
        } else {
            self.text(20)
        };
        let count = if self.chance(16) {
            995 + self.below(6) as u32
        } else {
            self.below(8) as u32
        };
        let zundokos = (1..=count)
            .map(|i| Said {
                name: zundoko_name(&name, i),
                index: i,
                word: "Zun".into(),
                said_at: Some(i64::from(i)),
            })
            .collect();
        let kiyoshi = self.chance(40).then(|| Said {
            name: kiyoshi_name(&name),
            index: count + 1,
            word: "Ki-yo-shi!".into(),
            said_at: None,
        });
        Observed {
            hikawa: Hikawa {
                namespace: self.pick(&["ns", "default"]).into(),
                name,
                ..Hikawa::default()
            },
            zundokos,
            kiyoshi,
            now: 1_000,
            entropy: self.u64(),
        }
    }

    /// A plan a module might return for `observed`: each field right most of the time (the
    /// namespace, the next name and index), anything otherwise.
    pub fn plan(&mut self, observed: &Observed) -> Plan {
        let hikawa = &observed.hikawa;
        let mut next = observed.zundokos.len() as u32 + 1;
        // How often this plan gets a field wrong: some plans are nearly always right (so that
        // whole plans pass and what passes is checked), some often wrong.
        let slip = self.pick(&[1u16, 16, 64]);
        let count = self.below(8);
        let actions = (0..count)
            .map(|_| match self.byte() {
                0..=159 => {
                    let kind = if self.chance(40) {
                        ChildKind::Kiyoshi
                    } else {
                        ChildKind::Zundoko
                    };
                    let namespace = if self.chance(256 - slip) {
                        hikawa.namespace.clone()
                    } else {
                        self.text(30)
                    };
                    // Off by one or two, or anything; the name now and then made from that index.
                    let index = if self.chance(256 - slip) {
                        next
                    } else {
                        match self.byte() % 4 {
                            0 => self.u64() as u32,
                            _ => next.wrapping_add(self.pick(&[1, 2, u32::MAX])),
                        }
                    };
                    let name = match (self.chance(256 - slip), kind) {
                        (true, ChildKind::Zundoko) => zundoko_name(&hikawa.name, next),
                        (true, ChildKind::Kiyoshi) => kiyoshi_name(&hikawa.name),
                        // Near misses: from that index, another padding, another Hikawa's, the
                        // other kind's; or anything.
                        (false, _) => match (self.byte() % 6, kind) {
                            (0, _) => zundoko_name(&hikawa.name, index),
                            (1, _) => format!("{}-zundoko-{next:04}", hikawa.name),
                            (2, _) => zundoko_name(&format!("{}x", hikawa.name), next),
                            (3, ChildKind::Zundoko) => kiyoshi_name(&hikawa.name),
                            (3, ChildKind::Kiyoshi) => zundoko_name(&hikawa.name, next),
                            _ => self.text(30),
                        },
                    };
                    if kind == ChildKind::Zundoko {
                        next = next.saturating_add(1);
                    }
                    let word = if self.chance(256 - slip) {
                        self.word()
                    } else {
                        self.text(70)
                    };
                    Action::Say(Say {
                        kind,
                        namespace,
                        name,
                        index,
                        word,
                    })
                }
                160..=219 => Action::SetStatus(StatusUpdate {
                    phase: if self.chance(256 - slip) {
                        self.pick(&["Singing", "Kiyoshied", "X1"]).into()
                    } else {
                        self.text(40)
                    },
                    num_zundokos_said: if self.chance(256 - slip) {
                        next - 1
                    } else {
                        self.u64() as u32
                    },
                    kiyoshied: self.chance(60),
                    message: if self.chance(256 - slip) {
                        self.pick(&["", "3 words", "ズンドコ 3", "½ done, \"quoted\""])
                            .into()
                    } else {
                        self.text(300)
                    },
                }),
                _ => Action::RequeueAfter(if self.chance(256 - slip) {
                    self.below(10_000)
                } else {
                    self.u64()
                }),
            })
            .collect();
        Plan { actions }
    }

    /// An observed state as the rules might be handed it, consistent or not: words of any
    /// text, indexes and names now and then wrong, any params (the shipped rules read `zun`,
    /// `doko`, `kiyoshi` and `zuns`), any status. Small enough that no call runs out of fuel.
    pub fn any_observed(&mut self) -> Observed {
        let name = if self.chance(200) {
            "h".to_string()
        } else {
            self.text(12)
        };
        let count = self.below(12) as u32;
        let said = |d: &mut Self, i: u32| Said {
            name: if d.chance(240) {
                zundoko_name(&name, i)
            } else {
                d.text(16)
            },
            index: if d.chance(240) { i } else { d.below(20) as u32 },
            word: d.word(),
            said_at: d.chance(200).then(|| d.below(100_000) as i64),
        };
        let zundokos = (1..=count).map(|i| said(self, i)).collect();
        let kiyoshi = self.chance(30).then(|| said(self, count + 1));
        let params = (0..self.below(3))
            .map(|_| {
                (
                    self.pick(&["zun", "doko", "kiyoshi", "zuns", "other"])
                        .to_string(),
                    if self.chance(128) {
                        self.below(9).to_string()
                    } else {
                        self.word()
                    },
                )
            })
            .collect::<std::collections::BTreeMap<_, _>>()
            .into_iter()
            .collect();
        Observed {
            hikawa: Hikawa {
                namespace: "default".into(),
                name: name.clone(),
                uid: "u".into(),
                generation: 1,
                created_at: Some(0),
                interval_millis: self.below(2_000),
                params,
                status: HikawaStatus {
                    num_zundokos_said: self.below(20) as u32,
                    kiyoshied: self.chance(30),
                    phase: self
                        .chance(128)
                        .then(|| self.pick(&["Singing", "Kiyoshied"]).into()),
                },
            },
            zundokos,
            kiyoshi,
            now: self.below(1 << 40) as i64,
            entropy: self.u64(),
        }
    }
}

/// `plan` as the guest's bindings carry it.
pub fn to_guest(plan: &Plan) -> wit::Plan {
    let actions = plan
        .actions
        .iter()
        .map(|a| match a {
            Action::Say(s) => wit::Action::Say(wit::Say {
                kind: match s.kind {
                    ChildKind::Zundoko => wit::ChildKind::Zundoko,
                    ChildKind::Kiyoshi => wit::ChildKind::Kiyoshi,
                },
                namespace: s.namespace.clone(),
                name: s.name.clone(),
                index: s.index,
                word: s.word.clone(),
            }),
            Action::SetStatus(s) => wit::Action::SetStatus(wit::StatusUpdate {
                phase: s.phase.clone(),
                num_zundokos_said: s.num_zundokos_said,
                kiyoshied: s.kiyoshied,
                message: s.message.clone(),
            }),
            Action::RequeueAfter(ms) => wit::Action::RequeueAfter(*ms),
        })
        .collect();
    wit::Plan { actions }
}
