//! Values in specs, entry files and traces: integers, MAC, IPv4 and IPv6 addresses, with
//! prefixes (`/len`), masks (`&&&` or `/0xmask`) and ranges (`lo..hi`).

use crate::ir::ValueKind;
use std::net::{Ipv4Addr, Ipv6Addr};

impl ValueKind {
    /// Width in bits.
    pub fn width(self) -> u8 {
        match self {
            ValueKind::Int(w) => w,
            ValueKind::Mac => 48,
            ValueKind::Ipv4 => 32,
            ValueKind::Ipv6 => 128,
        }
    }

    /// Parses one value of this kind. Integers must fit the width.
    pub fn parse(self, s: &str) -> Result<u128, String> {
        let s = s.trim();
        let v = match self {
            ValueKind::Mac => parse_mac(s).ok_or_else(|| format!("'{s}' is not a MAC address (like 02:00:00:00:00:01)"))?,
            ValueKind::Ipv4 => match s.parse::<Ipv4Addr>() {
                Ok(a) => u128::from(u32::from(a)),
                Err(_) => parse_int(s).ok_or_else(|| format!("'{s}' is not an IPv4 address"))?,
            },
            ValueKind::Ipv6 => match s.parse::<Ipv6Addr>() {
                Ok(a) => u128::from(a),
                Err(_) => return Err(format!("'{s}' is not an IPv6 address")),
            },
            // A 32-bit integer (a metadata register) also takes an IPv4 address.
            ValueKind::Int(32) => match s.parse::<Ipv4Addr>() {
                Ok(a) => u128::from(u32::from(a)),
                Err(_) => parse_int(s).ok_or_else(|| format!("'{s}' is not a number or an IPv4 address"))?,
            },
            ValueKind::Int(_) => parse_int(s).ok_or_else(|| format!("'{s}' is not a number"))?,
        };
        let w = self.width();
        if w < 128 && v >> w != 0 {
            return Err(format!("{s} does not fit in {w} bits"));
        }
        Ok(v)
    }

    /// Writes a value of this kind the way `parse` reads it.
    pub fn format(self, v: u128) -> String {
        match self {
            ValueKind::Mac => {
                let b = (v as u64).to_be_bytes();
                format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[2], b[3], b[4], b[5], b[6], b[7])
            }
            ValueKind::Ipv4 => Ipv4Addr::from(v as u32).to_string(),
            ValueKind::Ipv6 => Ipv6Addr::from(v).to_string(),
            ValueKind::Int(_) => v.to_string(),
        }
    }
}

fn parse_int(s: &str) -> Option<u128> {
    let s = s.replace('_', "");
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u128::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

fn parse_mac(s: &str) -> Option<u128> {
    let parts: Vec<&str> = s.split([':', '-']).collect();
    if parts.len() != 6 {
        return None;
    }
    let mut v = 0u128;
    for p in parts {
        if p.is_empty() || p.len() > 2 {
            return None;
        }
        v = v << 8 | u128::from(u8::from_str_radix(p, 16).ok()?);
    }
    Some(v)
}

/// A key-field match as written in an entry: exact value, prefix, value/mask, range or wildcard.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Match {
    /// Exactly this value.
    Exact(u128),
    /// The top `len` bits equal those of `value`.
    Prefix(u128, u8),
    /// `value & mask == key & mask`.
    Masked(u128, u128),
    /// `lo <= key <= hi`.
    Range(u128, u128),
    /// Anything.
    Any,
}

impl Match {
    /// Writes the match the way [`Match::parse`] reads it, for a field of `kind`.
    pub fn format(&self, kind: ValueKind) -> String {
        match *self {
            Match::Exact(v) => kind.format(v),
            Match::Prefix(v, l) => format!("{}/{l}", kind.format(v)),
            Match::Masked(v, m) => format!("{}/{m:#x}", kind.format(v)),
            Match::Range(lo, hi) => format!("{}..{}", kind.format(lo), kind.format(hi)),
            Match::Any => "*".into(),
        }
    }

