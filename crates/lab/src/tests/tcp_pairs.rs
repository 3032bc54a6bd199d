//! The TCP test's topology: N sender ▸ receiver pairs through one DUT namespace, each pair on
//! its own two DUT ports, as the switch-server measures iperf per port pair.
//!
//! ```text
//!  ns fp-tsnd-P-K  snd0 198.18.0.1 ─veth─ d0 ┐                    ┌ d1 ─veth─ rcv0 198.18.0.2  ns fp-trcv-P-K
//!  ns fp-tsnd-P-K  snd0 198.18.1.1 ─veth─ d2 ┤ ns fp-tdut-P-K     ├ d3 ─veth─ rcv0 198.18.1.2  ns fp-trcv-P-K
//!   …                                        │ [DUT, 2N ports]    │   …
//!                  snd0 198.18.i.1 ─veth─ d2i┘                    └ d2i+1 ─veth─ rcv0 198.18.i.2
//! ```
//!
//! Pair `i` is DUT ports `2i` and `2i + 1` and its own /24 in 198.18.0.0/15 (RFC 2544 §C.2.2);
//! each host has a fixed MAC ([`host_mac`]) and a permanent neighbour entry for its peer, so no
//! ARP crosses the DUT. The hosts keep veth's default offloads (checksum, TSO, GSO on) and get
//! GRO on, as a host's NIC would have it, unless the configuration says otherwise; the DUT's
//! interfaces get the MTU the DUT needs ([`PairsConfig::dut_mtu`]) and GRO off (veth's
//! default). IPv6 is off everywhere. Names carry the lab's prefix, the process id and a
//! counter ([`crate::topo::cleanup_stale`] recognises a crashed run's leftovers); dropping the
//! topology kills any process left in its namespaces (by PID: only the lab starts processes
//! there) and deletes them with their interfaces.

use std::net::Ipv4Addr;

use fastpath_io::netns::{Netns, VethPair};

use crate::dut::DutSite;
use crate::topo::{fmt_mac, ns_exec, PREFIX};
use crate::LabError;

/// Most pairs (each pair takes a /24 of 198.18.0.0/15 and two DUT ports).
pub const MAX_PAIRS: usize = 64;

/// Options for [`PairsTopo::create`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairsConfig {
    /// Number of sender ▸ receiver pairs, 1..=[`MAX_PAIRS`].
    pub pairs: usize,
    /// MTU of the hosts' interfaces (1500, a host's Ethernet).
    pub host_mtu: u32,
    /// MTU of the DUT's interfaces: 1500, or 65,535 for the XDP datapath in generic mode, whose
    /// redirect refuses an skb longer than the target's MTU even when it is a GSO segment
    /// (`xdp_ok_fwd_dev`, docs/tcp-gso.md).
    pub dut_mtu: u32,
    /// The hosts keep checksum offload, TSO and GSO (veth's defaults) and have GRO on; off: all
    /// four off, so the hosts' stacks put MTU-sized frames with full checksums on the wire.
    pub host_offloads: bool,
}

impl Default for PairsConfig {
    fn default() -> PairsConfig {
        PairsConfig { pairs: 1, host_mtu: 1500, dut_mtu: 1500, host_offloads: true }
    }
}

/// One end of a pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct End {
    /// Namespace name.
    pub ns: String,
    /// Its interface.
    pub ifname: String,
    /// Its fixed MAC.
    pub mac: [u8; 6],
    /// Its address.
    pub ip: Ipv4Addr,
    /// The DUT interface facing it.
    pub dut_if: String,
}

/// One sender ▸ receiver pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pair {
    /// The iperf client's end.
    pub sender: End,
    /// The iperf server's end.
    pub receiver: End,
}

/// Host `h` (0 sender, 1 receiver) of pair `i`: `02:fa:7c:00:<i>:<h + 1>`.
pub fn host_mac(i: usize, h: usize) -> [u8; 6] {
    [0x02, 0xfa, 0x7c, 0x00, i as u8, (h + 1) as u8]
}

/// Host `h` (0 sender, 1 receiver) of pair `i`: 198.18.i.(h + 1).
pub fn host_ip(i: usize, h: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, i as u8, (h + 1) as u8)
}

/// A created N-pair topology. Dropping it tears it down.
#[derive(Debug)]
pub struct PairsTopo {
    /// The pairs, in DUT port order.
    pub pairs: Vec<Pair>,
    /// The DUT namespace.
    pub dut_ns: String,
    cfg: PairsConfig,
    veths: Vec<VethPair>,
    live: Vec<Netns>,
}

