//! Mutation fuzzing of the DHCP decoder and the server: encoded seed messages are mutated (bit
//! flips, byte sets, inserts, deletes, truncations, option splices) and every result is decoded
//! and, when it decodes, handed to a server and a relay and re-encoded.
//!
//! Properties: nothing panics; a decoded message re-encodes to bytes that decode to the same
//! message and re-encode to the same bytes (encoding is stable); every error offset lies inside
//! the input.
//!
//! `FUZZ_ITERS` sets the number of mutated inputs (default 1,000,000, about a second in the test
//! profile); `FUZZ_SEED` replays a run. The seed is printed so a failure can be replayed.

use std::net::Ipv4Addr;

use fastpath_bng::dhcp::relay::{Relay, RelayConfig};
use fastpath_bng::dhcp::server::{Identity, Outcome, PoolConfig, ServerConfig};
use fastpath_bng::dhcp::wire::{DhcpRepr, MessageType, Op, FLAG_BROADCAST};

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn seeds() -> Vec<Vec<u8>> {
    let id = Identity { port: 2, svlan: 100, cvlan: 7, mac: [2, 0, 0, 0, 0, 9] };
    let mut out = Vec::new();
    for (t, tweak) in [
        (MessageType::DISCOVER, 0),
        (MessageType::REQUEST, 1),
        (MessageType::REQUEST, 2),
        (MessageType::RELEASE, 3),
        (MessageType::DECLINE, 4),
        (MessageType::INFORM, 5),
        (MessageType::OFFER, 6),
        (MessageType::ACK, 7),
    ] {
        let mut m = DhcpRepr::empty(if tweak >= 6 { Op::BOOTREPLY } else { Op::BOOTREQUEST });
        m.xid = 0x0102_0304 + tweak;
        m.chaddr[..6].copy_from_slice(&id.mac);
        m.flags = if tweak % 2 == 0 { FLAG_BROADCAST } else { 0 };
        m.options.message_type = Some(t);
        m.options.client_id = Some(vec![1, 2, 0, 0, 0, 0, 9]);
        m.options.parameter_list = Some(vec![1, 3, 6, 12, 15, 28, 42, 51, 54, 58, 59]);
        m.options.host_name = Some(b"cpe-7".to_vec());
        m.options.unknown = vec![(57, vec![2, 64]), (60, b"udhcp 1.35.0".to_vec())];
        match tweak {
            1 | 4 => {
                m.options.server_id = Some(Ipv4Addr::new(198, 18, 0, 1));
                m.options.requested_ip = Some(Ipv4Addr::new(198, 18, 0, 10));
            }
            2 | 3 | 5 => m.ciaddr = Ipv4Addr::new(198, 18, 0, 10),
            6 | 7 => {
                m.yiaddr = Ipv4Addr::new(198, 18, 0, 10);
                m.options.lease_time_s = Some(3600);
                m.options.renewal_time_s = Some(1800);
                m.options.rebinding_time_s = Some(3150);
                m.options.subnet_mask = Some(Ipv4Addr::new(255, 255, 255, 0));
                m.options.routers = vec![Ipv4Addr::new(198, 18, 0, 1)];
                m.options.dns = vec![Ipv4Addr::new(198, 18, 0, 2), Ipv4Addr::new(198, 18, 0, 3)];
            }
            _ => {}
        }
        m.options.relay_agent_info = Some(id.relay_agent_info());
        out.push(m.to_bytes());
    }
    out
}

