//! The XDP datapath at run time: its maps, the loaded program, the attachments, table entries
//! and counters.
//!
//! ```text
//!  XdpDatapath::build(program, ports)   check ▸ maps (one hash per table, devmap, counters) ▸
//!                                       generate ▸ load (the verifier's log on refusal)
//!  load_entries / apply_op              entries file or typed ops ▸ map updates (take effect at once)
//!  attach(mode)                         one BPF link per port (detached on drop, even on SIGKILL);
//!                                       native: a copy bound to the port that restores a VLAN tag
//!                                       the driver holds outside the frame, where the driver can;
//!                                       tc: the same pipeline as a SCHED_CLS program on tcx ingress
//!  counters()                           per-CPU array summed: per port, per drop reason, per table
//! ```
//!
//! Thread: control path only (every call is a system call); the program runs in the kernel's
//! receive path of each port, on whichever CPU receives.

use crate::codegen::{self, Hook, Layout, MapFds, Unsupported, VALUE_SIZE};
use fastpath_io::bpf::{
    BpfError, Insn, Link, Map, MapType, Prog, ProgType, UpdateFlags, XdpAttachMode, BPF_F_XDP_DEV_BOUND_ONLY, BPF_F_XDP_HAS_FRAGS,
    BPF_TCX_INGRESS, BPF_XDP,
};
use fastpath_packet::DropReason;
use fastpath_pipeline::entries::{entry_commands, EntryError, EntryOp, EntrySpec};
use fastpath_pipeline::ir::{MatchKind, TableDef, MAX_ARGS};
use fastpath_pipeline::objects::{Meter, MeterRates};
use fastpath_pipeline::value::Match;
use fastpath_pipeline::Program;

/// Why the XDP datapath could not be built or attached.
#[derive(Debug, thiserror::Error)]
pub enum XdpDpError {
    /// The spec uses something the XDP datapath does not compile.
    #[error("the XDP datapath cannot run this pipeline: {0}; use afxdp or afpacket ports for it")]
    Unsupported(#[from] Unsupported),
    /// A port's interface does not exist.
    #[error("port {port}: no interface \"{iface}\" in this network namespace")]
    NoInterface {
        /// Port name.
        port: String,
        /// Interface name.
        iface: String,
    },
    /// A BPF call failed.
    #[error("{what}: {err}")]
    Bpf {
        /// What was being done.
        what: String,
        /// The kernel's answer.
        err: Box<BpfError>,
    },
    /// The program could not be attached to a port.
    #[error("port {port} ({iface}): attaching the XDP program in {mode} mode: {err}; {hint}")]
    Attach {
        /// Port name.
        port: String,
        /// Interface name.
        iface: String,
        /// The mode tried last.
        mode: &'static str,
        /// The kernel's answer.
        err: Box<BpfError>,
        /// What to try.
        hint: &'static str,
    },
}

/// A port of the XDP datapath.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XdpPortSpec {
    /// Port name (for messages and counters).
    pub name: String,
    /// Interface.
    pub iface: String,
}

/// Counters of a running XDP datapath, summed over CPUs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct XdpCounters {
    /// Frames received, per port.
    pub rx: Vec<u64>,
    /// Frames handed to the redirect, per port.
    pub tx: Vec<u64>,
    /// Drops with a count above zero, by reason.
    pub drops: Vec<(DropReason, u64)>,
    /// Per table: (name, hits, misses).
    pub tables: Vec<(String, u64, u64)>,
}

impl XdpCounters {
    /// Frames dropped, over every reason.
    pub fn dropped(&self) -> u64 {
        self.drops.iter().map(|d| d.1).sum()
    }
}

/// How to attach.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AttachMode {
    /// Driver mode where the driver has it, else generic.
    #[default]
    Auto,
    /// Driver (native) mode only.
    Native,
    /// Generic (skb) mode.
    Skb,
    /// The tc hook (tcx ingress, Linux ≥ 6.6) instead of XDP: the same pipeline as a
    /// `SCHED_CLS` program that forwards each skb whole with `bpf_redirect`. On veth this is the
    /// way for TCP with the hosts' offloads on: a 64 KB GSO segment is neither copied (generic
    /// XDP copies every cloned or paged skb) nor bounded by the egress MTU, and it keeps its
    /// segment size and checksum state. The kernel has already moved an outer VLAN tag out of the
    /// frame (`skb_vlan_untag`) when tc runs: the pipeline does not see it and the tag leaves
    /// with the frame.
    Tc,
}