    /// Parses `*`, `v`, `v/len`, `v/0xmask` (or `v&&&mask`) and `lo..hi` for a field of `kind`.
    pub fn parse(kind: ValueKind, s: &str) -> Result<Match, String> {
        let s = s.trim();
        let w = kind.width();
        if s == "*" || s == "any" {
            return Ok(Match::Any);
        }
        if let Some((lo, hi)) = s.split_once("..") {
            let (lo, hi) = (kind.parse(lo)?, kind.parse(hi)?);
            if lo > hi {
                return Err(format!("range {s} is empty (low end above high end)"));
            }
            return Ok(Match::Range(lo, hi));
        }
        let split = s.split_once("&&&").or_else(|| {
            // '/' is a prefix length or a mask; IPv6 addresses never contain '/'.
            s.rsplit_once('/')
        });
        if let Some((v, m)) = split {
            let value = kind.parse(v)?;
            let is_mask = s.contains("&&&") || m.starts_with("0x");
            if is_mask {
                let mask = parse_int(m).ok_or_else(|| format!("'{m}' is not a mask"))?;
                return Ok(Match::Masked(value & mask, mask));
            }
            let len: u8 = m.parse().map_err(|_| format!("'{m}' is not a prefix length"))?;
            if len > w {
                return Err(format!("prefix length {len} is longer than the field's {w} bits"));
            }
            let mask = prefix_mask(len, w);
            if value & !mask != 0 {
                return Err(format!("{s} has bits set beyond its /{len} prefix"));
            }
            return Ok(Match::Prefix(value, len));
        }
        Ok(Match::Exact(kind.parse(s)?))
    }

    /// The match as an inclusive range, when it is one (exact, prefix, wildcard, range).
    pub fn as_range(&self, width: u8) -> Option<(u128, u128)> {
        let all = if width >= 128 { u128::MAX } else { (1u128 << width) - 1 };
        match *self {
            Match::Exact(v) => Some((v, v)),
            Match::Prefix(v, l) => Some((v, v | (all & !prefix_mask(l, width)))),
            Match::Range(lo, hi) => Some((lo, hi)),
            Match::Any => Some((0, all)),
            Match::Masked(v, m) => {
                // A mask of leading ones is a prefix.
                let inv = all & !m;
                if inv & inv.wrapping_add(1) == 0 {
                    Some((v & m, (v & m) | inv))
                } else {
                    None
                }
            }
        }
    }
}

