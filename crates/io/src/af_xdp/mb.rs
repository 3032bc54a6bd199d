//! Multi-buffer receive (`XDP_USE_SG`) and what a port must do for TCP senders that keep their
//! offloads on: cut a large TCP segment into frames that fit the interface (software GSO) and
//! complete a TCP checksum the sender left partial.
//!
//! Why here and not in the pool: a pool buffer is one 2048-byte UMEM chunk (256 bytes of
//! headroom, 1792 of frame), and the kernel hands a frame larger than that as a chain of
//! descriptors, one chunk each, all but the last flagged `XDP_PKT_CONTD`
//! (`Documentation/networking/af_xdp.rst`, "Multi-Buffer Support"). A 64 KB TCP segment is 37
//! chunks. The pipeline sees one buffer per packet, so a chain is gathered and cut into
//! MTU-sized TCP segments here, each with its own sequence number, IP id, IP length and both
//! checksums, as the kernel's `tcp_gso_segment` would have done on the sender. Nothing else
//! is forwarded as a chain: other chained frames (UDP, IPv6, IPv4 fragments) are dropped and
//! counted.
//!
//! Partial checksums: a sender with checksum offload on hands veth a `CHECKSUM_PARTIAL` skb
//! whose TCP checksum field holds only the folded pseudo-header sum (`__tcp_v4_send_check`,
//! net/ipv4/tcp_ipv4.c). The skb's checksum state does not cross into AF_XDP (copy mode copies
//! bytes, `__xsk_rcv`), and the skb the kernel builds for our transmit (`xsk_build_skb`) is
//! `CHECKSUM_NONE`, so the receiver would drop the segment (`TCP_CSUM`). A frame whose TCP
//! checksum field equals its pseudo-header sum and does not verify is such a frame: its
//! checksum is computed here. A frame corrupted on the way is not mistaken for one unless its
//! corruption happens to produce exactly that value.
//!
//! Thread: the port's worker. Never allocates after the port opened (the gather buffer is
//! sized once).

use fastpath_packet::csum::{add, finish, pseudo_v4, sum};
use fastpath_packet::{Batch, Pool, HEADROOM};

/// Ethernet header bytes (no VLAN tag: a tagged TCP frame is not segmented).
const ETH: usize = 14;
/// The largest frame a chain can carry: IPv4's 65,535 bytes plus the Ethernet header and a tag.
pub(crate) const GATHER_MAX: usize = 65_535 + 18;

/// Where an untagged IPv4 TCP frame's headers are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tcp4 {
    /// Offset of the TCP header (after the IPv4 header and its options).
    pub l4: usize,
    /// Offset of the TCP payload.
    pub payload: usize,
    /// End of the IP packet (Ethernet padding excluded).
    pub end: usize,
}

fn be16(f: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([f[at], f[at + 1]])
}

/// The headers of `f` when it is an untagged IPv4 TCP frame, not an IP fragment, with lengths
/// that agree with each other and with the frame.
pub(crate) fn parse_tcp4(f: &[u8]) -> Option<Tcp4> {
    if f.len() < ETH + 40 || be16(f, 12) != 0x0800 {
        return None;
    }
    let v = f[ETH];
    let ihl = usize::from(v & 0x0f) * 4;
    if v >> 4 != 4 || ihl < 20 || f[ETH + 9] != 6 || be16(f, ETH + 6) & 0x3fff != 0 {
        return None;
    }
    let tot = usize::from(be16(f, ETH + 2));
    let l4 = ETH + ihl;
    if ETH + tot > f.len() || f.len() < l4 + 20 {
        return None;
    }
    let thl = usize::from(f[l4 + 12] >> 4) * 4;
    if thl < 20 || ihl + thl > tot {
        return None;
    }
    Some(Tcp4 { l4, payload: l4 + thl, end: ETH + tot })
}

fn pseudo(f: &[u8], l4_len: usize) -> u16 {
    let a = |o: usize| [f[o], f[o + 1], f[o + 2], f[o + 3]];
    pseudo_v4(a(ETH + 12), a(ETH + 16), 6, l4_len as u16)
}

/// Completes the TCP checksum of an IPv4 TCP frame whose sender left it partial (the field
/// holds the pseudo-header sum and the segment does not verify). Returns whether it did.
pub(crate) fn complete_partial_csum(f: &mut [u8]) -> bool {
    let Some(t) = parse_tcp4(f) else { return false };
    let ps = pseudo(f, t.end - t.l4);
    let field = be16(f, t.l4 + 16);
    if field != ps || add(ps, sum(&f[t.l4..t.end])) == 0xffff {
        return false;
    }
    f[t.l4 + 16] = 0;
    f[t.l4 + 17] = 0;
    let c = finish(add(ps, sum(&f[t.l4..t.end])));
    f[t.l4 + 16..t.l4 + 18].copy_from_slice(&c.to_be_bytes());
    true
}