/// Where the tc program ([`AttachMode::Tc`]) sends a forwarded skb.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TcRedirect {
    /// Straight into the ingress of the port's peer when the port is a veth whose peer lives
    /// in another namespace (`bpf_redirect_peer`): the skb skips the port's transmit
    /// path and a second pass through the per-CPU backlog, as container networking forwards
    /// into a pod. The port's own egress (its qdisc, tc egress programs, packet sockets on it,
    /// its tx statistics) does not see the frame; the peer counts it as received. The ports
    /// are looked at when the program is generated. Any other port: as [`TcRedirect::Xmit`].
    #[default]
    Auto,
    /// Out of the port's egress (`bpf_redirect`), always.
    Xmit,
}

/// A pipeline compiled to XDP, loaded, with its maps.
#[derive(Debug)]
pub struct XdpDatapath {
    program: Program,
    ports: Vec<XdpPortSpec>,
    ifindexes: Vec<u32>,
    tables: Vec<Map>,
    _devmap: Map,
    /// One flow map per conntrack table (the program refers to them by fd).
    _conntracks: Vec<Map>,
    /// Which rule set of each classifier table is live.
    acl_sel: Map,
    /// The rules of each classifier table as the control side keeps them (empty for the
    /// others), with the next insertion number: the maps hold them sorted.
    rules: std::sync::Mutex<(Vec<Vec<Rule>>, u64)>,
    /// One state map per meter array.
    meters: Vec<Map>,
    counters: Map,
    layout: Layout,
    prog: Prog,
    insns: Vec<Insn>,
    fds: MapFds,
    /// Where the tc program sends forwarded skbs, and per port whether it went to the peer.
    tc_redirect: TcRedirect,
    tc_peer: Vec<bool>,
    /// The tc program, loaded when first attached with [`AttachMode::Tc`].
    tc: Option<Prog>,
    /// Per attached port: its link, mode name, and the port-bound program when it restores VLAN
    /// tags.
    links: Vec<(Link, &'static str, Option<Prog>)>,
}

fn bpf(what: impl Into<String>) -> impl FnOnce(BpfError) -> XdpDpError {
    let what = what.into();
    move |err| XdpDpError::Bpf { what, err: Box::new(err) }
}

/// A table map's key for `key` (one host-order u64 per field).
fn key_bytes(key: &[Match]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(8 * key.len());
    for m in key {
        match *m {
            Match::Exact(v) if v <= u128::from(u64::MAX) => out.extend_from_slice(&(v as u64).to_ne_bytes()),
            Match::Exact(v) => return Err(format!("key value {v:#x} wider than 64 bits")),
            _ => return Err("the XDP datapath matches exact keys only".into()),
        }
    }
    Ok(out)
}

/// A table map's value: the action index, then the arguments.
fn value_bytes(e: &EntrySpec) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(VALUE_SIZE as usize);
    out.extend_from_slice(&(e.action as u64).to_ne_bytes());
    for a in e.args {
        if a > u128::from(u64::MAX) {
            return Err(format!("argument {a:#x} wider than 64 bits"));
        }
        out.extend_from_slice(&(a as u64).to_ne_bytes());
    }
    debug_assert_eq!(out.len(), 8 + 8 * MAX_ARGS);
    Ok(out)
}

/// One rule of a classifier table, as the control side keeps it.
#[derive(Clone, Debug)]
struct Rule {
    spec: EntrySpec,
    /// Insertion number: ties of priority go to the rule added first.
    seq: u64,
}

/// A rule's bytes in the map (see `codegen::acl`): (a, b) per key field, then the value.
fn encode_rule(t: &TableDef, e: &EntrySpec) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(codegen::rule_size(t) as usize);
    for (k, m) in t.key.iter().zip(&e.key) {
        let (a, b) = codegen::encode_match(k.kind, k.field.width, m).map_err(|msg| format!("key field {}: {msg}", k.name))?;
        out.extend_from_slice(&a.to_ne_bytes());
        out.extend_from_slice(&b.to_ne_bytes());
    }
    out.extend(value_bytes(e)?);
    Ok(out)
}

