//! Broadband traffic: the access side (subscribers, Q-in-Q) and the core side (endpoints on
//! VLAN 10) offering 8 downstream frames for every upstream one, counted where they arrive.
//!
//! ```text
//!  ns access (gen0)                     DUT                     ns core (sink0)
//!  upstream:   subscriber i ─ S/C tags ─▶ dut0 [gateway] dut1 ─ VLAN 10 ─▶ endpoint e
//!  downstream: subscriber i ◀─ S/C tags ─ dut0 [gateway] dut1 ◀─ VLAN 10 ─ endpoint e
//! ```
//!
//! One thread sends both directions through two AF_PACKET ports (one opened in each generator
//! namespace; `sendmmsg` of up to 64 frames, qdisc bypassed), interleaving 8 downstream frames
//! and 1 upstream frame, paced by a token bucket refilled every half millisecond: the ratio is
//! exact and the generator takes one tester core. (One `send` per frame offered 0.2–0.25 Mpps
//! of 1400-byte frames here, below what a gateway forwards.)
//! Each frame is a template whose subscriber fields (MAC, S-VLAN, C-VLAN, IPv4) and endpoint
//! fields are rewritten in place for the next subscriber, with the IPv4 checksum recomputed and
//! the UDP checksum zero (no checksum, allowed for IPv4 by RFC 768), so 256,000 subscribers cost
//! no memory. Upstream frame `u` comes from subscriber `u % N` towards [`plan::endpoint_for`];
//! downstream frame `d` goes to subscriber `d % N` from endpoint `1 + d % 254`.
//!
//! Frames are counted on arrival by the receiving veth's `rx_packets` (read from sysfs inside
//! the namespace): a frame counts once the DUT has transmitted it into the veth. The sending
//! sockets carry a filter that takes no frame, so the forwarded traffic is not copied to them.
//! [`Encap::Untagged`] sends the same subscribers and endpoints without any VLAN tag (the Linux
//! baseline, which has no VLAN devices here).

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use std::sync::Mutex;

use fastpath_io::af_packet::{AfPacketConfig, PacketPort, RawSocket};
use fastpath_io::Port;
use fastpath_packet::build::FrameBuilder;
use fastpath_packet::{PktId, Pool};

use super::plan::{self, Subscriber, GATEWAY_MAC};
use crate::gen::{Latency, ProbeClock, FCS_LEN, HDR_LEN, MAGIC, PROBE_PORT};
use crate::topo::{self, ns_exec, Topology};
use crate::LabError;

/// Downstream frames per upstream frame.
pub const DOWN_PER_UP: u64 = 8;
/// UDP destination port no lab frame uses: the sending sockets' filter accepts only it.
const NO_PORT: u16 = 1;

/// How the subscribers' and endpoints' frames are tagged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Encap {
    /// Access Q-in-Q (S-tag 0x88a8, C-tag 0x8100), core VLAN 10: the contract of `vbng`.
    Tagged,
    /// No tags on either side (the Linux baseline).
    Untagged,
}

/// Where the fields of a template frame are.
#[derive(Clone, Copy, Debug)]
struct Layout {
    /// Offset of the IPv4 header.
    ip: usize,
    /// Whether the frame has the S-tag and C-tag (at 14 and 18).
    qinq: bool,
}

/// A frame template and its layout.
struct Template {
    frame: Vec<u8>,
    at: Layout,
}

impl Template {
    fn upstream(encap: Encap, size: u16, dport: u16) -> Template {
        let (s, e) = (Subscriber::nth(0), plan::endpoint(1));
        let len = usize::from(size.max(plan::MIN_FRAME)) - FCS_LEN;
        let b = FrameBuilder::eth(GATEWAY_MAC, s.mac);
        let (b, at) = match encap {
            Encap::Tagged => (b.qinq(s.svid, s.cvid), Layout { ip: 22, qinq: true }),
            Encap::Untagged => (b, Layout { ip: 14, qinq: false }),
        };
        let frame = b.ipv4(s.ipv4, e.ipv4).udp(plan::SRC_PORT, dport).payload(&[0; HDR_LEN]).frame_len(len).build();
        Template { frame, at }
    }

