//! ClassBench filter files: parser, writer, rule-set generator and header traces.
//!
//! ClassBench (Taylor and Turner, "ClassBench: A Packet Classification Benchmark", INFOCOM
//! 2005) writes one filter per line:
//!
//! ```text
//! @198.18.4.0/24  198.19.0.7/32  0 : 65535  80 : 80  0x06/0xFF  [0x0000/0x0000]
//!  src prefix     dst prefix     sport range dport range proto/mask  optional TCP flags/mask
//! ```
//!
//! A filter becomes a 5-field [`AclRule`] (widths [`FIELD_WIDTHS`]: sip, dip, sport, dport,
//! proto) whose priority and action are its line's position among the filters (the first line
//! wins, as in ClassBench). The flags column is checked for syntax and ignored by [`parse`];
//! [`parse_with_flags`] keeps it as a sixth, 16-bit ternary field.
//!
//! [`generate`] makes ClassBench-like rule sets without the original seed files: prefix lengths
//! and port classes are drawn from per-family distributions shaped like ClassBench's three seed
//! families (acl: long, specific destination prefixes and exact destination ports; fw: many
//! wildcards and port ranges; ipc: a mix), and addresses are drawn around a small pool of
//! "sites" so that prefixes nest and overlap the way real rule sets do. [`trace`] draws header
//! tuples that mostly fall inside chosen rules, like ClassBench's `trace_generator`.

use super::{Acl, AclConfig, AclRule, FieldMatch};
use std::fmt::{self, Write as _};

/// Field widths of a ClassBench 5-tuple: sip, dip, sport, dport, proto.
pub const FIELD_WIDTHS: [u8; 5] = [32, 32, 16, 16, 8];

/// A syntax error in a filter file, with its 1-based line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line number (for [`format`], the 0-based rule index + 1).
    pub line: usize,
    /// What was wrong.
    pub msg: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.msg)
    }
}

impl std::error::Error for ParseError {}

/// Parses a ClassBench filter file into 5-field rules; the flags column, if any, is ignored.
/// Blank lines and lines starting with `#` are skipped. Control thread only.
/// # Errors
/// The first malformed line.
pub fn parse(text: &str) -> Result<Vec<AclRule>, ParseError> {
    parse_inner(text, false)
}

/// As [`parse`], with the TCP-flags column as a sixth, 16-bit ternary field (`ANY` when the
/// column is absent).
/// # Errors
/// The first malformed line.
pub fn parse_with_flags(text: &str) -> Result<Vec<AclRule>, ParseError> {
    parse_inner(text, true)
}

fn parse_inner(text: &str, flags: bool) -> Result<Vec<AclRule>, ParseError> {
    let mut rules = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let err = |msg: String| ParseError { line: i + 1, msg };
        let body = line.strip_prefix('@').ok_or_else(|| err("filter must start with '@'".into()))?;
        let spaced = body.replace(':', " : ");
        let tok: Vec<&str> = spaced.split_whitespace().collect();
        if tok.len() < 9 {
            return Err(err(format!("expected at least 9 tokens, found {}", tok.len())));
        }
        let get = |k: usize| tok.get(k).copied().unwrap_or("");
        let sip = prefix(get(0)).map_err(&err)?;
        let dip = prefix(get(1)).map_err(&err)?;
        let sport = port_range(get(2), get(3), get(4)).map_err(&err)?;
        let dport = port_range(get(5), get(6), get(7)).map_err(&err)?;
        let (pv, pm) = masked(get(8), 0xff).map_err(&err)?;
        let proto = match pm {
            0xff => FieldMatch::exact(pv),
            0 => FieldMatch::range(0, 0xff),
            _ => FieldMatch::Masked { value: pv & pm, mask: pm },
        };
        let mut fields = vec![sip, dip, sport, dport, proto];
        match tok.get(9) {
            Some(f) => {
                let (fv, fm) = masked(f, 0xffff).map_err(&err)?;
                if flags {
                    fields.push(FieldMatch::Masked { value: fv & fm, mask: fm });
                }
            }
            None if flags => fields.push(FieldMatch::ANY),
            None => {}
        }
        if tok.len() > 10 {
            return Err(err(format!("unexpected token {:?}", get(10))));
        }
        let idx = rules.len() as u32;
        rules.push(AclRule { priority: idx, fields, action: idx });
    }
    Ok(rules)
}

