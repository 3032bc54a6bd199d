//! The N-to-1 topology of the switch tests (`incast`, `burst`, `fairness`): N sender
//! namespaces and one receiver namespace, each joined by a veth to a DUT namespace with N + 1
//! ports. Port `i < N` faces sender `i`; port `N` faces the receiver and is the congested one.
//!
//! ```text
//!  ns fp-snd0-P-K  s0 198.18.0.1 ─veth─ d0 ┐
//!  ns fp-snd1-P-K  s1 198.18.0.2 ─veth─ d1 ├─ ns fp-fdut-P-K [DUT, N+1 ports] ─ dN ─veth─ r0 198.18.0.254  ns fp-rcv-P-K
//!   …                                       │                                   (egress shaped to R)
//!  ns fp-sndN-1    sN-1          ─veth─ dN-1┘
//! ```
//!
//! Every host interface gets a fixed MAC ([`sender_mac`], [`RECEIVER_MAC`]) so a DUT's
//! forwarding entries can be written before anything starts, and permanent neighbour entries
//! for the peers it talks to (senders → receiver, receiver → every sender): no ARP crosses the
//! DUT, whose table knows only these MACs. All hosts are in 198.18.0.0/24 (RFC 2544 §C.2.2), one
//! L2 segment through the DUT. IPv6 is off everywhere. Names carry the lab's prefix, the
//! process id and a counter, so [`crate::topo::cleanup_stale`] recognises a crashed run's
//! leftovers; dropping the topology kills any process left in its namespaces (by PID: only the
//! lab starts processes there) and deletes them with their interfaces.

use std::net::Ipv4Addr;

use fastpath_io::netns::{Netns, VethPair};

use crate::topo::{fmt_mac, ns_exec, PREFIX};
use crate::LabError;

/// Most senders (the DUT's port ids and the hosts' last address byte must stay below 254).
pub const MAX_SENDERS: usize = 64;

/// The receiver's fixed MAC.
pub const RECEIVER_MAC: [u8; 6] = [0x02, 0xfa, 0x57, 0x00, 0x00, 0xfe];
/// The receiver's address.
pub const RECEIVER_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 254);

/// Sender `i`'s fixed MAC.
pub fn sender_mac(i: usize) -> [u8; 6] {
    [0x02, 0xfa, 0x57, 0x00, 0x00, (i + 1) as u8]
}

/// Sender `i`'s address, 198.18.0.(i + 1).
pub fn sender_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 0, (i + 1) as u8)
}

/// Options for [`FaninTopo::create`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaninConfig {
    /// Number of senders, 1..=[`MAX_SENDERS`].
    pub senders: usize,
    /// MTU of every veth end (9216 + headers for the burst test's jumbo frames).
    pub mtu: u32,
    /// GRO on the DUT-side veths: needed for the XDP live-frames generator (a veth receives
    /// XDP-redirected frames only with GRO or an XDP program), wrong for TCP through a
    /// user-space DUT on AF_PACKET ports (merged segments would arrive larger than the MTU).
    pub dut_gro: bool,
    /// Checksum offload, TSO and GSO on the hosts' veths. Off: frames on the wire are what the
    /// endpoints' stacks built, MTU-sized with real checksums, which a user-space DUT forwards
    /// as they are; every DUT of a switch test gets the same frames.
    pub host_offloads: bool,
}

impl Default for FaninConfig {
    fn default() -> FaninConfig {
        FaninConfig { senders: 2, mtu: 1500, dut_gro: false, host_offloads: false }
    }
}

/// One host: a sender or the receiver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    /// Namespace name.
    pub ns: String,
    /// Its interface (veth to the DUT).
    pub ifname: String,
    /// Its fixed MAC.
    pub mac: [u8; 6],
    /// Its address.
    pub ip: Ipv4Addr,
    /// The DUT interface facing it.
    pub dut_if: String,
}

/// A created N-to-1 topology. Dropping it tears it down.
#[derive(Debug)]
pub struct FaninTopo {
    /// The senders; sender `i` faces DUT port `i`.
    pub senders: Vec<Host>,
    /// The receiver, behind DUT port `senders.len()`.
    pub receiver: Host,
    /// DUT namespace name.
    pub dut_ns: String,
    /// The options it was built with.
    pub cfg: FaninConfig,
    /// Veths before namespaces: dropped in this order.
    veths: Vec<VethPair>,
    live: Vec<Netns>,
}

