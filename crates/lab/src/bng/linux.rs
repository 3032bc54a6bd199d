//! The Linux baseline gateway: the subscribers as the kernel would hold them without a BNG —
//! one /32 route and one permanent neighbour (the subscriber's MAC) per subscriber, and one
//! HTB class per subscriber at the tier's rate with a u32 filter that picks it, hashed on the
//! last octet of the destination address. Built with `ip -batch` and `tc -batch`, each timed
//! and bounded.
//!
//! ```text
//!  ns DUT: dut0 (access, 02:fa:00:00:00:01, 100.64.0.1/32)      dut1 (core, 198.18.1.1/24)
//!   ip -batch:  route add 100.64.x.y/32 dev dut0                 route add 198.18.0.e/32 dev dut1
//!               neigh add 100.64.x.y lladdr SUB-MAC nud permanent   neigh add 198.18.0.e lladdr EP-MAC
//!   tc -batch:  dut0 root htb 1: ─ class 1:(i+1) rate 100mbit ─ u32 ht 2:(ip & 0xff): ip dst /32
//! ```
//!
//! It forwards the same subscribers and endpoints untagged: this kernel has no 802.1Q/802.1ad
//! devices, so Linux is spared the per-subscriber VLAN sub-interfaces a real Linux BNG needs
//! (and the session lookup, anti-spoofing check, policer and ACL that fastpath runs). That is
//! generous to Linux. HTB class ids are 16 bits: one HTB qdisc holds at most 65,535 classes
//! (`1:1`..`1:ffff`; tc refuses `1:10000` as an invalid class ID), so setup fails above that
//! count (the error is the baseline's result). Each class's DRR quantum is one frame (1514
//! bytes), as an operator would set it (the default, rate / r2q, is 1.25 MB at 100 Mbit/s and
//! tc warns about it).

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::plan::{self, Subscriber};
use crate::topo::{ns_exec, Topology};
use crate::LabError;

/// Tier 0's rate (pipelines/vbng.toml: `[[tm.profile]] rate = "100mbit"`).
pub const TIER0_RATE: &str = "100mbit";
/// Most classes one HTB qdisc holds: class ids are 16 bits (`1:1`..`1:ffff`).
pub const MAX_HTB_CLASSES: u32 = 0xffff;
/// The core side's own address.
pub const CORE_ADDR: &str = "198.18.1.1/24";

/// How the Linux gateway's setup went.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct LinuxSetup {
    /// Seconds `ip -batch` took (routes and neighbours).
    pub routes_s: f64,
    /// Seconds `tc -batch` took (HTB classes and u32 filters), when it ran.
    pub tc_s: f64,
    /// Why setup did not complete (a command's error, or the time bound), if it did not.
    pub failed: Option<String>,
}

impl LinuxSetup {
    /// Seconds of setup in all.
    pub fn total_s(&self) -> f64 {
        self.routes_s + self.tc_s
    }
}

/// The `ip -batch` input for `n` subscribers and the 254 endpoints.
pub fn ip_batch(n: u32, access: &str, core: &str) -> String {
    let mut s = String::with_capacity(n as usize * 110);
    for e in 1..=plan::ENDPOINTS {
        let ep = plan::endpoint(e);
        s.push_str(&format!("route add {}/32 dev {core}\n", ep.ipv4));
        s.push_str(&format!("neigh add {} lladdr {} dev {core} nud permanent\n", ep.ipv4, plan::mac_text(ep.mac)));
    }
    for i in 0..n {
        let sub = Subscriber::nth(i);
        s.push_str(&format!("route add {}/32 dev {access}\n", sub.ipv4));
        s.push_str(&format!("neigh add {} lladdr {} dev {access} nud permanent\n", sub.ipv4, plan::mac_text(sub.mac)));
    }
    s
}

/// The `tc -batch` input for `n` subscribers on `access`: an HTB root, a 256-bucket u32 hash
/// table keyed on the destination address's last octet, and per subscriber a class at
/// [`TIER0_RATE`] and a filter in its bucket.
pub fn tc_batch(n: u32, access: &str) -> String {
    let mut s = String::with_capacity(n as usize * 150);
    s.push_str(&format!("qdisc add dev {access} root handle 1: htb\n"));
    s.push_str(&format!("filter add dev {access} parent 1: prio 1 handle 2: protocol ip u32 divisor 256\n"));
    s.push_str(&format!(
        "filter add dev {access} parent 1: prio 1 protocol ip u32 ht 800:: match ip dst 100.64.0.0/10 hashkey mask 0x000000ff at 16 link 2:\n"
    ));
    for i in 0..n {
        let sub = Subscriber::nth(i);
        let class = i + 1;
        s.push_str(&format!("class add dev {access} parent 1: classid 1:{class:x} htb rate {TIER0_RATE} ceil {TIER0_RATE} quantum 1514\n"));
        s.push_str(&format!(
            "filter add dev {access} parent 1: prio 1 protocol ip u32 ht 2:{:x}: match ip dst {}/32 flowid 1:{class:x}\n",
            sub.ipv4.octets()[3],
            sub.ipv4
        ));
    }
    s
}

