//! Connection state as a middlebox sees it: the TCP state machine, UDP/ICMP pseudo-states,
//! per-state timeouts and optional TCP window tracking.
//!
//! # TCP states
//! A middlebox sees both directions but neither endpoint's internals, so it tracks the states of
//! RFC 9293 §3.3.2 by the segments that pass (the approach of Linux netfilter's
//! `nf_conntrack_proto_tcp.c`). "O" is the side that sent the first SYN (the original
//! direction), "R" the reply side, "c" whichever side sent the first FIN (the closer):
//!
//! ```text
//!  O:SYN ──▶ SynSent ──R:SYN+ACK──▶ SynRecv ──O:ACK──▶ Established ──FIN from c──▶ FinWait
//!                                      │                                 │ R:ACK
//!                                      └───O:FIN──▶ FinWait              ▼
//!  FinWait/CloseWait ──FIN from !c──▶ LastAck ──ACK from c──▶ TimeWait   CloseWait
//!  any state ──RST──▶ Closed;   TimeWait/Closed ──O:SYN──▶ SynSent (port reuse)
//! ```
//! Retransmitted SYNs and SYN+ACKs keep their state (and refresh its timeout); a SYN in an
//! established connection, an ACK before the handshake, and nonsense flag combinations (SYN+FIN,
//! SYN+RST, no flags) are `Invalid` and change nothing. Simplification, documented: the final
//! ACK's acknowledgement number is not matched against the FIN it acknowledges.
//!
//! # Window tracking (per-table option)
//! Guido van Rooij, "Real Stateful TCP Packet Filtering in IP Filter" (2000), as simplified by
//! netfilter's `tcp_in_window`. Per direction we keep `end` (highest sequence number sent + 1),
//! `maxend` (highest right window edge the peer has advertised: ack + window) and `maxwin`
//! (largest window seen). A segment from sender S to receiver R with sequence `seq`, length
//! `len` (SYN and FIN count one) and `end = seq + len` is in window when
//! 1. `seq <= S.maxend` — it does not start beyond what R allowed;
//! 2. `end >= S.end - R.maxwin` — it is not older than one full window;
//! 3. `ack <= R.end` — it does not acknowledge data R never sent;
//! 4. `ack >= R.end - max(S.maxwin, 66000)` — nor data too far in the past.
//!
//! All comparisons are modulo 2^32 (RFC 9293 §3.4). Window scaling (RFC 7323 §2) applies only
//! when both SYNs carried the option; the caller passes the shift from the SYN's options.
//!
//! # Pseudo-states
//! UDP and other datagram protocols: `Unreplied` until a packet travels the reply way, then
//! `Replied` (longer timeout). ICMP echo: `EchoRequest` then `EchoReply`.

/// TCP flag bits (RFC 9293 §3.1, the low byte of the flags field).
pub mod flags {
    /// No more data from sender.
    pub const FIN: u8 = 0x01;
    /// Synchronise sequence numbers.
    pub const SYN: u8 = 0x02;
    /// Reset the connection.
    pub const RST: u8 = 0x04;
    /// Push function.
    pub const PSH: u8 = 0x08;
    /// Acknowledgment field is significant.
    pub const ACK: u8 = 0x10;
    /// Urgent pointer field is significant.
    pub const URG: u8 = 0x20;
}

/// IP protocol numbers the tracker gives special treatment (IANA "Assigned Internet Protocol
/// Numbers").
pub mod proto {
    /// ICMP (RFC 792).
    pub const ICMP: u8 = 1;
    /// TCP (RFC 9293).
    pub const TCP: u8 = 6;
    /// UDP (RFC 768).
    pub const UDP: u8 = 17;
    /// ICMPv6 (RFC 4443).
    pub const ICMPV6: u8 = 58;
}

/// Connection state of a flow entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum State {
    /// Free entry (not a connection).
    #[default]
    None,
    /// TCP: the initiator's SYN was seen.
    SynSent,
    /// TCP: the responder's SYN+ACK was seen.
    SynRecv,
    /// TCP: the handshake completed.
    Established,
    /// TCP: one side (the closer) sent FIN.
    FinWait,
    /// TCP: the other side acknowledged the closer's FIN and may still send data.
    CloseWait,
    /// TCP: both sides sent FIN; waiting for the closer's last ACK.
    LastAck,
    /// TCP: the last ACK was seen; the connection lingers for late segments.
    TimeWait,
    /// TCP: reset.
    Closed,
    /// UDP and other datagram protocols: only the original direction was seen.
    Unreplied,
    /// UDP and other datagram protocols: traffic went both ways.
    Replied,
    /// ICMP / ICMPv6: an echo request was seen.
    EchoRequest,
    /// ICMP / ICMPv6: an echo reply was seen.
    EchoReply,
}