    fn downstream(encap: Encap, size: u16, dport: u16) -> Template {
        let (s, e) = (Subscriber::nth(0), plan::endpoint(1));
        let len = usize::from(size.max(plan::MIN_FRAME)) - FCS_LEN;
        let b = FrameBuilder::eth(GATEWAY_MAC, e.mac);
        let (b, at) = match encap {
            Encap::Tagged => (b.vlan(plan::CORE_VLAN, 0), Layout { ip: 18, qinq: false }),
            Encap::Untagged => (b, Layout { ip: 14, qinq: false }),
        };
        let frame = b.ipv4(e.ipv4, s.ipv4).udp(plan::SRC_PORT, dport).payload(&[0; HDR_LEN]).frame_len(len).build();
        Template { frame, at }
    }

    /// Rewrites the addresses (and tags) and fixes the checksums: IPv4 recomputed, UDP zero.
    fn set(&mut self, src_mac: [u8; 6], tags: Option<(u16, u16)>, src: Ipv4Addr, dst: Ipv4Addr) {
        let f = &mut self.frame;
        f[6..12].copy_from_slice(&src_mac);
        if let (true, Some((s, c))) = (self.at.qinq, tags) {
            f[14..16].copy_from_slice(&(s & 0x0fff).to_be_bytes());
            f[18..20].copy_from_slice(&(c & 0x0fff).to_be_bytes());
        }
        let ip = self.at.ip;
        f[ip + 12..ip + 16].copy_from_slice(&src.octets());
        f[ip + 16..ip + 20].copy_from_slice(&dst.octets());
        f[ip + 10..ip + 12].copy_from_slice(&[0, 0]);
        let c = ipv4_checksum(&f[ip..ip + 20]);
        f[ip + 10..ip + 12].copy_from_slice(&c.to_be_bytes());
        f[ip + 26..ip + 28].copy_from_slice(&[0, 0]);
    }

    /// Offset of the UDP payload (the payload header).
    fn payload(&self) -> usize {
        self.at.ip + 28
    }
}

/// RFC 1071 checksum of an IPv4 header.
fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut s: u32 = h.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// Upstream frame `u` of `n` subscribers into `t`.
fn next_up(t: &mut Template, n: u32, u: u64) {
    let i = (u % u64::from(n)) as u32;
    let s = Subscriber::nth(i);
    let e = plan::endpoint_for(i, (u / u64::from(n)) as u32);
    t.set(s.mac, Some((s.svid, s.cvid)), s.ipv4, e.ipv4);
}

/// Downstream frame `d` of `n` subscribers into `t`.
fn next_down(t: &mut Template, n: u32, d: u64) {
    let s = Subscriber::nth((d % u64::from(n)) as u32);
    let e = plan::endpoint(1 + (d % u64::from(plan::ENDPOINTS)) as u8);
    t.set(e.mac, None, e.ipv4, s.ipv4);
}

/// One trial's counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct BngTrial {
    /// Requested rate over both directions, frames per second.
    pub rate_pps: u64,
    /// Upstream frames sent.
    pub sent_up: u64,
    /// Downstream frames sent.
    pub sent_down: u64,
    /// Upstream frames that reached the core side.
    pub received_up: u64,
    /// Downstream frames that reached the access side.
    pub received_down: u64,
    /// Seconds of sending.
    pub elapsed_s: f64,
}

impl BngTrial {
    /// Frames sent, both directions.
    pub fn sent(&self) -> u64 {
        self.sent_up + self.sent_down
    }
    /// Frames received, both directions (each direction capped at what was sent).
    pub fn received(&self) -> u64 {
        self.received_up.min(self.sent_up) + self.received_down.min(self.sent_down)
    }
    /// Loss ratio over both directions.
    pub fn loss(&self) -> f64 {
        if self.sent() == 0 {
            0.0
        } else {
            self.sent().saturating_sub(self.received()) as f64 / self.sent() as f64
        }
    }
    /// Offered frames per second.
    pub fn offered_pps(&self) -> f64 {
        if self.elapsed_s > 0.0 {
            self.sent() as f64 / self.elapsed_s
        } else {
            0.0
        }
    }
}

