//! Connection tracking on whole TCP/UDP/ICMP exchanges, driven the way a conntrack stage does
//! it: build the key from each packet's own (src, dst) tuple, look it up, insert on a miss,
//! track on a hit. Both directions must land on one entry; verdicts, states and ageing are
//! checked on simulated time.

use fastpath_tables::flow::{
    flags::*, proto, Dir, FlowConfig, FlowId, FlowKey, FlowTable, InsertError, Invalid, Segment, State, TcpVerdict,
};

const SEC: u64 = 1_000_000_000;
const CLIENT: ([u8; 4], u16) = ([198, 18, 1, 10], 43_210);
const SERVER: ([u8; 4], u16) = ([198, 19, 2, 20], 443);

struct Ct {
    t: FlowTable,
}

impl Ct {
    fn new() -> Ct {
        Ct { t: FlowTable::new(FlowConfig::with_capacity(1024)).unwrap() }
    }

    /// One packet from `src` to `dst` at `now`: (entry, verdict) or the insert error.
    fn pkt(
        &mut self,
        p: u8,
        src: ([u8; 4], u16),
        dst: ([u8; 4], u16),
        seg: Segment,
        now: u64,
    ) -> Result<(FlowId, TcpVerdict), InsertError> {
        let (k, side) = FlowKey::v4(5, p, src.0, src.1, dst.0, dst.1);
        let h = self.t.hash(&k);
        match self.t.lookup(&k, h, now) {
            Some(id) => Ok((id, self.t.track(id, side, &seg, now))),
            None => self.t.insert(&k, h, side, &seg, now).map(|id| (id, TcpVerdict::Accept)),
        }
    }

    fn c2s(&mut self, seg: Segment, now: u64) -> (FlowId, TcpVerdict) {
        self.pkt(proto::TCP, CLIENT, SERVER, seg, now).unwrap()
    }

    fn s2c(&mut self, seg: Segment, now: u64) -> (FlowId, TcpVerdict) {
        self.pkt(proto::TCP, SERVER, CLIENT, seg, now).unwrap()
    }

    fn state(&self, id: FlowId) -> State {
        self.t.entry(id).map_or(State::None, |e| e.state())
    }
}

const A: TcpVerdict = TcpVerdict::Accept;

/// Client ISN 1000, server ISN 9000; returns the connection after the three-way handshake.
fn established(ct: &mut Ct) -> FlowId {
    let (id, v) = ct.c2s(Segment::tcp(SYN, 1000, 0, 64_240, 0).with_wscale(7), 0);
    assert_eq!((v, ct.state(id)), (A, State::SynSent));
    let (id2, v) = ct.s2c(Segment::tcp(SYN | ACK, 9000, 1001, 65_160, 0).with_wscale(7), SEC / 1000);
    assert_eq!((id2, v, ct.state(id)), (id, A, State::SynRecv));
    let (_, v) = ct.c2s(Segment::tcp(ACK, 1001, 9001, 502, 0), 2 * SEC / 1000);
    assert_eq!((v, ct.state(id)), (A, State::Established));
    id
}

