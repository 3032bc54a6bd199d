//! Shared helpers of the namespace tests: marked test frames and bounded receive loops.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use fastpath_io::af_packet::RawSocket;
use fastpath_io::sys::is_root;

/// Marker at the start of every test frame's UDP payload, so stray kernel frames are ignored.
pub const MARKER: &[u8; 6] = b"FPTEST";
/// Ethernet (14) + IPv4 (20) + UDP (8).
pub const PAYLOAD_OFF: usize = 42;

/// Skips (returns true) when not root, outside CI only: with `CI` set a missing root is a
/// failure, so the namespace tests can never silently vanish from CI.
pub fn skip_unless_root() -> bool {
    if is_root() {
        return false;
    }
    assert!(std::env::var_os("CI").is_none(), "namespace tests need root in CI");
    eprintln!("not root: namespace test skipped");
    true
}

/// Polls `port` (as port id `port_id`) until `n` marked frames arrived or `timeout` passed;
/// returns their bytes in arrival order, freeing every buffer (marked or not).
pub fn rx_marked(
    port: &mut dyn fastpath_io::Port,
    pool: &mut fastpath_packet::Pool,
    port_id: u16,
    n: usize,
    timeout: Duration,
) -> Vec<Vec<u8>> {
    let mut batch = fastpath_packet::Batch::new();
    let mut out = Vec::new();
    let end = Instant::now() + timeout;
    while out.len() < n && Instant::now() < end {
        batch.clear();
        port.rx_burst(pool, &mut batch, port_id);
        for (i, &h) in batch.handles().iter().enumerate() {
            assert_eq!(batch.meta(i).in_port, port_id);
            if marked_seq(pool.data(h)).is_some() {
                out.push(pool.data(h).to_vec());
            }
            pool.free(h);
        }
        if batch.is_empty() {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    out
}

/// Inserts an 802.1Q tag (TPID 0x8100, VLAN `vid`) after the MAC addresses.
pub fn vlan_tagged(f: &[u8], vid: u16) -> Vec<u8> {
    tagged(f, 0x8100, vid)
}

/// Inserts a VLAN tag (`tpid`, then `tci`) after the MAC addresses, in front of any tag there.
pub fn tagged(f: &[u8], tpid: u16, tci: u16) -> Vec<u8> {
    let mut t = f[..12].to_vec();
    t.extend_from_slice(&tpid.to_be_bytes());
    t.extend_from_slice(&tci.to_be_bytes());
    t.extend_from_slice(&f[12..]);
    t
}

/// An Ethernet/IPv4/UDP frame of `size` bytes from 198.18.0.1 to 198.19.0.1, UDP source port
/// `1000 + flow`, whose payload starts with [`MARKER`] and the big-endian sequence number `seq`,
/// then a byte pattern derived from `seq`.
pub fn frame(flow: u16, seq: u32, size: usize) -> Vec<u8> {
    let size = size.max(PAYLOAD_OFF + 10);
    let mut f = vec![0u8; size];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]); // dst MAC
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]); // src MAC
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes()); // EtherType IPv4
    let ip_len = (size - 14) as u16;
    f[14] = 0x45; // version 4, IHL 5
    f[16..18].copy_from_slice(&ip_len.to_be_bytes()); // total length
    f[22] = 64; // TTL
    f[23] = 17; // protocol UDP
    f[26..30].copy_from_slice(&[198, 18, 0, 1]); // src
    f[30..34].copy_from_slice(&[198, 19, 0, 1]); // dst
    let mut sum = 0u32;
    for c in f[14..34].chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    f[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes()); // header checksum
    f[34..36].copy_from_slice(&(1000 + flow).to_be_bytes()); // UDP src port
    f[36..38].copy_from_slice(&9u16.to_be_bytes()); // UDP dst port (discard)
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes()); // UDP length; checksum 0 = none
    f[PAYLOAD_OFF..PAYLOAD_OFF + 6].copy_from_slice(MARKER);
    f[PAYLOAD_OFF + 6..PAYLOAD_OFF + 10].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f[PAYLOAD_OFF + 10..].iter_mut().enumerate() {
        *b = (seq as usize + i) as u8;
    }
    f
}

/// The sequence number of a test frame (untagged or with up to two VLAN tags, TPID 0x8100 or
/// 0x88a8), `None` for any other frame.
pub fn marked_seq(f: &[u8]) -> Option<u32> {
    let mut off = PAYLOAD_OFF;
    for _ in 0..2 {
        match f.get(off - 30..off - 28)? {
            [0x81, 0x00] | [0x88, 0xa8] => off += 4,
            _ => break,
        }
    }
    if f.get(off..off + 6)? != MARKER {
        return None;
    }
    let s = f.get(off + 6..off + 10)?;
    Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

/// Receives marked frames on `sock` until `n` arrived or `timeout` passed.
pub fn recv_marked(sock: &RawSocket, n: usize, timeout: Duration) -> Vec<Vec<u8>> {
    let end = Instant::now() + timeout;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 4096];
    while out.len() < n && Instant::now() < end {
        if let Ok(Some(len)) = sock.recv(&mut buf, 50) {
            if marked_seq(&buf[..len]).is_some() {
                out.push(buf[..len].to_vec());
            }
        }
    }
    out
}