fn prefix(s: &str) -> Result<FieldMatch, String> {
    let (addr, len) = s.split_once('/').ok_or_else(|| format!("expected addr/len, found {s:?}"))?;
    let addr: std::net::Ipv4Addr = addr.parse().map_err(|_| format!("bad IPv4 address {addr:?}"))?;
    let len: u8 = len.parse().map_err(|_| format!("bad prefix length {len:?}"))?;
    if len > 32 {
        return Err(format!("prefix length {len} above 32"));
    }
    Ok(FieldMatch::prefix(u32::from(addr), len, 32))
}

fn port_range(lo: &str, colon: &str, hi: &str) -> Result<FieldMatch, String> {
    if colon != ":" {
        return Err(format!("expected 'lo : hi' port range, found {lo:?} {colon:?} {hi:?}"));
    }
    let p = |s: &str| s.parse::<u16>().map_err(|_| format!("bad port {s:?}"));
    let (lo, hi) = (p(lo)?, p(hi)?);
    if lo > hi {
        return Err(format!("port range {lo} : {hi} is inverted"));
    }
    Ok(FieldMatch::range(u32::from(lo), u32::from(hi)))
}

fn masked(s: &str, max: u32) -> Result<(u32, u32), String> {
    let (v, m) = s.split_once('/').ok_or_else(|| format!("expected value/mask, found {s:?}"))?;
    let hex = |x: &str| {
        let digits = x.strip_prefix("0x").or_else(|| x.strip_prefix("0X")).unwrap_or(x);
        u32::from_str_radix(digits, 16).ok().filter(|&n| n <= max)
    };
    match (hex(v), hex(m)) {
        (Some(v), Some(m)) => Ok((v, m)),
        _ => Err(format!("bad value/mask {s:?} (hex, at most {max:#x})")),
    }
}

/// Writes 5-field rules (in their given order) as a ClassBench filter file.
/// # Errors
/// A rule that ClassBench cannot express (not 5 fields, an address range that is not a prefix,
/// a masked port, a protocol range other than exact or any); `line` is the rule index + 1.
pub fn format(rules: &[AclRule]) -> Result<String, ParseError> {
    let mut out = String::new();
    for (i, r) in rules.iter().enumerate() {
        let err = |msg: &str| ParseError { line: i + 1, msg: msg.to_string() };
        let [sip, dip, sport, dport, proto] = r.fields.as_slice() else {
            return Err(err("not a 5-field rule"));
        };
        let pfx = |f: &FieldMatch| -> Option<String> {
            let (lo, hi) = f.bounds(32);
            let host = hi.wrapping_sub(lo);
            if !f.is_range(32) || host & host.wrapping_add(1) != 0 || lo & host != 0 {
                return None;
            }
            Some(format!("{}/{}", std::net::Ipv4Addr::from(lo), host.leading_zeros()))
        };
        let port = |f: &FieldMatch| -> Option<(u32, u32)> { f.is_range(16).then(|| f.bounds(16)) };
        let (Some(s), Some(d)) = (pfx(sip), pfx(dip)) else {
            return Err(err("address is not a prefix"));
        };
        let (Some(sp), Some(dp)) = (port(sport), port(dport)) else {
            return Err(err("port is not a range"));
        };
        let (pv, pm) = match *proto {
            FieldMatch::Masked { value, mask } => (value, mask),
            FieldMatch::Range { lo, hi } if lo == hi => (lo, 0xff),
            FieldMatch::Range { lo: 0, hi: 0xff } => (0, 0),
            FieldMatch::Range { .. } => return Err(err("protocol range is not exact or any")),
        };
        let _ = writeln!(out, "@{s}\t{d}\t{} : {}\t{} : {}\t0x{pv:02X}/0x{pm:02X}", sp.0, sp.1, dp.0, dp.1);
    }
    Ok(out)
}

/// A ClassBench seed family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Access control lists: specific destinations and destination ports.
    Acl,
    /// Firewalls: many wildcards and port ranges.
    Fw,
    /// IP chains: a mix of both.
    Ipc,
}

