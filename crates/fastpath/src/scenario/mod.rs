//! Benchmark scenarios of the reference pipelines: the spec, its entries, and the traffic that
//! exercises it. The specs are the files in `pipelines/`, compiled into the binary so `fastpath
//! bench` runs from any directory.

use fastpath_packet::build::FrameBuilder;
use fastpath_pipeline::value::Match;
use fastpath_pipeline::Pipeline;
use std::collections::HashSet;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Reference pipelines `fastpath bench` knows, with their spec text.
pub const PIPELINES: &[(&str, &str)] = &[
    ("l2fwd", include_str!("../../../../pipelines/l2fwd.toml")),
    ("router", include_str!("../../../../pipelines/router.toml")),
    ("sdn-overlay", include_str!("../../../../pipelines/sdn-overlay.toml")),
    ("switch-acl", include_str!("../../../../pipelines/switch-acl.toml")),
    ("vbng", include_str!("../../../../pipelines/vbng.toml")),
];

pub mod overlay;
pub mod switch;
pub mod vbng;

/// What a scenario needs besides packets.
#[derive(Clone, Debug)]
pub struct Opts {
    /// Concurrent flows in the traffic.
    pub flows: u32,
    /// IPv4 routes for `router`.
    pub routes: usize,
    /// IPv6 routes for `router`.
    pub routes6: usize,
    /// `router`: percentage (0..=100) of the flows that are IPv6.
    pub v6_pct: u8,
    /// Seed for generated tables and traffic.
    pub seed: u64,
    /// `sdn-overlay` only: full, a ladder step, or the CPS traffic.
    pub overlay: overlay::Variant,
    /// `switch-acl` only: ACL rules (0, the 24 of the switch tests, or that many generated).
    pub rules: usize,
    /// `vbng` only: subscribers (sessions).
    pub subscribers: u32,
    /// `vbng` only: downstream:upstream frames.
    pub mix: vbng::Mix,
}

/// A ready scenario: the pipeline with its entries, and the frame of each flow.
pub struct Scenario {
    /// The pipeline.
    pub pipe: Pipeline,
    /// `frame(flow, len)`.
    pub frame: Box<dyn Fn(u32, usize) -> Vec<u8>>,
    /// Configuration echoed into the JSON `config` field.
    pub config: serde_json::Value,
}

/// SplitMix64: a tiny, good, seedable generator (Steele, Lea, Flood 2014) for reproducible
/// tables and traffic. Not for anything secret.
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

/// Next hops of generated route sets: port 1, 16 neighbour MACs.
pub const NEXT_HOPS: u32 = 16;
/// Our router MAC (source of forwarded frames).
pub const ROUTER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];

/// Neighbour `k`'s MAC.
pub fn neighbour_mac(k: u32) -> [u8; 6] {
    [0x02, 0, 0, 0, 0x01, k as u8]
}

/// `n` distinct IPv4 prefixes with a length mix like a full BGP table (about 60 % /24, 30 %
/// /16–/23, the rest shorter or longer), each with a next hop `0..NEXT_HOPS`.
pub fn random_routes(n: usize, seed: u64) -> Vec<(u32, u8, u32)> {
    let mut rng = Rng::new(seed);
    let mut seen = HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let r = rng.below(100);
        let len: u8 = match r {
            0..=59 => 24,
            60..=69 => 23,
            70..=77 => 22,
            78..=89 => 16 + rng.below(6) as u8,
            90..=95 => 8 + rng.below(8) as u8,
            _ => 25 + rng.below(8) as u8,
        };
        let mask = if len == 0 { 0 } else { u32::MAX << (32 - u32::from(len)) };
        let addr = (rng.next() as u32) & mask;
        // Keep clear of 0/8, 127/8 and multicast, as real tables do.
        let top = addr >> 24;
        if top == 0 || top == 127 || top >= 224 {
            continue;
        }
        if seen.insert((addr, len)) {
            out.push((addr, len, rng.below(u64::from(NEXT_HOPS)) as u32));
        }
    }
    out
}

