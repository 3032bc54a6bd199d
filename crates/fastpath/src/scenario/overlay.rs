//! The `sdn-overlay` scenario: tables at DASH-like scale and VXLAN traffic that exercises the
//! whole pipeline (decap ▸ conntrack + stateful inbound ACL ▸ policer ▸ CA→PA ▸ outbound ACL ▸
//! encap).
//!
//! Scale (issue 3): 1,000 local VMs (MAC → policer, 1,000 srTCM policers), 1,000 remote
//! customer addresses each behind its own tunnel endpoint (1,000 VTEPs), 3,000 inbound ACL
//! rules and 1,000 outbound rules of which only the last, lowest-priority rules allow the
//! traffic (so the classifier works for its answer), and up to 5,000,000 concurrent flows.
//! Flow `f` is a UDP flow from VM `f % 1000` to remote CA `(f / 1000) % 1000` with source port
//! `1024 + f / 1,000,000` (distinct 5-tuples for every `f < 64.5M`). Its first packet opens the
//! connection (ACL, `ct_commit`); the rest take the established path.

use super::Rng;
use fastpath_packet::build::FrameBuilder;
use std::fmt::Write;
use std::net::Ipv4Addr;

/// Local VMs (MACs and policers).
pub const VMS: u32 = 1000;
/// Remote customer addresses, one tunnel endpoint each.
pub const REMOTES: u32 = 1000;
/// Inbound ACL rules.
pub const ACL_IN_RULES: u32 = 3000;
/// Outbound ACL rules.
pub const ACL_OUT_RULES: u32 = 1000;
/// The VNI of the tenant traffic (VNET 1).
pub const VNI: u32 = 100;

/// Local VM `k`'s MAC.
pub fn vm_mac(k: u32) -> [u8; 6] {
    [0x02, 0x00, 0x00, 0x01, (k >> 8) as u8, k as u8]
}
/// Local VM `k`'s customer address: 10.1.x.y.
pub fn vm_ip(k: u32) -> Ipv4Addr {
    Ipv4Addr::new(10, 1, (k >> 8) as u8, k as u8)
}
/// Remote customer address `r`: 10.2.x.y.
pub fn remote_ip(r: u32) -> Ipv4Addr {
    Ipv4Addr::new(10, 2, (r >> 8) as u8, r as u8)
}

fn mac(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// The entries file for `pipelines/sdn-overlay.toml` (tables, policers), reproducible from `seed`.
pub fn entries(seed: u64) -> String {
    let mut rng = Rng::new(seed);
    let mut s = String::with_capacity(1 << 20);
    let _ = writeln!(s, "# sdn-overlay entries: {VMS} local MACs + policers, {REMOTES} CA->PA mappings and tunnel endpoints, {ACL_IN_RULES} inbound and {ACL_OUT_RULES} outbound ACL rules (seed {seed})");
    let _ = writeln!(s, "table vni_map add {VNI} => set_vnet(1)");
    for k in 0..VMS {
        let _ = writeln!(s, "table local_mac add {} => local_mac({k})", mac(vm_mac(k)));
        // 10 Gbyte/s: the bench polices nothing away; tests and `ctl` set real rates.
        let _ = writeln!(s, "meter policer {k} cir 10000000000 cbs 1000000 ebs 1000000");
    }
    let _ = writeln!(s, "table local_mac add {} => local_mac(0)", mac(GATEWAY_MAC));
    for r in 0..REMOTES {
        let _ = writeln!(s, "table ca_pa add 1 {} => to_tunnel({r})", remote_ip(r));
        // Return traffic to local VMs goes back through the same endpoints.
        let _ = writeln!(s, "table ca_pa add 1 {} => to_tunnel({r})", vm_ip(r % VMS));
        let vtep = Ipv4Addr::new(198, 19, (r >> 8) as u8, r as u8);
        let _ = writeln!(s, "table tunnels add {r} => encap(02:00:00:00:ee:01, 02:00:00:00:ee:00, 198.18.0.1, {vtep}, {}, 1)", 1000 + r);
    }
    // Inbound: rules for other prefixes (172.16/12 sources) that never match the traffic, then
    // the allow rules of the tenant at the lowest priorities.
    for k in 0..ACL_IN_RULES - 2 {
        let src = Ipv4Addr::from(0xac10_0000 | (rng.next() as u32 & 0x000f_ff00));
        let dport = rng.below(60000) as u16 + 1;
        let action = if k % 3 == 0 { "deny" } else { "allow" };
        let _ = writeln!(s, "table acl_in add {src}/24 10.0.0.0/8 {dport}..{} 6/0xff priority {} => {action}", dport + 10, k + 10);
    }
    let _ = writeln!(s, "table acl_in add 10.1.0.0/16 10.2.0.0/16 * * priority {} => allow", ACL_IN_RULES + 10);
    let _ = writeln!(s, "table acl_in add 10.2.0.0/16 10.1.0.0/16 22..22 6/0xff priority {} => allow", ACL_IN_RULES + 11);
    for k in 0..ACL_OUT_RULES {
        let dst = Ipv4Addr::from(0xc0a8_0000 | (rng.next() as u32 & 0xff00));
        let _ = writeln!(s, "table acl_out add * {dst}/24 * * priority {} => deny", k + 10);
    }
    s
}

/// The VXLAN frame of flow `f`, `len` bytes in all.
pub fn frame(f: u32, len: usize) -> Vec<u8> {
    let vm = f % VMS;
    let r = (f / VMS) % REMOTES;
    let sport = 1024 + (f / (VMS * REMOTES)) as u16;
    FrameBuilder::eth([0x02, 0, 0, 0, 0xee, 0x00], [0x02, 0, 0, 0, 0xee, 0x02])
        .ipv4(Ipv4Addr::new(198, 18, 0, 2), Ipv4Addr::new(198, 18, 0, 1))
        .udp(49152 + (f & 0x3fff) as u16, 4789)
        .vxlan(VNI)
        .inner_eth(GATEWAY_MAC, vm_mac(vm))
        .ipv4(vm_ip(vm), remote_ip(r))
        .udp(sport, 5001)
        .frame_len(len)
        .build()
}

/// The spec with the conntrack table sized for `flows` (plus headroom for the ACL's denials).
pub fn spec_for(spec: &str, flows: u32) -> String {
    let cap = (u64::from(flows) * 5 / 4 + 1024).min(1 << 30);
    spec.replace("size = 5000000\n", &format!("size = {cap}\n"))
}

/// Which form of the overlay a scenario runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Variant {
    /// The full pipeline, UDP flows (first packet through the ACL, then established).
    #[default]
    Full,
    /// Feature-ladder step `k` (see [`LADDER`]).
    Ladder(usize),
    /// Connections per second: every flow a SYN then its SYN-ACK, flows ageing out in 50 ms.
    Cps,
}