impl PairsTopo {
    /// Creates 2N + 1 namespaces and 2N veth pairs with MACs, addresses, MTUs, offload
    /// settings and static neighbours; every interface is up, the DUT's without addresses.
    ///
    /// # Errors
    /// [`LabError::NotRoot`] without root; [`LabError::Config`] for 0 or too many pairs;
    /// [`LabError::Cmd`] for a failing command (what was created so far is removed again).
    pub fn create(cfg: &PairsConfig) -> Result<PairsTopo, LabError> {
        if cfg.pairs == 0 || cfg.pairs > MAX_PAIRS {
            return Err(LabError::Config(format!("{} pairs: give 1 to {MAX_PAIRS}", cfg.pairs)));
        }
        if !fastpath_io::sys::is_root() {
            return Err(LabError::NotRoot);
        }
        // Each Netns and VethPair is removed on drop, so an error part-way leaves nothing.
        let dut = Netns::new(&format!("{PREFIX}tdut"))?;
        let mut t = PairsTopo { pairs: Vec::new(), dut_ns: dut.name().to_owned(), cfg: *cfg, veths: Vec::new(), live: Vec::new() };
        let mut nss = Vec::new();
        for i in 0..cfg.pairs {
            let s = Netns::new(&format!("{PREFIX}tsnd"))?;
            let r = Netns::new(&format!("{PREFIX}trcv"))?;
            let end = |ns: &Netns, h: usize, name: &str| End {
                ns: ns.name().to_owned(),
                ifname: name.to_owned(),
                mac: host_mac(i, h),
                ip: host_ip(i, h),
                dut_if: format!("d{}", 2 * i + h),
            };
            let p = Pair { sender: end(&s, 0, "snd0"), receiver: end(&r, 1, "rcv0") };
            t.veths.push(VethPair::new(&s, &p.sender.ifname, &dut, &p.sender.dut_if)?);
            t.veths.push(VethPair::new(&r, &p.receiver.ifname, &dut, &p.receiver.dut_if)?);
            t.pairs.push(p);
            nss.push(s);
            nss.push(r);
        }
        nss.push(dut);
        t.live = nss;
        t.build()?;
        Ok(t)
    }

    fn build(&mut self) -> Result<(), LabError> {
        let cfg = self.cfg;
        for ns in self.namespaces() {
            ns_exec(&ns, &["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"])?;
            ns_exec(&ns, &["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"])?;
        }
        let (hmtu, dmtu) = (cfg.host_mtu.to_string(), cfg.dut_mtu.to_string());
        let o = if cfg.host_offloads { "on" } else { "off" };
        for p in &self.pairs {
            for (h, peer) in [(&p.sender, &p.receiver), (&p.receiver, &p.sender)] {
                ns_exec(&h.ns, &["ip", "link", "set", &h.ifname, "address", &fmt_mac(&h.mac), "mtu", &hmtu, "up"])?;
                ns_exec(&h.ns, &["ip", "addr", "add", &format!("{}/24", h.ip), "dev", &h.ifname])?;
                // Needs ethtool (the setup script installs it).
                ns_exec(&h.ns, &["ethtool", "-K", &h.ifname, "tx", o, "tso", o, "gso", o, "gro", o])?;
                let (pip, pmac) = (peer.ip.to_string(), fmt_mac(&peer.mac));
                ns_exec(&h.ns, &["ip", "neigh", "replace", &pip, "lladdr", &pmac, "dev", &h.ifname, "nud", "permanent"])?;
                ns_exec(&self.dut_ns, &["ip", "link", "set", &h.dut_if, "mtu", &dmtu, "up"])?;
            }
        }
        Ok(())
    }

    /// The DUT's site: its namespace and one port pair per sender ▸ receiver pair.
    pub fn site(&self) -> DutSite {
        DutSite {
            ns: self.dut_ns.clone(),
            pairs: self.pairs.iter().map(|p| (p.sender.dut_if.clone(), p.receiver.dut_if.clone())).collect(),
        }
    }

    /// The namespaces this topology created and still owns.
    pub fn namespaces(&self) -> Vec<String> {
        self.live.iter().map(|n| n.name().to_owned()).collect()
    }

    /// Kills any process left inside the namespaces (by PID) and deletes the namespaces with
    /// their interfaces. Idempotent.
    ///
    /// # Errors
    /// [`LabError::Io`] naming the namespaces that could not be deleted.
    pub fn teardown(&mut self) -> Result<(), LabError> {
        crate::topo::teardown_namespaces(&mut self.live, &mut self.veths)
    }

    /// What of this topology still exists: namespaces and processes in them.
    pub fn leftovers(&self) -> Vec<String> {
        let mut names = vec![self.dut_ns.clone()];
        for p in &self.pairs {
            names.extend([p.sender.ns.clone(), p.receiver.ns.clone()]);
        }
        crate::topo::leftovers_of(names.iter())
    }
}

impl Drop for PairsTopo {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}