/// `n` distinct IPv6 prefixes inside 2000::/3 with a length mix like the public IPv6 table
/// (about 50 % /48, 10 % /32, 8 % /44, 7 % /40, 5 % /36, 5 % /29, 10 % /33–/47, 5 % /49–/64),
/// nested under `n / 10` random /32 "allocations" as RIR-assigned space is, each with a next
/// hop `0..NEXT_HOPS`. Prefixes are left-aligned `u128`s.
pub fn random_routes6(n: usize, seed: u64) -> Vec<(u128, u8, u32)> {
    let mut rng = Rng::new(seed ^ 0x6666);
    let allocs: Vec<u128> = (0..(n / 10).max(1)).map(|_| u128::from((rng.next() as u32 >> 3) | 1 << 29) << 96).collect();
    let mut seen = HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let len: u8 = match rng.below(100) {
            0..=49 => 48,
            50..=59 => 32,
            60..=67 => 44,
            68..=74 => 40,
            75..=79 => 36,
            80..=84 => 29,
            85..=94 => 33 + rng.below(15) as u8,
            _ => 49 + rng.below(16) as u8,
        };
        let alloc = allocs[rng.below(allocs.len() as u64) as usize];
        let p = (alloc | u128::from(rng.next()) << 32) & (u128::MAX << (128 - u32::from(len)));
        if seen.insert((p, len)) {
            out.push((p, len, rng.below(u64::from(NEXT_HOPS)) as u32));
        }
    }
    out
}

/// Entries-file lines for `routes` into table `fib4` of the router spec.
pub fn route_lines(routes: &[(u32, u8, u32)]) -> String {
    let mut s = String::with_capacity(routes.len() * 80);
    let smac = mac_text(ROUTER_MAC);
    for &(a, l, nh) in routes {
        s.push_str(&format!("table fib4 add {}/{l} => nexthop(1, {}, {smac})\n", Ipv4Addr::from(a), mac_text(neighbour_mac(nh))));
    }
    s
}