impl Kind {
    /// Lower-case name (`acl`, `fw`, `ipc`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Acl => "acl",
            Kind::Fw => "fw",
            Kind::Ipc => "ipc",
        }
    }

    /// The kind with this lower-case name.
    pub fn from_name(s: &str) -> Option<Kind> {
        [Kind::Acl, Kind::Fw, Kind::Ipc].into_iter().find(|k| k.name() == s)
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, seedable, good enough for rule synthesis.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn u32(&mut self) -> u32 {
        (self.next() >> 32) as u32
    }
    /// Uniform in `lo..=hi`.
    fn between(&mut self, lo: u32, hi: u32) -> u32 {
        let span = u64::from(hi - lo) + 1;
        lo + ((u128::from(self.next()) * u128::from(span)) >> 64) as u32
    }
    /// Index drawn with the given weights.
    fn pick(&mut self, weights: &[u32]) -> usize {
        let total: u32 = weights.iter().sum();
        let mut x = self.between(0, total.saturating_sub(1));
        for (i, &w) in weights.iter().enumerate() {
            if x < w {
                return i;
            }
            x -= w;
        }
        0
    }
}

/// Prefix-length classes: (weight, shortest, longest).
type LenDist = &'static [(u32, u8, u8)];
/// Port classes, weights for: any, exact well-known, exact random, 1024:65535, 0:1023, random range.
type PortDist = [u32; 6];
/// Protocol weights for: TCP, UDP, ICMP, any, other exact.
type ProtoDist = [u32; 5];

struct Family {
    sip: LenDist,
    dip: LenDist,
    sport: PortDist,
    dport: PortDist,
    proto: ProtoDist,
}

// Shapes follow the prefix-length and port-class histograms of ClassBench's seed files
// (acl1, fw1, ipc1) as described in the ClassBench paper, §4: acl1 destinations are mostly
// /32 and /24–/31 with exact destination ports; fw1 has wildcards in over a third of the
// address fields and many arbitrary port ranges; ipc1 sits between them.
const ACL: Family = Family {
    sip: &[(30, 0, 0), (15, 8, 23), (15, 24, 31), (40, 32, 32)],
    dip: &[(3, 0, 0), (7, 8, 23), (35, 24, 31), (55, 32, 32)],
    sport: [96, 1, 1, 1, 0, 1],
    dport: [12, 55, 15, 8, 3, 7],
    proto: [70, 20, 5, 4, 1],
};
const FW: Family = Family {
    sip: &[(40, 0, 0), (25, 8, 23), (10, 24, 31), (25, 32, 32)],
    dip: &[(30, 0, 0), (15, 8, 23), (15, 24, 31), (40, 32, 32)],
    sport: [70, 3, 2, 15, 5, 5],
    dport: [30, 25, 5, 15, 5, 20],
    proto: [45, 20, 5, 28, 2],
};
const IPC: Family = Family {
    sip: &[(20, 0, 0), (20, 8, 23), (20, 24, 31), (40, 32, 32)],
    dip: &[(15, 0, 0), (20, 8, 23), (25, 24, 31), (40, 32, 32)],
    sport: [80, 5, 5, 5, 2, 3],
    dport: [35, 35, 10, 8, 4, 8],
    proto: [45, 35, 10, 8, 2],
};

const WELL_KNOWN: [u32; 16] = [20, 21, 22, 23, 25, 53, 80, 110, 123, 143, 161, 179, 389, 443, 1521, 8080];

fn gen_prefix(rng: &mut Rng, dist: LenDist, sites: &[u32]) -> FieldMatch {
    let weights: Vec<u32> = dist.iter().map(|d| d.0).collect();
    let (_, lo, hi) = dist.get(rng.pick(&weights)).copied().unwrap_or((1, 0, 0));
    let len = rng.between(u32::from(lo), u32::from(hi)) as u8;
    let site = sites.get(rng.between(0, sites.len().saturating_sub(1) as u32) as usize).copied();
    // Hosts near a site: the top 16 bits come from the site, the rest mostly from it too.
    let addr = site.unwrap_or(0) ^ (rng.u32() & (0xFFFF >> rng.between(0, 16)));
    FieldMatch::prefix(addr, len, 32)
}

fn gen_port(rng: &mut Rng, dist: &PortDist) -> FieldMatch {
    match rng.pick(dist) {
        0 => FieldMatch::range(0, 0xffff),
        1 => FieldMatch::exact(WELL_KNOWN[rng.between(0, WELL_KNOWN.len() as u32 - 1) as usize]),
        2 => FieldMatch::exact(rng.between(1024, 0xffff)),
        3 => FieldMatch::range(1024, 0xffff),
        4 => FieldMatch::range(0, 1023),
        _ => {
            let a = rng.between(0, 0xffff);
            let b = a.saturating_add(rng.between(1, 4096)).min(0xffff);
            FieldMatch::range(a, b)
        }
    }
}