impl State {
    /// Every state, in declaration order.
    pub const ALL: [State; 13] = [
        State::None,
        State::SynSent,
        State::SynRecv,
        State::Established,
        State::FinWait,
        State::CloseWait,
        State::LastAck,
        State::TimeWait,
        State::Closed,
        State::Unreplied,
        State::Replied,
        State::EchoRequest,
        State::EchoReply,
    ];

    /// The snake_case name used in `show table` output and counters.
    pub const fn name(self) -> &'static str {
        match self {
            State::None => "none",
            State::SynSent => "syn_sent",
            State::SynRecv => "syn_recv",
            State::Established => "established",
            State::FinWait => "fin_wait",
            State::CloseWait => "close_wait",
            State::LastAck => "last_ack",
            State::TimeWait => "time_wait",
            State::Closed => "closed",
            State::Unreplied => "unreplied",
            State::Replied => "replied",
            State::EchoRequest => "echo_request",
            State::EchoReply => "echo_reply",
        }
    }
}

/// Which way a packet travels relative to the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Dir {
    /// From the initiator (the side whose packet created the entry).
    Original = 0,
    /// Towards the initiator.
    Reply = 1,
}

impl Dir {
    /// The other direction.
    #[inline]
    pub const fn flip(self) -> Dir {
        match self {
            Dir::Original => Dir::Reply,
            Dir::Reply => Dir::Original,
        }
    }
}

/// Why the tracker refused a packet. Small and `Copy`: the pipeline maps it to a drop reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Invalid {
    /// Impossible flag combination: SYN+FIN, SYN+RST, or none of SYN/FIN/RST/ACK.
    BadFlags,
    /// The first TCP packet of a connection is not a SYN (without ACK).
    NotInitial,
    /// A SYN where the connection is past its handshake.
    UnexpectedSyn,
    /// An ACK, FIN or data before the handshake allows it.
    UnexpectedAck,
    /// Sequence or acknowledgment number outside the tracked window.
    OutOfWindow,
}

/// Result of tracking one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TcpVerdict {
    /// The packet fits the connection; state and timeout were updated.
    Accept,
    /// The packet does not fit; the connection is unchanged.
    Invalid(Invalid),
}

/// What the tracker needs from one packet. Built by the caller from the parsed L4 header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Segment {
    /// TCP flags ([`flags`]); 0 for UDP/ICMP.
    pub tcp_flags: u8,
    /// TCP window-scale shift from a SYN's options, or [`Segment::NO_WSCALE`].
    pub wscale: u8,
    /// TCP window field (unscaled, as on the wire).
    pub win: u16,
    /// TCP sequence number.
    pub seq: u32,
    /// TCP acknowledgment number.
    pub ack: u32,
    /// TCP payload length in bytes.
    pub payload_len: u32,
    /// Bytes on the wire (for the per-direction byte counters).
    pub wire_len: u32,
}

impl Segment {
    /// `wscale` value meaning "the SYN carried no window-scale option".
    pub const NO_WSCALE: u8 = 0xff;

    /// A TCP segment without a window-scale option.
    pub const fn tcp(tcp_flags: u8, seq: u32, ack: u32, win: u16, payload_len: u32) -> Segment {
        Segment { tcp_flags, wscale: Self::NO_WSCALE, win, seq, ack, payload_len, wire_len: 40 + payload_len }
    }

    /// A UDP, ICMP or other non-TCP packet of `wire_len` bytes.
    pub const fn datagram(wire_len: u32) -> Segment {
        Segment { tcp_flags: 0, wscale: Self::NO_WSCALE, win: 0, seq: 0, ack: 0, payload_len: 0, wire_len }
    }

    /// The same segment with a window-scale option (SYN and SYN+ACK only).
    pub const fn with_wscale(mut self, shift: u8) -> Segment {
        self.wscale = shift;
        self
    }
}

/// Per-state timeouts in nanoseconds. Defaults follow Linux netfilter's
/// `nf_conntrack_tcp_timeout_*` / `udp_timeout*` / `icmp_timeout` sysctls, with SYN states
/// shortened to 30 s (a half-open flood must not fill the table for two minutes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// SynSent (default 30 s).
    pub syn_sent_ns: u64,
    /// SynRecv (default 30 s).
    pub syn_recv_ns: u64,
    /// Established (default 5 days, as netfilter).
    pub established_ns: u64,
    /// FinWait (default 120 s).
    pub fin_wait_ns: u64,
    /// CloseWait (default 60 s).
    pub close_wait_ns: u64,
    /// LastAck (default 30 s).
    pub last_ack_ns: u64,
    /// TimeWait (default 120 s).
    pub time_wait_ns: u64,
    /// Closed after RST (default 10 s).
    pub closed_ns: u64,
    /// Datagram, one direction only (default 30 s).
    pub unreplied_ns: u64,
    /// Datagram, both directions (default 180 s).
    pub replied_ns: u64,
    /// ICMP echo request / reply (default 30 s).
    pub icmp_ns: u64,
}