/// The BTF ids of the classifier loop's kfuncs, when some table needs them.
fn iter_num_kfuncs(p: &Program) -> Result<[u32; 3], XdpDpError> {
    let mut ids = [0; 3];
    let what = if p.tables.iter().any(codegen::is_classifier) {
        "tables of lpm, ternary or range keys"
    } else if p.conntracks.iter().any(|c| c.config.window_check) {
        "conntrack with TCP window checks (its walk of a SYN's options)"
    } else {
        return Ok(ids);
    };
    for (id, name) in ids.iter_mut().zip(codegen::ITER_NUM_KFUNCS) {
        *id = fastpath_io::bpf::vmlinux_func_btf_id(name)
            .ok()
            .flatten()
            .ok_or_else(|| Unsupported(format!("{what}: this kernel has no {name} (the loop needs Linux 6.4 or later)")))?;
    }
    Ok(ids)
}

/// The prefix length a match stands for (an exact value: all of it).
fn prefix_len(m: &Match) -> u32 {
    match *m {
        Match::Prefix(_, len) => u32::from(len),
        Match::Exact(_) => 128,
        _ => 0,
    }
}

impl XdpDatapath {
    /// Checks `program`, creates its maps, generates and loads the program for `ports` (port
    /// `i` is the pipeline's port number `i`). Nothing is attached yet.
    ///
    /// # Errors
    /// [`XdpDpError::Unsupported`] naming the first part of the spec that does not compile,
    /// [`XdpDpError::NoInterface`], or a BPF failure (with the verifier's log).
    pub fn build(program: Program, ports: &[XdpPortSpec]) -> Result<XdpDatapath, XdpDpError> {
        codegen::check(&program)?;
        let ifindexes = ports
            .iter()
            .map(|p| {
                fastpath_io::sys::ifindex(&p.iface).map_err(|_| XdpDpError::NoInterface { port: p.name.clone(), iface: p.iface.clone() })
            })
            .collect::<Result<Vec<u32>, _>>()?;
        let layout = Layout { ports: ports.len(), tables: program.tables.len() };
        let mut tables = Vec::new();
        for t in &program.tables {
            let m = if codegen::is_classifier(t) {
                // Two rule sets, the live one named by `acl_sel`.
                Map::create(MapType::ARRAY, 4, codegen::set_size(t), 2, &t.name)
            } else {
                Map::create(MapType::HASH, 8 * t.key.len() as u32, VALUE_SIZE, t.size as u32, &t.name)
            }
            .map_err(bpf(format!("creating the map of table \"{}\"", t.name)))?;
            tables.push(m);
        }
        let n_tables = program.tables.len();
        let acl_sel = Map::create(MapType::ARRAY, 4, 4, program.tables.len().max(1) as u32, "fp_acl_sel")
            .map_err(bpf("creating the rule-set map"))?;
        let mut meters = Vec::new();
        for m in &program.meters {
            let map = Map::create(MapType::ARRAY, 4, codegen::METER_VALUE_SIZE, m.size.max(1) as u32, &m.name)
                .map_err(bpf(format!("creating the map of meter array \"{}\"", m.name)))?;
            meters.push(map);
        }
        let n = ports.len().max(1) as u32;
        let devmap = Map::create(MapType::DEVMAP, 4, 4, n, "fp_ports").map_err(bpf("creating the port map"))?;
        for (i, ifx) in ifindexes.iter().enumerate() {
            devmap
                .update(&(i as u32).to_ne_bytes(), &ifx.to_ne_bytes())
                .map_err(bpf(format!("adding port {} to the port map", ports[i].name)))?;
        }
        let counters = Map::create(MapType::PERCPU_ARRAY, 4, 8, layout.slots(), "fp_counters").map_err(bpf("creating the counters"))?;
        let mut conntracks = Vec::new();
        for c in &program.conntracks {
            let m = Map::create(MapType::LRU_HASH, codegen::CT_KEY_SIZE, codegen::CT_VALUE_SIZE, c.config.capacity, &c.name)
                .map_err(bpf(format!("creating the flow map of conntrack \"{}\"", c.name)))?;
            conntracks.push(m);
        }
        let fds = MapFds {
            tables: tables.iter().map(Map::fd).collect(),
            devmap: devmap.fd(),
            counters: counters.fd(),
            conntracks: conntracks.iter().map(Map::fd).collect(),
            acl_sel: acl_sel.fd(),
            meters: meters.iter().map(Map::fd).collect(),
            iter_num: iter_num_kfuncs(&program)?,
        };
        let insns = codegen::generate(&program, &ifindexes, &fds, Hook::Xdp, &[]);
        // The program reads only the Ethernet header, in the first buffer: it can take
        // multi-buffer frames, which the kernel would otherwise drop (GRO/GSO skbs in generic
        // mode, jumbo frames).
        let prog = Prog::load_with_flags(ProgType::XDP, &insns, "GPL", BPF_XDP, &format!("fp_{}", program.name), BPF_F_XDP_HAS_FRAGS)
            .map_err(bpf("loading the XDP program"))?;
        Ok(XdpDatapath {
            program,
            ports: ports.to_vec(),
            ifindexes,
            tables,
            _devmap: devmap,
            _conntracks: conntracks,
            acl_sel,
            rules: std::sync::Mutex::new((vec![Vec::new(); n_tables], 0)),
            meters,
            counters,
            layout,
            prog,
            insns,
            fds,
            tc_redirect: TcRedirect::Auto,
            tc_peer: Vec::new(),
            tc: None,
            links: Vec::new(),
        })
    }