/// Runs `prog -n ns -batch file` with a time bound; kills it by PID when the bound passes.
/// Returns the seconds it took, or why it failed.
fn batch(prog: &str, ns: &str, file: &Path, bound: Duration) -> Result<f64, String> {
    let mut c = Command::new(prog);
    c.args(["-n", ns, "-batch"]).arg(file);
    run_bounded(c, bound)
}

/// Runs `cmd` with a time bound; kills it by PID when the bound passes. Returns the seconds
/// it took, or why it failed (the first lines of its standard error).
pub(crate) fn run_bounded(mut cmd: Command, bound: Duration) -> Result<f64, String> {
    let prog = cmd.get_program().to_string_lossy().into_owned();
    let t0 = Instant::now();
    let mut c = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().map_err(|e| format!("{prog}: {e}"))?;
    loop {
        match c.try_wait() {
            Ok(Some(st)) => {
                let secs = t0.elapsed().as_secs_f64();
                if st.success() {
                    return Ok(secs);
                }
                let mut err = String::new();
                if let Some(mut e) = c.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                let first: Vec<&str> = err.lines().take(3).collect();
                return Err(format!("{prog} failed after {secs:.1} s: {}", first.join(" / ")));
            }
            Ok(None) if t0.elapsed() > bound => {
                crate::topo::stop_child(&mut c, Duration::from_secs(1));
                return Err(format!("{prog} did not finish within the {} s bound", bound.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("{prog}: {e}")),
        }
    }
}

/// Makes `t`'s DUT namespace a Linux gateway for `n` subscribers (module doc), with each batch
/// bounded by `bound`; batch files go to `dir`. A setup that fails or overruns is reported in
/// [`LinuxSetup::failed`], not as an error.
///
/// # Errors
/// [`LabError`] when the basic configuration (sysctls, addresses) or a file write fails.
pub fn setup(t: &Topology, n: u32, bound: Duration, dir: &Path) -> Result<LinuxSetup, LabError> {
    plan::check_count(n)?;
    if n > MAX_HTB_CLASSES {
        // tc would add 65,535 classes and filters (minutes) and then refuse `1:10000`.
        return Ok(LinuxSetup {
            failed: Some(format!("{n} HTB classes: class ids are 16 bits, one HTB qdisc holds at most {MAX_HTB_CLASSES}")),
            ..LinuxSetup::default()
        });
    }
    let ns = t.dut_ns.as_str();
    for k in ["net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"] {
        ns_exec(ns, &["sysctl", "-qw", k])?;
    }
    let gw = plan::mac_text(plan::GATEWAY_MAC);
    for ifn in [t.dut_in, t.dut_out] {
        ns_exec(ns, &["sysctl", "-qw", &format!("net.ipv4.conf.{ifn}.rp_filter=0")])?;
        ns_exec(ns, &["ip", "link", "set", ifn, "down"])?;
        ns_exec(ns, &["ip", "link", "set", ifn, "address", &gw])?;
        ns_exec(ns, &["ip", "link", "set", ifn, "up"])?;
    }
    ns_exec(ns, &["ip", "addr", "add", &format!("{}/32", plan::GATEWAY_IP), "dev", t.dut_in])?;
    ns_exec(ns, &["ip", "addr", "add", CORE_ADDR, "dev", t.dut_out])?;
    let write = |name: &str, text: String| -> Result<std::path::PathBuf, LabError> {
        let p = dir.join(name);
        std::fs::File::create(&p)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .map_err(|e| LabError::Io(format!("{}: {e}", p.display())))?;
        Ok(p)
    };
    let ipf = write(&format!("linux-ip-{n}.batch"), ip_batch(n, t.dut_in, t.dut_out))?;
    let tcf = write(&format!("linux-tc-{n}.batch"), tc_batch(n, t.dut_in))?;
    let mut out = LinuxSetup::default();
    match batch("ip", ns, &ipf, bound) {
        Ok(s) => out.routes_s = s,
        Err(e) => {
            out.failed = Some(e);
            return Ok(out);
        }
    }
    match batch("tc", ns, &tcf, bound) {
        Ok(s) => out.tc_s = s,
        Err(e) => out.failed = Some(e),
    }
    let _ = std::fs::remove_file(ipf);
    let _ = std::fs::remove_file(tcf);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_name_every_subscriber_once() {
        let ip = ip_batch(3, "dut0", "dut1");
        assert_eq!(ip.lines().count(), 2 * 254 + 2 * 3);
        assert!(ip.contains("route add 100.64.1.2/32 dev dut0\n"));
        assert!(ip.contains("neigh add 100.64.1.2 lladdr 02:5b:00:00:00:02 dev dut0 nud permanent\n"));
        assert!(ip.contains("neigh add 198.18.0.254 lladdr 02:c0:00:00:00:fe dev dut1 nud permanent\n"));
        let tc = tc_batch(300, "dut0");
        assert_eq!(tc.lines().count(), 3 + 2 * 300);
        // Subscriber 299 is 100.64.2.43: bucket 0x2b, class 300 = 0x12c.
        assert!(tc.contains("class add dev dut0 parent 1: classid 1:12c htb rate 100mbit ceil 100mbit quantum 1514\n"));
        assert!(tc.contains("u32 ht 2:2b: match ip dst 100.64.2.43/32 flowid 1:12c\n"));
    }
}
