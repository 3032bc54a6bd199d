//! The pipeline spec: a TOML file that names the headers to parse, the tables, actions, meters and
//! counters, and the ingress/egress control flow. See `docs/spec.md` for the format.
//!
//! Loading is two steps: [`SpecFile::parse`] reads the TOML into this file model, keeping the
//! source span of every value; the compiler (`crate::compile`) then checks names and types and
//! reports every problem as a [`SpecError`] with file, line and column — before any packet flows.

pub mod error;
pub mod syntax;

use serde::Deserialize;
use toml::Spanned;

pub use error::{SpecError, SpecErrors};

/// A spec file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpecFile {
    /// Pipeline name.
    pub name: Spanned<String>,
    /// Free text.
    #[serde(default)]
    pub description: Option<String>,
    /// Which headers to parse.
    pub parser: ParserSpec,
    /// User metadata fields: `name = width_bits` (each takes one 32-bit register).
    #[serde(default)]
    pub metadata: toml::value::Table,
    /// Match-action tables.
    #[serde(default, rename = "table")]
    pub tables: Vec<TableSpec>,
    /// Actions tables may call.
    #[serde(default, rename = "action")]
    pub actions: Vec<ActionSpec>,
    /// Meters (arrays of RFC 2697 / 2698 markers).
    #[serde(default, rename = "meter")]
    pub meters: Vec<MeterSpec>,
    /// Counter arrays.
    #[serde(default, rename = "counter")]
    pub counters: Vec<CounterSpec>,
    /// Connection-tracking tables.
    #[serde(default, rename = "conntrack")]
    pub conntracks: Vec<ConntrackSpec>,
    /// MAC learning tables.
    #[serde(default, rename = "fdb")]
    pub fdbs: Vec<FdbSpec>,
    /// Control flow.
    pub control: ControlSpec,
    /// The traffic manager between ingress and egress.
    #[serde(default)]
    pub tm: Option<Spanned<TmSpec>>,
}

/// `[tm]`: the traffic manager (see `docs/tm.md`). Every value is optional.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TmSpec {
    /// Bytes of the shared buffer (all ports).
    pub buffer_bytes: Option<Spanned<u64>>,
    /// Packet descriptors of the shared buffer.
    pub buffer_pkts: Option<Spanned<u64>>,
    /// DRR quantum per unit of weight, bytes.
    pub drr_quantum_bytes: Option<Spanned<u64>>,
    /// Dynamic-threshold exponent of every class (α = 2^n).
    pub alpha_log2: Option<Spanned<i64>>,
    /// `dscp`, `pcp` or `none`.
    pub classify: Option<Spanned<String>>,
    /// DSCP ▸ class overrides: `46 = 7`, `"32-39" = 4`.
    pub dscp: Option<Spanned<toml::value::Table>>,
    /// PCP ▸ class overrides: `5 = 5`, `"0-2" = 0`.
    pub pcp: Option<Spanned<toml::value::Table>>,
    /// WRED random seed.
    pub seed: Option<u64>,
    /// The metadata field that holds a packet's pipe (subscriber) on hierarchical ports, e.g.
    /// `meta.sub`.
    pub pipe: Option<Spanned<String>>,
    /// Pipe profiles of hierarchical ports (`[[tm.profile]]`), by position from 0.
    #[serde(default, rename = "profile")]
    pub profiles: Vec<TmProfileSpec>,
    /// Port shapers.
    #[serde(default, rename = "port")]
    pub ports: Vec<TmPortSpec>,
    /// Per-class settings.
    #[serde(default, rename = "class")]
    pub classes: Vec<TmClassSpec>,
    /// WRED / ECN profiles.
    #[serde(default, rename = "wred")]
    pub wred: Vec<TmWredSpec>,
}

/// `[[tm.port]]`: one port's shaper.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TmPortSpec {
    /// Port id (the position of its `--port`, from 0).
    pub port: Spanned<u64>,
    /// Rate: bits/s, or a string with `kbit` / `mbit` / `gbit`.
    pub rate: Spanned<toml::Value>,
    /// Bucket size, bytes.
    pub burst_bytes: Option<Spanned<u64>>,
    /// Pipes (subscribers) of a hierarchical port: port ▸ group ▸ pipe ▸ class. Absent: a flat
    /// port with 8 classes.
    pub pipes: Option<Spanned<u64>>,
    /// Groups the pipes are split into, evenly (default 1).
    pub groups: Option<Spanned<u64>>,
    /// Each group's shaper rate (default unshaped).
    pub group_rate: Option<Spanned<toml::Value>>,
    /// Classes per pipe, 4 or 8 (default 4).
    pub classes: Option<Spanned<u64>>,
    /// Longest queue of a pipe's class, bytes (default 64 KiB).
    pub queue_bytes: Option<Spanned<u64>>,
    /// The profile every pipe starts with (default 0).
    pub profile: Option<Spanned<u64>>,
}