    /// Instructions in the generated program.
    pub fn insns(&self) -> usize {
        self.insns.len()
    }

    /// Per attached port, whether its program puts back a VLAN tag the driver holds outside
    /// the frame (native mode on a driver with the VLAN metadata kfunc: veth, mlx5, ice, …,
    /// kernel ≥ 6.8). Where false, the pipeline does not see such a tag
    /// (generic mode always: it has no metadata kfuncs). A tag inside the frame is seen in
    /// every mode.
    pub fn vlan_restore(&self) -> Vec<bool> {
        self.links.iter().map(|l| l.2.is_some()).collect()
    }

    /// The program with [`codegen::vlan_restore_prologue`] in front, loaded bound to port `i`'s
    /// device; `None` when the kernel or the driver cannot (no BTF, no such kfunc, a driver
    /// without the VLAN metadata kfunc).
    fn load_vlan_restore(&self, i: usize) -> Option<Prog> {
        let id = fastpath_io::bpf::vmlinux_func_btf_id(codegen::RX_VLAN_TAG_KFUNC).ok()??;
        let mut insns = codegen::vlan_restore_prologue(id).to_vec();
        insns.extend_from_slice(&self.insns);
        let name = format!("fp_{}", self.program.name);
        Prog::load_on(ProgType::XDP, &insns, "GPL", BPF_XDP, &name, BPF_F_XDP_HAS_FRAGS | BPF_F_XDP_DEV_BOUND_ONLY, self.ifindexes[i]).ok()
    }

    /// The loaded program (tests run it with `BPF_PROG_TEST_RUN`).
    pub fn prog(&self) -> &Prog {
        &self.prog
    }

    /// Chooses where the tc program sends forwarded skbs (before it is loaded; the default is
    /// [`TcRedirect::Auto`]).
    #[must_use]
    pub fn with_tc_redirect(mut self, r: TcRedirect) -> XdpDatapath {
        self.tc_redirect = r;
        self
    }

    /// Per port, whether the loaded tc program forwards into the ingress of the port's peer
    /// ([`TcRedirect::Auto`] on a veth whose peer is in another namespace); empty before
    /// [`XdpDatapath::load_tc`].
    pub fn tc_peer(&self) -> &[bool] {
        &self.tc_peer
    }

