//! `fastpath run --cpri ADDR`: the user plane's end of the control-packet redirect interface
//! (CPRi, BBF TR-459). What the pipeline punts (DHCP, unknown subscribers in `vbng`) goes to the
//! control plane at ADDR as a GTP-U G-PDU carrying the whole Ethernet frame, tags included,
//! with TEID = (user plane << 16) | the port it came in on ([`cpri_teid`]); G-PDUs from the
//! control plane leave through the port their TEID names (packet-out); echo requests are
//! answered. One UDP socket per worker: the control plane answers the address a frame came from,
//! so replies reach the worker that punted. `fastpath bng-cp` is the other end (docs/bng.md).

use fastpath_io::worker::{Exception, Punted};
use fastpath_pfcp::gtpu::{cpri_port, cpri_teid, echo_response, emit_gpdu, Gtpu, MessageType};
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};

/// Most datagrams read per poll, so a flood from the control plane cannot stall the worker.
const MAX_PER_POLL: usize = 64;
/// The socket's receive buffer, bytes.
const RCVBUF: usize = 8 << 20;

/// What the CPRi end saw, for the run's final report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpriStats {
    /// G-PDUs sent to the control plane (punts).
    pub sent: u64,
    /// Punts the socket refused (counted, the frame is dropped).
    pub send_errors: u64,
    /// G-PDUs received and handed to a port.
    pub packet_outs: u64,
    /// Datagrams that were not GTP-U, or G-PDUs for another user plane, or other messages.
    pub ignored: u64,
    /// Echo requests answered.
    pub echoes: u64,
}

/// The user plane's CPRi socket.
pub struct CpriEnd {
    sock: UdpSocket,
    cp: SocketAddr,
    up: u16,
    buf: Vec<u8>,
    out: Vec<u8>,
    stats: CpriStats,
}

impl CpriEnd {
    /// A socket on an ephemeral port that sends to the control plane at `cp`, for user plane
    /// number `up`. Non-blocking.
    ///
    /// # Errors
    /// The socket could not be created.
    pub fn connect(cp: SocketAddr, up: u16) -> std::io::Result<CpriEnd> {
        let any: SocketAddr = if cp.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().map_err(std::io::Error::other)?;
        let sock = UdpSocket::bind(any)?;
        // The control plane answers a batch of punts at once, after one store commit: room for
        // its bursts of replies while this worker is busy (the default buffer overflowed under
        // perfdhcp at 5,000 exchanges/s; docs/lab.md).
        super::grow_rcvbuf(&sock, RCVBUF, "cpri: the user plane's CPRi socket");
        sock.set_nonblocking(true)?;
        Ok(CpriEnd { sock, cp, up, buf: vec![0; 65536], out: Vec::with_capacity(2048), stats: CpriStats::default() })
    }

    /// The local address (where the control plane's answers arrive).
    ///
    /// # Errors
    /// As `UdpSocket::local_addr`.
    #[cfg(test)]
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// What it has seen so far.
    #[cfg(test)]
    pub fn stats(&self) -> CpriStats {
        self.stats
    }
}

/// The worker's CPRi counters, printed when the worker stops.
impl Drop for CpriEnd {
    fn drop(&mut self) {
        let s = self.stats;
        eprintln!(
            "cpri (user plane {}, to {}): {} punts sent ({} refused by the socket), {} packet-outs, {} echoes answered, {} datagrams ignored",
            self.up, self.cp, s.sent, s.send_errors, s.packet_outs, s.echoes, s.ignored
        );
    }
}

impl Exception for CpriEnd {
    fn punt(&mut self, frame: &[u8], p: &Punted) {
        self.out.clear();
        let ok = emit_gpdu(cpri_teid(self.up, p.in_port), frame, &mut self.out).is_ok() && self.sock.send_to(&self.out, self.cp).is_ok();
        if ok {
            self.stats.sent += 1;
        } else {
            self.stats.send_errors += 1;
        }
    }

    fn packet_out(&mut self, send: &mut dyn FnMut(u16, &[u8]) -> bool) {
        for _ in 0..MAX_PER_POLL {
            let (n, from) = match self.sock.recv_from(&mut self.buf) {
                Ok(x) => x,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(_) => return,
            };
            let Some(msg) = self.buf.get(..n).and_then(|b| Gtpu::parse(b).ok()) else {
                self.stats.ignored += 1;
                continue;
            };
            match msg.msg_type {
                MessageType::G_PDU if cpri_port(msg.teid).0 == self.up => {
                    if send(cpri_port(msg.teid).1, msg.payload) {
                        self.stats.packet_outs += 1;
                    }
                }
                MessageType::ECHO_REQUEST => {
                    let reply = echo_response(msg.seq.unwrap_or(0));
                    if self.sock.send_to(&reply, from).is_ok() {
                        self.stats.echoes += 1;
                    }
                }
                _ => self.stats.ignored += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastpath_packet::{PktId, PuntReason};
    use std::time::Duration;

    #[test]
    fn punts_go_up_as_g_pdus_and_g_pdus_come_down_to_their_port() {
        let cp = UdpSocket::bind("127.0.0.1:0").unwrap();
        cp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut up = CpriEnd::connect(cp.local_addr().unwrap(), 1).unwrap();
        let frame: Vec<u8> = (0..90u8).collect();
        up.punt(&frame, &Punted { pkt: PktId(0), reason: PuntReason::ACTION, in_port: 3 });
        let mut buf = [0u8; 2048];
        let (n, from) = cp.recv_from(&mut buf).unwrap();
        let m = Gtpu::parse(&buf[..n]).unwrap();
        assert_eq!((m.msg_type, m.teid, m.payload), (MessageType::G_PDU, cpri_teid(1, 3), &frame[..]));
        assert_eq!(from.port(), up.local_addr().unwrap().port());

        // Down: one for port 2, one for another user plane (ignored), garbage, an echo request.
        let mut g = Vec::new();
        emit_gpdu(cpri_teid(1, 2), &frame[..60], &mut g).unwrap();
        cp.send_to(&g, from).unwrap();
        g.clear();
        emit_gpdu(cpri_teid(7, 2), &frame[..60], &mut g).unwrap();
        cp.send_to(&g, from).unwrap();
        cp.send_to(b"not gtp", from).unwrap();
        cp.send_to(&fastpath_pfcp::gtpu::echo_request(9), from).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let mut outs = Vec::new();
        up.packet_out(&mut |port, f| {
            outs.push((port, f.to_vec()));
            true
        });
        assert_eq!(outs, [(2, frame[..60].to_vec())]);
        let (n, _) = cp.recv_from(&mut buf).unwrap();
        let e = Gtpu::parse(&buf[..n]).unwrap();
        assert_eq!((e.msg_type, e.seq), (MessageType::ECHO_RESPONSE, Some(9)));
        assert_eq!(up.stats(), CpriStats { sent: 1, send_errors: 0, packet_outs: 1, ignored: 2, echoes: 1 });
    }
}