fn mac_text(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

fn mac_value(m: [u8; 6]) -> u128 {
    m.iter().fold(0u128, |v, &b| v << 8 | u128::from(b))
}

/// Builds the named scenario.
pub fn build(name: &str, o: &Opts) -> Result<Scenario, String> {
    let spec = PIPELINES.iter().find(|(n, _)| *n == name).map(|(_, s)| *s).ok_or_else(|| {
        let names: Vec<&str> = PIPELINES.iter().map(|(n, _)| *n).collect();
        format!("no reference pipeline \"{name}\" (known: {})", names.join(", "))
    })?;
    let flows = o.flows.max(1);
    let spec = if name == "sdn-overlay" {
        let s = overlay::spec_for(spec, flows);
        match o.overlay {
            overlay::Variant::Full => s,
            overlay::Variant::Ladder(k) => overlay::ladder_spec(&s, k),
            overlay::Variant::Cps => overlay::cps_spec(&s),
        }
    } else {
        spec.to_string()
    };
    let prog = fastpath_pipeline::compile(&format!("pipelines/{name}.toml"), &spec).map_err(|e| e.to_string())?;
    let mut pipe = prog.instantiate();
    match name {
        "switch-acl" => switch::build(pipe, flows, o.rules, o.seed),
        "vbng" => vbng::build(pipe, o.subscribers, o.mix),
        "l2fwd" => {
            pipe.load_entries("l2fwd", "table port_pair add 0 => forward(1)\ntable port_pair add 1 => forward(0)\n")
                .map_err(|e| e.to_string())?;
            Ok(Scenario {
                pipe,
                frame: Box::new(move |f, len| {
                    udp_frame(0xc612_0000 | (f & 0xffff), 0xc613_0000 | (f >> 16), 1024 + (f % 50000) as u16, len)
                }),
                config: serde_json::json!({ "mac_swap": true, "ports": 2 }),
            })
        }
        "router" => {
            let v6_pct = o.v6_pct.min(100);
            let routes = random_routes(o.routes, o.seed);
            let routes6 = random_routes6(o.routes6, o.seed);
            if v6_pct < 100 && routes.is_empty() {
                return Err("router: IPv4 traffic needs --routes > 0".into());
            }
            if v6_pct > 0 && routes6.is_empty() {
                return Err("router: IPv6 traffic (--v6 > 0) needs --routes6 > 0".into());
            }
            let t0 = std::time::Instant::now();
            let ai = prog.actions.iter().position(|a| a.name == "nexthop").ok_or("router spec has no nexthop action")?;
            let args = |nh: u32| {
                let mut args = [0u128; fastpath_pipeline::ir::MAX_ARGS];
                args[0] = 1;
                args[1] = mac_value(neighbour_mac(nh));
                args[2] = mac_value(ROUTER_MAC);
                args
            };
            let table = pipe.table_mut("fib4").ok_or("router spec has no fib4 table")?;
            for &(a, l, nh) in &routes {
                table.insert(&[Match::Prefix(u128::from(a), l)], 0, ai, args(nh)).map_err(|e| e.to_string())?;
            }
            let load_ms = t0.elapsed().as_secs_f64() * 1e3;
            let t0 = std::time::Instant::now();
            let table6 = pipe.table_mut("fib6").ok_or("router spec has no fib6 table")?;
            for &(a, l, nh) in &routes6 {
                table6.insert(&[Match::Prefix(a, l)], 0, ai, args(nh)).map_err(|e| e.to_string())?;
            }
            let load6_ms = t0.elapsed().as_secs_f64() * 1e3;
            // Each flow goes to an address inside a random route (so it hits), from its own
            // source; flow f is IPv6 when f % 100 < v6_pct (so the share is exact per 100 flows).
            let mut rng = Rng::new(o.seed ^ 0x5eed);
            let is_v6 = move |f: u32| f % 100 < u32::from(v6_pct);
            let dsts: Vec<u128> = (0..flows)
                .map(|f| {
                    if is_v6(f) {
                        let (a, l, _) = routes6[rng.below(routes6.len() as u64) as usize];
                        let r = u128::from(rng.next()) << 64 | u128::from(rng.next());
                        a | r.checked_shr(u32::from(l)).unwrap_or(0)
                    } else {
                        let (a, l, _) = routes[rng.below(routes.len() as u64) as usize];
                        let host = if l >= 32 { 0 } else { (rng.next() as u32) & (u32::MAX >> l) };
                        u128::from(a | host)
                    }
                })
                .collect();
            Ok(Scenario {
                pipe,
                frame: Box::new(move |f, len| {
                    let dst = dsts[f as usize % dsts.len()];
                    let sport = 1024 + (f % 50000) as u16;
                    if is_v6(f) {
                        udp6_frame(ROUTER_SRC6 | u128::from(f), dst, sport, len)
                    } else {
                        udp_frame(0xc612_0000 | (f & 0xffff), dst as u32, sport, len)
                    }
                }),
                config: serde_json::json!({
                    "routes": o.routes, "route_load_ms": load_ms, "routes6": o.routes6, "route6_load_ms": load6_ms,
                    "v6": v6_pct, "next_hops": NEXT_HOPS,
                }),
            })
        }
        "sdn-overlay" => {
            let t0 = std::time::Instant::now();
            let n = pipe.load_entries("overlay-entries", &overlay::entries(o.seed)).map_err(|e| e.to_string())?;
            let load_ms = t0.elapsed().as_secs_f64() * 1e3;
            Ok(Scenario {
                pipe,
                frame: if o.overlay == overlay::Variant::Cps { Box::new(overlay::cps_frame) } else { Box::new(overlay::frame) },
                config: serde_json::json!({
                    "entries": n, "entries_load_ms": load_ms, "local_macs": overlay::VMS, "policers": overlay::VMS,
                    "tunnel_endpoints": overlay::REMOTES, "acl_in_rules": overlay::ACL_IN_RULES, "acl_out_rules": overlay::ACL_OUT_RULES,
                    "conntrack_capacity": u64::from(flows) * 5 / 4 + 1024, "traffic": "UDP in VXLAN, first packet of each flow through the ACL",
                }),
            })
        }
        _ => Err(format!("no benchmark scenario for \"{name}\"")),
    }
}

/// Source prefix of the router's generated IPv6 flows (2001:2::/48, RFC 5180's benchmarking
/// range); the flow number fills the low bits.
const ROUTER_SRC6: u128 = 0x2001_0002_0000 << 80;

/// An Ethernet/IPv6/UDP frame of `len` bytes (at least 62).
pub fn udp6_frame(src: u128, dst: u128, sport: u16, len: usize) -> Vec<u8> {
    FrameBuilder::eth([0x02, 0, 0, 0, 0, 0x01], [0x02, 0, 0, 0, 0, 0x02])
        .ipv6(Ipv6Addr::from(src), Ipv6Addr::from(dst))
        .udp(sport, 5001)
        .frame_len(len)
        .build()
}

/// An Ethernet/IPv4/UDP frame of `len` bytes.
pub fn udp_frame(src: u32, dst: u32, sport: u16, len: usize) -> Vec<u8> {
    FrameBuilder::eth([0x02, 0, 0, 0, 0, 0x01], [0x02, 0, 0, 0, 0, 0x02])
        .ipv4(Ipv4Addr::from(src), Ipv4Addr::from(dst))
        .udp(sport, 5001)
        .frame_len(len)
        .build()
}
