//! The eBPF datapath on several CPUs at once. The engine gives each flow to one worker; the
//! kernel runs a tc or XDP program on whichever CPU received the packet, so one connection's
//! entry is updated from two CPUs at the same time: its two directions always, and one
//! sender's own segments too (a sender transmits from its process and from the softirq that
//! took an ACK). These tests hammer one entry from several threads through
//! `BPF_PROG_TEST_RUN` (each run stays on the CPU it started on) and check what a serial run
//! would guarantee.
//!
//! Needs root (CI runs it as root; a missing root fails there rather than skipping).

mod common;

use common::{root_or_skip, tcp_frame, Seg, ACK, CONNTRACK_SPEC, FIN, SYN};
use fastpath_io::bpf::tc_action;
use fastpath_io::netns::{Netns, VethPair};
use fastpath_xdp::{XdpDatapath, XdpPortSpec};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One test at a time: each wants both CPUs.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const C_ISN: u32 = 0xfff0_0000; // wraps during the test
const S_ISN: u32 = 7_000;
const MSS: u32 = 1_000;

/// A frame of connection `conn` (its ports: [`ports`]) from the client or the server, the
/// window field at its most; `wscale` adds the option (SYNs only).
fn tcp_on(conn: u32, from_client: bool, flags: u8, seq: u32, ack: u32, wscale: Option<u8>, payload: usize) -> Vec<u8> {
    tcp_frame(ports(conn), Seg { from_client, flags, seq, ack, win: u16::MAX, wscale, payload })
}

/// A frame of connection 0.
fn tcp(from_client: bool, flags: u8, seq: u32, ack: u32, wscale: Option<u8>, payload: usize) -> Vec<u8> {
    tcp_on(0, from_client, flags, seq, ack, wscale, payload)
}

/// Connection `conn`'s client and server ports: each connection its own flow.
fn ports(conn: u32) -> (u16, u16) {
    (1024 + (conn % 60_000) as u16, 80 + (conn / 60_000) as u16)
}

/// The datapath of [`SPEC`] on a veth pair in `ns`, its tc program loaded.
fn datapath() -> XdpDatapath {
    let prog = fastpath_pipeline::compile("ct.toml", CONNTRACK_SPEC).unwrap();
    let ports = [("p0", "s0"), ("p1", "s1")].map(|(n, i)| XdpPortSpec { name: n.into(), iface: i.into() });
    let mut dp = XdpDatapath::build(prog, &ports).unwrap();
    dp.load_tc().unwrap();
    dp
}

/// Opens connection `conn`: the handshake, both sides scaling by 14, and the server's first
/// scaled window, a gigabyte (far more than the data in flight in these tests).
fn handshake(dp: &XdpDatapath, conn: u32) {
    let c1 = C_ISN.wrapping_add(1);
    for (what, f) in [
        ("SYN", tcp_on(conn, true, SYN, C_ISN, 0, Some(14), 0)),
        ("SYN+ACK", tcp_on(conn, false, SYN | ACK, S_ISN, c1, Some(14), 0)),
        ("ACK", tcp_on(conn, true, ACK, c1, S_ISN + 1, None, 0)),
        ("the server's first ACK", tcp_on(conn, false, ACK, S_ISN + 1, c1, None, 0)),
    ] {
        assert!(passes(dp, &f), "conn {conn}: {what} refused");
    }
}

/// Whether the tc program passes `f` (arriving on the first port) rather than dropping it.
fn passes(dp: &XdpDatapath, f: &[u8]) -> bool {
    let mut out = vec![0u8; f.len() + 256];
    let r = dp.tc_prog().unwrap().test_run_skb_on(dp.ifindexes()[0], f, &mut out).unwrap();
    r.retval as i32 == tc_action::REDIRECT
}

/// Two threads send one connection's data, each the next segment in turn, and after each of
/// its own segments the server's ACK for it. Each ACK is for data the program already passed,
/// so none may be refused. With a plain load, compare and store of the window's right edge, a
/// CPU that loses the race puts back an older edge than the other's, and the ACK beyond it is
/// refused as out of window: on a live connection that ACK can be the last of a flight, and
/// the sender then waits for it forever.
#[test]
fn acks_for_data_passed_on_two_cpus_at_once_are_in_window() {
    if !root_or_skip() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let ns = Netns::new("fpx-smp").unwrap();
    let _veth = VethPair::new(&ns, "s0", &ns, "s1").unwrap();
    ns.run(move || {
        let dp = &datapath();
        let send = |f: &[u8]| passes(dp, f);
        let data = |i: u32| tcp(true, ACK, C_ISN.wrapping_add(1).wrapping_add(i.wrapping_mul(MSS)), S_ISN + 1, None, MSS as usize);
        let ack = |segments: u32| tcp(false, ACK, S_ISN + 1, C_ISN.wrapping_add(1).wrapping_add(segments.wrapping_mul(MSS)), None, 0);
        handshake(dp, 0);

        let (claimed, refused) = (AtomicU32::new(0), AtomicU32::new(0));
        let until = Instant::now() + Duration::from_secs(2);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    while Instant::now() < until {
                        let i = claimed.fetch_add(1, Ordering::SeqCst);
                        assert!(send(&data(i)), "segment {i} refused");
                        if !send(&ack(i + 1)) {
                            refused.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                });
            }
        });
        let (n, bad) = (claimed.load(Ordering::SeqCst), refused.load(Ordering::SeqCst));
        eprintln!("{n} segments, {bad} of their ACKs refused");
        assert!(n > 10_000, "the threads ran ({n} segments)");
        assert_eq!(bad, 0, "{bad} of {n} ACKs for data already passed were refused as out of window");
    })
    .unwrap();
}