#[test]
fn handshake_data_fin_and_time_wait_ageing() {
    let mut ct = Ct::new();
    let id = established(&mut ct);
    assert_eq!(ct.t.dir(id, fastpath_tables::flow::Side::Lo), Dir::Original);
    // Request and a 3000-byte response in three segments (window 502 << 7 = 64 KiB).
    let (_, v) = ct.c2s(Segment::tcp(ACK | PSH, 1001, 9001, 502, 300), SEC);
    assert_eq!(v, A);
    for i in 0..3 {
        let (_, v) = ct.s2c(Segment::tcp(ACK, 9001 + i * 1000, 1301, 509, 1000), SEC + u64::from(i));
        assert_eq!(v, A);
    }
    let (_, v) = ct.c2s(Segment::tcp(ACK, 1301, 12_001, 502, 0), 2 * SEC);
    assert_eq!(v, A);
    // Server closes; client acks, then closes; server's final ACK.
    let (_, v) = ct.s2c(Segment::tcp(FIN | ACK, 12_001, 1301, 509, 0), 3 * SEC);
    assert_eq!((v, ct.state(id)), (A, State::FinWait));
    let (_, v) = ct.c2s(Segment::tcp(ACK, 1301, 12_002, 502, 0), 3 * SEC);
    assert_eq!((v, ct.state(id)), (A, State::CloseWait));
    let (_, v) = ct.c2s(Segment::tcp(FIN | ACK, 1301, 12_002, 502, 0), 4 * SEC);
    assert_eq!((v, ct.state(id)), (A, State::LastAck));
    let (_, v) = ct.s2c(Segment::tcp(ACK, 12_002, 1302, 509, 0), 4 * SEC);
    assert_eq!((v, ct.state(id)), (A, State::TimeWait));
    let e = ct.t.entry(id).unwrap();
    assert_eq!((e.pkts(Dir::Original), e.pkts(Dir::Reply)), (6, 6));
    // TIME_WAIT lasts 120 s: still there at 100 s, freed by the wheel by 126 s.
    ct.t.expire(100 * SEC, usize::MAX);
    assert_eq!(ct.t.len(), 1);
    ct.t.expire(126 * SEC, usize::MAX);
    assert_eq!(ct.t.len(), 0);
    assert_eq!(ct.t.stats().expired, 1);
}

#[test]
fn rst_closes_and_frees_after_ten_seconds() {
    let mut ct = Ct::new();
    let id = established(&mut ct);
    let (_, v) = ct.s2c(Segment::tcp(RST | ACK, 9001, 1001, 0, 0), SEC);
    assert_eq!((v, ct.state(id)), (A, State::Closed));
    ct.t.expire(10 * SEC, usize::MAX);
    assert_eq!(ct.t.len(), 1);
    ct.t.expire(13 * SEC, usize::MAX);
    assert_eq!(ct.t.len(), 0);
}

#[test]
fn retransmitted_syn_hits_the_same_entry_and_half_open_ages_out() {
    let mut ct = Ct::new();
    let (id, _) = ct.c2s(Segment::tcp(SYN, 1000, 0, 64_240, 0), 0);
    let (id2, v) = ct.c2s(Segment::tcp(SYN, 1000, 0, 64_240, 0), SEC);
    assert_eq!((id2, v, ct.state(id)), (id, A, State::SynSent));
    let (id3, v) = ct.c2s(Segment::tcp(SYN, 1000, 0, 64_240, 0), 3 * SEC);
    assert_eq!((id3, v), (id, A));
    assert_eq!(ct.t.len(), 1);
    // No answer: SYN_SENT's 30 s run from the last retransmission.
    ct.t.expire(32 * SEC, usize::MAX);
    assert_eq!(ct.t.len(), 1);
    ct.t.expire(35 * SEC, usize::MAX);
    assert_eq!(ct.t.len(), 0);
}

#[test]
fn out_of_window_segments_are_invalid_and_harmless() {
    let mut ct = Ct::new();
    let id = established(&mut ct);
    let before = *ct.t.entry(id).unwrap();
    // A blind injection far outside the window, and an ACK for data never sent.
    let (_, v) = ct.s2c(Segment::tcp(ACK | PSH, 9001 + 50_000_000, 1001, 509, 100), SEC);
    assert_eq!(v, TcpVerdict::Invalid(Invalid::OutOfWindow));
    let (_, v) = ct.c2s(Segment::tcp(ACK, 1001, 9001 + 5_000_000, 502, 0), SEC);
    assert_eq!(v, TcpVerdict::Invalid(Invalid::OutOfWindow));
    // A blind RST is refused too.
    let (_, v) = ct.s2c(Segment::tcp(RST, 9001 + 50_000_000, 0, 0, 0), SEC);
    assert_eq!(v, TcpVerdict::Invalid(Invalid::OutOfWindow));
    assert_eq!(ct.t.entry(id).unwrap(), &before);
    assert_eq!(ct.t.stats().invalid, 3);
    // The real conversation goes on.
    let (_, v) = ct.c2s(Segment::tcp(ACK | PSH, 1001, 9001, 502, 10), 2 * SEC);
    assert_eq!(v, A);
}

