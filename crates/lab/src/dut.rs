//! Devices under test, started inside the topology's DUT namespace between `dut0` and `dut1`.
//!
//! | name | what runs | ready when |
//! |---|---|---|
//! | `linux-bridge` | kernel bridge `br0`, defaults (receive work runs in the sender's softirq) | both ports forwarding |
//! | `linux-bridge-tuned` | the same, threaded NAPI on both ports with the NAPI threads pinned to the DUT core, bridge netfilter calls off | as above |
//! | `testpmd-afxdp` | `dpdk-testpmd --no-huge` io-forward between two `net_af_xdp` vdevs | "Press enter to exit" printed |
//! | `testpmd-afpacket` | the same on `net_af_packet` vdevs (qdisc bypass) | as above |
//! | `ovs-afxdp` | Open vSwitch userspace datapath (`datapath_type=netdev`) with `type=afxdp` ports, its own ovsdb in a temp dir | both ports have an OpenFlow port number and no error |
//! | `fastpath` | a configurable command line (`{in}`/`{out}` replaced by the interface names): l2fwd on AF_XDP ports | an XDP program is attached to `dut0`, or 2 s alive |
//! | `fastpath-xdp` | the same command line with `xdp:` ports: l2fwd compiled to an XDP program that forwards in the kernel's receive path | as above |
//!
//! A DUT forwards between the port pairs of a [`DutSite`]: one pair (`dut0` ▸ `dut1`) in the
//! lab's [`Topology`], or several (the TCP test's `--pairs N`): the bridges get one bridge per
//! pair (`br0`, `br1`, …), OVS one learning bridge with every port, testpmd its default paired
//! port topology (0 ↔ 1, 2 ↔ 3, …), and fastpath one `--port` per interface (`p0`, `p1`, …) with
//! the l2fwd `port_pair` entries of the extra pairs in a second `--entries` file.
//!
//! Processes are started with `ip netns exec` (which execs the program, so the child's PID is the
//! program's), stopped with SIGTERM then SIGKILL by that PID, and a DUT whose program is not
//! installed fails with [`LabError::Unavailable`] naming the setup script. Stopping runs on drop.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::topo::{self, ns_exec, run_cmd, thread_napi, Topology};
use crate::LabError;

/// The kinds of DUT the lab can start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DutKind {
    /// fastpath itself, on AF_XDP ports (user-space workers).
    Fastpath,
    /// fastpath's XDP datapath: the pipeline compiled to eBPF, run in the ports' receive path.
    FastpathXdp,
    /// The same eBPF datapath at the tc hook (tcx ingress, `--mode tc`): each skb, a 64 KB GSO
    /// segment included, forwarded whole.
    FastpathTc,
    /// Linux bridge, untuned.
    LinuxBridge,
    /// Linux bridge with threaded NAPI pinned to the DUT core and netfilter calls off.
    LinuxBridgeTuned,
    /// DPDK testpmd io-forward on AF_XDP vdevs.
    TestpmdAfXdp,
    /// DPDK testpmd io-forward on AF_PACKET vdevs.
    TestpmdAfPacket,
    /// Open vSwitch userspace datapath on AF_XDP ports.
    OvsAfXdp,
}

impl DutKind {
    /// Every kind, in report order.
    pub const ALL: [DutKind; 8] = [
        DutKind::Fastpath,
        DutKind::FastpathXdp,
        DutKind::FastpathTc,
        DutKind::LinuxBridge,
        DutKind::LinuxBridgeTuned,
        DutKind::TestpmdAfXdp,
        DutKind::TestpmdAfPacket,
        DutKind::OvsAfXdp,
    ];