/// How many segments [`segment_tcp4`] makes of a frame with these headers at this MSS.
pub(crate) fn segments_needed(t: &Tcp4, mss: usize) -> usize {
    (t.end - t.payload).div_ceil(mss).max(1)
}

/// The TCP payload bytes per segment for frames of at most `ETH + mtu` bytes, no more than a
/// pool buffer holds.
pub(crate) fn mss_for(t: &Tcp4, mtu: usize) -> usize {
    let max_l3 = mtu.min(fastpath_packet::pool::MAX_FRAME - ETH);
    max_l3.saturating_sub(t.payload - ETH).max(1)
}

/// Cuts the IPv4 TCP frame `f` (headers `t`) into segments of at most `mss` payload bytes,
/// each in a fresh pool buffer pushed onto `batch`: headers copied, IP total length and id
/// (+1 per segment, as `inet_gso_segment` does), sequence number advanced, FIN and PSH only on
/// the last segment, CWR only on the first, IP and TCP checksums computed. Returns the number
/// pushed; nothing is pushed (0) when the pool or the batch has too little room for all of
/// them.
pub(crate) fn segment_tcp4(f: &[u8], t: &Tcp4, mss: usize, pool: &mut Pool, batch: &mut Batch, port_id: u16) -> usize {
    let n = segments_needed(t, mss);
    if pool.available() < n || fastpath_packet::BATCH_MAX - batch.len() < n {
        return 0;
    }
    let hdr = &f[..t.payload];
    let ihl = t.l4 - ETH;
    let thl = t.payload - t.l4;
    let id0 = be16(f, ETH + 4);
    let seq0 = u32::from_be_bytes([f[t.l4 + 4], f[t.l4 + 5], f[t.l4 + 6], f[t.l4 + 7]]);
    let flags0 = f[t.l4 + 13];
    let body = &f[t.payload..t.end];
    for i in 0..n {
        let Some(h) = pool.alloc() else { return i };
        let chunk = &body[(i * mss).min(body.len())..((i + 1) * mss).min(body.len())];
        let len = hdr.len() + chunk.len();
        pool.set_bounds(h, HEADROOM, len);
        let s = pool.data_mut(h);
        s[..hdr.len()].copy_from_slice(hdr);
        s[hdr.len()..].copy_from_slice(chunk);
        // IPv4: total length, id, checksum.
        s[ETH + 2..ETH + 4].copy_from_slice(&((ihl + thl + chunk.len()) as u16).to_be_bytes());
        s[ETH + 4..ETH + 6].copy_from_slice(&id0.wrapping_add(i as u16).to_be_bytes());
        s[ETH + 10] = 0;
        s[ETH + 11] = 0;
        let ipc = finish(sum(&s[ETH..t.l4]));
        s[ETH + 10..ETH + 12].copy_from_slice(&ipc.to_be_bytes());
        // TCP: sequence number, flags, checksum.
        s[t.l4 + 4..t.l4 + 8].copy_from_slice(&seq0.wrapping_add((i * mss) as u32).to_be_bytes());
        let mut fl = flags0;
        if i + 1 < n {
            fl &= !0x09; // FIN, PSH: last segment only
        }
        if i > 0 {
            fl &= !0x80; // CWR: first segment only
        }
        s[t.l4 + 13] = fl;
        s[t.l4 + 16] = 0;
        s[t.l4 + 17] = 0;
        let ps = pseudo(s, thl + chunk.len());
        let c = finish(add(ps, add(sum(&s[t.l4..t.payload]), sum(chunk))));
        s[t.l4 + 16..t.l4 + 18].copy_from_slice(&c.to_be_bytes());
        batch.push(h, port_id);
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastpath_packet::csum::checksum;

    /// An IPv4 TCP frame with `payload` bytes, TCP options of 12 bytes (timestamps-sized),
    /// full checksums, flags PSH|ACK|FIN.
    fn tcp_frame(payload: usize) -> Vec<u8> {
        let thl = 32;
        let mut f = vec![0u8; ETH + 20 + thl + payload];
        f[12] = 0x08;
        f[ETH] = 0x45;
        f[ETH + 2..ETH + 4].copy_from_slice(&((20 + thl + payload) as u16).to_be_bytes());
        f[ETH + 4..ETH + 6].copy_from_slice(&0xfffeu16.to_be_bytes());
        f[ETH + 6] = 0x40; // DF
        f[ETH + 8] = 64;
        f[ETH + 9] = 6;
        f[ETH + 12..ETH + 16].copy_from_slice(&[198, 18, 0, 1]);
        f[ETH + 16..ETH + 20].copy_from_slice(&[198, 18, 0, 2]);
        let l4 = ETH + 20;
        f[l4..l4 + 2].copy_from_slice(&5201u16.to_be_bytes());
        f[l4 + 4..l4 + 8].copy_from_slice(&0xffff_fff0u32.to_be_bytes());
        f[l4 + 12] = (thl as u8 / 4) << 4;
        f[l4 + 13] = 0x19;
        for (i, b) in f[l4 + thl..].iter_mut().enumerate() {
            *b = (i * 7 + 3) as u8;
        }
        let ipc = checksum(&f[ETH..l4]);
        f[ETH + 10..ETH + 12].copy_from_slice(&ipc.to_be_bytes());
        let ps = pseudo(&f, thl + payload);
        let c = finish(add(ps, sum(&f[l4..])));
        f[l4 + 16..l4 + 18].copy_from_slice(&c.to_be_bytes());
        f
    }

    fn tcp_ok(f: &[u8]) -> bool {
        let t = parse_tcp4(f).unwrap();
        checksum(&f[ETH..t.l4]) == 0 && add(pseudo(f, t.end - t.l4), sum(&f[t.l4..t.end])) == 0xffff
    }

    #[test]
    fn a_partial_checksum_is_completed_and_a_full_one_left_alone() {
        let mut f = tcp_frame(1001);
        assert!(tcp_ok(&f));
        let full = f.clone();
        assert!(!complete_partial_csum(&mut f), "a correct checksum is not touched");
        assert_eq!(f, full);
        // What a CHECKSUM_PARTIAL sender leaves: the folded pseudo-header sum.
        let t = parse_tcp4(&f).unwrap();
        let ps = pseudo(&f, t.end - t.l4);
        f[t.l4 + 16..t.l4 + 18].copy_from_slice(&ps.to_be_bytes());
        assert!(!tcp_ok(&f));
        assert!(complete_partial_csum(&mut f));
        assert_eq!(f, full);
        // Any other wrong value is left for the receiver to drop.
        f[t.l4 + 16] ^= 0x55;
        let bad = f.clone();
        assert!(!complete_partial_csum(&mut f));
        assert_eq!(f, bad);
    }

    #[test]
    fn a_64k_segment_is_cut_into_valid_mtu_sized_segments() {
        let payload = 65_535 - 20 - 32;
        let f = tcp_frame(payload);
        let t = parse_tcp4(&f).unwrap();
        let mss = mss_for(&t, 1500);
        assert_eq!(mss, 1448);
        let mut pool = Pool::new(256);
        let mut batch = Batch::new();
        let n = segment_tcp4(&f, &t, mss, &mut pool, &mut batch, 3);
        assert_eq!(n, payload.div_ceil(1448));
        assert_eq!(batch.len(), n);
        let mut joined = Vec::new();
        for (i, &h) in batch.handles().iter().enumerate() {
            let s = pool.data(h);
            assert!(s.len() <= ETH + 1500);
            assert!(tcp_ok(s), "segment {i} checksums");
            let st = parse_tcp4(s).unwrap();
            let seq = u32::from_be_bytes([s[st.l4 + 4], s[st.l4 + 5], s[st.l4 + 6], s[st.l4 + 7]]);
            assert_eq!(seq, 0xffff_fff0u32.wrapping_add((i * 1448) as u32));
            assert_eq!(be16(s, ETH + 4), 0xfffeu16.wrapping_add(i as u16));
            let last = i + 1 == n;
            assert_eq!(s[st.l4 + 13], if last { 0x19 } else { 0x10 }, "FIN/PSH on the last only");
            assert_eq!(&s[..ETH], &f[..ETH]);
            joined.extend_from_slice(&s[st.payload..st.end]);
        }
        assert_eq!(joined, &f[t.payload..]);
        // Too little room: nothing is pushed.
        let mut small = Pool::new(8);
        let mut b2 = Batch::new();
        assert_eq!(segment_tcp4(&f, &t, mss, &mut small, &mut b2, 0), 0);
        assert_eq!(b2.len(), 0);
        assert_eq!(small.available(), 8);
    }

    #[test]
    fn only_plain_ipv4_tcp_is_parsed() {
        let f = tcp_frame(10);
        assert!(parse_tcp4(&f).is_some());
        let mut udp = f.clone();
        udp[ETH + 9] = 17;
        assert!(parse_tcp4(&udp).is_none());
        let mut frag = f.clone();
        frag[ETH + 6] = 0x20; // MF
        assert!(parse_tcp4(&frag).is_none());
        let mut short = f.clone();
        short[ETH + 2..ETH + 4].copy_from_slice(&5000u16.to_be_bytes());
        assert!(parse_tcp4(&short).is_none());
        assert!(parse_tcp4(&f[..40]).is_none());
    }
}