const SEC: u64 = 1_000_000_000;

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            syn_sent_ns: 30 * SEC,
            syn_recv_ns: 30 * SEC,
            established_ns: 5 * 24 * 3600 * SEC,
            fin_wait_ns: 120 * SEC,
            close_wait_ns: 60 * SEC,
            last_ack_ns: 30 * SEC,
            time_wait_ns: 120 * SEC,
            closed_ns: 10 * SEC,
            unreplied_ns: 30 * SEC,
            replied_ns: 180 * SEC,
            icmp_ns: 30 * SEC,
        }
    }
}

impl Timeouts {
    /// Timeout of `s` in nanoseconds (0 for `None`).
    #[inline]
    pub fn of(&self, s: State) -> u64 {
        match s {
            State::None => 0,
            State::SynSent => self.syn_sent_ns,
            State::SynRecv => self.syn_recv_ns,
            State::Established => self.established_ns,
            State::FinWait => self.fin_wait_ns,
            State::CloseWait => self.close_wait_ns,
            State::LastAck => self.last_ack_ns,
            State::TimeWait => self.time_wait_ns,
            State::Closed => self.closed_ns,
            State::Unreplied => self.unreplied_ns,
            State::Replied => self.replied_ns,
            State::EchoRequest | State::EchoReply => self.icmp_ns,
        }
    }
}

/// Window-tracking state of one direction (the sender's view, see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Window {
    /// Highest sequence number sent + 1 (`td_end`).
    pub end: u32,
    /// Highest right edge the peer allowed (`td_maxend`).
    pub maxend: u32,
    /// Largest (scaled) window this side advertised; 0 = not seen yet.
    pub maxwin: u32,
    /// Window-scale shift of this side's advertisements, or `Segment::NO_WSCALE` until known.
    pub scale: u8,
}

/// Bit in [`Conn::flags`]: the closer (first FIN) was the reply side.
const CLOSER_REPLY: u8 = 1;

/// The tracked state of one connection: 36 bytes, embedded in each flow entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Conn {
    /// Current state.
    pub state: State,
    /// IP protocol.
    pub proto: u8,
    /// Internal flags (who closed first).
    flags: u8,
    /// Window tracking per direction, indexed by `Dir as usize`.
    pub win: [Window; 2],
}

/// `a <= b` in sequence space (RFC 9293 §3.4).
#[inline]
fn seq_le(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) >= 0
}

/// Max distance an ACK may lag behind (netfilter's `MAXACKWINDOW` floor).
const MAX_ACK_WINDOW: u32 = 66_000;

impl Conn {
    /// The state of a free entry.
    pub const NONE: Conn = Conn { state: State::None, proto: 0, flags: 0, win: [Window { end: 0, maxend: 0, maxwin: 0, scale: 0 }; 2] };

    /// Opens a connection with its first packet (sent in the original direction).
    ///
    /// # Errors
    /// `NotInitial` when a TCP first packet is not a lone SYN, `BadFlags` for impossible flags.
    pub fn open(proto: u8, seg: &Segment) -> Result<Conn, Invalid> {
        let mut c = Conn { state: State::None, proto, flags: 0, win: [Window::default(); 2] };
        match proto {
            self::proto::TCP => {
                bad_flags(seg.tcp_flags)?;
                if seg.tcp_flags & (flags::SYN | flags::ACK | flags::RST) != flags::SYN {
                    return Err(Invalid::NotInitial);
                }
                c.syn_init(seg);
            }
            self::proto::ICMP | self::proto::ICMPV6 => c.state = State::EchoRequest,
            _ => c.state = State::Unreplied,
        }
        Ok(c)
    }

    /// Sets up a fresh handshake from the initiator's SYN.
    fn syn_init(&mut self, seg: &Segment) {
        let end = seg.seq.wrapping_add(seg.payload_len).wrapping_add(1);
        self.state = State::SynSent;
        self.flags = 0;
        self.win[0] = Window { end, maxend: end, maxwin: u32::from(seg.win).max(1), scale: seg.wscale };
        self.win[1] = Window::default();
    }

    /// The side that sent the first FIN.
    #[inline]
    fn closer(&self) -> Dir {
        if self.flags & CLOSER_REPLY != 0 {
            Dir::Reply
        } else {
            Dir::Original
        }
    }

