//! The P4Info of a fastpath program: what a P4Runtime client learns about the pipeline, and the
//! id ▸ object mapping the server decodes requests with.
//!
//! Ids follow P4Runtime's convention (`p4.config.v1.P4Ids`): the object kind in the top byte,
//! and here the object's 1-based position in the compiled program in the low 24 bits, so an id
//! is stable for as long as the spec is (the same spec gives the same ids on every start).
//!
//! | object | top byte | low 24 bits |
//! |---|---|---|
//! | action (built-ins first: `no_action`, `drop`, `forward`, `to_control`; then the spec's) | `0x01` | position in `Program::actions` + 1 |
//! | table | `0x02` | position in `Program::tables` + 1 |
//! | controller header `packet_in` / `packet_out` | `0x04` | 1 / 2 |
//! | counter array | `0x12` | position in `Program::counters` + 1 |
//! | meter array | `0x14` | position in `Program::meters` + 1 |
//!
//! Match fields and action parameters are numbered from 1 in key / parameter order. Widths are
//! the fields' widths in bits (a MAC 48, an IPv4 address 32, `meta.in_port` 16). Match kinds map
//! one to one: `exact` EXACT, `lpm` LPM, `ternary` TERNARY, `range` RANGE.

use crate::proto;
use fastpath_pipeline::ir::{MatchKind, Program, TableImpl};

/// `P4Ids.Prefix.ACTION`.
pub const ACTION: u32 = 0x01;
/// `P4Ids.Prefix.TABLE`.
pub const TABLE: u32 = 0x02;
/// `P4Ids.Prefix.CONTROLLER_HEADER`.
pub const CONTROLLER_HEADER: u32 = 0x04;
/// `P4Ids.Prefix.COUNTER`.
pub const COUNTER: u32 = 0x12;
/// `P4Ids.Prefix.METER`.
pub const METER: u32 = 0x14;

/// Id of the `packet_in` controller header.
pub const PACKET_IN_ID: u32 = CONTROLLER_HEADER << 24 | 1;
/// Id of the `packet_out` controller header.
pub const PACKET_OUT_ID: u32 = CONTROLLER_HEADER << 24 | 2;
/// `packet_in` metadata: the port the packet arrived on.
pub const META_INGRESS_PORT: u32 = 1;
/// `packet_in` metadata: why it was punted (0 an action's `to_control`, 1 a new flow, 2 TTL expired).
pub const META_PUNT_REASON: u32 = 2;
/// `packet_out` metadata: the port to send the packet out of (with `submit_to_ingress` 1: the
/// port it enters the pipeline as arriving on).
pub const META_EGRESS_PORT: u32 = 1;
/// `packet_out` metadata, 1 bit: run the packet through the pipeline instead of sending it.
pub const META_SUBMIT_TO_INGRESS: u32 = 2;
/// Width of port numbers and punt reasons in the controller headers.
pub const PORT_BITS: i32 = 16;

/// The id of object `index` of kind `prefix`.
pub fn id(prefix: u32, index: usize) -> u32 {
    prefix << 24 | ((index as u32 + 1) & 0x00ff_ffff)
}

/// The object index an id names, when it has kind `prefix` and is within `len` objects.
pub fn index(prefix: u32, id: u32, len: usize) -> Option<usize> {
    if id >> 24 != prefix {
        return None;
    }
    let low = (id & 0x00ff_ffff) as usize;
    (low >= 1 && low <= len).then(|| low - 1)
}

/// P4Runtime's match type for one of ours.
pub fn match_type(k: MatchKind) -> i32 {
    use proto::match_field::match_type as t;
    match k {
        MatchKind::Exact => t::EXACT,
        MatchKind::Lpm => t::LPM,
        MatchKind::Ternary => t::TERNARY,
        MatchKind::Range => t::RANGE,
    }
}

/// True when entries of this table carry a priority (P4Runtime: a table with a ternary, range
/// or optional field).
pub fn has_priority(prog: &Program, table: usize) -> bool {
    prog.tables.get(table).is_some_and(|t| t.key.iter().any(|k| matches!(k.kind, MatchKind::Ternary | MatchKind::Range)))
}

/// True when the table compiles to the classifier, whose rules are ordered by priority (an
/// exact + lpm table of several fields does too, without P4Runtime priorities).
pub fn is_classifier(prog: &Program, table: usize) -> bool {
    prog.tables.get(table).is_some_and(|t| t.imp == TableImpl::Acl)
}

