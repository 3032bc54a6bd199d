//! Test helpers (cargo feature `testutil`): classic pcap files written by hand, and tshark as
//! an independent dissector to check frames against.
//!
//! A pcap file here is the classic libpcap format: a 24-byte global header (magic
//! `0xa1b2c3d4`, version 2.4, snaplen 65535, linktype 1 = Ethernet) and a 16-byte record header
//! per frame, little endian. tshark runs with IPv4, UDP and TCP checksum validation on
//! ([`TSHARK_CHECKSUM_PREFS`]; ICMP checksums are always checked), so a wrong checksum shows up
//! as an error-level expert item.
//!
//! ```no_run
//! use fastpath_packet::testutil;
//! let frames = vec![vec![0u8; 60]];
//! let path = std::env::temp_dir().join("example.pcap");
//! testutil::write_pcap(&path, &frames).unwrap();
//! if testutil::tshark_or_skip("example") {
//!     testutil::assert_clean(&path);
//!     let rows = testutil::tshark_fields(&path, &["eth.type"]).unwrap();
//!     assert_eq!(rows[0]["eth.type"], vec!["0x0000".to_string()]);
//! }
//! ```
//!
//! Helpers panic on failure: they are for tests, never for the packet path.
#![allow(clippy::panic, clippy::expect_used)]

use std::collections::HashMap;
use std::io;
use std::path::Path;
use std::process::Command;

/// tshark options that turn on IPv4, UDP and TCP checksum validation.
pub const TSHARK_CHECKSUM_PREFS: &[&str] =
    &["-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE", "-o", "tcp.check_checksum:TRUE"];

/// Expert-info severity values tshark prints for `_ws.expert.severity` (epan/proto.h).
pub const EXPERT_ERROR: u32 = 0x0080_0000;
/// Warning severity.
pub const EXPERT_WARN: u32 = 0x0060_0000;

/// Aggregator between several values of one field in `-T fields` output (ASCII unit
/// separator: it never occurs in field values).
const AGG: char = '\u{1f}';

/// The bytes of a classic pcap file holding `frames` (timestamps 0 s, 1 µs, 2 µs, ...).
pub fn pcap_bytes(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(24 + frames.iter().map(|f| 16 + f.len()).sum::<usize>());
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes()); // magic (µs timestamps)
    out.extend_from_slice(&2u16.to_le_bytes()); // version major
    out.extend_from_slice(&4u16.to_le_bytes()); // version minor
    out.extend_from_slice(&0i32.to_le_bytes()); // thiszone
    out.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
    out.extend_from_slice(&65535u32.to_le_bytes()); // snaplen
    out.extend_from_slice(&1u32.to_le_bytes()); // linktype Ethernet
    for (i, f) in frames.iter().enumerate() {
        let len = u32::try_from(f.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&0u32.to_le_bytes()); // ts seconds
        out.extend_from_slice(&u32::try_from(i).unwrap_or(u32::MAX).to_le_bytes()); // ts µs
        out.extend_from_slice(&len.to_le_bytes()); // captured length
        out.extend_from_slice(&len.to_le_bytes()); // original length
        out.extend_from_slice(f);
    }
    out
}

/// Writes `frames` to a classic pcap file at `path`.
///
/// # Errors
/// The file could not be written.
pub fn write_pcap(path: &Path, frames: &[Vec<u8>]) -> io::Result<()> {
    std::fs::write(path, pcap_bytes(frames))
}

/// True when `tshark` runs.
pub fn tshark_available() -> bool {
    Command::new("tshark").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Decides whether a tshark-checked test runs: true when tshark is installed. When it is not,
/// panics if the `CI` environment variable is set (the check must not silently vanish in CI),
/// otherwise prints a notice naming `test` and returns false.
pub fn tshark_or_skip(test: &str) -> bool {
    if tshark_available() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("{test}: tshark is required in CI (apt-get install tshark)");
    }
    eprintln!("{test}: tshark not installed, skipping the tshark check");
    false
}

/// One row per frame: field name → its values in that frame (empty when absent).
pub type Fields = HashMap<String, Vec<String>>;