/// A client's FIN on one CPU while its data keeps arriving on the other, connection after
/// connection. An established connection's data changes no state, so it must not undo the
/// FIN's move to FIN_WAIT: the close then ends in TIME_WAIT, where the client's next SYN on the
/// same ports opens the connection again. Had a data segment stored back the ESTABLISHED it
/// read before the FIN, the server's FIN would make the closer the server, the client's last
/// ACK would leave CLOSE_WAIT, and that SYN would be refused.
#[test]
fn data_on_one_cpu_does_not_undo_a_fin_on_the_other() {
    if !root_or_skip() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let ns = Netns::new("fpx-smpfin").unwrap();
    let _veth = VethPair::new(&ns, "s0", &ns, "s1").unwrap();
    ns.run(move || {
        let dp = &datapath();
        // The connection the data thread sends on (u32::MAX: none), its segments so far, and
        // whether it is between reading `open` and having sent (so the main thread knows when
        // no data of a closed connection is still on its way).
        let (open, sent, stop) = (AtomicU32::new(u32::MAX), AtomicU32::new(0), AtomicU32::new(0));
        let busy = AtomicU32::new(0);
        let (mut conns, mut refused) = (0u32, 0u32);
        let until = Instant::now() + Duration::from_secs(2);
        std::thread::scope(|s| {
            s.spawn(|| {
                let (mut conn, mut i) = (u32::MAX, 0u32);
                while stop.load(Ordering::SeqCst) == 0 {
                    busy.store(1, Ordering::SeqCst);
                    let c = open.load(Ordering::SeqCst);
                    if c == u32::MAX {
                        busy.store(0, Ordering::SeqCst);
                        continue;
                    }
                    if c != conn {
                        (conn, i) = (c, 0);
                    }
                    let seq = C_ISN.wrapping_add(1).wrapping_add(i.wrapping_mul(MSS));
                    // In window before the FIN and after it (data from the closer).
                    assert!(passes(dp, &tcp_on(c, true, ACK, seq, S_ISN + 1, None, MSS as usize)), "conn {c} data {i} refused");
                    i += 1;
                    sent.store(i, Ordering::SeqCst);
                    busy.store(0, Ordering::SeqCst);
                }
            });
            while Instant::now() < until {
                let c = conns;
                conns += 1;
                let go = |from_client: bool, flags: u8, seq: u32, ack: u32, ws: Option<u8>| {
                    assert!(passes(dp, &tcp_on(c, from_client, flags, seq, ack, ws, 0)), "conn {c}: flags {flags:#x} refused");
                };
                handshake(dp, c);
                sent.store(0, Ordering::SeqCst);
                open.store(c, Ordering::SeqCst);
                while sent.load(Ordering::SeqCst) < 2 {}
                // The FIN, while the data keeps coming (its sequence number an old one, well
                // inside the gigabyte window).
                go(true, FIN | ACK, C_ISN.wrapping_add(1), S_ISN + 1, None);
                let n = sent.load(Ordering::SeqCst);
                while sent.load(Ordering::SeqCst) < n + 2 {}
                open.store(u32::MAX, Ordering::SeqCst);
                while busy.load(Ordering::SeqCst) != 0 {}
                // The server's FIN, the client's last ACK, and a new SYN on the same ports.
                go(false, FIN | ACK, S_ISN + 1, C_ISN.wrapping_add(2), None);
                go(true, ACK, C_ISN.wrapping_add(2), S_ISN + 2, None);
                if !passes(dp, &tcp_on(c, true, SYN, C_ISN ^ 0x5555, 0, Some(14), 0)) {
                    refused += 1;
                }
            }
            stop.store(1, Ordering::SeqCst);
        });
        eprintln!("{conns} connections, {refused} reopening SYNs refused");
        assert!(conns > 1_000, "the test ran ({conns} connections)");
        assert_eq!(refused, 0, "{refused} of {conns} closes lost their FIN_WAIT to data on the other CPU");
    })
    .unwrap();
}