/// The generator and counters of one topology: access side = the topology's generator
/// namespace (`gen0`, facing the DUT's port 0), core side = its sink namespace (`sink0`,
/// facing port 1).
pub struct BngTraffic {
    acc_ns: String,
    core_ns: String,
    acc_if: &'static str,
    core_if: &'static str,
    acc: RawSocket,
    core: RawSocket,
    /// The load's senders (access, core): batched sends.
    load: Mutex<(PacketPort, PacketPort)>,
    /// Subscribers the traffic cycles through.
    pub subscribers: u32,
    /// Tags on the wire.
    pub encap: Encap,
    /// RFC 2544 frame size (with FCS).
    pub frame_size: u16,
}

fn send_socket(ns: &str, iface: &str) -> Result<RawSocket, LabError> {
    let i = iface.to_owned();
    topo::in_netns(ns, move || -> Result<RawSocket, LabError> {
        let s = RawSocket::open(&i).map_err(|e| LabError::Io(format!("packet socket on {i}: {e}")))?;
        // Take no frame: the forwarded traffic would otherwise be queued to this socket.
        s.accept_only_udp_dport(NO_PORT)?;
        Ok(s)
    })?
}

fn rx_packets(ns: &str, iface: &str) -> Result<u64, LabError> {
    let s = ns_exec(ns, &["cat", &format!("/sys/class/net/{iface}/statistics/rx_packets")])?;
    s.trim().parse().map_err(|_| LabError::Io(format!("rx_packets of {iface}: {s:?}")))
}