/// The feature ladder: step names, each adding one feature to the one before.
pub const LADDER: &[&str] = &["vxlan-forward", "+inbound-acl", "+conntrack", "+policer", "+outbound-acl", "full (encap)"];

const HEAD: &str = "if vxlan.valid:\n    apply vni_map\n    vxlan_decap\nelse:\n    drop not_ip\n";
/// Conntrack with the stateful ACLs on a connection's first packet; `{out}` is where the outbound
/// ACL goes from step 4 on.
const CT: &str = "conntrack flows meta.vnet\nif ct.invalid:\n    drop conntrack_invalid\nelif ct.new:\n    apply acl_in\n{out}ct_load flows\nif ct.verdict != 1:\n    drop acl_deny\n";
const POL: &str = "apply local_mac\nmeter policer meta.pol drop_red\nif meta.color == 1:\n    set_dscp 10\n";

/// The spec of ladder step `k`: the control block rebuilt from the full one's pieces. Tables a
/// step does not use are applied under a never-true guard (`meta.tc == 255`: one mask test per
/// packet), because a spec must apply every table it defines.
pub fn ladder_spec(spec: &str, k: usize) -> String {
    let mut body = String::from(HEAD);
    let ct = CT.replace("{out}", if k >= 4 { "    apply acl_out\n" } else { "" });
    body.push_str(if k >= 2 {
        &ct
    } else if k == 1 {
        "apply acl_in\n"
    } else {
        ""
    });
    if k >= 3 {
        body.push_str(POL);
    }
    body.push_str("apply ca_pa\n");
    body.push_str(if k >= 5 { "apply tunnels\n" } else { "forward 1\n" });
    let unused: Vec<&str> = [(k < 1, "acl_in"), (k < 3, "local_mac"), (k < 4, "acl_out"), (k < 5, "tunnels")]
        .iter()
        .filter(|(u, _)| *u)
        .map(|(_, t)| *t)
        .collect();
    if !unused.is_empty() {
        body.push_str("if meta.tc == 255:\n");
        for t in unused {
            body.push_str(&format!("    apply {t}\n"));
        }
    }
    let cut = spec.find("ingress = '''").unwrap_or(spec.len());
    format!("{}ingress = '''\n{body}'''\n", &spec[..cut])
}

/// The spec for the CPS scenario: half-open flows time out after 50 ms, so a replayed SYN finds
/// its old entry expired and opens a fresh connection.
pub fn cps_spec(spec: &str) -> String {
    spec.replacen("name = \"flows\"\n", "name = \"flows\"\ntimeouts = { syn_sent = 0.05, syn_recv = 0.05 }\n", 1)
}

/// CPS traffic: packet `2c` is connection `c`'s SYN (VM → remote), packet `2c + 1` its SYN-ACK.
pub fn cps_frame(f: u32, len: usize) -> Vec<u8> {
    use fastpath_packet::hdr::TcpFlags;
    let c = f / 2;
    let vm = c % VMS;
    let r = (c / VMS) % REMOTES;
    let sport = 1024 + (c / (VMS * REMOTES)) as u16;
    let outer = FrameBuilder::eth([0x02, 0, 0, 0, 0xee, 0x00], [0x02, 0, 0, 0, 0xee, 0x02])
        .ipv4(Ipv4Addr::new(198, 18, 0, 2), Ipv4Addr::new(198, 18, 0, 1))
        .udp(49152 + (c & 0x3fff) as u16, 4789)
        .vxlan(VNI);
    let b = if f.is_multiple_of(2) {
        outer.inner_eth(GATEWAY_MAC, vm_mac(vm)).ipv4(vm_ip(vm), remote_ip(r)).tcp(sport, 80, TcpFlags::SYN, 1000, 0)
    } else {
        outer.inner_eth(vm_mac(vm), GATEWAY_MAC).ipv4(remote_ip(r), vm_ip(vm)).tcp(80, sport, TcpFlags(0x12), 5000, 1001)
    };
    b.frame_len(len).build()
}

/// The MAC of the overlay's gateway (source of traffic from remote CAs).
pub const GATEWAY_MAC: [u8; 6] = [0x02, 0, 0, 0, 0xee, 0x10];
