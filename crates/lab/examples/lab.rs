//! A minimal command line over the lab runners, until `fastpath lab` wires them:
//!
//! ```text
//! cargo run --release -p fastpath-lab --example lab -- rfc2544 --dut linux-bridge --dut testpmd-afxdp \
//!     --sizes 64,1518 --flows 1 --trial-s 2 --loss 0.005 --json out.jsonl --html out.html
//! cargo run --release -p fastpath-lab --example lab -- tcp --dut linux-bridge --streams 1,4 --seconds 10
//! cargo run --release -p fastpath-lab --example lab -- gen --sizes 64,1518 --seconds 2
//! ```

use fastpath_lab::dut::{DutConfig, DutKind};
use fastpath_lab::gen::{self, GenConfig, Sizes};
use fastpath_lab::tests::rfc2544::{self, Rfc2544Config};
use fastpath_lab::tests::tcp::{self, TcpConfig, TcpTool};
use fastpath_lab::{topo, LabError};

fn list<T: std::str::FromStr>(s: &str) -> Vec<T> {
    s.split(',').filter_map(|x| x.trim().parse().ok()).collect()
}

fn main() -> Result<(), LabError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let test = args.first().cloned().unwrap_or_default();
    let mut duts = Vec::new();
    let (mut sizes, mut flows, mut streams) = (vec![64u16], vec![1u32], vec![1u32, 4]);
    let (mut trial_s, mut loss, mut seconds, mut max_trials) = (2.0f64, 0.0f64, 10u32, 10u32);
    let (mut json, mut html, mut fastpath_cmd) = (None, None, None);
    let mut tools = vec![TcpTool::Iperf3];
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        let mut v = || it.next().cloned().unwrap_or_default();
        match a.as_str() {
            "--dut" => duts.push(DutKind::parse(&v())?),
            "--sizes" => sizes = list(&v()),
            "--flows" => flows = list(&v()),
            "--streams" => streams = list(&v()),
            "--trial-s" => trial_s = v().parse().unwrap_or(2.0),
            "--max-trials" => max_trials = v().parse().unwrap_or(10),
            "--loss" => loss = v().parse().unwrap_or(0.0),
            "--seconds" => seconds = v().parse().unwrap_or(10),
            "--json" => json = Some(v()),
            "--html" => html = Some(v()),
            "--iperf2" => tools.push(TcpTool::Iperf2),
            "--fastpath-cmd" => fastpath_cmd = Some(v().split_whitespace().map(String::from).collect::<Vec<_>>()),
            x => return Err(LabError::Config(format!("unknown argument {x}"))),
        }
    }
    topo::install_ctrlc()?;
    let duts: Vec<DutConfig> = duts
        .into_iter()
        .map(|k| {
            let mut c = DutConfig::new(k);
            if let Some(cmd) = &fastpath_cmd {
                c.fastpath_cmd = cmd.clone();
            }
            c
        })
        .collect();
    let command = format!("lab {}", args.join(" "));
    let mut report = fastpath_lab::tests::report("fastpath lab", &command);
    let mut progress = |l: &str| eprintln!("{l}");
    let lines = match test.as_str() {
        "rfc2544" => {
            let cfg =
                Rfc2544Config { duts, frame_sizes: sizes, flows, loss_threshold: loss, trial_s, max_trials, ..Rfc2544Config::default() };
            let r = rfc2544::run(&cfg, &mut progress)?;
            r.add_to(&mut report);
            r.json_lines()
        }
        "tcp" => {
            let cfg = TcpConfig { duts, streams, duration_s: seconds, tools, ..TcpConfig::default() };
            let r = tcp::run(&cfg, &mut progress)?;
            r.add_to(&mut report);
            r.json_lines()
        }
        "gen" => {
            let cfg = GenConfig { sizes: Sizes::Sweep(sizes), flows: flows[0], duration_s: trial_s, ..GenConfig::default() };
            let r = gen::run(&cfg, &mut progress)?;
            r.trials.iter().filter_map(|t| serde_json::to_string(t).ok()).map(|s| s + "\n").collect()
        }
        _ => return Err(LabError::Config("usage: lab rfc2544|tcp|gen [--dut NAME]... (see the file's doc)".into())),
    };
    print!("{lines}");
    if let Some(p) = json {
        std::fs::write(p, &lines)?;
    }
    if let Some(p) = html {
        report.write(p)?;
    }
    Ok(())
}