    /// Generates and loads the same pipeline for the tc hook ([`AttachMode::Tc`]), once.
    ///
    /// # Errors
    /// The verifier's rejection with its log.
    pub fn load_tc(&mut self) -> Result<(), XdpDpError> {
        if self.tc.is_none() {
            // A link whose kind cannot be read is sent out of its egress.
            let to_peer = |&ifx: &u32| {
                self.tc_redirect == TcRedirect::Auto && fastpath_io::sys::link_info(ifx).is_ok_and(|l| l.kind == "veth" && l.peer_elsewhere)
            };
            self.tc_peer = self.ifindexes.iter().map(to_peer).collect();
            let insns = codegen::generate(&self.program, &self.ifindexes, &self.fds, Hook::Tc, &self.tc_peer);
            let name = format!("fp_{}", self.program.name);
            let p = Prog::load(ProgType::SCHED_CLS, &insns, "GPL", BPF_TCX_INGRESS, &name).map_err(bpf("loading the tc program"))?;
            self.tc = Some(p);
        }
        Ok(())
    }

    /// The tc program, once [`XdpDatapath::load_tc`] (or attaching in tc mode) loaded it.
    pub fn tc_prog(&self) -> Option<&Prog> {
        self.tc.as_ref()
    }

    /// The ports' ifindexes, in port order.
    pub fn ifindexes(&self) -> &[u32] {
        &self.ifindexes
    }

    /// Applies one typed op to the table and meter maps (`tm pipe` is refused: the XDP
    /// datapath has no traffic manager).
    ///
    /// # Errors
    /// What was refused: a missing key for modify/del, a full table, a value the maps cannot hold.
    pub fn apply_op(&self, op: &EntryOp) -> Result<(), String> {
        let name = |t: usize| self.program.tables[t].name.clone();
        let table = match op {
            EntryOp::Add(e) | EntryOp::Modify(e) => e.table,
            EntryOp::Del { table, .. } | EntryOp::Clear { table } => *table,
            EntryOp::Meter { bank, index, rates } => return self.set_meter(bank, *index, rates),
            EntryOp::Pipe { .. } => return Err("tm pipe: the XDP datapath has no traffic manager".into()),
        };
        if codegen::is_classifier(&self.program.tables[table]) {
            return self.apply_rule(op, table);
        }
        match op {
            EntryOp::Add(e) | EntryOp::Modify(e) => {
                let (k, v) = (key_bytes(&e.key)?, value_bytes(e)?);
                let flags = if matches!(op, EntryOp::Add(_)) { UpdateFlags::Any } else { UpdateFlags::Exist };
                self.tables[e.table].update_with(&k, &v, flags).map_err(|err| match err.errno() {
                    libc::ENOENT => format!("table \"{}\" has no entry with that key", name(e.table)),
                    libc::E2BIG => format!("table \"{}\" is full ({} entries)", name(e.table), self.program.tables[e.table].size),
                    _ => err.to_string(),
                })
            }
            EntryOp::Del { table, key } => match self.tables[*table].delete(&key_bytes(key)?) {
                Ok(true) => Ok(()),
                Ok(false) => Err(format!("table \"{}\" has no entry with that key", name(*table))),
                Err(e) => Err(e.to_string()),
            },
            EntryOp::Clear { table } => {
                let m = &self.tables[*table];
                for k in m.keys().map_err(|e| e.to_string())? {
                    m.delete(&k).map_err(|e| e.to_string())?;
                }
                Ok(())
            }
            EntryOp::Meter { .. } | EntryOp::Pipe { .. } => Err("not a table change".into()),
        }
    }

