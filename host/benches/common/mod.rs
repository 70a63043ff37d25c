//! What the benchmarks share: the input of a call at a given number of children.

use zundoko_rules::naming::zundoko_name;
use zundoko_rules::{Observed, Said};

/// A Hikawa with `children` words said (Zun Doko Zun Doko ...: never the call, so every
/// decision says one more word).
pub fn observed(children: u32) -> Observed {
    let mut o = Observed {
        hikawa: zundoko_rules::Hikawa {
            namespace: "default".into(),
            name: "hikawa-sample".into(),
            uid: "0b4f3e9a-5a53-4b8e-9a1e-4b8a2f7c1d11".into(),
            generation: 1,
            created_at: Some(0),
            interval_millis: 0,
            ..Default::default()
        },
        now: 1_000_000,
        entropy: 42,
        ..Observed::default()
    };
    // Zun Doko Zun Doko ...: never the call, so every decision says one more word.
    for index in 1..=children {
        let word = if index % 2 == 1 { "Zun" } else { "Doko" };
        o.zundokos.push(Said { name: zundoko_name("hikawa-sample", index), index, word: word.into(), said_at: Some(index as i64) });
    }
    o.hikawa.status.num_zundokos_said = children;
    o
}