impl BngTraffic {
    /// Opens the sending sockets in `t`'s generator (access) and sink (core) namespaces.
    ///
    /// # Errors
    /// [`LabError::Io`] when a socket cannot be opened; [`LabError::Config`] for a bad count.
    pub fn attach(t: &Topology, subscribers: u32, encap: Encap, frame_size: u16) -> Result<BngTraffic, LabError> {
        plan::check_count(subscribers)?;
        let port = |ns: &str, iface: &'static str| -> Result<PacketPort, LabError> {
            topo::in_netns(ns, move || PacketPort::open(iface, &AfPacketConfig { block_nr: 2, ..AfPacketConfig::default() }))?
                .map_err(|e| LabError::Io(format!("sending port on {iface}: {e}")))
        };
        Ok(BngTraffic {
            load: Mutex::new((port(&t.gen_ns, t.gen_if)?, port(&t.sink_ns, t.sink_if)?)),
            acc: send_socket(&t.gen_ns, t.gen_if)?,
            core: send_socket(&t.sink_ns, t.sink_if)?,
            acc_ns: t.gen_ns.clone(),
            core_ns: t.sink_ns.clone(),
            acc_if: t.gen_if,
            core_if: t.sink_if,
            subscribers,
            encap,
            frame_size,
        })
    }

    /// (frames that arrived at the access side, at the core side) so far.
    fn arrived(&self) -> Result<(u64, u64), LabError> {
        Ok((rx_packets(&self.acc_ns, self.acc_if)?, rx_packets(&self.core_ns, self.core_if)?))
    }

    /// Waits until the gateway forwards: every 50 ms one upstream frame of the last subscriber
    /// and one downstream frame to it, until one of each has arrived or `bound` has passed.
    /// Returns whether it forwards. (A DUT may attach its ports before its workers have loaded
    /// every session; this is the readiness that counts.)
    ///
    /// # Errors
    /// [`LabError::Io`] from the counters.
    pub fn wait_forwarding(&self, bound: Duration) -> Result<bool, LabError> {
        let n = self.subscribers;
        let mut up = Template::upstream(self.encap, self.frame_size, plan::DATA_PORT);
        let mut down = Template::downstream(self.encap, self.frame_size, plan::DATA_PORT);
        next_up(&mut up, n, u64::from(n - 1));
        next_down(&mut down, n, u64::from(n - 1));
        let before = self.arrived()?;
        let t0 = Instant::now();
        while t0.elapsed() < bound {
            let _ = self.acc.send(&up.frame);
            let _ = self.core.send(&down.frame);
            std::thread::sleep(Duration::from_millis(50));
            let now = self.arrived()?;
            if now.0 > before.0 && now.1 > before.1 {
                std::thread::sleep(Duration::from_millis(100));
                return Ok(true);
            }
            if topo::interrupted() {
                return Err(LabError::Interrupted);
            }
        }
        Ok(false)
    }

    /// Offers `rate_pps` frames per second (both directions, 8:1; 0 = as fast as possible) for
    /// `duration`, then waits (≤ 1 s) for the counts to settle.
    ///
    /// # Errors
    /// [`LabError::Io`] from the counters.
    pub fn trial(&self, rate_pps: u64, duration: Duration) -> Result<BngTrial, LabError> {
        let before = self.arrived()?;
        let (up, down, secs) = self.offer(rate_pps, duration, &AtomicBool::new(false));
        let mut last = self.arrived()?;
        let t0 = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(50));
            let now = self.arrived()?;
            if now == last || t0.elapsed() > Duration::from_secs(1) {
                last = now;
                break;
            }
            last = now;
        }
        Ok(BngTrial {
            rate_pps,
            sent_up: up,
            sent_down: down,
            received_up: last.1 - before.1,
            received_down: last.0 - before.0,
            elapsed_s: secs,
        })
    }

    /// Sends for `duration` (or until `stop`) from a thread on the tester's CPUs. Returns
    /// (upstream sent, downstream sent, seconds).
    fn offer(&self, rate_pps: u64, duration: Duration, stop: &AtomicBool) -> (u64, u64, f64) {
        let (n, size, encap) = (self.subscribers, self.frame_size, self.encap);
        let Ok(mut ports) = self.load.lock() else { return (0, 0, 0.0) };
        let (acc, core) = &mut *ports;
        let r = topo::in_netns(&self.acc_ns, move || {
            let _ = fastpath_io::sys::set_nice(topo::LAB_NICE);
            let mut pool = Pool::new(256);
            let mut up = Template::upstream(encap, size, plan::DATA_PORT);
            let mut down = Template::downstream(encap, size, plan::DATA_PORT);
            let limit = if rate_pps == 0 { u64::MAX } else { (rate_pps as f64 * duration.as_secs_f64()).ceil() as u64 };
            let start = Instant::now();
            let end = start + duration;
            let (mut u, mut d) = (0u64, 0u64);
            let (mut ups, mut downs): (Vec<PktId>, Vec<PktId>) = (Vec::with_capacity(64), Vec::with_capacity(64));
            while u + d < limit && !stop.load(Ordering::Relaxed) {
                if Instant::now() >= end {
                    break;
                }
                let allowed = if rate_pps == 0 { limit } else { ((start.elapsed().as_secs_f64() * rate_pps as f64) as u64).min(limit) };
                if u + d >= allowed {
                    std::thread::sleep(Duration::from_micros(500));
                    continue;
                }
                // A burst of up to 63 frames in the 8:1 pattern, each direction one sendmmsg.
                let (mut pu, mut pd) = (u, d);
                for _ in 0..(allowed - u - d).min(63) {
                    let Some(h) = pool.alloc() else { break };
                    if (pu + pd) % (DOWN_PER_UP + 1) == DOWN_PER_UP {
                        next_up(&mut up, n, pu);
                        pool.set_data(h, &up.frame);
                        ups.push(h);
                        pu += 1;
                    } else {
                        next_down(&mut down, n, pd);
                        pool.set_data(h, &down.frame);
                        downs.push(h);
                        pd += 1;
                    }
                }
                let su = acc.tx_burst(&mut pool, &ups);
                let sd = core.tx_burst(&mut pool, &downs);
                pool.free_bulk(&ups[su..]);
                pool.free_bulk(&downs[sd..]);
                (u, d) = (u + su as u64, d + sd as u64);
                let short = su < ups.len() || sd < downs.len();
                ups.clear();
                downs.clear();
                if short {
                    // The veth's queue is full: try again after a pause.
                    std::thread::sleep(Duration::from_micros(50));
                }
            }
            (u, d, start.elapsed().as_secs_f64())
        });
        r.unwrap_or((0, 0, 0.0))
    }

    /// Latency of upstream probes (subscriber 0 to endpoint 1, UDP to [`PROBE_PORT`], a
    /// payload header with the transmit time) at `probe_pps` for `duration`, on top of a
    /// background load of `load_pps` (8:1, as in a trial). The probes take the whole upstream
    /// path of the gateway; downstream frames cannot be told apart by the receivers' socket
    /// filter once the kernel has moved their outer tag out (the C-tag stays in the frame).
    /// Returns the summary (None when no probe arrived), probes sent and received, and the
    /// background load's counts.
    ///
    /// # Errors
    /// [`LabError::Io`] when a socket cannot be opened.
    pub fn latency(&self, load_pps: u64, probe_pps: u64, duration: Duration) -> Result<(Option<Latency>, u64, u64, BngTrial), LabError> {
        let clock = ProbeClock::start();
        let (stop, ready, done) = (AtomicBool::new(false), AtomicBool::new(false), AtomicBool::new(false));
        let probe_tx = {
            let i = self.acc_if.to_owned();
            topo::in_netns(&self.acc_ns, move || RawSocket::open(&i))?.map_err(|e| LabError::Io(format!("probe socket: {e}")))?
        };
        let core_if = self.core_if.to_owned();
        let (encap, size) = (self.encap, self.frame_size);
        let before = self.arrived()?;
        let res = std::thread::scope(|s| -> Result<_, LabError> {
            let rx = s.spawn(|| {
                topo::in_netns(&self.core_ns, || -> Result<Vec<u64>, LabError> {
                    let sock = RawSocket::open(&core_if).map_err(|e| LabError::Io(format!("probe receiver: {e}")))?;
                    sock.accept_only_udp_dport(PROBE_PORT)?;
                    sock.enable_rx_timestamps()?;
                    std::thread::sleep(Duration::from_millis(50));
                    let _ = fastpath_io::sys::set_realtime(crate::gen::PROBE_RT_PRIORITY);
                    ready.store(true, Ordering::SeqCst);
                    let mut lat = Vec::new();
                    let mut buf = vec![0u8; 2048];
                    let mut quiet: Option<Instant> = None;
                    loop {
                        match sock.recv_stamped(&mut buf, 20)? {
                            Some((len, stamp)) => {
                                quiet = None;
                                let rx_ns = stamp.map_or_else(|| clock.now_ns(), |t| clock.at_ns(t));
                                if let Some(tx_ns) = buf.get(..len).and_then(probe_tx_ns) {
                                    lat.push(rx_ns.saturating_sub(tx_ns));
                                }
                            }
                            None if done.load(Ordering::SeqCst)
                                && quiet.get_or_insert_with(Instant::now).elapsed() > Duration::from_millis(300) =>
                            {
                                break
                            }
                            None => {}
                        }
                    }
                    Ok(lat)
                })
            });
            while !ready.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(5));
            }
            let load = s.spawn(|| self.offer(load_pps, duration, &stop));
            let sent = topo::in_netns(&self.acc_ns, || {
                let _ = fastpath_io::sys::set_realtime(crate::gen::PROBE_RT_PRIORITY);
                let mut t = Template::upstream(encap, size, PROBE_PORT);
                let (sub, ep) = (Subscriber::nth(0), plan::endpoint(1));
                t.set(sub.mac, Some((sub.svid, sub.cvid)), sub.ipv4, ep.ipv4);
                let off = t.payload();
                let interval = Duration::from_secs_f64(1.0 / probe_pps.max(1) as f64);
                let start = Instant::now();
                let mut sent = 0u64;
                while start.elapsed() < duration {
                    let due = start + interval.mul_f64(sent as f64);
                    if let Some(w) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(w);
                    }
                    let h = &mut t.frame[off..off + HDR_LEN];
                    h[0..2].copy_from_slice(&MAGIC.to_be_bytes());
                    h[4..8].copy_from_slice(&(sent as u32).to_be_bytes());
                    h[8..16].copy_from_slice(&clock.now_ns().to_be_bytes());
                    if probe_tx.send(&t.frame).is_ok() {
                        sent += 1;
                    }
                }
                sent
            });
            stop.store(true, Ordering::SeqCst);
            let (up, down, secs) = load.join().unwrap_or((0, 0, 0.0));
            done.store(true, Ordering::SeqCst);
            let lat = rx.join().map_err(|_| LabError::Io("probe receiver panicked".into()))???;
            Ok((sent?, lat, up, down, secs))
        })?;
        let (sent, mut lat, up, down, secs) = res;
        std::thread::sleep(Duration::from_millis(200));
        let after = self.arrived()?;
        let received = lat.len() as u64;
        let bg = BngTrial {
            rate_pps: load_pps,
            sent_up: up,
            sent_down: down,
            received_up: (after.1 - before.1).saturating_sub(received),
            received_down: after.0 - before.0,
            elapsed_s: secs,
        };
        Ok((Latency::from_ns(&mut lat), sent, received, bg))
    }
}