fn mutate(rng: &mut Rng, seed: &[u8], all: &[Vec<u8>]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        // Mutations aim at the options (from byte 240) three times in four: that is where the
        // decoder's branches are.
        let pos = |rng: &mut Rng, len: usize| {
            if len > 240 && rng.below(4) != 0 {
                240 + rng.below(len - 240)
            } else {
                rng.below(len)
            }
        };
        match rng.below(7) {
            0 if !v.is_empty() => {
                let i = pos(rng, v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 if !v.is_empty() => {
                let i = pos(rng, v.len());
                // Interesting bytes: option codes we decode, lengths at the edges.
                const BYTES: [u8; 12] = [0, 1, 2, 3, 4, 52, 53, 54, 82, 127, 254, 255];
                v[i] = if rng.below(2) == 0 { BYTES[rng.below(BYTES.len())] } else { rng.next() as u8 };
            }
            2 => {
                let i = pos(rng, v.len() + 1).min(v.len());
                let n = 1 + rng.below(8);
                for _ in 0..n {
                    v.insert(i, rng.next() as u8);
                }
            }
            3 if !v.is_empty() => {
                let i = pos(rng, v.len());
                let n = (1 + rng.below(16)).min(v.len() - i);
                v.drain(i..i + n);
            }
            4 => {
                let n = rng.below(v.len() + 1);
                v.truncate(n);
            }
            5 => {
                // Splice the options of another seed in.
                let other = &all[rng.below(all.len())];
                if other.len() > 241 && v.len() > 240 {
                    let a = 240 + rng.below(other.len() - 240);
                    let b = a + rng.below(other.len() - a);
                    let at = 240 + rng.below(v.len() - 240);
                    let tail = v.split_off(at);
                    v.extend_from_slice(&other[a..b]);
                    v.extend_from_slice(&tail);
                }
            }
            _ => {
                // An option with a random code and length at a random place.
                let at = pos(rng, v.len() + 1).min(v.len());
                let len = rng.below(12);
                let mut opt = vec![rng.next() as u8, len as u8];
                opt.extend((0..len).map(|_| rng.next() as u8));
                let tail = v.split_off(at);
                v.extend_from_slice(&opt);
                v.extend_from_slice(&tail);
            }
        }
    }
    v
}

#[test]
fn mutated_messages_never_panic_and_reencode_stably() {
    let iters: u64 = std::env::var("FUZZ_ITERS").ok().and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let seed: u64 = std::env::var("FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_d4c9);
    eprintln!("dhcp fuzz: FUZZ_SEED={seed} FUZZ_ITERS={iters}");
    let mut rng = Rng(seed | 1);
    let all = seeds();
    for s in &all {
        assert!(DhcpRepr::parse(s).is_ok(), "a seed must decode");
    }
    let mut server = ServerConfig {
        server_id: Ipv4Addr::new(198, 18, 0, 1),
        pools: vec![PoolConfig {
            name: "p".into(),
            svlans: vec![],
            first: Ipv4Addr::new(198, 18, 0, 10),
            last: Ipv4Addr::new(198, 18, 0, 20),
            mask: Ipv4Addr::new(255, 255, 255, 0),
            gateway: Ipv4Addr::new(198, 18, 0, 1),
            dns: vec![],
            lease_time_s: 60,
        }],
        offer_hold_s: 5,
        decline_quarantine_s: 30,
    }
    .build()
    .unwrap();
    // The relay's giaddr is the seeds' server address, so mutated replies reach its matching code.
    let mut relay =
        Relay::new(RelayConfig { giaddr: Ipv4Addr::new(198, 18, 0, 1), servers: vec![Ipv4Addr::new(198, 19, 0, 2)], max_hops: 4 });
    let (mut ok, mut err, mut replies) = (0u64, 0u64, 0u64);
    for i in 0..iters {
        let base = &all[rng.below(all.len())];
        let input = mutate(&mut rng, base, &all);
        match DhcpRepr::parse(&input) {
            Ok(m) => {
                ok += 1;
                let once = m.to_bytes();
                let again = DhcpRepr::parse(&once)
                    .unwrap_or_else(|e| panic!("iteration {i} (seed {seed}): our own encoding fails to decode: {e}; input {input:02x?}"));
                assert_eq!(again, m, "iteration {i} (seed {seed}): decode(encode(m)) != m; input {input:02x?}");
                assert_eq!(again.to_bytes(), once, "iteration {i} (seed {seed}): encoding not stable");
                // The server takes whatever decodes, on a clock that moves so leases expire.
                let now = i / 100;
                let id = Identity { port: 1, svlan: 0, cvlan: (i % 7) as u16, mac: m.mac() };
                if let Outcome::Reply(r) = server.handle(&m, id, now) {
                    replies += 1;
                    let bytes = r.msg.to_bytes();
                    assert_eq!(DhcpRepr::parse(&bytes).unwrap(), r.msg, "iteration {i}: a reply must decode");
                }
                // And the relay, from both sides; what it sends must decode too.
                if let Ok(fwd) = relay.from_client(&m, id, now) {
                    assert_eq!(DhcpRepr::parse(&fwd.to_bytes()).unwrap(), fwd, "iteration {i}: a relayed request must decode");
                }
                let mut from_server = m.clone();
                from_server.giaddr = Ipv4Addr::new(198, 18, 0, 1);
                if let Ok((_, r)) = relay.from_server(&from_server, now) {
                    assert_eq!(DhcpRepr::parse(&r.msg.to_bytes()).unwrap(), r.msg, "iteration {i}: a relayed reply must decode");
                }
                if i % 1000 == 0 {
                    server.expire(now);
                    server.drain_events();
                    relay.expire(now);
                    relay.drain_events();
                }
            }
            Err(e) => {
                err += 1;
                assert!(e.offset <= input.len(), "iteration {i} (seed {seed}): offset {} past {} bytes", e.offset, input.len());
            }
        }
    }
    eprintln!("dhcp fuzz: {ok} decoded, {err} refused, {replies} replies");
    // The mutator must reach both sides of the decoder, or it tests nothing.
    assert!(ok > iters / 20 && err > iters / 20, "{ok} decoded, {err} refused");
}
