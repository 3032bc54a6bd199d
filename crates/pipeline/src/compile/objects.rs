//! Stateful objects: meters (RFC 2697 / 2698), counter arrays and connection-tracking tables, each
//! checked and sized here; the runtime objects are made from these definitions by [`crate::build`].

use super::Compiler;
use crate::ir::{ConntrackDef, CounterDef, FdbDef, MeterDef, Program};
use crate::spec::SpecFile;
use toml::Spanned;

impl Compiler<'_> {
    pub(super) fn objects(&mut self, spec: &SpecFile, p: &mut Program) {
        for m in &spec.meters {
            let two_rate = match m.kind.get_ref().as_str() {
                "srtcm" => false,
                "trtcm" => true,
                other => {
                    let e =
                        self.err(m.kind.span().start + 1, format!("meter kind \"{other}\" is not srtcm (RFC 2697) or trtcm (RFC 2698)"));
                    self.push(e);
                    false
                }
            };
            let size = self.size(&m.size, 1 << 24);
            p.meters.push(MeterDef { name: m.name.get_ref().clone(), two_rate, size, color_aware: m.color_aware });
        }
        for c in &spec.counters {
            let size = self.size(&c.size, 1 << 24);
            p.counters.push(CounterDef { name: c.name.get_ref().clone(), size });
        }
        for c in &spec.conntracks {
            let size = self.size(&c.size, 1 << 30);
            let mut config = fastpath_tables::flow::FlowConfig::with_capacity(size as u32);
            config.window_check = c.window_check;
            if let Some(t) = &c.timeouts {
                for (k, v) in t.get_ref() {
                    let secs = v.as_float().or_else(|| v.as_integer().map(|i| i as f64)).filter(|s| *s > 0.0 && *s < 1e9);
                    let to = &mut config.timeouts;
                    let slot = match k.as_str() {
                        "syn_sent" => &mut to.syn_sent_ns,
                        "syn_recv" => &mut to.syn_recv_ns,
                        "established" => &mut to.established_ns,
                        "fin_wait" => &mut to.fin_wait_ns,
                        "close_wait" => &mut to.close_wait_ns,
                        "last_ack" => &mut to.last_ack_ns,
                        "time_wait" => &mut to.time_wait_ns,
                        "closed" => &mut to.closed_ns,
                        "unreplied" => &mut to.unreplied_ns,
                        "replied" => &mut to.replied_ns,
                        "icmp" => &mut to.icmp_ns,
                        other => {
                            let e = self.err(t.span().start, format!("conntrack \"{}\": unknown timeout \"{other}\"", c.name.get_ref()));
                            self.push(e.hint("one of syn_sent, syn_recv, established, fin_wait, close_wait, last_ack, time_wait, closed, unreplied, replied, icmp"));
                            continue;
                        }
                    };
                    match secs {
                        Some(s) => *slot = (s * 1e9) as u64,
                        None => {
                            let e = self.err(
                                t.span().start,
                                format!("conntrack \"{}\": timeout \"{k}\" must be a positive number of seconds", c.name.get_ref()),
                            );
                            self.push(e);
                        }
                    }
                }
            }
            if fastpath_tables::flow::FlowTable::new(fastpath_tables::flow::FlowConfig { capacity: 1, ..config }).is_err() {
                let e = self.err(c.size.span().start, "conntrack configuration refused");
                self.push(e);
            }
            p.conntracks.push(ConntrackDef { name: c.name.get_ref().clone(), config });
        }
    }

    /// `[[fdb]]`: size, ageing time and VLAN membership.
    pub(super) fn fdbs(&mut self, spec: &SpecFile, p: &mut Program) {
        for f in &spec.fdbs {
            let size = self.size(&f.size, 1 << 24);
            let ageing_s = f.ageing_s.as_ref().map_or(300.0, |a| *a.get_ref());
            if !(ageing_s > 0.0 && ageing_s <= 1e6) {
                let pos = f.ageing_s.as_ref().map_or(f.name.span().start, |a| a.span().start);
                let e = self.err(pos, format!("fdb \"{}\": ageing_s {ageing_s} is not in (0, 1000000] seconds", f.name.get_ref()));
                self.push(e);
            }
            let mut vlans: Vec<(u16, u64)> = Vec::new();
            for v in &f.vlans {
                let vid = *v.vid.get_ref();
                if vid > 4094 || vlans.iter().any(|(x, _)| u64::from(*x) == vid) {
                    let m = if vid > 4094 {
                        format!("VLAN id {vid} is not 0 (untagged) to 4094")
                    } else {
                        format!("VLAN {vid} is listed twice")
                    };
                    let e = self.err(v.vid.span().start, m);
                    self.push(e);
                    continue;
                }
                let mut mask = 0u64;
                for port in &v.ports {
                    let x = *port.get_ref();
                    if x >= 64 {
                        let e = self.err(port.span().start, format!("port {x}: VLAN members are ports 0 to 63"));
                        self.push(e);
                        continue;
                    }
                    mask |= 1 << x;
                }
                vlans.push((vid as u16, mask));
            }
            p.fdbs.push(FdbDef { name: f.name.get_ref().clone(), size, ageing_ns: (ageing_s.clamp(0.0, 1e6) * 1e9) as u64, vlans });
        }
    }

    pub(super) fn size(&mut self, s: &Spanned<u64>, max: u64) -> usize {
        let v = *s.get_ref();
        if v == 0 || v > max {
            let e = self.err(s.span().start, format!("size {v} out of range 1..={max}"));
            self.push(e);
            return 1;
        }
        v as usize
    }
}