    /// A change to classifier table `t`: the control side's list changes, then the whole
    /// sorted set is written to the rule set the program is not reading, and that set made
    /// live.
    fn apply_rule(&self, op: &EntryOp, t: usize) -> Result<(), String> {
        let def = &self.program.tables[t];
        let mut guard = self.rules.lock().map_err(|_| "the rule list's lock is poisoned".to_string())?;
        let (all, seq) = &mut *guard;
        let rules = &mut all[t];
        let at = |key: &[Match]| rules.iter().position(|r| r.spec.key == key);
        match op {
            EntryOp::Add(e) => {
                encode_rule(def, e)?;
                match at(&e.key) {
                    Some(i) => rules[i].spec = e.clone(),
                    None if rules.len() >= def.size.min(codegen::MAX_RULES) => {
                        return Err(format!("table \"{}\" is full ({} rules)", def.name, rules.len()));
                    }
                    None => {
                        rules.push(Rule { spec: e.clone(), seq: *seq });
                        *seq += 1;
                    }
                }
            }
            EntryOp::Modify(e) => {
                encode_rule(def, e)?;
                let i = at(&e.key).ok_or_else(|| format!("table \"{}\" has no entry with that key", def.name))?;
                rules[i].spec = e.clone();
            }
            EntryOp::Del { key, .. } => {
                let i = at(key).ok_or_else(|| format!("table \"{}\" has no entry with that key", def.name))?;
                rules.remove(i);
            }
            EntryOp::Clear { .. } => rules.clear(),
            EntryOp::Meter { .. } | EntryOp::Pipe { .. } => return Err("not a table change".into()),
        }
        // The engine's order: a prefix table's longest prefix first; a classifier's lower
        // priority first, ties to the rule added first.
        let mut order: Vec<&Rule> = rules.iter().collect();
        if def.key.iter().all(|k| k.kind == MatchKind::Lpm) {
            order.sort_by_key(|r| std::cmp::Reverse(r.spec.key.iter().map(prefix_len).sum::<u32>()));
        } else {
            order.sort_by_key(|r| (r.spec.priority, r.seq));
        }
        let mut set = Vec::with_capacity(codegen::set_size(def) as usize);
        set.extend_from_slice(&(order.len() as u64).to_ne_bytes());
        for r in order {
            set.extend(encode_rule(def, &r.spec)?);
        }
        set.resize(codegen::set_size(def) as usize, 0);
        let key = (t as u32).to_ne_bytes();
        let mut live = [0u8; 4];
        let found = self.acl_sel.lookup(&key, &mut live).map_err(|e| e.to_string())?;
        let spare: u32 = if found { 1 - (u32::from_ne_bytes(live) & 1) } else { 1 };
        self.tables[t].update(&spare.to_ne_bytes(), &set).map_err(|e| e.to_string())?;
        self.acl_sel.update(&key, &spare.to_ne_bytes()).map_err(|e| e.to_string())
    }

    /// `meter M I …`: validated as the engine validates it (all zero: unset, every packet
    /// green), written with both buckets full.
    fn set_meter(&self, bank: &str, index: usize, r: &MeterRates) -> Result<(), String> {
        let Some(m) = self.program.meters.iter().position(|m| m.name == bank) else {
            return Err(format!("no meter array \"{bank}\""));
        };
        let def = &self.program.meters[m];
        if index >= def.size {
            return Err(format!("meter index {index} out of range (\"{bank}\" has {})", def.size));
        }
        // Validated as the engine validates it; both buckets start full.
        let (kind, tokens) =
            match Meter::configured(def.two_rate, def.color_aware, r).map_err(|e| format!("meter {bank}[{index}]: {e:?}"))? {
                Meter::Unset => (0u64, (0, 0)),
                Meter::Sr(_) => (1, (r.cbs_bytes, r.ebs_or_pbs_bytes)),
                Meter::Tr(_) => (2, (r.ebs_or_pbs_bytes, r.cbs_bytes)),
            };
        let mut v = vec![0u8; codegen::METER_VALUE_SIZE as usize];
        let mut put = |at: i16, x: u64| v[at as usize..at as usize + 8].copy_from_slice(&x.to_ne_bytes());
        put(codegen::KIND, kind);
        put(codegen::AWARE, u64::from(def.color_aware));
        put(codegen::CIR, r.cir_bytes_per_s);
        put(codegen::CBS, r.cbs_bytes);
        put(codegen::EBS_PBS, r.ebs_or_pbs_bytes);
        put(codegen::PIR, r.pir_bytes_per_s);
        put(codegen::TOKENS_A, tokens.0);
        put(codegen::TOKENS_B, tokens.1);
        self.meters[m].update(&(index as u32).to_ne_bytes(), &v).map_err(|e| e.to_string())
    }

    /// Loads an entries file (the format of `--entries`), line by line; each line takes effect
    /// at once. Returns the commands applied.
    ///
    /// # Errors
    /// The first bad line, with file, line and column.
    pub fn load_entries(&self, file: &str, text: &str) -> Result<usize, EntryError> {
        let mut n = 0;
        for (line, cmd) in entry_commands(text) {
            let op = self.program.parse_entry(cmd).map_err(|e| e.into_error(file, line, cmd))?;
            self.apply_op(&op).map_err(|msg| EntryError { file: file.to_string(), line, col: 0, input: cmd.to_string(), msg })?;
            n += 1;
        }
        Ok(n)
    }