#[test]
fn stray_packets_cannot_open_connections() {
    let mut ct = Ct::new();
    // An ACK, a SYN+ACK and a RST for connections nobody opened.
    for f in [ACK, SYN | ACK, RST, FIN | ACK] {
        let r = ct.pkt(proto::TCP, SERVER, CLIENT, Segment::tcp(f, 1, 1, 100, 0), 0);
        assert_eq!(r, Err(InsertError::Invalid(Invalid::NotInitial)), "flags {f:#x}");
    }
    assert_eq!(ct.t.len(), 0);
    assert_eq!(ct.t.stats().invalid, 4);
}

#[test]
fn port_reuse_after_time_wait_reopens() {
    let mut ct = Ct::new();
    let id = established(&mut ct);
    ct.c2s(Segment::tcp(RST | ACK, 1001, 9001, 0, 0), SEC);
    assert_eq!(ct.state(id), State::Closed);
    let (id2, v) = ct.c2s(Segment::tcp(SYN, 777_000, 0, 64_240, 0), 2 * SEC);
    assert_eq!((id2, v, ct.state(id)), (id, A, State::SynSent));
    let (_, v) = ct.s2c(Segment::tcp(SYN | ACK, 55, 777_001, 65_160, 0), 2 * SEC);
    assert_eq!((v, ct.state(id)), (A, State::SynRecv));
}

#[test]
fn udp_and_icmp_pseudo_states_and_timeouts() {
    let mut ct = Ct::new();
    let dns_c = ([198, 18, 1, 10], 50_000);
    let dns_s = ([198, 19, 0, 53], 53);
    let (u, _) = ct.pkt(proto::UDP, dns_c, dns_s, Segment::datagram(70), 0).unwrap();
    assert_eq!(ct.state(u), State::Unreplied);
    let (u2, v) = ct.pkt(proto::UDP, dns_s, dns_c, Segment::datagram(120), SEC).unwrap();
    assert_eq!((u2, v, ct.state(u)), (u, A, State::Replied));
    assert_eq!(ct.t.entry(u).unwrap().expires_ns(), SEC + 180 * SEC);
    // ICMP echo: the identifier is both "ports".
    let (a, b) = (([198, 18, 1, 10], 0x1234), ([198, 19, 0, 1], 0x1234));
    let (i, _) = ct.pkt(proto::ICMP, a, b, Segment::datagram(84), 0).unwrap();
    let (i2, _) = ct.pkt(proto::ICMP, b, a, Segment::datagram(84), 0).unwrap();
    assert_eq!((i2, ct.state(i)), (i, State::EchoReply));
    // An unanswered UDP flow ages out after 30 s, the answered one stays.
    let (lone, _) = ct.pkt(proto::UDP, ([198, 18, 1, 11], 1), dns_s, Segment::datagram(70), 0).unwrap();
    ct.t.expire(40 * SEC, usize::MAX);
    assert!(ct.t.entry(lone).is_none());
    assert!(ct.t.entry(u).is_some());
}

#[test]
fn ipv6_flows_and_zones_are_separate() {
    let mut t = FlowTable::new(FlowConfig::with_capacity(16)).unwrap();
    let c6 = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10];
    let s6 = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x20];
    let (k, side) = FlowKey::v6(1, proto::TCP, c6, 40_000, s6, 80);
    let id = t.insert(&k, t.hash(&k), side, &Segment::tcp(SYN, 1, 0, 1000, 0), 0).unwrap();
    let (kr, sr) = FlowKey::v6(1, proto::TCP, s6, 80, c6, 40_000);
    assert_eq!(t.lookup(&kr, t.hash(&kr), 1), Some(id));
    assert_eq!(t.track(id, sr, &Segment::tcp(SYN | ACK, 7, 2, 1000, 0), 1), A);
    // Same tuple in another zone is another connection.
    let (kz, _) = FlowKey::v6(2, proto::TCP, s6, 80, c6, 40_000);
    assert_eq!(t.lookup(&kz, t.hash(&kz), 1), None);
}
