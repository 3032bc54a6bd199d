//! Subscriber sessions of a broadband user plane (`pipelines/vbng.toml`): one session is the
//! handful of table entries, meter and pipe settings that carry one IPoE subscriber, created,
//! changed and deleted together.
//!
//! | session field | becomes |
//! |---|---|
//! | port, S-VLAN, C-VLAN, MAC, id, IPv4, ACL profile | `up_session` entry `port svlan cvlan mac => session_up(id, ip, acl)` |
//! | IPv4, id, port, S-VLAN, C-VLAN, MAC | `down_session` entry `ip => session_down(id, port, svlan, cvlan, mac)` |
//! | upstream rates (CIR/PIR) | meter `police[id]` (RFC 2698); none: unpoliced |
//! | tier | `tm pipe PORT id profile TIER`: the subscriber's HQoS pipe shaped to the tier (when the port is hierarchical) |
//! | counters | `sub_up[id]`, `sub_down[id]` (packets, bytes) |
//!
//! [`Sessions`] keeps the sessions and turns each command into entry ops ([`EntryOp`]), which
//! the control plane applies as one transaction on every worker ([`crate::Control`]); the same
//! ops are what a PFCP endpoint produces. Identity (port, S-VLAN, C-VLAN, MAC), address and id
//! are each unique: a second session with any of them is refused, naming the one that has it.
//!
//! The text form (`fastpath ctl`):
//! ```text
//! session add 7 port 0 s-vlan 100 c-vlan 7 mac 02:5b:00:00:00:07 ip 100.64.1.7 tier 0 [acl 0] [up 10mbit[/20mbit]]
//! session modify 7 [tier 1] [acl 2] [up 50mbit/100mbit | up none]
//! session del 7
//! show sessions | show session 7
//! ```

use fastpath_pipeline::compile::tm::{default_burst, parse_rate};
use fastpath_pipeline::entries::{EntryOp, EntrySpec};
use fastpath_pipeline::ir::{TableImpl, ValueKind, MAX_ARGS};
use fastpath_pipeline::objects::MeterRates;
use fastpath_pipeline::value::Match;
use fastpath_pipeline::Program;
use std::collections::HashMap;
use std::net::Ipv4Addr;

/// A subscriber identity on the access side: port, outer and inner VLAN, MAC.
pub type Identity = (u16, u16, u16, [u8; 6]);

/// One subscriber session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// Session id: the HQoS pipe, policer and counter index.
    pub id: u32,
    /// Access port.
    pub port: u16,
    /// Outer (S-) VLAN.
    pub svlan: u16,
    /// Inner (C-) VLAN.
    pub cvlan: u16,
    /// The subscriber's MAC address.
    pub mac: [u8; 6],
    /// The subscriber's IPv4 address (anti-spoofing and the downstream lookup).
    pub ip: Ipv4Addr,
    /// Service tier: the `[[tm.profile]]` that shapes its downstream pipe.
    pub tier: u16,
    /// ACL profile (`class_acl`'s `meta.acl`).
    pub acl: u8,
    /// Upstream policer rates, bits/s (committed, peak); `None`: unpoliced.
    pub up: Option<(u64, u64)>,
}

/// A change to one session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionCmd {
    /// Create a session.
    Add(Session),
    /// Change a session's tier, ACL profile or upstream rates (`None`: keep).
    Modify {
        /// Session id.
        id: u32,
        /// New tier.
        tier: Option<u16>,
        /// New ACL profile.
        acl: Option<u8>,
        /// New upstream rates (`Some(None)`: stop policing).
        up: Option<Option<(u64, u64)>>,
    },
    /// Delete a session.
    Del(u32),
}

/// Where sessions live in the program: resolved once from its tables, meters and `[tm]`.
#[derive(Clone, Debug)]
struct Binding {
    up_table: usize,
    up_action: usize,
    down_table: usize,
    down_action: usize,
    police: Option<String>,
    /// Hierarchical ports and their pipe counts.
    hqos: Vec<(u16, u32)>,
    profiles: u16,
    /// Most sessions (the smallest per-session array).
    max_id: u32,
}