fn gen_proto(rng: &mut Rng, dist: &ProtoDist) -> FieldMatch {
    match rng.pick(dist) {
        0 => FieldMatch::exact(6),
        1 => FieldMatch::exact(17),
        2 => FieldMatch::exact(1),
        3 => FieldMatch::range(0, 0xff),
        _ => FieldMatch::exact([47, 50, 51, 89, 132][rng.between(0, 4) as usize]),
    }
}

/// `n` ClassBench-like 5-field rules of family `kind`; rule `i` has priority and action `i`.
/// Rules are ordered roughly from specific to broad (by bits fixed, with jitter).
/// Deterministic in `seed`. Control thread / tests only.
pub fn generate(kind: Kind, n: usize, seed: u64) -> Vec<AclRule> {
    let fam = match kind {
        Kind::Acl => &ACL,
        Kind::Fw => &FW,
        Kind::Ipc => &IPC,
    };
    let mut rng = Rng(seed ^ ((kind as u64) << 56));
    // Address "sites": rule addresses cluster around them, so prefixes nest and overlap.
    let mut site_pool = |k: usize| -> Vec<u32> { (0..k.max(1)).map(|_| rng.u32()).collect() };
    let ssites = site_pool(n / 32 + 2);
    let dsites = site_pool(n / 16 + 2);
    let mut drawn: Vec<(u32, Vec<FieldMatch>)> = (0..n)
        .map(|_| {
            let fields = vec![
                gen_prefix(&mut rng, fam.sip, &ssites),
                gen_prefix(&mut rng, fam.dip, &dsites),
                gen_port(&mut rng, &fam.sport),
                gen_port(&mut rng, &fam.dport),
                gen_proto(&mut rng, &fam.proto),
            ];
            let fixed: u32 = fields
                .iter()
                .zip(FIELD_WIDTHS)
                .map(|(f, w)| {
                    let (lo, hi) = f.bounds(w);
                    u32::from(w).saturating_sub(32 - (hi - lo).leading_zeros())
                })
                .sum();
            (fixed + rng.between(0, 15), fields)
        })
        .collect();
    // Real rule sets list specific exceptions before broad policies; drawn in random order a
    // broad rule would shadow most rules after it and make the set trivially small.
    drawn.sort_by_key(|(fixed, _)| std::cmp::Reverse(*fixed));
    drawn.into_iter().enumerate().map(|(i, (_, fields))| AclRule { priority: i as u32, fields, action: i as u32 }).collect()
}

/// `n` header tuples (sip, dip, sport, dport, proto) for `rules`: 9 in 10 are drawn inside a
/// randomly chosen rule (a uniform point in each field's match), 1 in 10 are uniform random.
/// Fields a rule lacks (or rules of other shapes) are drawn at random. Deterministic in `seed`.
pub fn trace(rules: &[AclRule], n: usize, seed: u64) -> Vec<[u32; 5]> {
    let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0x5eed);
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let mut key = [0u32; 5];
        let chosen =
            if rules.is_empty() || rng.between(0, 9) == 0 { None } else { rules.get(rng.between(0, rules.len() as u32 - 1) as usize) };
        for (d, k) in key.iter_mut().enumerate() {
            let w = FIELD_WIDTHS[d];
            let max = super::width_max(w);
            *k = match chosen.and_then(|r| r.fields.get(d)) {
                Some(&FieldMatch::Range { lo, hi }) => rng.between(lo, hi.min(max).max(lo)),
                Some(&FieldMatch::Masked { value, mask }) => value | (rng.u32() & !mask & max),
                None => rng.u32() & max,
            };
        }
        out.push(key);
    }
    out
}

