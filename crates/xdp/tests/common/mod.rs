//! What the datapath's integration tests share (each test binary uses a part of it).
#![allow(dead_code)]

use fastpath_io::sys::is_root;

/// True when the test may run (root: it loads programs and makes namespaces); off root it
/// prints why and skips, except under CI, which runs as root and must not skip.
pub fn root_or_skip() -> bool {
    if is_root() {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "CI runs these tests as root");
    eprintln!("not root: skipped");
    false
}

/// Connection tracking with window checks on plain IPv4/TCP: an invalid segment is dropped and
/// counted as `conntrack_invalid`, everything else goes to port 1.
pub const CONNTRACK_SPEC: &str = r#"
name = "ct"
[parser]
headers = ["eth", "ipv4", "tcp"]

[[conntrack]]
name = "flows"
size = 65536
window_check = true

[control]
ingress = '''
conntrack flows
if ct.invalid:
    drop conntrack_invalid
elif ct.new:
    ct_commit flows 1
forward 1
'''
"#;

pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const ACK: u8 = 0x10;

/// One TCP segment of a frame built by [`tcp_frame`].
#[derive(Clone, Copy, Debug)]
pub struct Seg {
    pub from_client: bool,
    pub flags: u8,
    pub seq: u32,
    pub ack: u32,
    /// The window field, as on the wire.
    pub win: u16,
    /// A window-scale option, after Linux's other SYN options (MSS, SACK permitted,
    /// timestamps, NOP: 20 bytes of options in all).
    pub wscale: Option<u8>,
    pub payload: usize,
}

/// An Ethernet + IPv4 + TCP frame between 10.0.0.1 (the client) and 10.0.0.2 on `(client
/// port, server port)`.
pub fn tcp_frame((client, server): (u16, u16), s: Seg) -> Vec<u8> {
    let (c, v) = ([10, 0, 0, 1], [10, 0, 0, 2]);
    let (src, dst, sport, dport) = if s.from_client { (c, v, client, server) } else { (v, c, server, client) };
    let opts: Vec<u8> = s.wscale.map_or(Vec::new(), |ws| vec![2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, ws]);
    let tcp_len = 20 + opts.len();
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 6, 0, 0];
    ip[2..4].copy_from_slice(&((20 + tcp_len + s.payload) as u16).to_be_bytes());
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    f.extend(ip);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&s.seq.to_be_bytes());
    f.extend_from_slice(&s.ack.to_be_bytes());
    f.push(((tcp_len / 4) << 4) as u8);
    f.push(s.flags);
    f.extend_from_slice(&s.win.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0]);
    f.extend(opts);
    f.resize(f.len() + s.payload, 0xab);
    f
}