impl Binding {
    fn of(p: &Program) -> Result<Binding, String> {
        let table = |name: &str, action: &str, keys: usize| -> Result<(usize, usize), String> {
            let t = p.table_index(name).ok_or_else(|| format!("the pipeline has no table \"{name}\""))?;
            let d = &p.tables[t];
            if d.key.len() != keys || d.imp != TableImpl::Exact && d.imp != TableImpl::Direct {
                return Err(format!("table \"{name}\" must have an exact key of {keys} field(s)"));
            }
            let a = d
                .actions
                .iter()
                .copied()
                .find(|&a| p.actions[a].name == action)
                .ok_or_else(|| format!("table \"{name}\" does not allow action \"{action}\""))?;
            Ok((t, a))
        };
        let (up_table, up_action) = table("up_session", "session_up", 4)?;
        let (down_table, down_action) = table("down_session", "session_down", 1)?;
        let (np_up, np_down) = (p.actions[up_action].params.len(), p.actions[down_action].params.len());
        if np_up != 3 || np_down != 5 {
            return Err("session_up must take (sub, ip, acl) and session_down (sub, port, svlan, cvlan, mac)".into());
        }
        let police = p.meters.iter().find(|m| m.name == "police").map(|m| m.name.clone());
        let hqos: Vec<(u16, u32)> =
            p.tm.as_ref()
                .map(|t| t.hqos.iter().map(|(port, h)| (*port, h.groups.iter().map(|g| g.pipes).sum())).collect())
                .unwrap_or_default();
        let profiles = p.tm.as_ref().and_then(|t| t.hqos.first()).map_or(0, |(_, h)| h.profiles.len() as u16);
        let sizes = p.meters.iter().filter(|m| m.name == "police").map(|m| m.size).chain(p.counters.iter().map(|c| c.size));
        let max_id = sizes.chain(hqos.iter().map(|(_, n)| *n as usize)).min().unwrap_or(1 << 24).min(1 << 24) as u32;
        Ok(Binding { up_table, up_action, down_table, down_action, police, hqos, profiles, max_id })
    }
}

/// What undoes one planned change (when the transaction it belongs to is refused).
#[derive(Clone, Debug)]
pub enum Undo {
    /// Remove the session that was added.
    Added(u32),
    /// Put back the session as it was.
    Was(Session),
}

/// The sessions of one user plane, and how they map onto its pipeline.
#[derive(Clone, Debug)]
pub struct Sessions {
    binding: Binding,
    by_id: Map<u32, Session>,
    by_ip: Map<Ipv4Addr, u32>,
    by_identity: Map<Identity, u32>,
}

/// Session maps hash with foldhash: bulk creation hashes three keys per session.
type Map<K, V> = HashMap<K, V, foldhash::fast::SeedableRandomState>;

impl Sessions {
    /// Sessions over `prog`, which must have the vbng session tables (`up_session`,
    /// `down_session` with actions `session_up`, `session_down`); a `police` meter array and
    /// hierarchical `[tm]` ports are used when present.
    ///
    /// # Errors
    /// What the program lacks.
    pub fn new(prog: &Program) -> Result<Sessions, String> {
        Sessions::hashed(prog, foldhash::fast::SeedableRandomState::random())
    }

    /// As [`Sessions::new`], with the same hash seed in every process, for measurements: with a
    /// random seed, creating 256k sessions costs a few million instructions more or less from
    /// one run to the next, which `scripts/instructions` would count as per-packet noise.
    ///
    /// # Errors
    /// What the program lacks.
    pub fn fixed_seed(prog: &Program) -> Result<Sessions, String> {
        Sessions::hashed(prog, foldhash::fast::SeedableRandomState::fixed())
    }

    fn hashed(prog: &Program, seed: foldhash::fast::SeedableRandomState) -> Result<Sessions, String> {
        Ok(Sessions {
            binding: Binding::of(prog)?,
            by_id: Map::with_hasher(seed),
            by_ip: Map::with_hasher(seed),
            by_identity: Map::with_hasher(seed),
        })
    }

    /// Number of sessions.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Session `id`.
    pub fn get(&self, id: u32) -> Option<&Session> {
        self.by_id.get(&id)
    }