/// A mask of the top `len` bits of a `width`-bit field (`len` ≥ `width` gives every bit).
pub fn prefix_mask(len: u8, width: u8) -> u128 {
    let all = if width >= 128 { u128::MAX } else { (1u128 << width) - 1 };
    // `all >> 128` would overflow (a panic in debug builds; in release the amount wraps to 0, so
    // a /128 came out as an empty mask and `2001:db8::42/128` was refused).
    all & !all.checked_shr(u32::from(len)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_and_format() {
        assert_eq!(ValueKind::Mac.parse("02:00:00:00:00:0a").unwrap(), 0x02000000000a);
        assert_eq!(ValueKind::Mac.format(0x02000000000a), "02:00:00:00:00:0a");
        assert_eq!(ValueKind::Ipv4.parse("198.18.0.1").unwrap(), 0xc6120001);
        assert_eq!(ValueKind::Int(16).parse("0x10").unwrap(), 16);
        assert!(ValueKind::Int(8).parse("256").unwrap_err().contains("8 bits"));
        assert!(ValueKind::Mac.parse("02:00").is_err());
        assert_eq!(ValueKind::Ipv6.parse("2001:2::1").unwrap(), 0x2001_0002_0000_0000_0000_0000_0000_0001);
    }

    #[test]
    fn matches() {
        let k = ValueKind::Ipv4;
        assert_eq!(Match::parse(k, "10.0.0.0/8").unwrap(), Match::Prefix(0x0a000000, 8));
        assert_eq!(Match::parse(k, "10.0.0.0/8").unwrap().as_range(32), Some((0x0a000000, 0x0affffff)));
        assert!(Match::parse(k, "10.0.0.1/8").unwrap_err().contains("beyond"));
        assert_eq!(Match::parse(ValueKind::Int(16), "80..90").unwrap(), Match::Range(80, 90));
        assert_eq!(Match::parse(ValueKind::Int(8), "6/0xff").unwrap(), Match::Masked(6, 0xff));
        assert_eq!(Match::parse(ValueKind::Int(8), "*").unwrap(), Match::Any);
        assert_eq!(Match::Masked(0x12, 0xf0).as_range(8), Some((0x10, 0x1f)));
        assert_eq!(Match::Masked(0x02, 0x02).as_range(8), None);
        assert_eq!(Match::parse(ValueKind::Ipv6, "2001:2::/32").unwrap(), Match::Prefix(0x2001_0002u128 << 96, 32));
        assert_eq!(Match::parse(ValueKind::Ipv6, "2001:db8::42/128").unwrap(), Match::Prefix(0x2001_0db8u128 << 96 | 0x42, 128));
        assert_eq!(Match::parse(ValueKind::Int(128), "7/128").unwrap(), Match::Prefix(7, 128));
    }

    #[test]
    fn prefix_mask_at_the_boundaries() {
        for w in [8u8, 16, 32, 48, 64, 127, 128] {
            let all = if w == 128 { u128::MAX } else { (1u128 << w) - 1 };
            assert_eq!(prefix_mask(0, w), 0, "/0 of {w}");
            assert_eq!(prefix_mask(w, w), all, "/{w} of {w}");
            assert_eq!(prefix_mask(1, w), 1 << (w - 1), "/1 of {w}");
        }
        assert_eq!(prefix_mask(64, 128), u128::MAX << 64);
        assert_eq!(prefix_mask(24, 32), 0xffff_ff00);
    }

    use proptest::prelude::*;

    /// A field kind and a prefix length, boundary lengths (/0, the full width and, for IPv6,
    /// /32 and /64) weighted in: they are where a shift by the full width hides.
    fn kind_and_len() -> impl Strategy<Value = (ValueKind, u8)> {
        let kind = prop_oneof![
            Just(ValueKind::Ipv4),
            Just(ValueKind::Ipv6),
            Just(ValueKind::Mac),
            prop_oneof![Just(8u8), Just(16), Just(32), Just(64), Just(128), 1u8..=128].prop_map(ValueKind::Int),
        ];
        kind.prop_flat_map(|k| {
            let w = k.width();
            let len = prop_oneof![
                3 => Just(0u8),
                3 => Just(w),
                2 => Just(32u8.min(w)),
                2 => Just(64u8.min(w)),
                1 => Just(w.saturating_sub(1)),
                4 => 0..=w,
            ];
            (Just(k), len)
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        /// Every prefix `v/len` (host bits cleared) parses back from its text as the same prefix;
        /// its range is [v, v | host bits]; with a host bit set it is refused; `/width+1` is refused.
        #[test]
        fn prefixes_round_trip((kind, len) in kind_and_len(), raw in any::<u128>()) {
            let w = kind.width();
            let all = if w >= 128 { u128::MAX } else { (1u128 << w) - 1 };
            let mask = prefix_mask(len, w);
            prop_assert_eq!(mask.count_ones(), u32::from(len));
            prop_assert_eq!(mask & !all, 0);
            let v = raw & mask;
            let m = Match::Prefix(v, len);
            let text = m.format(kind);
            prop_assert_eq!(Match::parse(kind, &text), Ok(m), "{}", text);
            prop_assert_eq!(m.as_range(w), Some((v, v | (all & !mask))));
            if len < w {
                let host = (raw & all & !mask).max(1 << (w - len - 1));
                let bad = Match::Prefix(v | host, len).format(kind);
                prop_assert!(Match::parse(kind, &bad).is_err(), "{} accepted", bad);
            }
            let too_long = format!("{}/{}", kind.format(v), u16::from(w) + 1);
            prop_assert!(Match::parse(kind, &too_long).is_err());
            // The same prefix written as a mask.
            if matches!(kind, ValueKind::Int(_)) && len > 0 {
                let masked = Match::parse(kind, &format!("{v}/{mask:#x}"));
                prop_assert_eq!(masked.map(|x| x.as_range(w)), Ok(Some((v, v | (all & !mask)))));
            }
        }
    }
}