/// Builds the classifier for a ClassBench rule set (5-tuple widths). Control thread only.
/// # Errors
/// As [`Acl::build`].
pub fn build(rules: &[AclRule]) -> Result<Acl, super::BuildError> {
    Acl::build(&AclConfig::five_tuple(), rules)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn parses_classbench_lines() {
        let text = "@198.18.4.0/24\t198.19.0.7/32\t0 : 65535\t80 : 80\t0x06/0xFF\n\
                    \n# comment\n\
                    @0.0.0.0/0 10.1.2.3/8 1024:65535 53 : 53 0x00/0x00 0x1000/0x1000\n\
                    @1.2.3.4/32 5.6.7.8/32 1 : 2 3 : 4 0x11/0xFE\n";
        let r = parse(text).unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(
            r[0].fields,
            vec![
                FieldMatch::range(0xC612_0400, 0xC612_04FF),
                FieldMatch::exact(0xC613_0007),
                FieldMatch::range(0, 65535),
                FieldMatch::exact(80),
                FieldMatch::exact(6),
            ]
        );
        assert_eq!((r[1].priority, r[1].action), (1, 1));
        assert_eq!(r[1].fields[1], FieldMatch::range(0x0A00_0000, 0x0AFF_FFFF)); // host bits dropped
        assert_eq!(r[1].fields[4], FieldMatch::range(0, 255));
        assert_eq!(r[2].fields[4], FieldMatch::Masked { value: 0x10, mask: 0xFE });
        let f = parse_with_flags(text).unwrap();
        assert_eq!(f[0].fields[5], FieldMatch::ANY);
        assert_eq!(f[1].fields[5], FieldMatch::Masked { value: 0x1000, mask: 0x1000 });
    }

    #[test]
    fn parse_errors_name_the_line() {
        for (text, line, needle) in [
            ("198.18.0.0/16 0.0.0.0/0 0 : 1 0 : 1 0x06/0xFF", 1, "'@'"),
            ("@198.18.0.0/16 0.0.0.0/0 0 : 1 0 : 1", 1, "9 tokens"),
            ("\n@198.18.0.0/33 0.0.0.0/0 0 : 1 0 : 1 0x06/0xFF", 2, "above 32"),
            ("@198.18.0.256/16 0.0.0.0/0 0 : 1 0 : 1 0x06/0xFF", 1, "IPv4"),
            ("@198.18.0.0/16 0.0.0.0/0 5 : 1 0 : 1 0x06/0xFF", 1, "inverted"),
            ("@198.18.0.0/16 0.0.0.0/0 0 : 70000 0 : 1 0x06/0xFF", 1, "bad port"),
            ("@198.18.0.0/16 0.0.0.0/0 0 - 1 0 : 1 0x06/0xFF x", 1, "port range"),
            ("@198.18.0.0/16 0.0.0.0/0 0 : 1 0 : 1 0x106/0xFF", 1, "value/mask"),
            ("@198.18.0.0/16 0.0.0.0/0 0 : 1 0 : 1 0x06/0xFF 0x0/0x0 extra", 1, "unexpected"),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.line, line, "{text}");
            assert!(e.msg.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn format_then_parse_round_trips() {
        for kind in [Kind::Acl, Kind::Fw, Kind::Ipc] {
            let rules = generate(kind, 300, 9);
            let text = format(&rules).unwrap();
            assert_eq!(parse(&text).unwrap(), rules, "{}", kind.name());
        }
        let bad = AclRule { priority: 0, fields: vec![FieldMatch::range(1, 2); 5], action: 0 };
        assert_eq!(format(&[bad]).unwrap_err().line, 1);
    }

    #[test]
    fn generator_is_deterministic_and_shaped() {
        assert_eq!(generate(Kind::Fw, 100, 1), generate(Kind::Fw, 100, 1));
        assert_ne!(generate(Kind::Fw, 100, 1), generate(Kind::Fw, 100, 2));
        let wild = |k: Kind, d: usize| {
            generate(k, 2000, 5).iter().filter(|r| r.fields[d].bounds(32) == (0, if d < 2 { u32::MAX } else { 0xffff })).count()
        };
        // fw has far more wildcard addresses than acl; acl destinations are specific.
        assert!(wild(Kind::Fw, 0) > 2 * wild(Kind::Acl, 1), "{} {}", wild(Kind::Fw, 0), wild(Kind::Acl, 1));
        assert!(wild(Kind::Acl, 1) < 200);
        assert!(wild(Kind::Acl, 2) > 1800); // source ports almost always any
        assert_eq!(Kind::from_name("ipc"), Some(Kind::Ipc));
        assert_eq!(Kind::from_name("x"), None);
    }

    #[test]
    fn trace_mostly_hits_rules() {
        let rules = generate(Kind::Acl, 500, 2);
        let tr = trace(&rules, 1000, 3);
        assert_eq!(tr.len(), 1000);
        let hits = tr.iter().filter(|k| rules.iter().any(|r| r.matches(&k[..]))).count();
        assert!(hits >= 850, "{hits}");
        assert_eq!(trace(&rules, 10, 3), tr[..10].to_vec());
    }
}
