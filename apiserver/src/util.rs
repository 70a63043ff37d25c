//! Small helpers: timestamps (RFC 3339, second precision), UIDs, name suffixes, durations.

use std::time::{SystemTime, UNIX_EPOCH};

use rand::Rng;

/// Days since 1970-01-01 to (year, month, day) (Howard Hinnant's civil_from_days).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = (z - era * 146_097) as u64;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe as i64 + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = (y - era * 400) as u64;
    let mp = if m > 2 { m - 3 } else { m + 9 } as u64;
    let doy = (153 * mp + 2) / 5 + d as u64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe as i64 - 719_468
}

pub fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs() as i64
}

pub fn format_rfc3339(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, (rem % 3600) / 60, rem % 60)
}

/// The current time as metav1.Time serialises it: RFC 3339, second precision, UTC.
pub fn now_rfc3339() -> String {
    format_rfc3339(unix_now())
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)` into unix seconds.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut i = 19;
    if b.get(i) == Some(&b'.') {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
    }
    let offset = match b.get(i)? {
        b'Z' | b'z' => 0,
        b'+' | b'-' => {
            let sign = if b[i] == b'+' { 1 } else { -1 };
            sign * (num(i + 1..i + 3)? * 3600 + num(i + 4..i + 6)? * 60)
        }
        _ => return None,
    };
    Some(days_from_civil(y, mo as u32, d as u32) * 86_400 + h * 3600 + mi * 60 + se - offset)
}

/// A random version-4 UUID, as the API server assigns to `metadata.uid`.
pub fn new_uid() -> String {
    let mut b: [u8; 16] = rand::rng().random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

/// The 5-character suffix `generateName` gets (k8s.io/apimachinery/pkg/util/rand.String).
pub fn random_suffix() -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5).map(|_| ALPHANUMS[rng.random_range(0..ALPHANUMS.len())] as char).collect()
}

/// k8s.io/apimachinery/pkg/util/duration.HumanDuration, used for the Age column.
pub fn human_duration(d: i64) -> String {
    if d < -1 {
        return "<invalid>".into();
    }
    let seconds = d.max(0);
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 { format!("{minutes}m") } else { format!("{minutes}m{s}s") };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 { format!("{hours}h") } else { format!("{hours}h{m}m") };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 { format!("{}d", hours / 24) } else { format!("{}d{h}h", hours / 24) };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 { format!("{}y", hours / 24 / 365) } else { format!("{}y{dy}d", hours / 24 / 365) };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn rfc3339_roundtrip() {
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(parse_rfc3339("2023-11-14T22:13:20Z"), Some(1_700_000_000));
        assert_eq!(parse_rfc3339("2023-11-14T22:13:20.123456Z"), Some(1_700_000_000));
        assert_eq!(parse_rfc3339("2023-11-14T23:13:20+01:00"), Some(1_700_000_000));
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(125), "2m5s");
        assert_eq!(new_uid().len(), 36);
    }
}