    /// Every session, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &Session> {
        self.by_id.values()
    }

    /// Records `cmd` and appends the entry ops that carry it out to `ops` and what undoes it
    /// to `undo`.
    ///
    /// # Errors
    /// A duplicate id, identity or address, an unknown session, a value out of range. Nothing
    /// is recorded or appended then.
    pub fn plan(&mut self, cmd: &SessionCmd, ops: &mut Vec<EntryOp>, undo: &mut Vec<Undo>) -> Result<(), String> {
        match cmd {
            SessionCmd::Add(s) => {
                self.check_new(s)?;
                self.add_ops(s, ops);
                self.insert(s.clone());
                undo.push(Undo::Added(s.id));
            }
            SessionCmd::Modify { id, tier, acl, up } => {
                let old = self.by_id.get(id).ok_or_else(|| format!("no session {id}"))?.clone();
                let mut s = old.clone();
                if let Some(t) = tier {
                    s.tier = *t;
                }
                if let Some(a) = acl {
                    s.acl = *a;
                }
                if let Some(u) = up {
                    s.up = *u;
                }
                self.check_values(&s)?;
                if s.acl != old.acl {
                    ops.push(EntryOp::Modify(self.up_entry(&s)));
                }
                if s.up != old.up {
                    ops.extend(self.police_op(&s));
                }
                if s.tier != old.tier {
                    ops.extend(self.pipe_op(&s));
                }
                self.by_id.insert(s.id, s);
                undo.push(Undo::Was(old));
            }
            SessionCmd::Del(id) => {
                let s = self.by_id.get(id).ok_or_else(|| format!("no session {id}"))?.clone();
                ops.push(EntryOp::Del { table: self.binding.up_table, key: up_key(&s) });
                ops.push(EntryOp::Del { table: self.binding.down_table, key: vec![Match::Exact(u128::from(u32::from(s.ip)))] });
                if s.up.is_some() {
                    ops.extend(self.police_op(&Session { up: None, ..s.clone() }));
                }
                self.remove(*id);
                undo.push(Undo::Was(s));
            }
        }
        Ok(())
    }

    /// Undoes planned changes, last first.
    pub fn undo(&mut self, undo: Vec<Undo>) {
        for u in undo.into_iter().rev() {
            match u {
                Undo::Added(id) => self.remove(id),
                Undo::Was(s) => {
                    self.remove(s.id);
                    self.insert(s);
                }
            }
        }
    }

    fn insert(&mut self, s: Session) {
        self.by_ip.insert(s.ip, s.id);
        self.by_identity.insert((s.port, s.svlan, s.cvlan, s.mac), s.id);
        self.by_id.insert(s.id, s);
    }

    fn remove(&mut self, id: u32) {
        if let Some(s) = self.by_id.remove(&id) {
            self.by_ip.remove(&s.ip);
            self.by_identity.remove(&(s.port, s.svlan, s.cvlan, s.mac));
        }
    }

    fn check_new(&self, s: &Session) -> Result<(), String> {
        if self.by_id.contains_key(&s.id) {
            return Err(format!("session {} exists", s.id));
        }
        if let Some(o) = self.by_ip.get(&s.ip) {
            return Err(format!("address {} belongs to session {o}", s.ip));
        }
        if let Some(o) = self.by_identity.get(&(s.port, s.svlan, s.cvlan, s.mac)) {
            return Err(format!("port {} s-vlan {} c-vlan {} mac {} belongs to session {o}", s.port, s.svlan, s.cvlan, mac_text(&s.mac)));
        }
        self.check_values(s)
    }

    fn check_values(&self, s: &Session) -> Result<(), String> {
        let b = &self.binding;
        if s.id >= b.max_id {
            return Err(format!("session id {} out of range (the pipeline has room for ids 0 to {})", s.id, b.max_id - 1));
        }
        if s.svlan == 0 || s.svlan > 4094 || s.cvlan == 0 || s.cvlan > 4094 {
            return Err(format!("VLANs must be 1 to 4094 (s-vlan {}, c-vlan {})", s.svlan, s.cvlan));
        }
        if !b.hqos.is_empty() && s.tier >= b.profiles {
            return Err(format!("tier {} out of range (the pipeline's [tm] has {} profiles)", s.tier, b.profiles));
        }
        if let Some((c, p)) = s.up {
            if c == 0 || p < c {
                return Err(format!("upstream rates {c}/{p} bit/s: the committed rate must be above 0 and at most the peak"));
            }
        }
        Ok(())
    }

    fn up_entry(&self, s: &Session) -> EntrySpec {
        let mut args = [0u128; MAX_ARGS];
        args[0] = u128::from(s.id);
        args[1] = u128::from(u32::from(s.ip));
        args[2] = u128::from(s.acl);
        EntrySpec { table: self.binding.up_table, key: up_key(s), priority: u32::MAX / 2, action: self.binding.up_action, args }
    }

    fn add_ops(&self, s: &Session, ops: &mut Vec<EntryOp>) {
        ops.push(EntryOp::Add(self.up_entry(s)));
        let mut args = [0u128; MAX_ARGS];
        args[..5].copy_from_slice(&[
            u128::from(s.id),
            u128::from(s.port),
            u128::from(s.svlan),
            u128::from(s.cvlan),
            u128::from(mac_u64(&s.mac)),
        ]);
        ops.push(EntryOp::Add(EntrySpec {
            table: self.binding.down_table,
            key: vec![Match::Exact(u128::from(u32::from(s.ip)))],
            priority: u32::MAX / 2,
            action: self.binding.down_action,
            args,
        }));
        ops.extend(self.police_op(s));
        ops.extend(self.pipe_op(s));
    }

    /// The policer setting of `s` (all zero: unpoliced), if the program has one.
    fn police_op(&self, s: &Session) -> Option<EntryOp> {
        let bank = self.binding.police.clone()?;
        let rates = match s.up {
            Some((c, p)) => MeterRates {
                cir_bytes_per_s: c / 8,
                cbs_bytes: default_burst(c),
                pir_bytes_per_s: p / 8,
                ebs_or_pbs_bytes: default_burst(p),
            },
            None => MeterRates { cir_bytes_per_s: 0, cbs_bytes: 0, pir_bytes_per_s: 0, ebs_or_pbs_bytes: 0 },
        };
        Some(EntryOp::Meter { bank, index: s.id as usize, rates })
    }

    /// The tier of `s` on its port's HQoS, when the port is hierarchical.
    fn pipe_op(&self, s: &Session) -> Option<EntryOp> {
        self.binding.hqos.iter().any(|(p, _)| *p == s.port).then_some(EntryOp::Pipe { port: s.port, pipe: s.id, profile: s.tier })
    }
}