/// `[[tm.profile]]`: what the pipes of one service tier share.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TmProfileSpec {
    /// The pipe's shaper rate (absent: unshaped).
    pub rate: Option<Spanned<toml::Value>>,
    /// Bucket, bytes.
    pub burst_bytes: Option<Spanned<u64>>,
    /// Per class: `"strict"` or a weight for the round robin of the non-strict classes.
    /// Default: the highest class strict, the others weight 1.
    pub sched: Option<Spanned<Vec<toml::Value>>>,
}

/// `[[tm.class]]`: one class's queue on every port.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TmClassSpec {
    /// Class 0..=7 (7 the highest priority).
    pub class: Spanned<u64>,
    /// `strict` or `drr`.
    pub sched: Option<Spanned<String>>,
    /// DRR weight.
    pub weight: Option<Spanned<u64>>,
    /// Ring capacity, packets (a power of two).
    pub ring_pkts: Option<Spanned<u64>>,
    /// Bytes reserved for this queue on every port.
    pub min_bytes: Option<Spanned<u64>>,
    /// Dynamic-threshold exponent (α = 2^n).
    pub alpha_log2: Option<Spanned<i64>>,
    /// A `[[tm.wred]]` profile.
    pub wred: Option<Spanned<String>>,
    /// Queue shaper rate.
    pub rate: Option<Spanned<toml::Value>>,
    /// Queue shaper bucket, bytes.
    pub burst_bytes: Option<Spanned<u64>>,
}

/// `[[tm.wred]]`: a WRED / ECN profile.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TmWredSpec {
    /// Profile name.
    pub name: Spanned<String>,
    /// Average queue (bytes) where marking / dropping starts.
    pub min_bytes: Spanned<u64>,
    /// Average queue (bytes) from which everything is dropped.
    pub max_bytes: Spanned<u64>,
    /// 1 / the probability just below `max_bytes` (default 10).
    pub maxp_inv: Option<Spanned<u64>>,
    /// EWMA weight 2^−n (default 9).
    pub weight_log2: Option<Spanned<u64>>,
    /// Mark ECN-capable packets instead of dropping them (default true).
    #[serde(default = "yes")]
    pub ecn: bool,
}

/// `[parser]`: the standard header graph, limited to the headers listed.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParserSpec {
    /// Header names from the catalog (`eth`, `vlan`, `qinq`, `arp`, `ipv4`, `ipv6`, `udp`,
    /// `tcp`, `icmp`, `icmp6`, `vxlan`, `inner_eth`, …).
    pub headers: Spanned<Vec<Spanned<String>>>,
    /// Verify the IPv4 header checksum and drop (`ipv4_bad_checksum`) on mismatch.
    #[serde(default)]
    pub verify_ipv4_checksum: bool,
}

/// `[[table]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableSpec {
    /// Table name (also its stage name).
    pub name: Spanned<String>,
    /// Key fields in order.
    pub key: Vec<KeySpec>,
    /// Actions entries may use.
    pub actions: Spanned<Vec<Spanned<String>>>,
    /// Capacity in entries.
    pub size: Spanned<u64>,
    /// Action on a miss, as a call: `drop`, `forward(1)`, `nexthop(1, 02:00:00:00:00:01, …)`.
    #[serde(default)]
    pub default: Option<Spanned<String>>,
}

/// One key field of a table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeySpec {
    /// Field name, e.g. `ipv4.dst`.
    pub field: Spanned<String>,
    /// `exact`, `lpm`, `ternary` or `range`.
    #[serde(rename = "match")]
    pub kind: Spanned<String>,
}

/// `[[action]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionSpec {
    /// Action name.
    pub name: Spanned<String>,
    /// Parameter names; types are inferred from how the body uses them.
    #[serde(default)]
    pub params: Vec<Spanned<String>>,
    /// Primitives, one per line (or separated by `;`).
    pub body: Spanned<String>,
}

/// `[[meter]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeterSpec {
    /// Meter array name.
    pub name: Spanned<String>,
    /// `srtcm` (RFC 2697) or `trtcm` (RFC 2698).
    pub kind: Spanned<String>,
    /// Number of meters in the array.
    pub size: Spanned<u64>,
    /// Colour-aware (reads `meta.color` as the pre-colour) instead of colour-blind.
    #[serde(default)]
    pub color_aware: bool,
}

/// `[[conntrack]]`: a connection-tracking flow table (one per pipeline instance, i.e. per worker).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConntrackSpec {
    /// Table name (`conntrack NAME`, `ct_commit NAME`).
    pub name: Spanned<String>,
    /// Most concurrent flows.
    pub size: Spanned<u64>,
    /// Per-state timeouts in seconds (`established = 300`, …); missing states keep the defaults.
    #[serde(default)]
    pub timeouts: Option<Spanned<toml::value::Table>>,
    /// Check TCP sequence/ack numbers against the tracked windows (default true).
    #[serde(default = "yes")]
    pub window_check: bool,
}