    /// Tracks one packet travelling `dir`. `window_check` turns on sequence-window validation.
    /// On `Accept` the state may change; on `Invalid` nothing changes. Never panics.
    #[inline(always)]
    pub fn step(&mut self, dir: Dir, seg: &Segment, window_check: bool) -> TcpVerdict {
        // Fast path for the bulk of traffic: a plain ACK (with or without data) on an
        // established connection changes no state; only the window moves. Same result as the
        // general path (it would take the `Established => Established` arm).
        if self.state == State::Established && seg.tcp_flags & (flags::SYN | flags::FIN | flags::RST | flags::ACK) == flags::ACK {
            if window_check {
                if let Err(e) = self.in_window(dir, seg) {
                    return TcpVerdict::Invalid(e);
                }
            }
            return TcpVerdict::Accept;
        }
        // Datagrams that change no state: anything on a replied flow, the original direction
        // of an unreplied one (what `step_general` would conclude, without the call).
        if self.state == State::Replied || (self.state == State::Unreplied && dir == Dir::Original) {
            return TcpVerdict::Accept;
        }
        // The reply's SYN+ACK, the second packet of every connection: what `step_tcp` does for
        // it (the `SynSent` arm, then `init_sender` from `in_window` or without window checks),
        // without the general state machine (~125 instructions a SYN+ACK, callgrind, cps).
        if self.state == State::SynSent
            && dir == Dir::Reply
            && self.proto == proto::TCP
            && seg.tcp_flags & (flags::SYN | flags::FIN | flags::RST | flags::ACK) == flags::SYN | flags::ACK
            && self.win[Dir::Reply as usize].maxwin == 0
        {
            self.init_sender(Dir::Reply, seg);
            self.state = State::SynRecv;
            return TcpVerdict::Accept;
        }
        self.step_general(dir, seg, window_check)
    }

    /// Every other packet: the full state machine.
    #[inline(never)]
    fn step_general(&mut self, dir: Dir, seg: &Segment, window_check: bool) -> TcpVerdict {
        match self.proto {
            self::proto::TCP => match self.step_tcp(dir, seg, window_check) {
                Ok(()) => TcpVerdict::Accept,
                Err(e) => TcpVerdict::Invalid(e),
            },
            self::proto::ICMP | self::proto::ICMPV6 => {
                if dir == Dir::Reply {
                    self.state = State::EchoReply;
                }
                TcpVerdict::Accept
            }
            _ => {
                if dir == Dir::Reply {
                    self.state = State::Replied;
                }
                TcpVerdict::Accept
            }
        }
    }

    fn step_tcp(&mut self, dir: Dir, seg: &Segment, window_check: bool) -> Result<(), Invalid> {
        use State::*;
        let f = seg.tcp_flags;
        bad_flags(f)?;
        let syn = f & flags::SYN != 0;
        let ack = f & flags::ACK != 0;
        let fin = f & flags::FIN != 0;
        let rst = f & flags::RST != 0;
        let orig = dir == Dir::Original;

        // A new SYN from the initiator reopens a finished connection (client port reuse, as
        // netfilter allows in TIME_WAIT/CLOSE). Window state starts over.
        if syn && !ack && orig && matches!(self.state, TimeWait | Closed) {
            self.syn_init(seg);
            return Ok(());
        }
        if rst {
            if window_check && !self.rst_in_window(dir, seg) {
                return Err(Invalid::OutOfWindow);
            }
            self.state = Closed;
            return Ok(());
        }
        // Work out the next state first, so an invalid packet changes nothing.
        let closer = self.closer();
        let next = match self.state {
            None => return Err(Invalid::NotInitial),
            SynSent => match (orig, syn, ack) {
                (true, true, false) => SynSent,  // retransmitted SYN
                (false, true, true) => SynRecv,  // SYN+ACK
                (false, true, false) => SynRecv, // simultaneous open
                _ => return Err(Invalid::UnexpectedAck),
            },
            SynRecv => match (orig, syn) {
                (_, true) => SynRecv, // retransmitted SYN or SYN+ACK
                (true, false) if fin => FinWait,
                (true, false) if ack => Established, // third packet of the handshake
                (false, false) => SynRecv,
                _ => return Err(Invalid::UnexpectedAck),
            },
            Established if syn => return Err(Invalid::UnexpectedSyn),
            Established if fin => FinWait,
            Established => Established,
            FinWait | CloseWait | LastAck | TimeWait if syn => return Err(Invalid::UnexpectedSyn),
            FinWait if dir != closer && fin => LastAck,
            FinWait if dir != closer && ack => CloseWait,
            FinWait => FinWait,
            CloseWait if dir != closer && fin => LastAck,
            CloseWait => CloseWait,
            LastAck if dir == closer && ack => TimeWait,
            LastAck => LastAck,
            TimeWait => TimeWait,
            Closed if syn => return Err(Invalid::UnexpectedSyn),
            Closed => Closed,
            // Datagram states never reach here (proto is TCP).
            Unreplied | Replied | EchoRequest | EchoReply => return Err(Invalid::BadFlags),
        };
        if window_check {
            self.in_window(dir, seg)?;
        } else if next == SynRecv && !orig && syn {
            // Keep the reply side's window initialised even without checks, so turning the
            // option on later (or reading the entry) sees sane values.
            self.init_sender(dir, seg);
        }
        if next == FinWait && self.state != FinWait {
            self.flags = if orig { 0 } else { CLOSER_REPLY };
        }
        self.state = next;
        Ok(())
    }