impl FaninTopo {
    /// Creates N + 2 namespaces and N + 1 veth pairs with MACs, addresses, MTUs, offload
    /// settings and static neighbours; every interface is up, the DUT's without addresses.
    ///
    /// # Errors
    /// [`LabError::NotRoot`] without root; [`LabError::Config`] for 0 or too many senders;
    /// [`LabError::Cmd`] for a failing command (what was created so far is removed again).
    pub fn create(cfg: &FaninConfig) -> Result<FaninTopo, LabError> {
        if cfg.senders == 0 || cfg.senders > MAX_SENDERS {
            return Err(LabError::Config(format!("{} senders: give 1 to {MAX_SENDERS}", cfg.senders)));
        }
        if !fastpath_io::sys::is_root() {
            return Err(LabError::NotRoot);
        }
        // Each Netns and VethPair is removed on drop, so an error part-way leaves nothing.
        let dut = Netns::new(&format!("{PREFIX}fdut"))?;
        let rcv = Netns::new(&format!("{PREFIX}rcv"))?;
        let mut t = FaninTopo {
            senders: Vec::new(),
            receiver: Host {
                ns: rcv.name().to_owned(),
                ifname: "r0".into(),
                mac: RECEIVER_MAC,
                ip: RECEIVER_IP,
                dut_if: format!("d{}", cfg.senders),
            },
            dut_ns: dut.name().to_owned(),
            cfg: *cfg,
            veths: Vec::new(),
            live: Vec::new(),
        };
        let mut nss = Vec::new();
        for i in 0..cfg.senders {
            let ns = Netns::new(&format!("{PREFIX}snd{i}"))?;
            let h =
                Host { ns: ns.name().to_owned(), ifname: format!("s{i}"), mac: sender_mac(i), ip: sender_ip(i), dut_if: format!("d{i}") };
            t.veths.push(VethPair::new(&ns, &h.ifname, &dut, &h.dut_if)?);
            t.senders.push(h);
            nss.push(ns);
        }
        t.veths.push(VethPair::new(&rcv, &t.receiver.ifname, &dut, &t.receiver.dut_if)?);
        nss.push(rcv);
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
        let mtu = cfg.mtu.to_string();
        let onoff = |b: bool| if b { "on" } else { "off" };
        for h in self.hosts() {
            ns_exec(&h.ns, &["ip", "link", "set", &h.ifname, "address", &fmt_mac(&h.mac), "mtu", &mtu, "up"])?;
            ns_exec(&h.ns, &["ip", "addr", "add", &format!("{}/24", h.ip), "dev", &h.ifname])?;
            let o = onoff(cfg.host_offloads);
            ns_exec(&h.ns, &["ethtool", "-K", &h.ifname, "tx", o, "tso", o, "gso", o])?;
            ns_exec(&self.dut_ns, &["ip", "link", "set", &h.dut_if, "mtu", &mtu, "up"])?;
            // Needs ethtool (the setup script installs it); veth GRO is off by default.
            ns_exec(&self.dut_ns, &["ethtool", "-K", &h.dut_if, "gro", onoff(cfg.dut_gro)])?;
        }
        // Static neighbours: each sender knows the receiver, the receiver knows every sender.
        let (rip, rmac) = (self.receiver.ip.to_string(), fmt_mac(&self.receiver.mac));
        for s in &self.senders {
            ns_exec(&s.ns, &["ip", "neigh", "replace", &rip, "lladdr", &rmac, "dev", &s.ifname, "nud", "permanent"])?;
            let (sip, smac) = (s.ip.to_string(), fmt_mac(&s.mac));
            let r = &self.receiver;
            ns_exec(&r.ns, &["ip", "neigh", "replace", &sip, "lladdr", &smac, "dev", &r.ifname, "nud", "permanent"])?;
        }
        Ok(())
    }

    /// Every host: the senders in order, then the receiver.
    pub fn hosts(&self) -> Vec<&Host> {
        self.senders.iter().chain(std::iter::once(&self.receiver)).collect()
    }

