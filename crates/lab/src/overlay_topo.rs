//! The overlay topology: two tenant hosts whose kernels run real VXLAN interfaces, each joined
//! to a DUT namespace by a veth (the underlay). The DUT is the tenants' VXLAN gateway.
//!
//! ```text
//!  ns fp-tena-P-N                     ns fp-odut-P-N                        ns fp-tenb-P-N
//! ┌───────────────────────┐        ┌──────────────────────────────┐       ┌───────────────────────┐
//! │ vx0 198.19.100.1/24   │        │  d0 (PA .1.254)  d1 (PA .2.254)│       │ vx0 198.19.100.2/24   │
//! │  VNI 100, MTU 1450    │        │        [ DUT: VXLAN gateway ] │       │  VNI 200, MTU 1450    │
//! │ a0 198.18.1.1/24 (PA) ├─veth───┤ d0                        d1  ├─veth──┤ b0 198.18.2.1/24 (PA) │
//! └───────────────────────┘        └──────────────────────────────┘       └───────────────────────┘
//!   tenant A (CA .1)   ── VXLAN/UDP 4789 ──▶ decap ▸ … ▸ encap ── VXLAN/UDP 4789 ──▶ tenant B (CA .2)
//! ```
//!
//! Each tenant's `vx0` is `ip link add vx0 type vxlan id VNI dstport 4789 local <own PA> remote
//! <DUT PA>`: every tenant frame goes to the DUT, which must decapsulate it, decide, and
//! re-encapsulate it towards the other tenant's PA with that tunnel's VNI. The two tunnels use
//! different VNIs (100 and 200, both mapped to the same virtual network) because the kernel
//! baseline terminates each tunnel in its own VXLAN device in one namespace, and Linux refuses
//! two VXLAN devices with the same VNI and port there.
//!
//! Static neighbour entries, because the fastpath DUT answers no ARP: on each tenant's underlay
//! for the DUT's PA (its veth's MAC), and on each tenant's `vx0` for the other tenant's CA (its
//! `vx0` MAC, set here to a fixed value), so no ARP crosses the overlay (the `sdn-overlay`
//! pipeline tracks only IP and drops the rest). Tenant MTU 1450 fits the 1500-byte underlay
//! (50 bytes of VXLAN encapsulation, RFC 7348 §4). Addresses come from 198.18.0.0/15
//! (RFC 2544 §C.2.2); names carry the lab's prefix, the process id and a counter, so
//! [`crate::topo::cleanup_stale`] recognises a crashed run's leftovers. Dropping the topology
//! kills any process left in its namespaces (by PID) and deletes them.

use std::net::Ipv4Addr;

use fastpath_io::netns::{Netns, VethPair};

use crate::topo::{fmt_mac, ns_exec, PREFIX};
use crate::LabError;

/// The VXLAN UDP port (RFC 7348 §5).
pub const VXLAN_PORT: u16 = 4789;
/// The tenant interfaces' MTU: 1500 − 50 bytes of VXLAN encapsulation.
pub const TENANT_MTU: u32 = 1450;

/// One tenant host: its namespace, underlay and overlay addresses.
#[derive(Clone, Debug)]
pub struct Tenant {
    /// Namespace name.
    pub ns: String,
    /// Underlay interface (veth to the DUT).
    pub underlay_if: &'static str,
    /// Underlay (provider) address.
    pub pa: Ipv4Addr,
    /// Underlay MAC.
    pub underlay_mac: [u8; 6],
    /// VXLAN interface.
    pub vxlan_if: &'static str,
    /// VNI of this tenant's tunnel to the DUT.
    pub vni: u32,
    /// Customer (tenant) address on the VXLAN interface.
    pub ca: Ipv4Addr,
    /// MAC of the VXLAN interface (the inner frames' source).
    pub vxlan_mac: [u8; 6],
    /// The DUT's underlay interface facing this tenant.
    pub dut_if: &'static str,
    /// The DUT's PA on that side (the tenant's VXLAN remote).
    pub dut_pa: Ipv4Addr,
    /// MAC of that DUT interface.
    pub dut_mac: [u8; 6],
}

