//! Request decoding never panics: random bytes, and bit-flipped copies of valid requests, go
//! through the prost decoders, and whatever decodes goes through the request ▸ `EntryOp`
//! mapping and a real `Write` / `Read` against a control plane (the router and switch-acl
//! pipelines). Bounded: `FUZZ_ITERS` random inputs (default 20,000; a tenth of that many writes per
//! pipeline), a fixed seed printed
//! on failure.

use fastpath_control::Control;
use fastpath_p4rt::ops::{self, KeyCache};
use fastpath_p4rt::{entry, p4info, proto};
use prost::Message;

/// xorshift64*: deterministic, seedable.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = self.below(max as u64 + 1) as usize;
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn iters() -> usize {
    std::env::var("FUZZ_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000)
}

fn control(name: &str) -> Control<'static> {
    let text = std::fs::read_to_string(format!("{}/../../pipelines/{name}.toml", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let t2 = text.clone();
    let n = name.to_string();
    let build = move || fastpath_pipeline::compile(&n, &t2).map(|p| p.instantiate()).map_err(|e| e.to_string());
    let shadow = build().unwrap();
    // No workers: the transaction runs on the control replica alone.
    Control::new(shadow, Box::new(build), Vec::new())
}

/// A random but plausible table entry for `prog`: real ids most of the time, random bytes.
fn random_entry(r: &mut Rng, prog: &fastpath_pipeline::Program) -> proto::TableEntry {
    use proto::field_match::{self as fm, FieldMatchType as T};
    let t = r.below(prog.tables.len() as u64 + 1) as usize;
    let table_id = if r.below(8) == 0 { r.next() as u32 } else { p4info::id(p4info::TABLE, t) };
    let nkeys = prog.tables.get(t).map_or(1, |d| d.key.len());
    let matches = (0..r.below(nkeys as u64 + 2))
        .map(|_| {
            let field_id = r.below(nkeys as u64 + 2) as u32;
            let ty = match r.below(7) {
                0 => Some(T::Exact(fm::Exact { value: r.bytes(18) })),
                1 => Some(T::Lpm(fm::Lpm { value: r.bytes(18), prefix_len: r.below(140) as i32 - 4 })),
                2 => Some(T::Ternary(fm::Ternary { value: r.bytes(18), mask: r.bytes(18) })),
                3 => Some(T::Range(fm::Range { low: r.bytes(18), high: r.bytes(18) })),
                4 => Some(T::Optional(fm::Optional { value: r.bytes(18) })),
                5 => Some(T::Other(proto::Any { type_url: "x".into(), value: r.bytes(4) })),
                _ => None,
            };
            proto::FieldMatch { field_id, field_match_type: ty }
        })
        .collect();
    let a = r.below(prog.actions.len() as u64 + 1) as usize;
    let nparams = prog.actions.get(a).map_or(1, |d| d.params.len());
    let action = (r.below(8) != 0).then(|| proto::TableAction {
        r#type: Some(proto::table_action::Type::Action(proto::Action {
            action_id: if r.below(8) == 0 { r.next() as u32 } else { p4info::id(p4info::ACTION, a) },
            params: (0..r.below(nparams as u64 + 2))
                .map(|_| proto::ActionParam { param_id: r.below(nparams as u64 + 2) as u32, value: r.bytes(18) })
                .collect(),
        })),
    });
    proto::TableEntry {
        table_id,
        r#match: matches,
        action,
        priority: [0, 1, 10, -1, i32::MAX, i32::MIN][r.below(6) as usize],
        is_default_action: r.below(16) == 0,
        ..Default::default()
    }
}

/// A valid entry for a random table of `prog` (values drawn from a small space, so inserts
/// collide with earlier ones and modifies and deletes find them).
fn valid_entry(r: &mut Rng, prog: &fastpath_pipeline::Program) -> proto::TableEntry {
    use fastpath_pipeline::ir::MatchKind;
    use proto::field_match::{self as fm, FieldMatchType as T};
    let t = r.below(prog.tables.len() as u64) as usize;
    let def = &prog.tables[t];
    let mut matches = Vec::new();
    for (k, kd) in def.key.iter().enumerate() {
        let w = u32::from(kd.field.width);
        let all = if w >= 128 { u128::MAX } else { (1u128 << w) - 1 };
        let v = (u128::from(r.below(4)) << (w.saturating_sub(8))) & all;
        let enc = |x: u128| entry::encode(x, 0);
        let ty = match kd.kind {
            MatchKind::Exact => Some(T::Exact(fm::Exact { value: enc(v) })),
            MatchKind::Lpm => {
                let len = 1 + r.below(u64::from(w)) as u32;
                let mask = all & !all.checked_shr(len).unwrap_or(0);
                Some(T::Lpm(fm::Lpm { value: enc(v & mask), prefix_len: len as i32 }))
            }
            MatchKind::Ternary if r.below(2) == 0 => None,
            MatchKind::Ternary => {
                let mask = all & !all.checked_shr(1 + r.below(u64::from(w)) as u32).unwrap_or(0);
                Some(T::Ternary(fm::Ternary { value: enc(v & mask), mask: enc(mask) }))
            }
            MatchKind::Range if r.below(2) == 0 => None,
            MatchKind::Range => {
                let lo = u128::from(r.below(100));
                Some(T::Range(fm::Range { low: enc(lo), high: enc(lo + u128::from(r.below(100))) }))
            }
        };
        if let Some(ty) = ty {
            matches.push(proto::FieldMatch { field_id: k as u32 + 1, field_match_type: Some(ty) });
        }
    }
    let a = def.actions[r.below(def.actions.len() as u64) as usize];
    let params = prog.actions[a]
        .params
        .iter()
        .enumerate()
        .map(|(i, (_, kind))| proto::ActionParam {
            param_id: i as u32 + 1,
            value: entry::encode(u128::from(r.below(3)) & ((1u128 << kind.width().min(127)) - 1), 0),
        })
        .collect();
    proto::TableEntry {
        table_id: p4info::id(p4info::TABLE, t),
        r#match: matches,
        action: Some(proto::TableAction {
            r#type: Some(proto::table_action::Type::Action(proto::Action { action_id: p4info::id(p4info::ACTION, a), params })),
        }),
        priority: if p4info::has_priority(prog, t) { 1 + r.below(3) as i32 } else { 0 },
        ..Default::default()
    }
}