    /// The DUT's interfaces in port order: `d0 … d(N-1)` then the receiver's `dN`.
    pub fn dut_ports(&self) -> Vec<String> {
        self.hosts().iter().map(|h| h.dut_if.clone()).collect()
    }

    /// The DUT port id facing the receiver (N).
    pub fn receiver_port(&self) -> usize {
        self.senders.len()
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
        crate::topo::leftovers_of(std::iter::once(&self.dut_ns).chain(self.hosts().into_iter().map(|h| &h.ns)))
    }
}

impl Drop for FaninTopo {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topo::namespaces;

    #[test]
    fn addresses_and_macs_are_distinct_and_fixed() {
        assert_eq!(sender_mac(0), [2, 0xfa, 0x57, 0, 0, 1]);
        assert_eq!(sender_ip(15), Ipv4Addr::new(198, 18, 0, 16));
        let macs: std::collections::BTreeSet<[u8; 6]> = (0..MAX_SENDERS).map(sender_mac).chain([RECEIVER_MAC]).collect();
        assert_eq!(macs.len(), MAX_SENDERS + 1);
        assert!(matches!(FaninTopo::create(&FaninConfig { senders: 0, ..FaninConfig::default() }), Err(LabError::Config(_))));
    }

    #[test]
    fn three_senders_reach_the_receiver_through_a_bridge_and_teardown_leaves_nothing() {
        if !fastpath_io::sys::is_root() {
            assert!(std::env::var_os("CI").is_none(), "CI runs these tests as root");
            return;
        }
        let mut t = FaninTopo::create(&FaninConfig { senders: 3, mtu: 9000, ..FaninConfig::default() }).unwrap();
        assert_eq!(t.namespaces().len(), 5);
        assert_eq!(t.dut_ports(), vec!["d0", "d1", "d2", "d3"]);
        assert_eq!(t.receiver_port(), 3);
        let link = ns_exec(&t.senders[1].ns, &["ip", "link", "show", "s1"]).unwrap();
        assert!(link.contains("02:fa:57:00:00:02") && link.contains("mtu 9000"), "{link}");
        let neigh = ns_exec(&t.receiver.ns, &["ip", "neigh", "show"]).unwrap();
        assert_eq!(neigh.matches("PERMANENT").count(), 3, "{neigh}");
        // A plain bridge in the DUT namespace carries a UDP datagram from sender 2.
        let ns = t.dut_ns.clone();
        ns_exec(&ns, &["ip", "link", "add", "br0", "type", "bridge", "forward_delay", "0", "stp_state", "0"]).unwrap();
        for p in t.dut_ports() {
            ns_exec(&ns, &["ip", "link", "set", &p, "master", "br0"]).unwrap();
        }
        ns_exec(&ns, &["ip", "link", "set", "br0", "up"]).unwrap();
        let rx = crate::topo::in_netns(&t.receiver.ns, || std::net::UdpSocket::bind((RECEIVER_IP, 9999))).unwrap().unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        let t0 = std::time::Instant::now();
        let mut got = false;
        while !got && t0.elapsed() < std::time::Duration::from_secs(5) {
            crate::topo::in_netns(&t.senders[2].ns, || {
                let s = std::net::UdpSocket::bind((sender_ip(2), 0)).unwrap();
                s.send_to(b"hello", (RECEIVER_IP, 9999)).unwrap();
            })
            .unwrap();
            let mut b = [0u8; 16];
            got = rx.recv_from(&mut b).map(|(n, from)| &b[..n] == b"hello" && from.ip() == sender_ip(2)).unwrap_or(false);
        }
        assert!(got, "the datagram crossed the bridge");
        let mut child = std::process::Command::new("ip").args(["netns", "exec", &t.receiver.ns, "sleep", "30"]).spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        drop(rx);
        let names = t.namespaces();
        t.teardown().unwrap();
        assert!(t.leftovers().is_empty(), "{:?}", t.leftovers());
        let _ = child.wait();
        let all = namespaces(PREFIX);
        assert!(names.iter().all(|n| !all.contains(n)), "{all:?}");
    }
}