    /// Attaches the program to every port (one BPF link each). With [`AttachMode::Auto`], a
    /// port whose driver refuses native XDP gets generic XDP. In native mode a port whose
    /// driver has the VLAN metadata kfunc gets its own copy of the program, bound to it, that
    /// first puts back a tag the driver holds outside the frame ([`XdpDatapath::vlan_restore`]).
    /// Returns the mode of each port.
    ///
    /// # Errors
    /// [`XdpDpError::Attach`] naming the port, mode and what to try; ports attached before it
    /// stay attached until the datapath drops.
    pub fn attach(&mut self, mode: AttachMode) -> Result<Vec<&'static str>, XdpDpError> {
        let tries: &[XdpAttachMode] = match mode {
            AttachMode::Auto => &[XdpAttachMode::Native, XdpAttachMode::Skb],
            AttachMode::Native => &[XdpAttachMode::Native],
            AttachMode::Skb => &[XdpAttachMode::Skb],
            AttachMode::Tc => return self.attach_tc(),
        };
        for (i, p) in self.ports.iter().enumerate() {
            let mut last = None;
            for &m in tries {
                if m == XdpAttachMode::Native {
                    // A device-bound program attaches in native mode only.
                    if let Some(bound) = self.load_vlan_restore(i) {
                        if let Ok(l) = Link::xdp(&bound, self.ifindexes[i], m) {
                            self.links.push((l, m.name(), Some(bound)));
                            last = None;
                            break;
                        }
                    }
                }
                match Link::xdp(&self.prog, self.ifindexes[i], m) {
                    Ok(l) => {
                        self.links.push((l, m.name(), None));
                        last = None;
                        break;
                    }
                    Err(e) => last = Some((m, e)),
                }
            }
            if let Some((m, err)) = last {
                let hint = m.attach_hint(err.errno());
                return Err(XdpDpError::Attach { port: p.name.clone(), iface: p.iface.clone(), mode: m.name(), err: Box::new(err), hint });
            }
        }
        Ok(self.links.iter().map(|l| l.1).collect())
    }

    /// [`XdpDatapath::attach`] with [`AttachMode::Tc`]: one tcx ingress link per port.
    fn attach_tc(&mut self) -> Result<Vec<&'static str>, XdpDpError> {
        self.load_tc()?;
        let prog = self.tc.as_ref().expect("loaded by load_tc");
        for (p, &ifx) in self.ports.iter().zip(&self.ifindexes) {
            let link = Link::tcx_ingress(prog, ifx).map_err(|err| {
                let hint = match err.errno() {
                    libc::EPERM | libc::EACCES => "run as root (CAP_NET_ADMIN and CAP_BPF)",
                    _ => "tc programs attach through tcx links, which need Linux 6.6 or later",
                };
                XdpDpError::Attach { port: p.name.clone(), iface: p.iface.clone(), mode: "tc", err: Box::new(err), hint }
            })?;
            self.links.push((link, "tc", None));
        }
        Ok(self.links.iter().map(|l| l.1).collect())
    }

    /// Detaches the program from every port (the maps and entries stay).
    pub fn detach(&mut self) {
        self.links.clear();
    }

    fn counter(&self, idx: u32) -> u64 {
        match self.counters.lookup_percpu(&idx.to_ne_bytes()) {
            Ok(Some(v)) => v.chunks_exact(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8]))).sum(),
            _ => 0,
        }
    }

    /// The counters, summed over CPUs.
    pub fn counters(&self) -> XdpCounters {
        let l = self.layout;
        XdpCounters {
            rx: (0..l.ports).map(|p| self.counter(l.rx(p))).collect(),
            tx: (0..l.ports).map(|p| self.counter(l.tx(p))).collect(),
            drops: DropReason::ALL.iter().map(|r| (*r, self.counter(l.drop(*r)))).filter(|d| d.1 > 0).collect(),
            tables: self
                .program
                .tables
                .iter()
                .enumerate()
                .map(|(t, d)| (d.name.clone(), self.counter(l.hit(t)), self.counter(l.miss(t))))
                .collect(),
        }
    }
}