/// Runs `tshark -T fields` with checksum validation on and returns, per frame, the values of
/// `fields` (e.g. `ip.src`, `udp.dstport`, `vxlan.vni`; a field occurring several times, as in
/// tunnels, has several values, outermost first).
///
/// # Errors
/// tshark could not be run or exited with an error (message included).
pub fn tshark_fields(path: &Path, fields: &[&str]) -> io::Result<Vec<Fields>> {
    let mut cmd = Command::new("tshark");
    cmd.arg("-r").arg(path).arg("-n").args(TSHARK_CHECKSUM_PREFS);
    cmd.args(["-T", "fields", "-E", "occurrence=a", "-E"]).arg(format!("aggregator={AGG}"));
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!("tshark failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr))));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text
        .lines()
        .map(|line| {
            let mut row = Fields::new();
            for (name, val) in fields.iter().zip(line.split('\t').chain(std::iter::repeat(""))) {
                let vals = if val.is_empty() { Vec::new() } else { val.split(AGG).map(str::to_owned).collect() };
                row.insert((*name).to_owned(), vals);
            }
            row
        })
        .collect())
}

/// Fields [`problems_in`] needs; [`tshark_check`] adds them to the caller's.
const PROBLEM_FIELDS: &[&str] = &["frame.number", "_ws.malformed", "_ws.expert.severity", "_ws.expert.message"];

/// The problems in rows that hold [`PROBLEM_FIELDS`]: every expert item at `min_severity` or
/// above, and every malformed frame, as `"frame N: message"` lines.
fn problems_in(rows: &[Fields], min_severity: u32) -> Vec<String> {
    let mut problems = Vec::new();
    for r in rows {
        let n = r.get("frame.number").and_then(|v| v.first()).cloned().unwrap_or_default();
        let sev = r.get("_ws.expert.severity").cloned().unwrap_or_default();
        let msg = r.get("_ws.expert.message").cloned().unwrap_or_default();
        for (i, s) in sev.iter().enumerate() {
            if s.parse::<u32>().is_ok_and(|s| s >= min_severity) {
                let m = msg.get(i).map_or("?", String::as_str);
                problems.push(format!("frame {n}: {m}"));
            }
        }
        if r.get("_ws.malformed").is_some_and(|v| !v.is_empty()) {
            problems.push(format!("frame {n}: malformed ({})", msg.join("; ")));
        }
    }
    problems
}

/// Every problem tshark reports at `min_severity` or above ([`EXPERT_ERROR`],
/// [`EXPERT_WARN`]), or as malformed, as `"frame N: message"` lines.
///
/// # Errors
/// As [`tshark_fields`].
pub fn tshark_problems(path: &Path, min_severity: u32) -> io::Result<Vec<String>> {
    Ok(problems_in(&tshark_fields(path, PROBLEM_FIELDS)?, min_severity))
}

/// One tshark run for both checks: the requested `fields` per frame, and the error-level and
/// malformed problems (as [`tshark_problems`] with [`EXPERT_ERROR`]).
///
/// # Errors
/// As [`tshark_fields`].
pub fn tshark_check(path: &Path, fields: &[&str]) -> io::Result<(Vec<Fields>, Vec<String>)> {
    let mut all: Vec<&str> = fields.to_vec();
    all.extend(PROBLEM_FIELDS.iter().filter(|f| !fields.contains(f)));
    let rows = tshark_fields(path, &all)?;
    let problems = problems_in(&rows, EXPERT_ERROR);
    Ok((rows, problems))
}

/// Panics unless tshark, with checksum validation on, reads every frame of `path` with no
/// malformed packet and no error-level expert item (a bad checksum is one).
pub fn assert_clean(path: &Path) {
    let problems = tshark_problems(path, EXPERT_ERROR).expect("running tshark");
    assert!(problems.is_empty(), "tshark found problems in {}:\n{}", path.display(), problems.join("\n"));
}

/// Panics unless `field` of frame `frame` (0-based) has exactly the values `want`.
pub fn assert_field(rows: &[Fields], frame: usize, field: &str, want: &[&str]) {
    let got = rows.get(frame).and_then(|r| r.get(field)).cloned().unwrap_or_default();
    assert_eq!(got, want, "frame {} field {field}", frame + 1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcap_layout() {
        let b = pcap_bytes(&[vec![1, 2, 3], vec![]]);
        assert_eq!(b.len(), 24 + 16 + 3 + 16);
        assert_eq!(&b[..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
        assert_eq!(&b[20..24], &[1, 0, 0, 0], "linktype Ethernet");
        assert_eq!(&b[32..40], &[3, 0, 0, 0, 3, 0, 0, 0], "caplen and len");
        assert_eq!(&b[40..43], &[1, 2, 3]);
    }
}
