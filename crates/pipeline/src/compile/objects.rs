//! Stateful objects: meters (RFC 2697 / 2698), counter arrays and connection-tracking tables, each
//! checked and sized here; the runtime objects are made from these definitions by [`crate::build`].

use super::Compiler;
use crate::ir::{ConntrackDef, CounterDef, MeterDef, Program};
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