fn up_key(s: &Session) -> Vec<Match> {
    vec![
        Match::Exact(u128::from(s.port)),
        Match::Exact(u128::from(s.svlan)),
        Match::Exact(u128::from(s.cvlan)),
        Match::Exact(u128::from(mac_u64(&s.mac))),
    ]
}

fn mac_u64(m: &[u8; 6]) -> u64 {
    m.iter().fold(0u64, |a, b| a << 8 | u64::from(*b))
}

/// `02:5b:00:00:00:07`.
pub fn mac_text(m: &[u8; 6]) -> String {
    ValueKind::Mac.format(u128::from(mac_u64(m)))
}

/// Parses a `session …` line (words after `session`).
///
/// # Errors
/// What is wrong, and the word to blame.
pub fn parse_session<'a>(w: &[&'a str]) -> Result<SessionCmd, (String, &'a str)> {
    let usage = "expected 'session add ID port P s-vlan S c-vlan C mac M ip A tier T [acl K] [up CIR[/PIR]]', \
                 'session modify ID [tier T] [acl K] [up CIR[/PIR]|none]' or 'session del ID'";
    let (Some(&verb), Some(&id)) = (w.get(1), w.get(2)) else {
        return Err((usage.into(), w.first().copied().unwrap_or("")));
    };
    let id: u32 = id.parse().map_err(|_| (format!("session id '{id}' is not a number"), id))?;
    let rest = &w[3..];
    if !rest.len().is_multiple_of(2) {
        let last = rest.last().copied().unwrap_or(verb);
        return Err((format!("'{last}' needs a value"), last));
    }
    let mut kv: HashMap<&str, &'a str> = HashMap::new();
    for pair in rest.chunks(2) {
        if kv.insert(pair[0], pair[1]).is_some() {
            return Err((format!("'{}' is given twice", pair[0]), pair[0]));
        }
    }
    let allowed: &[&str] = match verb {
        "add" => &["port", "s-vlan", "c-vlan", "mac", "ip", "tier", "acl", "up"],
        "modify" => &["tier", "acl", "up"],
        "del" | "delete" => &[],
        other => return Err((format!("unknown session verb \"{other}\" (add, modify, del)"), other)),
    };
    if let Some((k, _)) = kv.iter().find(|(k, _)| !allowed.contains(k)) {
        let key = rest.iter().copied().find(|x| x == k).unwrap_or(verb);
        return Err((format!("'{k}' is not a setting of 'session {verb}' ({})", allowed.join(", ")), key));
    }
    fn num<'a, T: std::str::FromStr>(kv: &HashMap<&str, &'a str>, k: &str) -> Result<Option<T>, (String, &'a str)> {
        kv.get(k).map(|v| v.parse::<T>().map_err(|_| (format!("{k} '{v}' is not a number in range"), *v))).transpose()
    }
    let up = match kv.get("up") {
        None => None,
        Some(&"none") => Some(None),
        Some(v) => {
            let (c, p) = v.split_once('/').unwrap_or((v, v));
            let rate = |x: &str| parse_rate(&toml::Value::String(x.into())).map_err(|e| (e, *v));
            Some(Some((rate(c)?, rate(p)?)))
        }
    };
    Ok(match verb {
        "add" => {
            let need = |k: &str| kv.get(k).copied().ok_or_else(|| (format!("'session add' needs {k}"), verb));
            let mac_s = need("mac")?;
            let mac = ValueKind::Mac.parse(mac_s).map_err(|e| (e, mac_s))? as u64;
            let ip_s = need("ip")?;
            let ip: Ipv4Addr = ip_s.parse().map_err(|_| (format!("'{ip_s}' is not an IPv4 address"), ip_s))?;
            need("port")?;
            need("s-vlan")?;
            need("c-vlan")?;
            need("tier")?;
            SessionCmd::Add(Session {
                id,
                port: num(&kv, "port")?.unwrap_or(0),
                svlan: num(&kv, "s-vlan")?.unwrap_or(0),
                cvlan: num(&kv, "c-vlan")?.unwrap_or(0),
                mac: std::array::from_fn(|i| (mac >> (40 - 8 * i)) as u8),
                ip,
                tier: num(&kv, "tier")?.unwrap_or(0),
                acl: num(&kv, "acl")?.unwrap_or(0),
                up: up.flatten(),
            })
        }
        "modify" => SessionCmd::Modify { id, tier: num(&kv, "tier")?, acl: num(&kv, "acl")?, up },
        _ => SessionCmd::Del(id),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prog() -> Program {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../pipelines/vbng.toml")).unwrap();
        fastpath_pipeline::compile("vbng.toml", &text).unwrap()
    }

    fn words(s: &str) -> Vec<&str> {
        s.split_whitespace().collect()
    }

    #[test]
    fn parses_every_form_and_blames_the_bad_word() {
        let a =
            parse_session(&words("session add 7 port 0 s-vlan 100 c-vlan 7 mac 02:5b:00:00:00:07 ip 100.64.1.7 tier 1 up 10mbit/20mbit"))
                .unwrap();
        let SessionCmd::Add(s) = a else { panic!() };
        assert_eq!((s.id, s.svlan, s.cvlan, s.tier, s.acl), (7, 100, 7, 1, 0));
        assert_eq!(s.mac, [2, 0x5b, 0, 0, 0, 7]);
        assert_eq!(s.up, Some((10_000_000, 20_000_000)));
        assert_eq!(
            parse_session(&words("session modify 7 up none")).unwrap(),
            SessionCmd::Modify { id: 7, tier: None, acl: None, up: Some(None) }
        );
        assert_eq!(parse_session(&words("session del 7")).unwrap(), SessionCmd::Del(7));
        let e = parse_session(&words("session add 7 port 0 s-vlan 100 c-vlan 7 mac 02:5b:00:00:00:07 ip 100.64.1.300 tier 0")).unwrap_err();
        assert_eq!(e.1, "100.64.1.300");
        let e = parse_session(&words("session add 7 port 0 s-vlan 100 mac 02:5b:00:00:00:07 ip 100.64.1.3 tier 0")).unwrap_err();
        assert!(e.0.contains("c-vlan"), "{}", e.0);
        let e = parse_session(&words("session modify 7 mac 02:5b:00:00:00:07")).unwrap_err();
        assert_eq!(e.1, "mac");
        let e = parse_session(&words("session add 7 port 0 s-vlan 5000 c-vlan 7 mac 02:5b:00:00:00:07 ip 100.64.1.3 tier 0 up fast"))
            .unwrap_err();
        assert_eq!(e.1, "fast");
    }

    #[test]
    fn a_session_is_its_entries_and_duplicates_are_refused() {
        let p = prog();
        let mut s = Sessions::new(&p).unwrap();
        let cmd = |t: &str| parse_session(&words(t)).unwrap();
        let (mut ops, mut undo) = (Vec::new(), Vec::new());
        s.plan(&cmd("session add 7 port 0 s-vlan 100 c-vlan 7 mac 02:5b:00:00:00:07 ip 100.64.1.7 tier 1 up 10mbit"), &mut ops, &mut undo)
            .unwrap();
        // up entry, down entry, policer, pipe.
        assert_eq!(ops.len(), 4);
        assert!(matches!(ops[3], EntryOp::Pipe { port: 0, pipe: 7, profile: 1 }));
        // The same address, identity or id again: refused, nothing appended.
        for dup in [
            "session add 8 port 0 s-vlan 100 c-vlan 8 mac 02:5b:00:00:00:08 ip 100.64.1.7 tier 0",
            "session add 8 port 0 s-vlan 100 c-vlan 7 mac 02:5b:00:00:00:07 ip 100.64.1.8 tier 0",
            "session add 7 port 0 s-vlan 100 c-vlan 9 mac 02:5b:00:00:00:09 ip 100.64.1.9 tier 0",
            "session add 9 port 0 s-vlan 100 c-vlan 9 mac 02:5b:00:00:00:09 ip 100.64.1.9 tier 9",
            "session add 300000 port 0 s-vlan 100 c-vlan 9 mac 02:5b:00:00:00:09 ip 100.64.1.9 tier 0",
        ] {
            assert!(s.plan(&cmd(dup), &mut ops, &mut undo).is_err(), "{dup}");
        }
        assert_eq!(ops.len(), 4);
        // Modify only what changed; delete takes both entries out and unpolices.
        ops.clear();
        s.plan(&cmd("session modify 7 tier 2"), &mut ops, &mut undo).unwrap();
        assert_eq!(ops, [EntryOp::Pipe { port: 0, pipe: 7, profile: 2 }]);
        ops.clear();
        s.plan(&cmd("session del 7"), &mut ops, &mut undo).unwrap();
        assert_eq!(ops.len(), 3);
        assert!(s.is_empty());
        // Undo puts everything back as before the first add: nothing.
        s.undo(undo);
        assert!(s.is_empty());
    }

    #[test]
    fn ops_applied_to_a_pipeline_make_a_working_session() {
        let p = prog();
        let mut pipe = p.instantiate();
        pipe.set_ports(2).unwrap();
        let mut s = Sessions::new(&p).unwrap();
        let (mut ops, mut undo) = (Vec::new(), Vec::new());
        let add = "session add 7 port 0 s-vlan 100 c-vlan 7 mac 02:5b:00:00:00:07 ip 100.64.1.7 tier 1 up 10mbit/20mbit";
        s.plan(&parse_session(&words(add)).unwrap(), &mut ops, &mut undo).unwrap();
        pipe.apply_ops(&ops).unwrap();
        assert_eq!(pipe.table("up_session").unwrap().len(), 1);
        assert_eq!(pipe.table("down_session").unwrap().len(), 1);
        let shown = pipe.entry_lines("down_session").unwrap().join("\n");
        assert!(shown.contains("100.64.1.7 => session_down(7, 0, 100, 7, 02:5b:00:00:00:07)"), "{shown}");
        ops.clear();
        s.plan(&SessionCmd::Del(7), &mut ops, &mut undo).unwrap();
        pipe.apply_ops(&ops).unwrap();
        assert_eq!(pipe.table("up_session").unwrap().len(), 0);
        assert_eq!(pipe.table("down_session").unwrap().len(), 0);
    }
}
