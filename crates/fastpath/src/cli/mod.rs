//! Subcommands and the glue they share.

pub mod bench;
pub mod bench_bng;
pub mod bng_cp;
pub mod check;
pub mod cpri;
pub mod ctl;
pub mod gen;
pub mod lab;
pub mod p4info;
pub mod run;
pub mod run_xdp;
pub mod sim;

use fastpath_packet::DropReason;
use fastpath_pipeline::Pipeline;
use std::fmt::Write;
use std::path::{Path, PathBuf};

pub use fastpath_runtime::PipeProc;

/// Compiles a spec and loads entry files into it.
pub fn load_pipeline(spec: &Path, entries: &[PathBuf]) -> Result<Pipeline, String> {
    let prog = fastpath_pipeline::compile_file(spec).map_err(|e| e.to_string())?;
    let mut pipe = prog.instantiate();
    for e in entries {
        let text = std::fs::read_to_string(e).map_err(|err| format!("{}: {err}", e.display()))?;
        let n = pipe.load_entries(&e.display().to_string(), &text).map_err(|err| err.to_string())?;
        eprintln!("loaded {n} entries from {}", e.display());
    }
    Ok(pipe)
}

/// Per-stage counters (summed over workers where there are several) as a table — `show runtime`
/// and `show drops` in one: calls, packets in and out, drops, TSC cycles per packet, then every
/// drop by `stage/reason`.
pub fn format_stats(stats: &[(String, fastpath_pipeline::StageStats)]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{:<18} {:>10} {:>12} {:>12} {:>10} {:>10}", "stage", "calls", "packets in", "packets out", "drops", "cyc/pkt");
    let mut drops = Vec::new();
    for (name, st) in stats {
        let d: u64 = st.drops.iter().sum();
        let cpp = if st.pkts_in > 0 { st.cycles as f64 / st.pkts_in as f64 } else { 0.0 };
        let _ = writeln!(s, "{name:<18} {:>10} {:>12} {:>12} {:>10} {cpp:>10.1}", st.calls, st.pkts_in, st.pkts_out, d);
        for (r, &c) in DropReason::ALL.iter().zip(st.drops.iter()) {
            if c > 0 {
                drops.push(format!("  {name}/{}: {c}", r.name()));
            }
        }
    }
    if !drops.is_empty() {
        let _ = writeln!(s, "drops by reason:");
        for d in drops {
            let _ = writeln!(s, "{d}");
        }
    }
    s.trim_end().to_string()
}

/// Sizes `sock`'s receive buffer to `bytes`: SO_RCVBUF, and past net.core.rmem_max with
/// SO_RCVBUFFORCE when the process may (CAP_NET_ADMIN); says so on stderr when it cannot.
pub fn grow_rcvbuf(sock: &std::net::UdpSocket, bytes: usize, what: &str) {
    use std::os::fd::AsRawFd;
    let r = socket2::SockRef::from(sock);
    // Linux reports twice what was set (its bookkeeping share).
    if r.set_recv_buffer_size(bytes).is_ok() && r.recv_buffer_size().is_ok_and(|n| n >= bytes) {
        return;
    }
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: a valid socket descriptor, a pointer to a c_int and its size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            std::ptr::from_ref(&v).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        eprintln!("{what}: receive buffer below {bytes} bytes (SO_RCVBUFFORCE: {})", std::io::Error::last_os_error());
    }
}
