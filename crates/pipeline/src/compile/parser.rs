//! The parser section and user metadata: which headers a pipeline parses (and that each follows
//! one it can follow), and the `[metadata]` fields, each mapped to a 32-bit register.

use super::Compiler;
use crate::ir::Program;
use crate::spec::{suggest, SpecFile};
use fastpath_packet::meta::REGS;
use fastpath_packet::Hdr;

impl Compiler<'_> {
    pub(super) fn parser(&mut self, spec: &SpecFile, p: &mut Program) {
        for h in spec.parser.headers.get_ref() {
            match Hdr::from_name(h.get_ref()) {
                Some(x) => p.headers.insert(x),
                None => {
                    let e = self.err(h.span().start + 1, format!("unknown header \"{}\"", h.get_ref()));
                    let s = suggest(h.get_ref(), Hdr::ALL.iter().map(|h| h.name()));
                    self.push(e.did_you_mean(s));
                }
            }
        }
        let hs = p.headers;
        let needs: &[(Hdr, &[Hdr])] = &[
            (Hdr::Vlan, &[Hdr::Eth]),
            (Hdr::Qinq, &[Hdr::Vlan]),
            (Hdr::Arp, &[Hdr::Eth]),
            (Hdr::Ipv4, &[Hdr::Eth]),
            (Hdr::Ipv6, &[Hdr::Eth]),
            (Hdr::Icmp, &[Hdr::Ipv4]),
            (Hdr::Icmp6, &[Hdr::Ipv6]),
            (Hdr::Udp, &[Hdr::Ipv4, Hdr::Ipv6]),
            (Hdr::Tcp, &[Hdr::Ipv4, Hdr::Ipv6]),
            (Hdr::Vxlan, &[Hdr::Udp]),
            (Hdr::InnerEth, &[Hdr::Vxlan]),
            (Hdr::InnerIpv4, &[Hdr::InnerEth]),
            (Hdr::InnerIpv6, &[Hdr::InnerEth]),
            (Hdr::InnerUdp, &[Hdr::InnerIpv4, Hdr::InnerIpv6]),
            (Hdr::InnerTcp, &[Hdr::InnerIpv4, Hdr::InnerIpv6]),
            (Hdr::InnerIcmp, &[Hdr::InnerIpv4, Hdr::InnerIpv6]),
        ];
        for (h, below) in needs {
            if hs.has(*h) && !below.iter().any(|b| hs.has(*b)) {
                let pos = spec.parser.headers.get_ref().iter().find(|x| x.get_ref() == h.name()).map_or(0, |x| x.span().start + 1);
                let names: Vec<&str> = below.iter().map(|b| b.name()).collect();
                let e = self.err(pos, format!("header \"{}\" can only follow {}", h.name(), names.join(" or ")));
                self.push(e.hint(format!("add \"{}\" to the parser's headers", names[0])));
            }
        }
        if !hs.has(Hdr::Eth) && !spec.parser.headers.get_ref().is_empty() {
            let e = self.err(spec.parser.headers.span().start, "the parser must include \"eth\"");
            self.push(e);
        }
    }

    pub(super) fn metadata(&mut self, spec: &SpecFile, p: &mut Program) {
        for (name, v) in &spec.metadata {
            let w = v.as_integer().unwrap_or(0);
            let pos = self.src.text.find(&format!("{name} ")).or_else(|| self.src.text.find(name.as_str())).unwrap_or(0);
            if !(1..=32).contains(&w) {
                let e = self.err(pos, format!("metadata \"{name}\": width must be 1..=32 bits, got {v}"));
                self.push(e);
                continue;
            }
            if p.user_meta.len() == REGS {
                let e = self.err(pos, format!("at most {REGS} metadata fields"));
                self.push(e);
                continue;
            }
            p.user_meta.push((name.clone(), w as u8));
        }
    }
}