fn write_of(r: &mut Rng, prog: &fastpath_pipeline::Program) -> proto::WriteRequest {
    let updates = (0..r.below(6))
        .map(|_| {
            let entity = match r.below(6) {
                0 => proto::entity::Entity::MeterEntry(proto::MeterEntry {
                    meter_id: r.next() as u32,
                    index: Some(proto::Index { index: r.next() as i64 }),
                    config: Some(proto::MeterConfig { cir: r.next() as i64, cburst: r.next() as i64, ..Default::default() }),
                }),
                1 => proto::entity::Entity::CounterEntry(proto::CounterEntry { counter_id: r.next() as u32, index: None, data: None }),
                2 => proto::entity::Entity::TableEntry(random_entry(r, prog)),
                _ => proto::entity::Entity::TableEntry(valid_entry(r, prog)),
            };
            let ty = [1, 1, 1, 2, 3, 3, 0, 4][r.below(8) as usize];
            proto::Update { r#type: ty, entity: Some(proto::Entity { entity: Some(entity) }) }
        })
        .collect();
    proto::WriteRequest { device_id: 1, atomicity: r.below(4) as i32, updates, ..Default::default() }
}

#[test]
fn random_bytes_never_panic_the_decoders() {
    let seed = 0x5eed_0001;
    let mut r = Rng(seed);
    for i in 0..iters() {
        let b = r.bytes(96);
        let _ = proto::WriteRequest::decode(&b[..]);
        let _ = proto::ReadRequest::decode(&b[..]);
        let _ = proto::StreamMessageRequest::decode(&b[..]);
        let _ = proto::SetForwardingPipelineConfigRequest::decode(&b[..]);
        let _ = proto::GetForwardingPipelineConfigRequest::decode(&b[..]);
        let _ = proto::P4Info::decode(&b[..]);
        assert!(i < usize::MAX, "seed {seed:#x}");
    }
}

/// Random structured writes, and bit-flipped encodings of them, against real control planes:
/// every update gets an outcome, nothing panics, and what the tables hold afterwards reads back
/// and maps to `TableEntry`s that map to the same keys again.
#[test]
fn random_and_mutated_writes_and_reads_never_panic() {
    for name in ["router", "switch-acl"] {
        let seed = 0x5eed_0002 ^ name.len() as u64;
        let mut r = Rng(seed);
        let mut ctl = control(name);
        let prog = ctl.pipeline_info().clone();
        let mut cache = KeyCache::default();
        let mut accepted = 0usize;
        for _ in 0..iters() / 10 {
            let w = write_of(&mut r, &prog);
            let mut bytes = w.encode_to_vec();
            for _ in 0..r.below(4) {
                if !bytes.is_empty() {
                    let k = r.below(bytes.len() as u64) as usize;
                    bytes[k] ^= 1 << r.below(8);
                }
            }
            for req in [Some(w), proto::WriteRequest::decode(&bytes[..]).ok()].into_iter().flatten() {
                match ops::write(&mut ctl, &mut cache, &req) {
                    Ok(n) => {
                        assert_eq!(n, req.updates.len());
                        accepted += n;
                    }
                    Err(outcomes) => assert_eq!(outcomes.len(), req.updates.len(), "seed {seed:#x}"),
                }
            }
            let read = proto::ReadRequest {
                device_id: 1,
                role: String::new(),
                entities: vec![proto::Entity { entity: Some(proto::entity::Entity::TableEntry(random_entry(&mut r, &prog))) }],
            };
            let _ = ops::read(&mut ctl, &read);
        }
        // Everything in the tables reads back and maps back to the same key.
        let all = proto::ReadRequest {
            device_id: 1,
            role: String::new(),
            entities: vec![proto::Entity { entity: Some(proto::entity::Entity::TableEntry(proto::TableEntry::default())) }],
        };
        let entities = ops::read(&mut ctl, &all).unwrap();
        for e in &entities {
            let Some(proto::entity::Entity::TableEntry(te)) = &e.entity else { panic!("{e:?}") };
            let t = entry::table_of(&prog, te.table_id).unwrap();
            let key = entry::key_of(&prog, t, &te.r#match).unwrap_or_else(|err| panic!("{name}: {te:?} does not map back: {err:?}"));
            assert!(ctl.read(t, None).unwrap().iter().any(|v| entry::canon_key(&prog, t, &v.key).as_ref() == Some(&key)));
        }
        eprintln!("{name}: {accepted} random updates accepted, {} entries at the end", entities.len());
        assert!(accepted > 0, "{name}: the generator never made a valid update (seed {seed:#x})");
    }
}