    /// First packet from a side whose window is still unknown (normally the SYN+ACK).
    fn init_sender(&mut self, dir: Dir, seg: &Segment) {
        let syn = seg.tcp_flags & flags::SYN != 0;
        let end =
            seg.seq.wrapping_add(seg.payload_len).wrapping_add(u32::from(syn)).wrapping_add(u32::from(seg.tcp_flags & flags::FIN != 0));
        let s = dir as usize;
        let r = 1 - s;
        let mut scale = 0;
        if syn {
            // RFC 7323 §2.2: scaling is on only if both SYNs carried the option.
            if seg.wscale != Segment::NO_WSCALE && self.win[r].scale != Segment::NO_WSCALE {
                scale = seg.wscale.min(14);
                self.win[r].scale = self.win[r].scale.min(14);
            } else {
                self.win[r].scale = 0;
            }
        } else if self.win[r].scale == Segment::NO_WSCALE {
            self.win[r].scale = 0;
        }
        let win = if syn { u32::from(seg.win) } else { u32::from(seg.win) << scale };
        self.win[s] = Window { end, maxend: end, maxwin: win.max(1), scale };
        if seg.tcp_flags & flags::ACK != 0 {
            let edge = seg.ack.wrapping_add(win);
            if seq_le(self.win[r].maxend, edge) {
                self.win[r].maxend = edge;
            }
        }
    }

    /// The window test of the module doc, and the window update when it passes.
    #[inline]
    fn in_window(&mut self, dir: Dir, seg: &Segment) -> Result<(), Invalid> {
        let s = dir as usize;
        let r = 1 - s;
        if self.win[s].maxwin == 0 {
            self.init_sender(dir, seg);
            return Ok(());
        }
        let f = seg.tcp_flags;
        let syn = f & flags::SYN != 0;
        let end = seg.seq.wrapping_add(seg.payload_len).wrapping_add(u32::from(syn)).wrapping_add(u32::from(f & flags::FIN != 0));
        let (snd, rcv) = (self.win[s], self.win[r]);
        let scale = if snd.scale == Segment::NO_WSCALE || syn { 0 } else { snd.scale };
        let win = u32::from(seg.win) << scale;
        let ok_seq = seq_le(seg.seq, snd.maxend) && seq_le(snd.end.wrapping_sub(rcv.maxwin), end);
        let has_ack = f & flags::ACK != 0 && rcv.maxwin != 0;
        let ok_ack = !has_ack || (seq_le(seg.ack, rcv.end) && seq_le(rcv.end.wrapping_sub(snd.maxwin.max(MAX_ACK_WINDOW)), seg.ack));
        if !(ok_seq && ok_ack) {
            return Err(Invalid::OutOfWindow);
        }
        let w = &mut self.win[s];
        w.maxwin = w.maxwin.max(win).max(1);
        if !seq_le(end, w.end) {
            w.end = end;
        }
        if has_ack {
            let edge = seg.ack.wrapping_add(win.max(1));
            if !seq_le(edge, self.win[r].maxend) {
                self.win[r].maxend = edge;
            }
        }
        Ok(())
    }

    /// RST acceptance: its sequence number must lie in the receiver's window (RFC 5961 §3 is
    /// stricter — exact match — but a middlebox may lag behind the endpoints).
    fn rst_in_window(&self, dir: Dir, seg: &Segment) -> bool {
        let (snd, rcv) = (self.win[dir as usize], self.win[1 - dir as usize]);
        if snd.maxwin == 0 {
            // Reply side never spoke (RST answering a SYN): it must acknowledge the SYN.
            return seg.tcp_flags & flags::ACK != 0 && seg.ack == rcv.end;
        }
        seq_le(seg.seq, snd.maxend) && seq_le(snd.end.wrapping_sub(rcv.maxwin.max(1)), seg.seq)
    }
}

