//! `fastpath run`: a pipeline between ports.

use super::{load_pipeline, PipeProc};
use clap::Args;
use fastpath_io::pcap::{PcapSink, PcapSource};
use fastpath_io::port::{Duplex, Port};
use fastpath_io::worker::Worker;
use fastpath_packet::Pool;
use std::path::PathBuf;

/// Arguments of `fastpath run`.
#[derive(Args)]
#[command(after_help = "\
Ports are numbered in the order given (the first --port is port 0), and actions name them by \
number (forward 1).\n\nPort kinds:\n  \
NAME=pcap:IN.pcap            read a capture (pcap or pcapng); packets sent to it are dropped\n  \
NAME=pcap:IN.pcap:OUT.pcap   read IN, write what the pipeline sends to this port into OUT\n  \
NAME=pcap::OUT.pcap          output only\n\n\
Example:\n  fastpath run pipelines/router.toml --entries testdata/routes/small.txt \\\n    \
--port p0=pcap:testdata/pcap/router-in.pcap --port p1=pcap::out.pcap --trace 3")]
pub struct RunArgs {
    /// The pipeline spec (TOML).
    spec: PathBuf,
    /// Entries file (table entries, meter settings) loaded before traffic starts.
    #[arg(long, short = 'e')]
    entries: Vec<PathBuf>,
    /// A port: NAME=KIND:ARGS (see below). Repeat for each port.
    #[arg(long = "port", short = 'p', required = true)]
    ports: Vec<String>,
    /// Trace the first N packets through every stage and print it.
    #[arg(long, default_value_t = 0)]
    trace: usize,
    /// Buffers in the packet pool.
    #[arg(long, default_value_t = 8192)]
    pool: usize,
}

fn open_port(spec: &str) -> Result<Box<dyn Port>, String> {
    let (name, rest) = spec.split_once('=').ok_or_else(|| format!("--port {spec}: expected NAME=KIND:ARGS, e.g. p0=pcap:in.pcap"))?;
    let (kind, args) = rest.split_once(':').unwrap_or((rest, ""));
    match kind {
        "pcap" => {
            let (input, output) = match args.split_once(':') {
                Some((i, o)) => (i, o),
                None => (args, ""),
            };
            if input.is_empty() && output.is_empty() {
                return Err(format!("--port {spec}: pcap needs an input file, an output file, or both (pcap:IN[:OUT], pcap::OUT)"));
            }
            let rx: Option<Box<dyn Port>> = if input.is_empty() {
                None
            } else {
                Some(Box::new(PcapSource::open(name, input).map_err(|e| format!("--port {spec}: {e}"))?))
            };
            let tx: Option<Box<dyn Port>> = if output.is_empty() {
                None
            } else {
                Some(Box::new(PcapSink::create(name, output).map_err(|e| format!("--port {spec}: {e}"))?))
            };
            Ok(Box::new(Duplex::new(name, rx, tx)))
        }
        other => Err(format!("--port {spec}: unknown port kind \"{other}\" (known: pcap)")),
    }
}

pub fn run(a: RunArgs) -> Result<(), String> {
    let mut pipe = load_pipeline(&a.spec, &a.entries)?;
    let ports = a.ports.iter().map(|p| open_port(p)).collect::<Result<Vec<_>, _>>()?;
    if a.trace > 0 {
        pipe.trace_next(a.trace);
    }
    let mut w = Worker::new(Pool::new(a.pool), ports, PipeProc(pipe));
    let end = w.run_until_exhausted();
    w.flush();
    let pipe = &mut w.processor_mut().0;
    if a.trace > 0 {
        print!("{}", pipe.take_trace());
    }
    println!("{}", super::format_stats(pipe));
    for (i, p) in w.ports().iter().enumerate() {
        let s = p.stats();
        println!("port {i} {:<8} rx {:>10} pkts  tx {:>10} pkts  tx_dropped {}", p.name(), s.rx_pkts, s.tx_pkts, s.tx_dropped);
    }
    let mut failed = false;
    for p in w.ports() {
        if let Some(e) = p.error() {
            eprintln!("error: port {}: {e}", p.name());
            failed = true;
        }
    }
    if let fastpath_io::worker::RunEnd::PoolEmpty = end {
        return Err("stopped: the packet pool ran dry (raise --pool)".into());
    }
    if failed {
        return Err("a port stopped early (see above); packets read before the damage were processed and written".into());
    }
    Ok(())
}