    /// The name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            DutKind::Fastpath => "fastpath",
            DutKind::FastpathXdp => "fastpath-xdp",
            DutKind::FastpathTc => "fastpath-tc",
            DutKind::LinuxBridge => "linux-bridge",
            DutKind::LinuxBridgeTuned => "linux-bridge-tuned",
            DutKind::TestpmdAfXdp => "testpmd-afxdp",
            DutKind::TestpmdAfPacket => "testpmd-afpacket",
            DutKind::OvsAfXdp => "ovs-afxdp",
        }
    }

    /// The `--port` arguments of a fastpath DUT of this kind (`{in}`/`{out}` for the interfaces).
    pub fn fastpath_ports(self) -> [&'static str; 2] {
        match self {
            DutKind::FastpathXdp | DutKind::FastpathTc => ["p0=xdp:{in}", "p1=xdp:{out}"],
            _ => ["p0=afxdp:{in}", "p1=afxdp:{out}"],
        }
    }

    /// The `--mode` a fastpath DUT of this kind runs with on the lab's veths, unless told
    /// otherwise. `fastpath-xdp`: `skb`, because the senders hand the DUT skbs (the probes, the
    /// kernel stack) and generic XDP runs on the skb as it is, where native XDP on veth copies
    /// each into a page first (3 runs each, 64 B: p50 2.2 / 2.0 µs at 0.02 / 0.25 Mpps in skb
    /// mode against 3.1 / 2.7 in native mode; docs/xdp.md). `fastpath-tc`: `tc`.
    pub fn fastpath_mode(self) -> Option<&'static str> {
        match self {
            DutKind::FastpathXdp => Some("skb"),
            DutKind::FastpathTc => Some("tc"),
            _ => None,
        }
    }

    /// True for the DUTs that are fastpath (any datapath).
    pub fn is_fastpath(self) -> bool {
        matches!(self, DutKind::Fastpath | DutKind::FastpathXdp | DutKind::FastpathTc)
    }

    /// Parses a name; `testpmd` means `testpmd-afxdp` and `ovs` means `ovs-afxdp`.
    ///
    /// # Errors
    /// [`LabError::Config`] listing the valid names.
    pub fn parse(s: &str) -> Result<DutKind, LabError> {
        let s = match s {
            "testpmd" => "testpmd-afxdp",
            "ovs" => "ovs-afxdp",
            "bridge" => "linux-bridge",
            x => x,
        };
        DutKind::ALL.into_iter().find(|k| k.name() == s).ok_or_else(|| {
            let names: Vec<&str> = DutKind::ALL.iter().map(|k| k.name()).collect();
            LabError::Config(format!("unknown DUT \"{s}\" (one of: {})", names.join(", ")))
        })
    }
}

/// How to start a DUT.
#[derive(Clone, Debug)]
pub struct DutConfig {
    /// Which DUT.
    pub kind: DutKind,
    /// The CPU the DUT's forwarding runs on (testpmd's forwarding lcore, NAPI threads).
    pub core: usize,
    /// Command line of the `fastpath` and `fastpath-xdp` DUTs; `{in}` and `{out}` become the
    /// DUT's interfaces.
    pub fastpath_cmd: Vec<String>,
    /// How long to wait for the DUT to become ready.
    pub ready_timeout: Duration,
    /// Nice value given to every thread of the DUT once it is ready (its processes' threads,
    /// or the tuned bridge's NAPI threads; the untuned bridge runs in the softirq of the
    /// generator's thread, which the lab gives the same value). Default [`topo::LAB_NICE`];
    /// `None` leaves them at 0.
    pub nice: Option<i32>,
    /// The name its results carry, when it is not the kind's (several configurations of one
    /// kind in one run: `switch-acl/24`).
    pub label: Option<String>,
}

impl DutConfig {
    /// Defaults for `kind`: core 1, nice [`topo::LAB_NICE`], the l2fwd pipeline on AF_XDP ports
    /// for fastpath (on `xdp:` ports in [`DutKind::fastpath_mode`] for fastpath-xdp).
    pub fn new(kind: DutKind) -> DutConfig {
        let ports = kind.fastpath_ports();
        let mut cmd = vec!["fastpath", "run", "pipelines/l2fwd.toml", "--port", ports[0], "--port", ports[1]];
        if let Some(m) = kind.fastpath_mode() {
            cmd.extend(["--mode", m]);
        }
        DutConfig {
            kind,
            core: 1,
            fastpath_cmd: cmd.iter().map(|s| (*s).to_owned()).collect(),
            ready_timeout: Duration::from_secs(20),
            nice: Some(topo::LAB_NICE),
            label: None,
        }
    }

    /// The name its results carry: the label, else the kind's name.
    pub fn name(&self) -> &str {
        self.label.as_deref().unwrap_or(self.kind.name())
    }
}

/// Where a DUT runs: its namespace and the port pairs it forwards between (what enters the
/// first interface of a pair leaves by the second, and back).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DutSite {
    /// The DUT's network namespace.
    pub ns: String,
    /// (in, out) interface pairs, in port order: pair `i` is ports `2i` and `2i + 1`.
    pub pairs: Vec<(String, String)>,
}