/// The P4Info of `prog`.
pub fn p4info(prog: &Program, description: &str) -> proto::P4Info {
    let preamble = |id: u32, name: &str| proto::Preamble { id, name: name.to_string(), alias: name.to_string(), doc: None };
    let tables = prog
        .tables
        .iter()
        .enumerate()
        .map(|(t, def)| proto::Table {
            preamble: Some(preamble(id(TABLE, t), &def.name)),
            match_fields: def
                .key
                .iter()
                .enumerate()
                .map(|(k, key)| proto::MatchField {
                    id: k as u32 + 1,
                    name: key.name.clone(),
                    bitwidth: i32::from(key.field.width),
                    r#match: Some(proto::match_field::Match::MatchType(match_type(key.kind))),
                })
                .collect(),
            action_refs: def.actions.iter().map(|&a| proto::ActionRef { id: id(ACTION, a), scope: proto::scope::TABLE_ONLY }).collect(),
            // The default action is fixed by the spec.
            const_default_action_id: id(ACTION, def.default.0),
            initial_default_action: Some(proto::TableActionCall {
                action_id: id(ACTION, def.default.0),
                arguments: prog
                    .actions
                    .get(def.default.0)
                    .map(|a| {
                        a.params
                            .iter()
                            .enumerate()
                            .map(|(p, (_, kind))| proto::TableActionCallArgument {
                                param_id: p as u32 + 1,
                                value: crate::entry::encode(def.default.1[p], kind.width()),
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            }),
            size: def.size as i64,
            is_const_table: false,
        })
        .collect();
    let actions = prog
        .actions
        .iter()
        .enumerate()
        .map(|(a, def)| proto::P4Action {
            preamble: Some(preamble(id(ACTION, a), &def.name)),
            params: def
                .params
                .iter()
                .enumerate()
                .map(|(p, (name, kind))| proto::P4ActionParam { id: p as u32 + 1, name: name.clone(), bitwidth: i32::from(kind.width()) })
                .collect(),
        })
        .collect();
    let counters = prog
        .counters
        .iter()
        .enumerate()
        .map(|(c, def)| proto::Counter {
            preamble: Some(preamble(id(COUNTER, c), &def.name)),
            spec: Some(proto::CounterSpec { unit: proto::counter_unit::BOTH }),
            size: def.size as i64,
        })
        .collect();
    let meters = prog
        .meters
        .iter()
        .enumerate()
        .map(|(m, def)| proto::Meter {
            preamble: Some(preamble(id(METER, m), &def.name)),
            spec: Some(proto::MeterSpec {
                unit: proto::meter_spec::UNIT_BYTES,
                r#type: if def.two_rate { proto::meter_spec::TWO_RATE_THREE_COLOR } else { proto::meter_spec::SINGLE_RATE_THREE_COLOR },
            }),
            size: def.size as i64,
        })
        .collect();
    let field = |id: u32, name: &str| proto::ControllerPacketMetadataField { id, name: name.into(), bitwidth: PORT_BITS };
    let controller_packet_metadata = vec![
        proto::ControllerPacketMetadata {
            preamble: Some(preamble(PACKET_IN_ID, "packet_in")),
            metadata: vec![field(META_INGRESS_PORT, "ingress_port"), field(META_PUNT_REASON, "punt_reason")],
        },
        proto::ControllerPacketMetadata {
            preamble: Some(preamble(PACKET_OUT_ID, "packet_out")),
            metadata: vec![
                field(META_EGRESS_PORT, "egress_port"),
                proto::ControllerPacketMetadataField { id: META_SUBMIT_TO_INGRESS, name: "submit_to_ingress".into(), bitwidth: 1 },
            ],
        },
    ];
    proto::P4Info {
        pkg_info: Some(proto::PkgInfo {
            name: prog.name.clone(),
            version: String::new(),
            doc: (!description.is_empty()).then(|| proto::Documentation { brief: description.to_string(), description: String::new() }),
            arch: "fastpath".into(),
        }),
        tables,
        actions,
        counters,
        meters,
        controller_packet_metadata,
    }
}

/// `info` in the protobuf text format (`p4info.txt`), as P4 compilers write it and P4Runtime
/// clients read it (p4runtime-shell's `FwdPipeConfig`, for a client that pushes a new spec with
/// `SetForwardingPipelineConfig`). Fields at their default value are left out, as protobuf's own
/// printer does.
pub fn to_text(info: &proto::P4Info) -> String {
    let mut t = Text::default();
    if let Some(p) = &info.pkg_info {
        t.open("pkg_info");
        t.string("name", &p.name);
        t.string("version", &p.version);
        doc(&mut t, p.doc.as_ref());
        t.string("arch", &p.arch);
        t.close();
    }
    for tab in &info.tables {
        t.open("tables");
        preamble(&mut t, tab.preamble.as_ref());
        for f in &tab.match_fields {
            t.open("match_fields");
            t.int("id", f.id);
            t.string("name", &f.name);
            t.int("bitwidth", f.bitwidth);
            match &f.r#match {
                Some(proto::match_field::Match::MatchType(m)) => t.enumv("match_type", match_type_name(*m)),
                Some(proto::match_field::Match::OtherMatchType(o)) => t.string("other_match_type", o),
                None => {}
            }
            t.close();
        }
        for a in &tab.action_refs {
            t.open("action_refs");
            t.int("id", a.id);
            t.enumv("scope", scope_name(a.scope));
            t.close();
        }
        t.int("const_default_action_id", tab.const_default_action_id);
        if let Some(d) = &tab.initial_default_action {
            t.open("initial_default_action");
            t.int("action_id", d.action_id);
            for a in &d.arguments {
                t.open("arguments");
                t.int("param_id", a.param_id);
                t.bytes("value", &a.value);
                t.close();
            }
            t.close();
        }
        t.int("size", tab.size);
        if tab.is_const_table {
            t.line("is_const_table: true");
        }
        t.close();
    }
    for a in &info.actions {
        t.open("actions");
        preamble(&mut t, a.preamble.as_ref());
        for p in &a.params {
            t.open("params");
            t.int("id", p.id);
            t.string("name", &p.name);
            t.int("bitwidth", p.bitwidth);
            t.close();
        }
        t.close();
    }
    for c in &info.counters {
        t.open("counters");
        preamble(&mut t, c.preamble.as_ref());
        if let Some(s) = &c.spec {
            t.open("spec");
            t.enumv("unit", ["UNSPECIFIED", "BYTES", "PACKETS", "BOTH"].get(s.unit as usize).copied().unwrap_or(""));
            t.close();
        }
        t.int("size", c.size);
        t.close();
    }
    for m in &info.meters {
        t.open("meters");
        preamble(&mut t, m.preamble.as_ref());
        if let Some(s) = &m.spec {
            t.open("spec");
            t.enumv("unit", ["UNSPECIFIED", "BYTES", "PACKETS"].get(s.unit as usize).copied().unwrap_or(""));
            t.enumv("type", ["TWO_RATE_THREE_COLOR", "SINGLE_RATE_THREE_COLOR"].get(s.r#type as usize).copied().unwrap_or(""));
            t.close();
        }
        t.int("size", m.size);
        t.close();
    }
    for h in &info.controller_packet_metadata {
        t.open("controller_packet_metadata");
        preamble(&mut t, h.preamble.as_ref());
        for f in &h.metadata {
            t.open("metadata");
            t.int("id", f.id);
            t.string("name", &f.name);
            t.int("bitwidth", f.bitwidth);
            t.close();
        }
        t.close();
    }
    t.out
}

fn preamble(t: &mut Text, p: Option<&proto::Preamble>) {
    let Some(p) = p else { return };
    t.open("preamble");
    t.int("id", p.id);
    t.string("name", &p.name);
    t.string("alias", &p.alias);
    doc(t, p.doc.as_ref());
    t.close();
}

fn doc(t: &mut Text, d: Option<&proto::Documentation>) {
    let Some(d) = d else { return };
    t.open("doc");
    t.string("brief", &d.brief);
    t.string("description", &d.description);
    t.close();
}

fn match_type_name(m: i32) -> &'static str {
    use proto::match_field::match_type as k;
    match m {
        k::EXACT => "EXACT",
        k::LPM => "LPM",
        k::TERNARY => "TERNARY",
        k::RANGE => "RANGE",
        k::OPTIONAL => "OPTIONAL",
        _ => "",
    }
}

fn scope_name(s: i32) -> &'static str {
    match s {
        proto::scope::TABLE_ONLY => "TABLE_ONLY",
        proto::scope::DEFAULT_ONLY => "DEFAULT_ONLY",
        _ => "",
    }
}

/// An indenting text-format writer.
#[derive(Default)]
struct Text {
    out: String,
    depth: usize,
}

impl Text {
    fn line(&mut self, s: &str) {
        self.out.extend(std::iter::repeat_n("  ", self.depth));
        self.out.push_str(s);
        self.out.push('\n');
    }
    fn open(&mut self, name: &str) {
        self.line(&format!("{name} {{"));
        self.depth += 1;
    }
    fn close(&mut self) {
        self.depth -= 1;
        self.line("}");
    }
    fn int(&mut self, name: &str, v: impl Into<i64>) {
        let v = v.into();
        if v != 0 {
            self.line(&format!("{name}: {v}"));
        }
    }
    /// An enum by its value name; the default (empty name here) is left out.
    fn enumv(&mut self, name: &str, v: &str) {
        if !v.is_empty() {
            self.line(&format!("{name}: {v}"));
        }
    }
    fn string(&mut self, name: &str, v: &str) {
        self.bytes(name, v.as_bytes());
    }
    /// A quoted string with C escapes (octal for bytes outside printable ASCII), as protobuf's
    /// text format has it.
    fn bytes(&mut self, name: &str, v: &[u8]) {
        if v.is_empty() {
            return;
        }
        let mut q = String::with_capacity(v.len() + 2);
        for &b in v {
            match b {
                b'"' => q.push_str("\\\""),
                b'\\' => q.push_str("\\\\"),
                b'\n' => q.push_str("\\n"),
                0x20..=0x7e => q.push(char::from(b)),
                _ => q.push_str(&format!("\\{b:03o}")),
            }
        }
        self.line(&format!("{name}: \"{q}\""));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_carry_the_kind_and_a_stable_index() {
        assert_eq!(id(TABLE, 0), 0x0200_0001);
        assert_eq!(id(ACTION, 4), 0x0100_0005);
        assert_eq!(index(TABLE, 0x0200_0001, 1), Some(0));
        assert_eq!(index(TABLE, 0x0200_0002, 1), None, "past the last table");
        assert_eq!(index(TABLE, 0x0100_0001, 1), None, "an action id is not a table id");
        assert_eq!(index(TABLE, 0x0200_0000, 1), None);
        assert_eq!(index(COUNTER, 0, 1), None);
    }

    #[test]
    fn the_router_p4info_names_tables_fields_actions_and_widths() {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../pipelines/router.toml")).unwrap();
        let prog = fastpath_pipeline::compile("router.toml", &text).unwrap();
        let info = p4info(&prog, "IPv4/IPv6 LPM router");
        let fib4 = info.tables.iter().find(|t| t.preamble.as_ref().unwrap().name == "fib4").unwrap();
        assert_eq!(fib4.preamble.as_ref().unwrap().id, 0x0200_0001);
        assert_eq!(fib4.size, 2_000_000);
        let f = &fib4.match_fields[0];
        assert_eq!((f.id, f.name.as_str(), f.bitwidth), (1, "ipv4.dst", 32));
        assert_eq!(f.r#match, Some(proto::match_field::Match::MatchType(proto::match_field::match_type::LPM)));
        let nexthop = info.actions.iter().find(|a| a.preamble.as_ref().unwrap().name == "nexthop").unwrap();
        let params: Vec<(u32, &str, i32)> = nexthop.params.iter().map(|p| (p.id, p.name.as_str(), p.bitwidth)).collect();
        assert_eq!(params, [(1, "port", 16), (2, "dmac", 48), (3, "smac", 48)]);
        let nid = nexthop.preamble.as_ref().unwrap().id;
        assert!(fib4.action_refs.iter().any(|r| r.id == nid));
        let pin = &info.controller_packet_metadata[0];
        assert_eq!(pin.preamble.as_ref().unwrap().name, "packet_in");
        assert_eq!(pin.metadata[0].name, "ingress_port");
    }

    #[test]
    fn the_text_form_nests_messages_names_enums_and_escapes_strings() {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../pipelines/router.toml")).unwrap();
        let prog = fastpath_pipeline::compile("router.toml", &text).unwrap();
        let t = to_text(&p4info(&prog, "say \"hi\"\n\u{e9}"));
        assert!(t.starts_with("pkg_info {\n  name: \"router\"\n"), "{t}");
        assert!(t.contains("  doc {\n    brief: \"say \\\"hi\\\"\\n\\303\\251\"\n"), "{t}");
        assert!(
            t.contains("tables {\n  preamble {\n    id: 33554433\n    name: \"fib4\"\n    alias: \"fib4\"\n  }\n  match_fields {\n    id: 1\n    name: \"ipv4.dst\"\n    bitwidth: 32\n    match_type: LPM\n  }\n"),
            "{t}"
        );
        assert!(t.contains("  size: 2000000\n}\n"), "{t}");
        let opens = t.matches('{').count();
        assert_eq!(opens, t.matches('}').count() - t.matches("\\}").count(), "balanced braces");
    }
}
