//! Writes a demonstration report with every block kind: `cargo run -p fastpath-lab --example
//! report_demo -- /tmp/report.html`. The numbers are made up; they only exercise the layout.

use fastpath_lab::report::{Chart, Report};

fn main() -> std::io::Result<()> {
    let path = std::env::args().nth(1).unwrap_or_else(|| "report-demo.html".into());
    let sizes = [64.0, 128.0, 256.0, 512.0, 1024.0, 1280.0, 1518.0];
    let duts = [("fastpath", 1.6), ("linux-bridge-tuned", 0.85), ("testpmd-afxdp", 1.05), ("ovs-afxdp", 0.95)];
    let mut r = Report::new("fastpath lab — RFC 2544 on veth (demo data)");
    r.para("Generator ▸ DUT ▸ sink in three network namespaces joined by veth pairs; one DUT core; 0 % loss threshold; 2 s trials.")
        .pre("fastpath lab rfc2544 --dut fastpath --dut linux-bridge-tuned --trial-s 2")
        .heading("Throughput")
        .table(
            &["DUT", "frame (B)", "Mpps", "Gbps", "p99 (µs)"],
            duts.iter()
                .map(|(d, m)| vec![d.to_string(), "64".into(), format!("{m:.3}"), format!("{:.3}", m * 64.0 * 8.0 / 1e3), "210".into()])
                .collect(),
        )
        .line_chart(duts.iter().fold(
            Chart::new("Throughput vs frame size").x_label("frame size (bytes)").y_label("throughput (Mpps)").log_x().x_ticks(&sizes),
            |c, (d, m)| c.series(*d, sizes.iter().map(|&s| (s, m * (1.0 - s / 4000.0))).collect()),
        ))
        .bar_chart(duts.iter().fold(
            Chart::new("Latency at 50 % of the no-drop rate, 64 B").x_label("percentile").y_label("latency (µs)"),
            |c, (d, m)| {
                c.bars(
                    *d,
                    ["min", "p50", "p99", "p99.9", "max"]
                        .iter()
                        .enumerate()
                        .map(|(i, p)| (p.to_string(), (i as f64 + 1.0).powi(2) * 30.0 / m))
                        .collect(),
                )
            },
        ))
        .heading("TCP")
        .line_chart(
            Chart::new("iperf3 throughput over time, 4 streams")
                .x_label("time (s)")
                .y_label("throughput (Gbps)")
                .series("linux-bridge", (0..30).map(|t| (t as f64, 19.0 + (t as f64 * 0.7).sin() * 2.0)).collect())
                .series("fastpath", (0..30).map(|t| (t as f64, 23.0 + (t as f64 * 0.5).cos() * 1.5)).collect()),
        )
        .line_chart(
            Chart::new("CPU over time")
                .x_label("time (s)")
                .y_label("CPU busy (% of one core)")
                .series("DUT", (0..30).map(|t| (t as f64, 92.0 + (t as f64).sin() * 5.0)).collect())
                .series("machine", (0..30).map(|t| (t as f64, 180.0 + (t as f64 * 0.3).cos() * 12.0)).collect()),
        );
    r.write(&path)?;
    println!("wrote {path}");
    Ok(())
}