fn yes() -> bool {
    true
}

/// `[[fdb]]`: a MAC learning table for `l2_switch`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FdbSpec {
    /// Table name (`l2_switch NAME`).
    pub name: Spanned<String>,
    /// Most MAC addresses learned at once.
    pub size: Spanned<u64>,
    /// Seconds an entry lives without a frame from its address (default 300).
    pub ageing_s: Option<Spanned<f64>>,
    /// VLANs and their member ports; none: every port floods to every other.
    #[serde(default)]
    pub vlans: Vec<FdbVlanSpec>,
}

/// One VLAN of an `[[fdb]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FdbVlanSpec {
    /// VLAN id, 1..=4094; 0 for untagged frames.
    pub vid: Spanned<u64>,
    /// Member ports (ids below 64).
    pub ports: Vec<Spanned<u64>>,
}

/// `[[counter]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CounterSpec {
    /// Counter array name.
    pub name: Spanned<String>,
    /// Number of counters in the array.
    pub size: Spanned<u64>,
}

/// `[control]`: the ingress and egress programs.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlSpec {
    /// Runs on every packet after parsing.
    pub ingress: Spanned<String>,
    /// Runs on forwarded packets after the traffic manager.
    #[serde(default)]
    pub egress: Option<Spanned<String>>,
}

/// A spec's source text with its file name, for turning byte offsets into line and column.
#[derive(Debug, Clone)]
pub struct Source {
    /// File name as given (shown in errors).
    pub file: String,
    /// Full text.
    pub text: String,
}

impl Source {
    /// 1-based line and column of byte `pos`.
    pub fn line_col(&self, pos: usize) -> (usize, usize) {
        let pos = pos.min(self.text.len());
        let before = &self.text[..pos];
        let line = before.matches('\n').count() + 1;
        let col = before.rfind('\n').map_or(pos, |nl| pos - nl - 1) + 1;
        (line, col)
    }

    /// The text of 1-based line `n`.
    pub fn line_text(&self, n: usize) -> &str {
        self.text.lines().nth(n.saturating_sub(1)).unwrap_or("")
    }

    /// Byte offset where the contents of the string value at `span` begin: after the opening
    /// quote(s), and after the newline that TOML trims right after `'''` / `"""`. Literal
    /// strings map one-to-one; in basic strings escapes may shift columns.
    pub fn string_start(&self, span: std::ops::Range<usize>) -> usize {
        let s = self.text.get(span.start..).unwrap_or("");
        if s.starts_with("'''") || s.starts_with("\"\"\"") {
            let after = span.start + 3;
            let rest = self.text.get(after..).unwrap_or("");
            if rest.starts_with("\r\n") {
                after + 2
            } else if rest.starts_with('\n') {
                after + 1
            } else {
                after
            }
        } else {
            span.start + 1
        }
    }

    /// An error at byte `pos`.
    pub fn error(&self, pos: usize, msg: impl Into<String>) -> SpecError {
        let (line, col) = self.line_col(pos);
        SpecError { file: self.file.clone(), line, col, msg: msg.into(), source_line: self.line_text(line).to_string(), hint: None }
    }
}

impl SpecFile {
    /// Parses the TOML. Syntax and shape errors come back with their line and column.
    pub fn parse(src: &Source) -> Result<SpecFile, SpecErrors> {
        toml::from_str(&src.text).map_err(|e| {
            let pos = e.span().map_or(0, |s| s.start);
            SpecErrors(vec![src.error(pos, e.message().trim().to_string())])
        })
    }
}

/// The closest of `candidates` to `word` by edit distance, if close enough to suggest.
pub fn suggest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        let d = edit_distance(word, c);
        if best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    let (d, c) = best?;
    (d <= 2.max(word.len() / 3)).then(|| c.to_string())
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_and_string_start() {
        let src = Source { file: "x.toml".into(), text: "a = 1\nb = '''\nxy\n'''\n".into() };
        assert_eq!(src.line_col(0), (1, 1));
        assert_eq!(src.line_col(6), (2, 1));
        let start = src.text.find("'''").unwrap();
        let s = src.string_start(start..start + 12);
        assert_eq!(&src.text[s..s + 2], "xy");
    }

    #[test]
    fn suggestions() {
        assert_eq!(suggest("ipv4.dstt", ["ipv4.dst", "ipv4.src", "eth.dst"]).as_deref(), Some("ipv4.dst"));
        assert_eq!(suggest("zzzzzz", ["ipv4.dst"]), None);
    }
}