/// Rejects impossible flag combinations.
#[inline]
fn bad_flags(f: u8) -> Result<(), Invalid> {
    let syn_fin = flags::SYN | flags::FIN;
    let syn_rst = flags::SYN | flags::RST;
    if f & syn_fin == syn_fin || f & syn_rst == syn_rst || f & (flags::SYN | flags::FIN | flags::RST | flags::ACK) == 0 {
        return Err(Invalid::BadFlags);
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::flags::*;
    use super::*;
    use Dir::{Original as O, Reply as R};

    const C_ISN: u32 = 1000;
    const S_ISN: u32 = 5000;

    fn handshake(check: bool) -> Conn {
        let mut c = Conn::open(proto::TCP, &Segment::tcp(SYN, C_ISN, 0, 65535, 0)).unwrap();
        assert_eq!(c.state, State::SynSent);
        let sa = Segment::tcp(SYN | ACK, S_ISN, C_ISN + 1, 65535, 0);
        assert_eq!(c.step(R, &sa, check), TcpVerdict::Accept);
        assert_eq!(c.state, State::SynRecv);
        let a = Segment::tcp(ACK, C_ISN + 1, S_ISN + 1, 65535, 0);
        assert_eq!(c.step(O, &a, check), TcpVerdict::Accept);
        assert_eq!(c.state, State::Established);
        c
    }

    #[test]
    fn handshake_data_and_fin_close() {
        for check in [false, true] {
            let mut c = handshake(check);
            // 100 bytes each way.
            let d = Segment::tcp(ACK | PSH, C_ISN + 1, S_ISN + 1, 65535, 100);
            assert_eq!(c.step(O, &d, check), TcpVerdict::Accept);
            let d = Segment::tcp(ACK | PSH, S_ISN + 1, C_ISN + 101, 65535, 100);
            assert_eq!(c.step(R, &d, check), TcpVerdict::Accept);
            assert_eq!(c.state, State::Established);
            // Client closes first.
            let f = Segment::tcp(FIN | ACK, C_ISN + 101, S_ISN + 101, 65535, 0);
            assert_eq!(c.step(O, &f, check), TcpVerdict::Accept);
            assert_eq!(c.state, State::FinWait);
            let a = Segment::tcp(ACK, S_ISN + 101, C_ISN + 102, 65535, 0);
            assert_eq!(c.step(R, &a, check), TcpVerdict::Accept);
            assert_eq!(c.state, State::CloseWait);
            let f = Segment::tcp(FIN | ACK, S_ISN + 101, C_ISN + 102, 65535, 0);
            assert_eq!(c.step(R, &f, check), TcpVerdict::Accept);
            assert_eq!(c.state, State::LastAck);
            // An ACK from the non-closer does not finish it.
            assert_eq!(c.step(R, &a, check), TcpVerdict::Accept);
            assert_eq!(c.state, State::LastAck);
            let a = Segment::tcp(ACK, C_ISN + 102, S_ISN + 102, 65535, 0);
            assert_eq!(c.step(O, &a, check), TcpVerdict::Accept);
            assert_eq!(c.state, State::TimeWait);
        }
    }

    #[test]
    fn server_closes_first_and_fin_fin_goes_to_last_ack() {
        let mut c = handshake(true);
        let f = Segment::tcp(FIN | ACK, S_ISN + 1, C_ISN + 1, 65535, 0);
        assert_eq!(c.step(R, &f, true), TcpVerdict::Accept);
        assert_eq!(c.state, State::FinWait);
        // Client's FIN crosses (carries the ACK of the server's FIN).
        let f2 = Segment::tcp(FIN | ACK, C_ISN + 1, S_ISN + 2, 65535, 0);
        assert_eq!(c.step(O, &f2, true), TcpVerdict::Accept);
        assert_eq!(c.state, State::LastAck);
        // Closer (server) acks the client's FIN.
        let a = Segment::tcp(ACK, S_ISN + 2, C_ISN + 2, 65535, 0);
        assert_eq!(c.step(R, &a, true), TcpVerdict::Accept);
        assert_eq!(c.state, State::TimeWait);
    }

    #[test]
    fn rst_closes_from_any_state() {
        for check in [false, true] {
            let mut c = handshake(check);
            let r = Segment::tcp(RST | ACK, S_ISN + 1, C_ISN + 1, 0, 0);
            assert_eq!(c.step(R, &r, check), TcpVerdict::Accept);
            assert_eq!(c.state, State::Closed);
            // Port reuse: a new SYN reopens.
            let s = Segment::tcp(SYN, 90_000, 0, 1000, 0);
            assert_eq!(c.step(O, &s, check), TcpVerdict::Accept);
            assert_eq!(c.state, State::SynSent);
        }
        // RST answering a SYN (connection refused).
        let mut c = Conn::open(proto::TCP, &Segment::tcp(SYN, C_ISN, 0, 65535, 0)).unwrap();
        let r = Segment::tcp(RST | ACK, 0, C_ISN + 1, 0, 0);
        assert_eq!(c.step(R, &r, true), TcpVerdict::Accept);
        assert_eq!(c.state, State::Closed);
    }

    #[test]
    fn out_of_window_rst_is_refused() {
        let mut c = handshake(true);
        let r = Segment::tcp(RST, S_ISN + 3_000_000, 0, 0, 0);
        assert_eq!(c.step(R, &r, true), TcpVerdict::Invalid(Invalid::OutOfWindow));
        assert_eq!(c.state, State::Established);
        // Without window checks it is accepted.
        assert_eq!(c.step(R, &r, false), TcpVerdict::Accept);
        assert_eq!(c.state, State::Closed);
    }

    #[test]
    fn retransmitted_syn_and_synack_keep_state() {
        let mut c = Conn::open(proto::TCP, &Segment::tcp(SYN, C_ISN, 0, 65535, 0)).unwrap();
        let s = Segment::tcp(SYN, C_ISN, 0, 65535, 0);
        assert_eq!(c.step(O, &s, true), TcpVerdict::Accept);
        assert_eq!(c.state, State::SynSent);
        let sa = Segment::tcp(SYN | ACK, S_ISN, C_ISN + 1, 65535, 0);
        assert_eq!(c.step(R, &sa, true), TcpVerdict::Accept);
        assert_eq!(c.step(R, &sa, true), TcpVerdict::Accept);
        assert_eq!(c.step(O, &s, true), TcpVerdict::Accept);
        assert_eq!(c.state, State::SynRecv);
    }

    #[test]
    fn invalid_packets_change_nothing() {
        // First packet not a SYN.
        assert_eq!(Conn::open(proto::TCP, &Segment::tcp(ACK, 1, 1, 1, 0)), Err(Invalid::NotInitial));
        assert_eq!(Conn::open(proto::TCP, &Segment::tcp(SYN | ACK, 1, 1, 1, 0)), Err(Invalid::NotInitial));
        assert_eq!(Conn::open(proto::TCP, &Segment::tcp(SYN | FIN, 1, 1, 1, 0)), Err(Invalid::BadFlags));
        assert_eq!(Conn::open(proto::TCP, &Segment::tcp(0, 1, 1, 1, 0)), Err(Invalid::BadFlags));
        // ACK from the client before the SYN+ACK.
        let mut c = Conn::open(proto::TCP, &Segment::tcp(SYN, C_ISN, 0, 65535, 0)).unwrap();
        let before = c;
        let a = Segment::tcp(ACK, C_ISN + 1, 77, 65535, 0);
        assert_eq!(c.step(O, &a, false), TcpVerdict::Invalid(Invalid::UnexpectedAck));
        assert_eq!(c, before);
        // SYN in an established connection.
        let mut c = handshake(true);
        let before = c;
        let s = Segment::tcp(SYN, C_ISN + 1, 0, 65535, 0);
        assert_eq!(c.step(O, &s, true), TcpVerdict::Invalid(Invalid::UnexpectedSyn));
        assert_eq!(c.step(O, &Segment::tcp(SYN | RST, 1, 1, 1, 0), true), TcpVerdict::Invalid(Invalid::BadFlags));
        assert_eq!(c, before);
    }

    #[test]
    fn out_of_window_data_is_refused() {
        let mut c = handshake(true);
        let before = c;
        // Far beyond the advertised window.
        let d = Segment::tcp(ACK, C_ISN + 1 + 1_000_000, S_ISN + 1, 65535, 100);
        assert_eq!(c.step(O, &d, true), TcpVerdict::Invalid(Invalid::OutOfWindow));
        // Far in the past.
        let d = Segment::tcp(ACK, C_ISN.wrapping_sub(1_000_000), S_ISN + 1, 65535, 100);
        assert_eq!(c.step(O, &d, true), TcpVerdict::Invalid(Invalid::OutOfWindow));
        // Acknowledges data the server never sent.
        let d = Segment::tcp(ACK, C_ISN + 1, S_ISN + 500_000, 65535, 0);
        assert_eq!(c.step(O, &d, true), TcpVerdict::Invalid(Invalid::OutOfWindow));
        assert_eq!(c, before);
        // Same packets are fine with checks off.
        assert_eq!(c.step(O, &d, false), TcpVerdict::Accept);
        // In-window data at the edge of the window is accepted.
        let mut c = before;
        let d = Segment::tcp(ACK, C_ISN + 1 + 65_000, S_ISN + 1, 65535, 535);
        assert_eq!(c.step(O, &d, true), TcpVerdict::Accept);
    }

    #[test]
    fn window_scaling_needs_both_syns() {
        // Both sides scale by 7: a 200 kB flight is in window.
        let syn = Segment::tcp(SYN, C_ISN, 0, 65535, 0).with_wscale(7);
        let mut c = Conn::open(proto::TCP, &syn).unwrap();
        let sa = Segment::tcp(SYN | ACK, S_ISN, C_ISN + 1, 65535, 0).with_wscale(7);
        assert_eq!(c.step(R, &sa, true), TcpVerdict::Accept);
        // Client ACK advertises 2048 << 7 = 256 KiB.
        assert_eq!(c.step(O, &Segment::tcp(ACK, C_ISN + 1, S_ISN + 1, 2048, 0), true), TcpVerdict::Accept);
        let d = Segment::tcp(ACK, S_ISN + 1 + 200_000, C_ISN + 1, 2048, 1000);
        assert_eq!(c.step(R, &d, true), TcpVerdict::Accept);
        // Only the client offered scaling: windows are unscaled, so the same flight is refused.
        let mut c = Conn::open(proto::TCP, &syn).unwrap();
        let sa = Segment::tcp(SYN | ACK, S_ISN, C_ISN + 1, 65535, 0);
        assert_eq!(c.step(R, &sa, true), TcpVerdict::Accept);
        assert_eq!(c.step(O, &Segment::tcp(ACK, C_ISN + 1, S_ISN + 1, 2048, 0), true), TcpVerdict::Accept);
        assert_eq!(c.step(R, &d, true), TcpVerdict::Invalid(Invalid::OutOfWindow));
    }

    #[test]
    fn sequence_numbers_wrap() {
        let isn = u32::MAX - 10;
        let mut c = Conn::open(proto::TCP, &Segment::tcp(SYN, isn, 0, 65535, 0)).unwrap();
        let sa = Segment::tcp(SYN | ACK, S_ISN, isn.wrapping_add(1), 65535, 0);
        assert_eq!(c.step(R, &sa, true), TcpVerdict::Accept);
        let a = Segment::tcp(ACK, isn.wrapping_add(1), S_ISN + 1, 65535, 100);
        assert_eq!(c.step(O, &a, true), TcpVerdict::Accept);
        let a = Segment::tcp(ACK, isn.wrapping_add(101), S_ISN + 1, 65535, 100);
        assert_eq!(c.step(O, &a, true), TcpVerdict::Accept);
        assert_eq!(c.state, State::Established);
    }

    #[test]
    fn datagram_pseudo_states() {
        let mut u = Conn::open(proto::UDP, &Segment::datagram(60)).unwrap();
        assert_eq!(u.state, State::Unreplied);
        assert_eq!(u.step(O, &Segment::datagram(60), true), TcpVerdict::Accept);
        assert_eq!(u.state, State::Unreplied);
        assert_eq!(u.step(R, &Segment::datagram(60), true), TcpVerdict::Accept);
        assert_eq!(u.state, State::Replied);
        let mut i = Conn::open(proto::ICMP, &Segment::datagram(84)).unwrap();
        assert_eq!(i.state, State::EchoRequest);
        assert_eq!(i.step(R, &Segment::datagram(84), true), TcpVerdict::Accept);
        assert_eq!(i.state, State::EchoReply);
        let g = Conn::open(47, &Segment::datagram(100)).unwrap();
        assert_eq!(g.state, State::Unreplied);
    }

    #[test]
    fn timeouts_cover_every_state() {
        let t = Timeouts::default();
        for s in State::ALL {
            assert_eq!(t.of(s) == 0, s == State::None, "{s:?}");
            assert!(!s.name().is_empty());
        }
        assert!(t.of(State::SynSent) < t.of(State::Established));
        assert!(t.of(State::Unreplied) < t.of(State::Replied));
    }

    proptest::proptest! {
        /// From a fresh SYN, `step` (with its SYN+ACK fast path) gives the same verdict and
        /// connection as the general state machine, on random segments that are mostly
        /// SYN+ACKs and the handshake's other packets, with and without window scaling.
        #[test]
        fn synack_fast_path_equals_general_path(
            check: bool,
            syn_ws in proptest::option::of(0u8..16),
            syn_win: u16,
            segs in proptest::collection::vec(
                (proptest::bool::ANY,
                 proptest::prop_oneof![4 => proptest::strategy::Just(SYN | ACK), 1 => proptest::strategy::Just(SYN), 1 => proptest::strategy::Just(ACK), 1 => proptest::strategy::Just(SYN | ACK | FIN), 1 => proptest::strategy::Just(RST | ACK), 1 => proptest::num::u8::ANY],
                 0u32..200_000, 0u32..4, proptest::num::u16::ANY, 0u32..2000, proptest::option::of(0u8..16)),
                1..8),
        ) {
            let mut syn = Segment::tcp(SYN, C_ISN, 0, syn_win, 0);
            if let Some(w) = syn_ws {
                syn = syn.with_wscale(w);
            }
            let mut a = Conn::open(proto::TCP, &syn).unwrap();
            let mut b = a;
            for (orig, f, seq, ack, win, len, ws) in segs {
                let d = if orig { O } else { R };
                let mut g = Segment::tcp(f, S_ISN.wrapping_add(seq), C_ISN.wrapping_add(ack), win, len);
                if let Some(w) = ws {
                    g = g.with_wscale(w);
                }
                let va = a.step(d, &g, check);
                let vb = b.step_general(d, &g, check);
                proptest::prop_assert_eq!(va, vb);
                proptest::prop_assert_eq!(a, b);
            }
        }

        /// The established-ACK fast path of `step` gives the same verdict and state as the
        /// general state machine, on random segment sequences after a real handshake.
        #[test]
        fn fast_path_equals_general_path(
            check: bool,
            segs in proptest::collection::vec(
                (proptest::bool::ANY,
                 proptest::prop_oneof![proptest::strategy::Just(ACK), proptest::strategy::Just(ACK | PSH), proptest::strategy::Just(FIN | ACK), proptest::strategy::Just(RST), proptest::num::u8::ANY],
                 0u32..200_000, 0u32..200_000, proptest::num::u16::ANY, 0u32..2000),
                1..64),
        ) {
            let mut a = handshake(check);
            let mut b = a;
            for (orig, f, seq, ack, win, len) in segs {
                let d = if orig { O } else { R };
                let g = Segment::tcp(f, C_ISN.wrapping_add(seq), S_ISN.wrapping_add(ack), win, len);
                let va = a.step(d, &g, check);
                let vb = b.step_general(d, &g, check);
                proptest::prop_assert_eq!(va, vb);
                proptest::prop_assert_eq!(a, b);
            }
        }
    }
}