impl DutSite {
    /// The one pair (`dut_in`, `dut_out`) of the lab's topology.
    pub fn of(t: &Topology) -> DutSite {
        DutSite { ns: t.dut_ns.clone(), pairs: vec![(t.dut_in.to_owned(), t.dut_out.to_owned())] }
    }

    /// Every interface, in port order.
    pub fn ports(&self) -> Vec<&str> {
        self.pairs.iter().flat_map(|(a, b)| [a.as_str(), b.as_str()]).collect()
    }
}

/// The `fastpath run` command of a multi-pair site: `template` (one pair, `{in}`/`{out}`) with
/// the first pair's interfaces put in, then a `--port` for each further interface (`p2`, `p3`,
/// … of the template's port kind) and `--entries extra_entries`, where the caller writes
/// [`extra_pair_entries`]. One pair: the template with its placeholders replaced.
///
/// # Errors
/// [`LabError::Config`] when the site has several pairs and the template has no `…={in}` port
/// to take the port kind from.
pub fn fastpath_argv(template: &[String], site: &DutSite, extra_entries: &Path) -> Result<Vec<String>, LabError> {
    let (a0, b0) = site.pairs.first().map(|(a, b)| (a.as_str(), b.as_str())).unwrap_or(("", ""));
    let mut argv: Vec<String> = template.iter().map(|a| a.replace("{in}", a0).replace("{out}", b0)).collect();
    if site.pairs.len() > 1 {
        // "p0=afxdp:{in}" -> "afxdp:"
        let kind = template.iter().find_map(|a| a.split_once('=').and_then(|(_, v)| v.strip_suffix("{in}"))).ok_or_else(|| {
            LabError::Config(format!("{} pairs need a `NAME=KIND:{{in}}` port in the fastpath command", site.pairs.len()))
        })?;
        for (i, (a, b)) in site.pairs.iter().enumerate().skip(1) {
            argv.extend(["--port".into(), format!("p{}={kind}{a}", 2 * i), "--port".into(), format!("p{}={kind}{b}", 2 * i + 1)]);
        }
        argv.extend(["--entries".into(), extra_entries.to_string_lossy().into_owned()]);
    }
    Ok(argv)
}

/// The l2fwd `port_pair` entries of pairs 1.. of `pairs` (pair 0's, ports 0 and 1, are the lab's
/// usual entries file): port `2i` forwards to `2i + 1` and back.
pub fn extra_pair_entries(pairs: usize) -> String {
    (1..pairs)
        .map(|i| {
            format!("table port_pair add {} => forward({})\ntable port_pair add {} => forward({})\n", 2 * i, 2 * i + 1, 2 * i + 1, 2 * i)
        })
        .collect()
}

/// A running DUT. Stopped (processes killed by PID, temp files removed) on drop.
#[derive(Debug)]
pub struct Dut {
    kind: DutKind,
    ns: String,
    children: Vec<(String, Child)>,
    tmp: Option<PathBuf>,
    napi_pids: Vec<u32>,
    bridges: Vec<String>,
}

fn have(prog: &str) -> bool {
    std::env::var_os("PATH").map(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file())).unwrap_or(false)
        || Path::new(prog).is_file()
}

fn need(kind: DutKind, prog: &str) -> Result<(), LabError> {
    if have(prog) {
        Ok(())
    } else {
        Err(LabError::Unavailable {
            dut: kind.name().to_owned(),
            why: format!("`{prog}` is not installed (run scripts/setup-lab.sh as root)"),
        })
    }
}

