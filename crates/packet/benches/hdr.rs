//! Header-layer micro-benchmarks: checksum speed, the parse chain a parser stage runs per
//! packet, in-place TTL rewrite, and frame emission for generators.
//!
//! Run: `cargo bench -p fastpath-packet --bench hdr` (numbers are machine-dependent; the
//! `fastpath bench` figures are the ones to quote).

use std::hint::black_box;
use std::net::{Ipv4Addr, Ipv6Addr};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use fastpath_packet::build::FrameBuilder;
use fastpath_packet::csum;
use fastpath_packet::hdr::{Eth, IpProto, Ipv4, Ipv4Mut, Ipv6, Ipv6Frag, Udp};

/// RFC 1071 §4.1 reference loop (16-bit big-endian words, 32-bit accumulator): the twin the
/// optimised `csum::sum` is measured against.
fn naive_sum(data: &[u8]) -> u16 {
    let mut acc: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for w in &mut chunks {
        acc += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [b] = chunks.remainder() {
        acc += u32::from(*b) << 8;
    }
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

fn checksums(c: &mut Criterion) {
    let mut g = c.benchmark_group("csum");
    for len in [20usize, 64, 1500] {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_function(format!("sum/{len}"), |b| b.iter(|| csum::sum(black_box(&data))));
        g.bench_function(format!("naive/{len}"), |b| b.iter(|| naive_sum(black_box(&data))));
    }
    g.finish();
}

fn parsing(c: &mut Criterion) {
    let (m1, m2) = ([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1]);
    let v4 =
        FrameBuilder::eth(m1, m2).ipv4(Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 19, 0, 1)).udp(1024, 1025).frame_len(64).build();
    let v6 = FrameBuilder::eth(m1, m2)
        .ipv6(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST)
        .ipv6_ext(IpProto::HOPOPT, &[1, 4, 0, 0, 0, 0])
        .ipv6_frag(Ipv6Frag { offset: 0, more: false, ident: 1 })
        .ipv6_ext(IpProto::DSTOPTS, &[])
        .udp(1, 2)
        .frame_len(128)
        .build();
    let mut g = c.benchmark_group("parse");
    g.throughput(Throughput::Elements(1));
    g.bench_function("eth_ipv4_udp", |b| {
        b.iter(|| {
            let f = black_box(&v4[..]);
            let e = Eth::parse(f).ok()?;
            let ip = Ipv4::parse(e.payload()).ok()?;
            let u = Udp::parse(ip.payload()).ok()?;
            Some((ip.dst(), u.dst_port()))
        })
    });
    g.bench_function("eth_ipv4_verify_checksum", |b| {
        b.iter(|| {
            let e = Eth::parse(black_box(&v4[..])).ok()?;
            Some(Ipv4::parse(e.payload()).ok()?.checksum_ok())
        })
    });
    g.bench_function("eth_ipv6_3ext_udp", |b| {
        b.iter(|| {
            let e = Eth::parse(black_box(&v6[..])).ok()?;
            let ip = Ipv6::parse(e.payload()).ok()?;
            let u = Udp::parse(ip.upper_payload()).ok()?;
            Some((ip.upper_proto(), u.dst_port()))
        })
    });
    g.finish();

    let mut g = c.benchmark_group("rewrite");
    g.throughput(Throughput::Elements(1));
    let mut buf = v4.clone();
    g.bench_function("ipv4_ttl_incremental", |b| {
        b.iter(|| {
            let mut ip = Ipv4Mut::parse(black_box(&mut buf[14..])).ok()?;
            let t = ip.ttl();
            ip.set_ttl(t.wrapping_sub(1));
            Some(ip.checksum())
        })
    });
    g.bench_function("ipv4_ttl_full_recompute", |b| {
        b.iter(|| {
            let mut ip = Ipv4Mut::parse(black_box(&mut buf[14..])).ok()?;
            let t = ip.ttl();
            ip.set_ttl(t.wrapping_sub(1));
            ip.fill_checksum();
            Some(ip.checksum())
        })
    });
    g.finish();

    let mut g = c.benchmark_group("build");
    g.throughput(Throughput::Elements(1));
    let fb = FrameBuilder::eth(m1, m2).ipv4(Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 19, 0, 1)).udp(1024, 1025).frame_len(64);
    let mut out = [0u8; 2048];
    g.bench_function("emit_eth_ipv4_udp_64", |b| b.iter(|| fb.emit(black_box(&mut out))));
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(std::time::Duration::from_secs(2)).warm_up_time(std::time::Duration::from_millis(500));
    targets = checksums, parsing
}
criterion_main!(benches);