/// A created overlay topology. Dropping it tears it down.
#[derive(Debug)]
pub struct OverlayTopo {
    /// Tenant A (the client side: ping and iperf3 clients run here).
    pub a: Tenant,
    /// Tenant B (the server side).
    pub b: Tenant,
    /// DUT namespace name.
    pub dut_ns: String,
    /// Veths before namespaces: dropped in this order.
    veths: Vec<VethPair>,
    live: Vec<Netns>,
}

fn mac_of(ns: &str, ifname: &str) -> Result<[u8; 6], LabError> {
    let out = ns_exec(ns, &["cat", &format!("/sys/class/net/{ifname}/address")])?;
    parse_mac(out.trim()).ok_or_else(|| LabError::Io(format!("bad MAC of {ifname}: {out}")))
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for m in &mut mac {
        *m = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

impl OverlayTopo {
    /// Creates the three namespaces, both underlay veths and both tenants' VXLAN interfaces
    /// with addresses, static neighbours and MTUs; the DUT namespace's interfaces are up with no
    /// address (a kernel DUT adds its own). With `offloads == false` the tenants send frames a
    /// user-space DUT can forward as they are: no checksum offload, TSO or GSO on `vx0` and
    /// the underlay (inner checksums computed, MTU-sized segments).
    ///
    /// # Errors
    /// [`LabError::NotRoot`] without root; [`LabError::Cmd`] for a failing command (what was
    /// created so far is removed again).
    pub fn create(offloads: bool) -> Result<OverlayTopo, LabError> {
        if !fastpath_io::sys::is_root() {
            return Err(LabError::NotRoot);
        }
        let na = Netns::new(&format!("{PREFIX}tena"))?;
        let nd = Netns::new(&format!("{PREFIX}odut"))?;
        let nb = Netns::new(&format!("{PREFIX}tenb"))?;
        let tenant = |ns: &Netns, underlay_if, side: u8, vni, host: u8, dut_if| Tenant {
            ns: ns.name().to_owned(),
            underlay_if,
            pa: Ipv4Addr::new(198, 18, side, 1),
            underlay_mac: [0; 6],
            vxlan_if: "vx0",
            vni,
            ca: Ipv4Addr::new(198, 19, 100, host),
            vxlan_mac: [0x02, 0x00, 0xc6, 0x13, 0x64, host],
            dut_if,
            dut_pa: Ipv4Addr::new(198, 18, side, 254),
            dut_mac: [0; 6],
        };
        let mut t = OverlayTopo {
            a: tenant(&na, "a0", 1, 100, 1, "d0"),
            b: tenant(&nb, "b0", 2, 200, 2, "d1"),
            dut_ns: nd.name().to_owned(),
            veths: Vec::new(),
            live: Vec::new(),
        };
        t.veths.push(VethPair::new(&na, t.a.underlay_if, &nd, t.a.dut_if)?);
        t.veths.push(VethPair::new(&nb, t.b.underlay_if, &nd, t.b.dut_if)?);
        t.live = vec![na, nd, nb];
        t.build(offloads)?;
        Ok(t)
    }

    fn build(&mut self, offloads: bool) -> Result<(), LabError> {
        for ns in self.namespaces() {
            ns_exec(&ns, &["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"])?;
            ns_exec(&ns, &["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"])?;
        }
        let dut_ns = self.dut_ns.clone();
        for t in [&mut self.a, &mut self.b] {
            t.underlay_mac = mac_of(&t.ns, t.underlay_if)?;
            t.dut_mac = mac_of(&dut_ns, t.dut_if)?;
        }
        for (t, peer) in [(&self.a, &self.b), (&self.b, &self.a)] {
            let ns = t.ns.as_str();
            let pa = format!("{}/24", t.pa);
            ns_exec(ns, &["ip", "addr", "add", &pa, "dev", t.underlay_if])?;
            let (vni, port, local, remote) = (t.vni.to_string(), VXLAN_PORT.to_string(), t.pa.to_string(), t.dut_pa.to_string());
            let vmac = fmt_mac(&t.vxlan_mac);
            ns_exec(
                ns,
                &[
                    "ip",
                    "link",
                    "add",
                    t.vxlan_if,
                    "address",
                    &vmac,
                    "mtu",
                    &TENANT_MTU.to_string(),
                    "type",
                    "vxlan",
                    "id",
                    &vni,
                    "dstport",
                    &port,
                    "local",
                    &local,
                    "remote",
                    &remote,
                    "dev",
                    t.underlay_if,
                    "nolearning",
                ],
            )?;
            ns_exec(ns, &["ip", "addr", "add", &format!("{}/24", t.ca), "dev", t.vxlan_if])?;
            ns_exec(ns, &["ip", "link", "set", t.vxlan_if, "up"])?;
            // Static neighbours: the DUT's PA on the underlay, the peer's CA on the overlay.
            let dmac = fmt_mac(&t.dut_mac);
            ns_exec(ns, &["ip", "neigh", "replace", &remote, "lladdr", &dmac, "dev", t.underlay_if, "nud", "permanent"])?;
            let (pca, pmac) = (peer.ca.to_string(), fmt_mac(&peer.vxlan_mac));
            ns_exec(ns, &["ip", "neigh", "replace", &pca, "lladdr", &pmac, "dev", t.vxlan_if, "nud", "permanent"])?;
            if !offloads {
                for ifn in [t.vxlan_if, t.underlay_if] {
                    ns_exec(ns, &["ethtool", "-K", ifn, "tx", "off", "tso", "off", "gso", "off"])?;
                }
            }
        }
        Ok(())
    }

    /// The tenants, A then B.
    pub fn tenants(&self) -> [&Tenant; 2] {
        [&self.a, &self.b]
    }

    /// The namespaces this topology created and still owns.
    pub fn namespaces(&self) -> Vec<String> {
        self.live.iter().map(|n| n.name().to_owned()).collect()
    }

    /// Kills any process left inside the namespaces (by PID: only the lab starts processes
    /// there) and deletes the namespaces with their interfaces. Idempotent.
    ///
    /// # Errors
    /// [`LabError::Io`] naming the namespaces that could not be deleted.
    pub fn teardown(&mut self) -> Result<(), LabError> {
        crate::topo::teardown_namespaces(&mut self.live, &mut self.veths)
    }

    /// What of this topology still exists: namespaces and processes in them.
    pub fn leftovers(&self) -> Vec<String> {
        crate::topo::leftovers_of([&self.a.ns, &self.dut_ns, &self.b.ns])
    }
}

impl Drop for OverlayTopo {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topo::{namespaces, ns_pids};

    #[test]
    fn macs_parse_and_reject_bad_input() {
        assert_eq!(parse_mac("02:00:c6:13:64:01"), Some([2, 0, 0xc6, 0x13, 0x64, 1]));
        assert_eq!(parse_mac("02:00:c6:13:64"), None);
        assert_eq!(parse_mac("02:00:c6:13:64:01:07"), None);
        assert_eq!(parse_mac("zz:00:c6:13:64:01"), None);
    }

    #[test]
    fn tenant_vxlan_interfaces_are_configured_and_teardown_leaves_nothing() {
        if !fastpath_io::sys::is_root() {
            assert!(std::env::var_os("CI").is_none(), "CI runs these tests as root");
            return;
        }
        let mut t = OverlayTopo::create(true).unwrap();
        let names = t.namespaces();
        assert_eq!(names.len(), 3);
        let link = ns_exec(&t.a.ns, &["ip", "-d", "link", "show", "vx0"]).unwrap();
        assert!(link.contains("vxlan id 100") && link.contains("remote 198.18.1.254") && link.contains("mtu 1450"), "{link}");
        let link = ns_exec(&t.b.ns, &["ip", "-d", "link", "show", "vx0"]).unwrap();
        assert!(link.contains("vxlan id 200") && link.contains("dstport 4789"), "{link}");
        // A process left in a tenant namespace is killed by the teardown.
        let mut child = std::process::Command::new("ip").args(["netns", "exec", &t.b.ns, "sleep", "30"]).spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!ns_pids(&t.b.ns).is_empty());
        t.teardown().unwrap();
        assert!(t.leftovers().is_empty(), "{:?}", t.leftovers());
        let _ = child.wait();
        let all = namespaces(PREFIX);
        assert!(names.iter().all(|n| !all.contains(n)), "{all:?}");
    }
}