/// The transmit time of a probe as a packet socket returns it (outer tag put back): Ethernet,
/// up to two tags, IPv4, UDP to [`PROBE_PORT`], then the payload header. `None` otherwise.
fn probe_tx_ns(f: &[u8]) -> Option<u64> {
    let mut off = 12;
    while matches!(f.get(off..off + 2)?, [0x81, 0x00] | [0x88, 0xa8]) {
        off += 4;
    }
    if f.get(off..off + 2)? != [0x08, 0x00] {
        return None;
    }
    let ip = off + 2;
    let udp = ip + usize::from(f.get(ip)? & 0x0f) * 4;
    if *f.get(ip + 9)? != 17 || f.get(udp + 2..udp + 4)? != PROBE_PORT.to_be_bytes() {
        return None;
    }
    crate::gen::parse_probe_payload(f.get(udp + 8..)?).map(|p| p.tx_ns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastpath_packet::hdr::{Eth, Ipv4};

    #[test]
    fn templates_take_each_subscriber_with_valid_checksums() {
        for encap in [Encap::Tagged, Encap::Untagged] {
            let mut up = Template::upstream(encap, 1400, plan::DATA_PORT);
            let mut down = Template::downstream(encap, 1400, plan::DATA_PORT);
            assert_eq!((up.frame.len(), down.frame.len()), (1396, 1396));
            for k in [0u64, 1, 3999, 4000, 255_999, 1_000_000] {
                next_up(&mut up, 256_000, k);
                next_down(&mut down, 256_000, k);
                let s = Subscriber::nth((k % 256_000) as u32);
                let want_up = plan::upstream_frame(&s, &plan::endpoint_for(s.id, (k / 256_000) as u32), 1400, 0);
                let want_down = plan::downstream_frame(&plan::endpoint(1 + (k % 254) as u8), &s, 1400, 0);
                let ip = |f: &[u8], off: usize| Ipv4::parse(&f[off..]).map(|i| (i.src(), i.dst(), i.checksum_ok())).unwrap();
                if encap == Encap::Tagged {
                    // Same bytes as the plan's builder up to the UDP checksum (zero here).
                    assert_eq!(up.frame[..48], want_up[..48], "upstream {k}");
                    assert_eq!(down.frame[..44], want_down[..44], "downstream {k}");
                } else {
                    assert_eq!(Eth::parse(&up.frame).unwrap().src(), s.mac);
                }
                let (src, dst, ok) = ip(&up.frame, up.at.ip);
                assert!(ok && src == s.ipv4 && dst == plan::endpoint_for(s.id, (k / 256_000) as u32).ipv4);
                let (src, dst, ok) = ip(&down.frame, down.at.ip);
                assert!(ok && dst == s.ipv4 && src == plan::endpoint(1 + (k % 254) as u8).ipv4);
            }
        }
    }

    #[test]
    fn probes_are_found_behind_any_tags() {
        let mut t = Template::upstream(Encap::Tagged, 200, PROBE_PORT);
        let off = t.payload();
        t.frame[off..off + 2].copy_from_slice(&MAGIC.to_be_bytes());
        t.frame[off + 8..off + 16].copy_from_slice(&42u64.to_be_bytes());
        assert_eq!(probe_tx_ns(&t.frame), Some(42));
        let mut u = Template::upstream(Encap::Untagged, 200, PROBE_PORT);
        let off = u.payload();
        u.frame[off..off + 2].copy_from_slice(&MAGIC.to_be_bytes());
        assert_eq!(probe_tx_ns(&u.frame), Some(0));
        assert_eq!(probe_tx_ns(&Template::upstream(Encap::Untagged, 200, plan::DATA_PORT).frame), None);
        assert_eq!(probe_tx_ns(&[]), None);
    }
}