fn tmp_dir(tag: &str) -> Result<PathBuf, LabError> {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("fp-{tag}-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

/// Waits until `ok()` or the timeout; `what` names the condition in the error.
fn wait_for(kind: DutKind, timeout: Duration, what: &str, mut ok: impl FnMut() -> Result<bool, LabError>) -> Result<(), LabError> {
    let t0 = Instant::now();
    loop {
        if ok()? {
            return Ok(());
        }
        if t0.elapsed() > timeout {
            return Err(LabError::Io(format!("{}: not ready after {:?}: {what}", kind.name(), timeout)));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Dut {
    /// Starts the DUT in `t`'s DUT namespace and waits until it forwards. Reserves the DUT's
    /// core ([`topo::reserve_dut_core`]) until it stops, so the lab's traffic threads and the
    /// sink's receive work run on the other CPUs.
    ///
    /// # Errors
    /// [`LabError::Unavailable`] when its program is not installed; [`LabError::Cmd`] or
    /// [`LabError::Io`] when it fails to start or to become ready (its log is in the message).
    pub fn start(t: &Topology, cfg: &DutConfig) -> Result<Dut, LabError> {
        Dut::start_at(&DutSite::of(t), cfg)
    }

    /// [`Dut::start`] on any site: in `site.ns`, forwarding between each of its port pairs.
    ///
    /// # Errors
    /// As [`Dut::start`]; [`LabError::Config`] for a site without pairs.
    pub fn start_at(site: &DutSite, cfg: &DutConfig) -> Result<Dut, LabError> {
        if site.pairs.is_empty() {
            return Err(LabError::Config(format!("{}: a DUT needs at least one port pair", cfg.name())));
        }
        let mut d =
            Dut { kind: cfg.kind, ns: site.ns.clone(), children: Vec::new(), tmp: None, napi_pids: Vec::new(), bridges: Vec::new() };
        // From here on the lab's own threads stay off the DUT's core (lifted again by `stop`).
        topo::reserve_dut_core(Some(cfg.core));
        match cfg.kind {
            DutKind::LinuxBridge | DutKind::LinuxBridgeTuned => d.bridge(site, cfg)?,
            DutKind::TestpmdAfXdp | DutKind::TestpmdAfPacket => d.testpmd(site, cfg)?,
            DutKind::OvsAfXdp => d.ovs(site, cfg)?,
            DutKind::Fastpath | DutKind::FastpathXdp | DutKind::FastpathTc => d.fastpath(site, cfg)?,
        }
        if let Some(n) = cfg.nice {
            d.renice(n)?;
        }
        Ok(d)
    }

    /// Which DUT this is.
    pub fn kind(&self) -> DutKind {
        self.kind
    }

    /// PIDs whose CPU time is the DUT's: its processes, or the NAPI threads of the tuned bridge
    /// (empty for the untuned bridge, whose work runs in the senders' softirqs).
    pub fn pids(&self) -> Vec<u32> {
        let mut p: Vec<u32> = self.children.iter().map(|(_, c)| c.id()).collect();
        p.extend(&self.napi_pids);
        p
    }

    /// Every thread of the DUT: its processes' threads and its NAPI threads.
    pub fn threads(&self) -> Vec<u32> {
        let mut out = Vec::new();
        for (_, c) in &self.children {
            let tasks = std::fs::read_dir(format!("/proc/{}/task", c.id()));
            out.extend(tasks.into_iter().flatten().flatten().filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok()));
        }
        out.extend(&self.napi_pids);
        out
    }

    /// Sets the nice value of every thread of the DUT ([`Dut::threads`]).
    ///
    /// # Errors
    /// [`LabError::Cmd`] when `renice` fails.
    pub fn renice(&self, nice: i32) -> Result<(), LabError> {
        let tids: Vec<String> = self.threads().iter().map(u32::to_string).collect();
        if tids.is_empty() {
            return Ok(());
        }
        let n = nice.to_string();
        let mut args = vec!["-n", n.as_str(), "-p"];
        args.extend(tids.iter().map(String::as_str));
        run_cmd("renice", &args).map(|_| ())
    }

    fn bridge(&mut self, site: &DutSite, cfg: &DutConfig) -> Result<(), LabError> {
        let ns = &site.ns;
        // One bridge per pair: each pair its own L2 segment, as fastpath's port_pair table makes it.
        for (i, (a, b)) in site.pairs.iter().enumerate() {
            let br = format!("br{i}");
            ns_exec(ns, &["ip", "link", "add", &br, "type", "bridge", "forward_delay", "0", "stp_state", "0"])?;
            self.bridges.push(br.clone());
            for p in [a, b] {
                ns_exec(ns, &["ip", "link", "set", p, "master", &br])?;
            }
            ns_exec(ns, &["ip", "link", "set", &br, "up"])?;
        }
        if cfg.kind == DutKind::LinuxBridgeTuned {
            // Netfilter calls off (the sysctls exist only with br_netfilter loaded).
            for k in ["iptables", "ip6tables", "arptables"] {
                let _ = ns_exec(ns, &["sysctl", "-qw", &format!("net.bridge.bridge-nf-call-{k}=0")]);
            }
            // Threaded NAPI: receive processing moves from the sender's softirq to kernel threads,
            // which we pin to the DUT core.
            for p in site.ports() {
                self.napi_pids.extend(thread_napi(ns, p, &[cfg.core])?);
            }
        }
        let kind = cfg.kind;
        let want = 2 * site.pairs.len();
        wait_for(kind, cfg.ready_timeout, "bridge ports forwarding", || {
            let out = ns_exec(ns, &["bridge", "link", "show"])?;
            Ok(out.matches("state forwarding").count() >= want)
        })
    }

    fn spawn(&mut self, label: &str, ns: Option<&str>, argv: &[String], log: &Path) -> Result<(), LabError> {
        let logf = std::fs::File::create(log)?;
        let mut cmd = match ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).args(argv);
                c
            }
            None => {
                let mut c = Command::new(argv.first().map(String::as_str).unwrap_or("false"));
                c.args(argv.iter().skip(1));
                c
            }
        };
        let child = cmd
            .stdin(Stdio::piped()) // testpmd exits when its stdin reaches end-of-file
            .stdout(logf.try_clone()?)
            .stderr(logf)
            .spawn()
            .map_err(|e| LabError::Cmd { cmd: argv.join(" "), status: -1, stderr: e.to_string() })?;
        self.children.push((label.to_owned(), child));
        Ok(())
    }

    fn alive(&mut self) -> Result<(), LabError> {
        for (label, c) in &mut self.children {
            if let Ok(Some(st)) = c.try_wait() {
                return Err(LabError::Io(format!("{label} exited early ({st})")));
            }
        }
        Ok(())
    }

    fn testpmd(&mut self, site: &DutSite, cfg: &DutConfig) -> Result<(), LabError> {
        need(cfg.kind, "dpdk-testpmd")?;
        let tmp = tmp_dir("testpmd")?;
        self.tmp = Some(tmp.clone());
        // testpmd's default port topology pairs ports 0 and 1, 2 and 3, …: the site's pairs.
        let vdevs: Vec<String> = site
            .ports()
            .iter()
            .enumerate()
            .map(|(i, p)| {
                if cfg.kind == DutKind::TestpmdAfXdp {
                    format!("net_af_xdp{i},iface={p},start_queue=0,queue_count=1")
                } else {
                    format!("net_af_packet{i},iface={p},qpairs=1,qdisc_bypass=1,blocksz=4096,framesz=2048,framecnt=512")
                }
            })
            .collect();
        let main_core = if cfg.core == 0 { 1 } else { 0 };
        let prefix = tmp.file_name().and_then(|s| s.to_str()).unwrap_or("fp-testpmd").to_owned();
        // stdbuf: testpmd's stdout goes to a file, where it would be block-buffered and the
        // "Press enter to exit" line (our ready signal) would never show.
        let mut argv: Vec<String> = vec![
            "stdbuf".into(),
            "-oL".into(),
            "dpdk-testpmd".into(),
            "--no-huge".into(),
            "-m".into(),
            "512".into(),
            "--no-pci".into(),
            "--file-prefix".into(),
            prefix,
            "-l".into(),
            format!("{main_core},{}", cfg.core),
            "--main-lcore".into(),
            main_core.to_string(),
        ];
        for v in vdevs {
            argv.push("--vdev".into());
            argv.push(v);
        }
        argv.extend(
            ["--", "--forward-mode=io", "--nb-cores=1", "--auto-start", "--rxq=1", "--txq=1", "--total-num-mbufs=16384"].map(String::from),
        );
        let log = tmp.join("testpmd.log");
        self.spawn("dpdk-testpmd", Some(&site.ns), &argv, &log)?;
        let kind = cfg.kind;
        let logp = log.clone();
        let r = wait_for(kind, cfg.ready_timeout, "testpmd forwarding", || {
            self.alive()?;
            Ok(std::fs::read_to_string(&logp).map(|s| s.contains("Press enter to exit")).unwrap_or(false))
        });
        r.map_err(|e| with_log(e, &log))
    }

    fn ovs(&mut self, site: &DutSite, cfg: &DutConfig) -> Result<(), LabError> {
        for p in ["ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl"] {
            need(cfg.kind, p)?;
        }
        let schema = ["/usr/share/openvswitch/vswitch.ovsschema", "/usr/local/share/openvswitch/vswitch.ovsschema"]
            .into_iter()
            .find(|p| Path::new(p).is_file())
            .ok_or_else(|| LabError::Unavailable { dut: "ovs-afxdp".into(), why: "vswitch.ovsschema not found".into() })?;
        let tmp = tmp_dir("ovs")?;
        self.tmp = Some(tmp.clone());
        let p = |f: &str| tmp.join(f).to_string_lossy().into_owned();
        let db = p("conf.db");
        run_cmd("ovsdb-tool", &["create", &db, schema])?;
        let sock = format!("unix:{}", p("db.sock"));
        let server: Vec<String> = vec![
            "ovsdb-server".into(),
            db,
            format!("--remote=p{sock}"),
            format!("--unixctl={}", p("ovsdb.ctl")),
            format!("--pidfile={}", p("ovsdb.pid")),
        ];
        // Inside the DUT namespace too (its unix socket is a file, reachable from anywhere), so
        // the topology's teardown finds it even if this process dies before stopping it.
        self.spawn("ovsdb-server", Some(&site.ns), &server, &tmp.join("ovsdb.log"))?;
        let vsctl = |args: &[&str]| -> Result<String, LabError> {
            let mut a = vec!["--db", sock.as_str(), "--timeout=10"];
            a.extend_from_slice(args);
            run_cmd("ovs-vsctl", &a)
        };
        let kind = cfg.kind;
        wait_for(kind, cfg.ready_timeout, "ovsdb-server socket", || Ok(Path::new(&p("db.sock")).exists()))?;
        vsctl(&["--no-wait", "init"])?;
        vsctl(&["--no-wait", "set", "Open_vSwitch", ".", &format!("other_config:pmd-cpu-mask=0x{:x}", 1u64 << cfg.core)])?;
        let vswitchd: Vec<String> = vec![
            "ovs-vswitchd".into(),
            sock.clone(),
            format!("--unixctl={}", p("vswitchd.ctl")),
            format!("--pidfile={}", p("vswitchd.pid")),
        ];
        let log = tmp.join("vswitchd.log");
        self.spawn("ovs-vswitchd", Some(&site.ns), &vswitchd, &log)?;
        vsctl(&["add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev"]).map_err(|e| with_log(e, &log))?;
        let ports = site.ports();
        for &port in &ports {
            vsctl(&["add-port", "br0", port, "--", "set", "interface", port, "type=afxdp"]).map_err(|e| with_log(e, &log))?;
        }
        let r = wait_for(kind, cfg.ready_timeout, "afxdp ports up", || {
            self.alive()?;
            let mut ok = true;
            for &port in &ports {
                let ofport = vsctl(&["get", "interface", port, "ofport"])?;
                let err = vsctl(&["get", "interface", port, "error"]).unwrap_or_default();
                if err.trim() != "[]" && !err.trim().is_empty() {
                    return Err(LabError::Io(format!("ovs port {port}: {}", err.trim())));
                }
                ok &= ofport.trim().parse::<i64>().map(|n| n > 0).unwrap_or(false);
            }
            Ok(ok)
        });
        r.map_err(|e| with_log(e, &log))
    }

    fn fastpath(&mut self, site: &DutSite, cfg: &DutConfig) -> Result<(), LabError> {
        let tmp = tmp_dir("fastpath")?;
        self.tmp = Some(tmp.clone());
        let extra = tmp.join("pairs.txt");
        let argv = fastpath_argv(&cfg.fastpath_cmd, site, &extra)?;
        if site.pairs.len() > 1 {
            std::fs::write(&extra, extra_pair_entries(site.pairs.len()))?;
        }
        let prog = argv.first().cloned().unwrap_or_default();
        need(cfg.kind, &prog)?;
        let log = tmp.join("fastpath.log");
        self.spawn("fastpath", Some(&site.ns), &argv, &log)?;
        let t0 = Instant::now();
        let (ns, port) = (site.ns.clone(), site.pairs[0].0.clone());
        let r = wait_for(cfg.kind, cfg.ready_timeout, "XDP program on the ingress port", || {
            self.alive()?;
            let out = ns_exec(&ns, &["ip", "link", "show", &port])?;
            Ok(out.contains("xdp") || t0.elapsed() > Duration::from_secs(2))
        });
        r.map_err(|e| with_log(e, &log))
    }

    /// Stops the DUT: SIGTERM, then SIGKILL after 3 s, to each process it started (by PID);
    /// removes the bridge and temp files. Idempotent.
    pub fn stop(&mut self) {
        for (_, c) in &mut self.children {
            if let Ok(None) = c.try_wait() {
                let _ = run_cmd("kill", &["-TERM", &c.id().to_string()]);
            }
        }
        let t0 = Instant::now();
        for (_, c) in &mut self.children {
            loop {
                match c.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if t0.elapsed() > Duration::from_secs(3) => {
                        let _ = c.kill();
                        let _ = c.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        }
        self.children.clear();
        for br in self.bridges.drain(..) {
            let _ = ns_exec(&self.ns, &["ip", "link", "del", &br]);
        }
        if let Some(d) = self.tmp.take() {
            if self.kind.is_fastpath() {
                // The ports' own lines: the XDP mode obtained, and the kernel's loss counters.
                let log = std::fs::read_to_string(d.join("fastpath.log")).unwrap_or_default();
                for l in log
                    .lines()
                    .filter(|l| l.starts_with("fastpath: af_xdp") || l.contains("as an XDP program") || l.contains("as a tc program"))
                {
                    eprintln!("  DUT {l}");
                }
            }
            let _ = std::fs::remove_dir_all(d);
        }
        topo::reserve_dut_core(None);
    }
}

impl Drop for Dut {
    fn drop(&mut self) {
        self.stop();
    }
}

fn with_log(e: LabError, log: &Path) -> LabError {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(15).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    LabError::Io(format!("{e}\n--- {} ---\n{}", log.display(), tail.join("\n")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_aliases() {
        for k in DutKind::ALL {
            assert_eq!(DutKind::parse(k.name()).unwrap(), k);
        }
        assert_eq!(DutKind::parse("testpmd").unwrap(), DutKind::TestpmdAfXdp);
        assert_eq!(DutKind::parse("ovs").unwrap(), DutKind::OvsAfXdp);
        let e = DutKind::parse("vpp").unwrap_err().to_string();
        assert!(e.contains("vpp") && e.contains("linux-bridge-tuned"), "{e}");
    }

    #[test]
    fn several_pairs_get_a_port_each_and_their_entries() {
        let tmpl: Vec<String> = DutConfig::new(DutKind::Fastpath).fastpath_cmd;
        let one = DutSite { ns: "n".into(), pairs: vec![("d0".into(), "d1".into())] };
        let v = fastpath_argv(&tmpl, &one, Path::new("/t/x.txt")).unwrap();
        assert_eq!(v.join(" "), "fastpath run pipelines/l2fwd.toml --port p0=afxdp:d0 --port p1=afxdp:d1");
        let three = DutSite { ns: "n".into(), pairs: (0..3).map(|i| (format!("d{}", 2 * i), format!("d{}", 2 * i + 1))).collect() };
        assert_eq!(three.ports(), ["d0", "d1", "d2", "d3", "d4", "d5"]);
        let v = fastpath_argv(&DutConfig::new(DutKind::FastpathXdp).fastpath_cmd, &three, Path::new("/t/x.txt")).unwrap();
        assert_eq!(
            v.join(" "),
            "fastpath run pipelines/l2fwd.toml --port p0=xdp:d0 --port p1=xdp:d1 --mode skb \
             --port p2=xdp:d2 --port p3=xdp:d3 --port p4=xdp:d4 --port p5=xdp:d5 --entries /t/x.txt"
        );
        assert_eq!(
            extra_pair_entries(3),
            "table port_pair add 2 => forward(3)\ntable port_pair add 3 => forward(2)\n\
             table port_pair add 4 => forward(5)\ntable port_pair add 5 => forward(4)\n"
        );
        assert_eq!(extra_pair_entries(1), "");
        let e = fastpath_argv(&["fp".into(), "run".into(), "--port".into(), "p0=afxdp:dut0".into()], &three, Path::new("/x")).unwrap_err();
        assert!(e.to_string().contains("3 pairs"), "{e}");
        let bare = DutSite { ns: "n".into(), pairs: vec![] };
        assert!(Dut::start_at(&bare, &DutConfig::new(DutKind::LinuxBridge)).unwrap_err().to_string().contains("at least one port pair"));
    }

    #[test]
    fn missing_program_is_unavailable_with_a_hint() {
        let e = need(DutKind::Fastpath, "/nonexistent/fastpath-xyz").unwrap_err();
        assert!(matches!(e, LabError::Unavailable { .. }));
        assert!(e.to_string().contains("setup-lab.sh"), "{e}");
    }
}
