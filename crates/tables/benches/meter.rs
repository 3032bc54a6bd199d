//! Meter marking cost: one srTCM / trTCM, and 1,000 policers in a `MeterArray`.
//!
//! `cargo bench -p fastpath-tables --bench meter`.
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use fastpath_tables::meter::{Color, ColorMode, MeterArray, SrTcm, SrTcmConfig, TrTcm, TrTcmConfig};

const N: usize = 4096;

fn meters(c: &mut Criterion) {
    let sr = SrTcmConfig { cir_bytes_per_s: 125_000_000, cbs_bytes: 100_000, ebs_bytes: 100_000, mode: ColorMode::Aware };
    let tr = TrTcmConfig {
        cir_bytes_per_s: 125_000_000,
        cbs_bytes: 100_000,
        pir_bytes_per_s: 250_000_000,
        pbs_bytes: 200_000,
        mode: ColorMode::Blind,
    };
    let mut g = c.benchmark_group("meter");
    g.throughput(Throughput::Elements(N as u64));
    let mut m = SrTcm::new(sr).unwrap_or_else(|e| panic!("{e}"));
    let mut t = 0u64;
    g.bench_function("srtcm", |b| {
        b.iter(|| {
            for i in 0..N {
                t += 67;
                black_box(m.mark(t, 64 + (i as u32 & 1023), Color::Green));
            }
        })
    });
    let mut m = TrTcm::new(tr).unwrap_or_else(|e| panic!("{e}"));
    g.bench_function("trtcm", |b| {
        b.iter(|| {
            for i in 0..N {
                t += 67;
                black_box(m.mark(t, 64 + (i as u32 & 1023), Color::Green));
            }
        })
    });
    let mut arr = MeterArray::new((0..1000).map(|_| SrTcm::new(sr).unwrap_or_else(|e| panic!("{e}"))).collect());
    let idx: Vec<u32> = (0..256u32).map(|i| i.wrapping_mul(2_654_435_761) % 1000).collect();
    let lens: Vec<u32> = (0..256u32).map(|i| 64 + (i * 37) % 1400).collect();
    let mut colors = vec![Color::Green; 256];
    g.throughput(Throughput::Elements(256));
    g.bench_function("array1000_batch256", |b| {
        b.iter(|| {
            t += 20_000;
            arr.mark_batch(t, &idx, &lens, &mut colors);
            black_box(&colors);
        })
    });
    g.finish();
}

criterion_group!(benches, meters);
criterion_main!(benches);
