//! `update-under-load`: table updates at a steady rate while fastpath forwards at 90 % of its
//! zero-loss rate. It reports the loss (it must be 0), the update rate sustained and the time
//! from a write to its effect.
//!
//! ```text
//!  ns gen (gen0) ══ dut0 [fastpath: router + ACL] dut1 ══ ns sink (sink0)
//!                          ▲ P4Runtime (--p4rt unix:…), or the control socket (--ctl)
//!  updater: every 1/R s a write of B changes — ACL rules and routes added, then deleted
//!           again, and the route that carries the traffic replaced by an equal one — one
//!           request each, timed from the write to the reply
//! ```
//!
//! 1. The zero-loss rate of the pipeline at this frame size (RFC 2544 search, as `rfc2544`),
//!    with `base_routes` routes and `base_acl` ACL rules loaded, none of them matching the
//!    traffic but the route that carries it.
//! 2. A run of `duration_s` at `load` (default 0.9) of that rate while the updater writes
//!    `updates_per_s` changes per second in writes of `batch` changes. Half the changes are ACL
//!    rules (deny rules on 10.128.0.0/9 destinations, added then deleted), half are routes
//!    (10.0.0.0/9 /24s, added then deleted); every write also replaces the traffic's route by
//!    an equal one, so every write touches the table the packets use.
//!
//! **The front ends** ([`Via`]). By default the updater is a P4Runtime controller
//! ([`fastpath_p4rt::Client`] on a one-thread tokio runtime): it connects to the DUT's
//! `--p4rt unix:…` socket, arbitrates as the primary, reads the P4Info, and sends each write as
//! one `WriteRequest` (ROLLBACK_ON_ERROR: all or nothing) of INSERTs, DELETEs and a MODIFY, by
//! table, field and action names. With [`Via::Ctl`] it sends the same changes as one request
//! of the control socket's text protocol (`fastpath ctl`). Both become one transaction of the
//! DUT's control plane; [`write_changes`] is the one schedule both render.
//!
//! **Write to effect.** A write's reply comes once every worker has applied it: the control
//! plane posts the changes to each worker's mailbox, the worker applies all of them between two
//! batches and answers, and only then does `Control::apply` return (`fastpath_control`: its
//! broadcast waits for every worker's reply). The P4Runtime server answers a `Write` when that
//! call returns (`fastpath_p4rt::server`: the handler awaits the control thread's result), and
//! the text protocol answers its request the same way. So the time from sending a write to its
//! reply bounds the time to its effect on every worker from above; that is the figure reported
//! (p50, p99, max). A packet sees a write entirely or not at all: changes are applied between
//! batches, never inside one (the control crate's tests).

use std::io::{Read, Write};
use std::net::Ipv4Addr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fastpath_p4rt::client::{ClientError, Entry, Names};
use fastpath_p4rt::{proto, Client, ClientConfig};
use serde::Serialize;

use crate::dut::{Dut, DutConfig, DutKind};
use crate::gen::{GenMode, Traffic, Trial};
use crate::report::{Chart, Report};
use crate::tests::rfc2544::Bisect;
use crate::topo::{self, TopoConfig, Topology};
use crate::LabError;

/// The DUT's spec: the router pipeline with an ACL in front of the routing table.
pub const SPEC: &str = r#"
name = "router-acl"
description = "update-under-load: an ACL, then IPv4 LPM routing"

[parser]
headers = ["eth", "ipv4", "udp", "tcp"]

[[action]]
name = "nexthop"
params = ["port", "dmac", "smac"]
body = '''
set eth.dst = dmac
set eth.src = smac
forward port
'''

[[action]]
name = "deny"
body = "drop acl_deny"

[[table]]
name = "acl"
key = [
    { field = "ipv4.src", match = "ternary" },
    { field = "ipv4.dst", match = "ternary" },
    { field = "ipv4.proto", match = "ternary" },
    { field = "l4.dport", match = "range" },
]
actions = ["no_action", "deny"]
size = 65536
default = "no_action"

[[table]]
name = "fib4"
key = [{ field = "ipv4.dst", match = "lpm" }]
actions = ["nexthop", "drop"]
size = 1048576
default = "drop(no_route)"

[control]
ingress = '''
if ipv4.valid:
    apply acl
    ttl_dec
    apply fib4
else:
    drop not_ip
'''
"#;

/// Configuration of a run.
#[derive(Clone, Debug)]
pub struct UpdateConfig {
    /// The `fastpath` binary.
    pub fastpath_exe: PathBuf,
    /// Extra `fastpath run` arguments (e.g. `--workers 2`).
    pub fastpath_args: Vec<String>,
    /// Port kind of the DUT (`afxdp` or `afpacket`).
    pub port_kind: String,
    /// Frame size (with FCS).
    pub frame_size: u16,
    /// Flows (UDP source ports).
    pub flows: u32,
    /// Routes loaded at start (none carries traffic but the one that does).
    pub base_routes: u32,
    /// ACL rules loaded at start (none matches the traffic).
    pub base_acl: u32,
    /// Changes per second the updater writes.
    pub updates_per_s: u32,
    /// Changes per write.
    pub batch: u32,
    /// Fraction of the zero-loss rate offered during the updates.
    pub load: f64,
    /// Seconds of the run under updates.
    pub duration_s: f64,
    /// Seconds per search trial.
    pub trial_s: f64,
    /// Search resolution (fraction of the full-speed rate).
    pub resolution: f64,
    /// Most search trials.
    pub max_trials: u32,
    /// Loss accepted by the search (0 = RFC 2544).
    pub loss_threshold: f64,
    /// Offer this rate instead of searching (packets per second; 0: search).
    pub rate_pps: u64,
    /// How the generator sends.
    pub mode: GenMode,
    /// The front end the updater writes through.
    pub via: Via,
    /// Where the spec, the entries file and the socket (P4Runtime or control) go.
    pub work_dir: PathBuf,
}

/// The front end the updater writes through.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Via {
    /// P4Runtime `Write`s (the DUT runs with `--p4rt unix:PATH`).
    #[default]
    P4rt,
    /// The control socket's text protocol (the DUT runs with `--ctl PATH`).
    Ctl,
}

impl Via {
    /// Its name on the command line and in the JSON (`p4rt`, `ctl`).
    pub fn name(self) -> &'static str {
        match self {
            Via::P4rt => "p4rt",
            Via::Ctl => "ctl",
        }
    }

    /// Parses `--via`.
    ///
    /// # Errors
    /// Anything but `p4rt` or `ctl`.
    pub fn parse(s: &str) -> Result<Via, String> {
        match s {
            "p4rt" => Ok(Via::P4rt),
            "ctl" => Ok(Via::Ctl),
            other => Err(format!("--via {other}: expected p4rt (P4Runtime Writes) or ctl (the control socket's text protocol)")),
        }
    }

    fn title(self) -> &'static str {
        match self {
            Via::P4rt => "P4Runtime",
            Via::Ctl => "control socket",
        }
    }
}

impl Default for UpdateConfig {
    fn default() -> UpdateConfig {
        UpdateConfig {
            fastpath_exe: PathBuf::from("fastpath"),
            fastpath_args: Vec::new(),
            port_kind: "afxdp".into(),
            frame_size: 64,
            flows: 1024,
            base_routes: 10_000,
            base_acl: 1_000,
            updates_per_s: 10_000,
            batch: 100,
            load: 0.9,
            duration_s: 10.0,
            trial_s: 2.0,
            resolution: 0.05,
            max_trials: 8,
            loss_threshold: 0.0,
            rate_pps: 0,
            mode: GenMode::XdpLive,
            via: Via::P4rt,
            work_dir: std::env::temp_dir(),
        }
    }
}

/// Milliseconds from writing a request to its reply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct WriteMs {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

/// The result (one JSON line).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct UpdateRow {
    /// `update-under-load`.
    pub test: &'static str,
    /// The front end the changes went through: `p4rt` or `ctl`.
    pub via: &'static str,
    /// Frame size, bytes with FCS.
    pub frame_size: u16,
    /// Flows.
    pub flows: u32,
    /// Zero-loss rate found (or given), Mpps.
    pub zero_loss_mpps: f64,
    /// The search's full-speed trial passed: the rate is the generator's, a lower bound.
    pub generator_limited: bool,
    /// Rate asked for under updates, Mpps.
    pub load_mpps: f64,
    /// Rate the generator achieved under updates (sent over its sending time), Mpps.
    pub offered_mpps: f64,
    /// Frames sent and received under updates.
    pub sent: u64,
    /// Received.
    pub received: u64,
    /// Loss ratio under updates (must be 0).
    pub loss: f64,
    /// Changes per second asked for.
    pub updates_asked_per_s: u32,
    /// Changes per second acknowledged over the run.
    pub updates_per_s: f64,
    /// Changes acknowledged.
    pub updates: u64,
    /// Writes (requests) acknowledged.
    pub writes: u64,
    /// Writes refused (each with its reason in the log; there should be none).
    pub refused: u64,
    /// Time from a write to its reply, which comes once every worker applied it.
    pub write_to_effect_ms: WriteMs,
    /// Routes and ACL rules at start.
    pub base_routes: u32,
    /// ACL rules at start.
    pub base_acl: u32,
}

/// Results of a run.
#[derive(Clone, Debug, Default)]
pub struct UpdateResults {
    /// The row.
    pub rows: Vec<UpdateRow>,
    /// Write-to-reply times (ms) in the order written, for the chart.
    pub samples: Vec<(f64, f64)>,
}

impl UpdateResults {
    /// One JSON object per row.
    pub fn json_lines(&self) -> String {
        super::json_lines(&self.rows)
    }

    /// Adds the table and the write-latency-over-time chart.
    pub fn add_to(&self, report: &mut Report) {
        report.heading("Hot updates under load (update-under-load)");
        report.para(
            "fastpath forwards at a fraction of its zero-loss rate through an ACL and an LPM table while an \
             updater adds and deletes ACL rules and routes (none matching the traffic) and replaces the \
             route that carries it, in writes of several changes each: P4Runtime Writes from a controller \
             that is the primary, or requests on the control socket. A write's reply comes once every \
             worker has applied it, so write-to-reply bounds write-to-effect from above.",
        );
        let rows = self
            .rows
            .iter()
            .map(|r| {
                vec![
                    format!("{} B, {} flows", r.frame_size, r.flows),
                    r.via.to_string(),
                    format!("{:.3}{}", r.zero_loss_mpps, if r.generator_limited { " (generator-limited)" } else { "" }),
                    format!("{:.3}", r.offered_mpps),
                    format!("{} / {} ({:.4} %)", r.received, r.sent, r.loss * 100.0),
                    format!("{:.0} of {}", r.updates_per_s, r.updates_asked_per_s),
                    format!("{:.2} / {:.2} / {:.2}", r.write_to_effect_ms.p50, r.write_to_effect_ms.p99, r.write_to_effect_ms.max),
                    r.refused.to_string(),
                ]
            })
            .collect();
        report.table(
            &[
                "traffic",
                "via",
                "zero-loss Mpps",
                "offered Mpps",
                "received / sent (loss)",
                "changes/s",
                "write→effect ms p50 / p99 / max",
                "refused",
            ],
            rows,
        );
        if !self.samples.is_empty() {
            report.line_chart(
                Chart::new("Write to effect on every worker")
                    .x_label("seconds into the run")
                    .y_label("ms")
                    .series("write → reply", self.samples.clone()),
            );
        }
    }
}

/// A next hop's MACs: the sink's, and a made-up source MAC of the DUT.
const DUT_MAC: &str = "02:fa:00:00:00:01";

fn mac_text(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// The entries loaded at start: the route of the traffic, `routes` others in 10.0.0.0/9 and
/// `acl` deny rules on destinations in 10.128.0.0/9 (none matches the traffic).
pub fn base_entries(sink_ip: Ipv4Addr, sink_mac: [u8; 6], routes: u32, acl: u32) -> String {
    let mut s = String::new();
    let sink = mac_text(sink_mac);
    s.push_str(&format!("table fib4 add {sink_ip}/32 => nexthop(1, {sink}, {DUT_MAC})\n"));
    for k in 0..routes {
        s.push_str(&format!("table fib4 add {} => nexthop(1, {sink}, {DUT_MAC})\n", route_prefix(k)));
    }
    for k in 0..acl {
        s.push_str(&format!("table acl add {} priority {} => deny\n", acl_key(k), 1000 + k));
    }
    s
}

/// The k-th /24 in 10.0.0.0/9.
fn route_prefix(k: u32) -> String {
    let k = k % (1 << 15);
    format!("10.{}.{}.0/24", k >> 8, k & 0xff)
}

/// The k-th ACL key: a /32 destination in 10.128.0.0/9, UDP, ports 1000..1999.
fn acl_key(k: u32) -> String {
    let k = k % (1 << 23);
    format!("* 10.{}.{}.{}/32 17/0xff 1000..1999", 128 + (k >> 16), (k >> 8) & 0xff, k & 0xff)
}

/// One change of a write, as both front ends name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Route `k` ([`route_prefix`]) added, to the sink.
    AddRoute(u32),
    /// Route `k` deleted.
    DelRoute(u32),
    /// ACL rule `k` ([`acl_key`]) added as a deny with fastpath priority `p` (smaller wins).
    AddRule(u32, u32),
    /// ACL rule `k` (fastpath priority `p`) deleted.
    DelRule(u32, u32),
    /// The route that carries the traffic replaced by an equal one.
    ReplaceTrafficRoute,
}

/// The changes of write `w` (`batch` of them, then the traffic route replaced): ACL rules and
/// routes are added in one write and deleted `keep` writes later, so the tables stay near their
/// size and every change succeeds.
pub fn write_changes(cfg: &UpdateConfig, w: u64, keep: u64) -> Vec<Change> {
    let half = u64::from(cfg.batch / 2);
    let base = (u64::from(cfg.base_routes), u64::from(cfg.base_acl));
    let mut out = Vec::with_capacity(4 * half as usize + 1);
    let ids = |x: u64| (0..half).map(move |k| x * half + k);
    let route = |id: u64| (base.0 + id) as u32;
    let rule = |id: u64| ((base.1 + id) as u32, (100_000 + id % 1_000_000) as u32);
    if w >= keep {
        for id in ids(w - keep) {
            out.push(Change::DelRoute(route(id)));
            let (k, p) = rule(id);
            out.push(Change::DelRule(k, p));
        }
    }
    for id in ids(w) {
        out.push(Change::AddRoute(route(id)));
        let (k, p) = rule(id);
        out.push(Change::AddRule(k, p));
    }
    out.push(Change::ReplaceTrafficRoute);
    out
}

/// A change as a line of the control socket's text protocol.
pub fn change_text(sink_ip: Ipv4Addr, sink_mac: [u8; 6], c: Change) -> String {
    let sink = mac_text(sink_mac);
    match c {
        Change::AddRoute(k) => format!("table fib4 add {} => nexthop(1, {sink}, {DUT_MAC})", route_prefix(k)),
        Change::DelRoute(k) => format!("table fib4 del {}", route_prefix(k)),
        Change::AddRule(k, p) => format!("table acl add {} priority {p} => deny", acl_key(k)),
        Change::DelRule(k, _) => format!("table acl del {}", acl_key(k)),
        Change::ReplaceTrafficRoute => format!("table fib4 modify {sink_ip}/32 => nexthop(1, {sink}, {DUT_MAC})"),
    }
}

/// The text of write `w` ([`write_changes`], one line each).
pub fn write_text(sink_ip: Ipv4Addr, sink_mac: [u8; 6], cfg: &UpdateConfig, w: u64, keep: u64) -> String {
    write_changes(cfg, w, keep).into_iter().map(|c| change_text(sink_ip, sink_mac, c) + "\n").collect()
}

/// [`DUT_MAC`] as a number.
const DUT_MAC_BITS: u128 = 0x02fa_0000_0001;

/// A change as a P4Runtime update, named through the device's P4Info: routes are LPM entries of
/// `fib4`; rules are `acl` entries (destination /32 and protocol as ternary matches with full
/// masks, the source a don't-care and so left out, the port range) with the P4Runtime priority
/// `2³¹−1 − p` that the server stores as fastpath priority `p`.
///
/// # Errors
/// A name the P4Info does not have ([`ClientError::Name`]).
pub fn change_update(names: &Names, sink_ip: Ipv4Addr, sink_mac: [u8; 6], c: Change) -> Result<proto::Update, ClientError> {
    let mac = |m: [u8; 6]| m.iter().fold(0u128, |v, &b| v << 8 | u128::from(b));
    let route = |prefix: u32, len: u8| {
        Entry::new("fib4")
            .lpm("ipv4.dst", u128::from(prefix), len)
            .action("nexthop", &[("port", 1), ("dmac", mac(sink_mac)), ("smac", DUT_MAC_BITS)])
    };
    let route_k = |k: u32| route(0x0a00_0000 | (k % (1 << 15)) << 8, 24);
    let rule = |k: u32, p: u32| {
        Entry::new("acl")
            .ternary("ipv4.dst", u128::from(0x0a80_0000 | (k % (1 << 23))), u128::from(u32::MAX))
            .ternary("ipv4.proto", 17, 0xff)
            .range("l4.dport", 1000, 1999)
            .priority(i32::MAX - p.min(i32::MAX as u32 - 1) as i32)
            .action("deny", &[])
    };
    match c {
        Change::AddRoute(k) => names.insert(&route_k(k)),
        Change::DelRoute(k) => names.delete(&route_k(k)),
        Change::AddRule(k, p) => names.insert(&rule(k, p)),
        Change::DelRule(k, p) => names.delete(&rule(k, p)),
        Change::ReplaceTrafficRoute => names.modify(&route(u32::from(sink_ip), 32)),
    }
}

/// One request on the control socket (the `fastpath ctl` protocol: the text, a half-close, the
/// reply `ok\n…` or `error CODE\n…`).
fn ctl_request(path: &Path, text: &str) -> Result<(), String> {
    let mut c = UnixStream::connect(path).map_err(|e| format!("{}: {e}", path.display()))?;
    c.set_read_timeout(Some(Duration::from_secs(30))).map_err(|e| e.to_string())?;
    c.write_all(text.as_bytes()).map_err(|e| e.to_string())?;
    c.shutdown(std::net::Shutdown::Write).map_err(|e| e.to_string())?;
    let mut reply = String::new();
    c.read_to_string(&mut reply).map_err(|e| e.to_string())?;
    match reply.split_once('\n').map_or(reply.as_str(), |x| x.0) {
        "ok" => Ok(()),
        status => Err(format!("{status}: {}", reply.lines().nth(1).unwrap_or_default())),
    }
}

/// The updater's connection to the DUT.
enum Writer {
    /// The control socket (one connection per request, as `fastpath ctl`).
    Ctl(PathBuf),
    /// A P4Runtime client that is the primary, on its own one-thread runtime.
    P4rt(Box<(tokio::runtime::Runtime, Client)>),
}

/// A write, ready to send.
enum Request {
    Text(String),
    Updates(Vec<proto::Update>),
}

impl Writer {
    /// Connects through `via` to the DUT's socket `sock`.
    fn connect(via: Via, sock: &Path) -> Result<Writer, LabError> {
        match via {
            Via::Ctl => Ok(Writer::Ctl(sock.to_path_buf())),
            Via::P4rt => {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| LabError::Io(format!("the updater's tokio runtime: {e}")))?;
                let cfg = ClientConfig::new(format!("unix:{}", sock.display()), 1);
                let client = rt.block_on(Client::connect(&cfg)).map_err(|e| LabError::Io(format!("P4Runtime client: {e}")))?;
                Ok(Writer::P4rt(Box::new((rt, client))))
            }
        }
    }

    /// `changes` as this front end's request.
    fn prepare(&self, t: &Topology, changes: &[Change]) -> Result<Request, String> {
        match self {
            Writer::Ctl(_) => Ok(Request::Text(changes.iter().map(|&c| change_text(t.sink_ip, t.sink_mac, c) + "\n").collect())),
            Writer::P4rt(b) => changes
                .iter()
                .map(|&c| change_update(b.1.names(), t.sink_ip, t.sink_mac, c))
                .collect::<Result<_, _>>()
                .map(Request::Updates)
                .map_err(|e| e.to_string()),
        }
    }

    /// Sends a request and waits for its reply.
    fn send(&mut self, r: Request) -> Result<(), String> {
        match (self, r) {
            (Writer::Ctl(sock), Request::Text(text)) => ctl_request(sock, &text),
            (Writer::P4rt(b), Request::Updates(u)) => {
                let (rt, client) = &mut **b;
                rt.block_on(client.write_with(u, proto::atomicity::ROLLBACK_ON_ERROR)).map_err(|e| match e {
                    // The update that failed, not the ones aborted because of it.
                    ClientError::Write { message, failed } => match failed.iter().find(|f| f.1 != fastpath_p4rt::client::Code::Aborted) {
                        Some((k, code, msg)) => format!("update {k} of the write: {code:?}: {msg} (the others aborted)"),
                        None => format!("{} of the write's updates failed: {message}", failed.len()),
                    },
                    other => other.to_string(),
                })
            }
            _ => Err("a request for the other front end".into()),
        }
    }
}

/// What the updater did.
#[derive(Debug, Default)]
struct Updated {
    writes: u64,
    changes: u64,
    refused: u64,
    ms: Vec<(f64, f64)>,
    first_error: Option<String>,
    secs: f64,
}

/// Writes a request every `batch / updates_per_s` seconds until `stop`; returns what it did.
fn updater(t: &Topology, cfg: &UpdateConfig, writer: &mut Writer, stop: &AtomicBool) -> Updated {
    let period = Duration::from_secs_f64(f64::from(cfg.batch) / f64::from(cfg.updates_per_s.max(1)));
    // Delete what a write added this many writes later: about one second of changes live.
    let keep = (u64::from(cfg.updates_per_s) / u64::from(cfg.batch.max(1))).max(1);
    let mut u = Updated::default();
    let t0 = Instant::now();
    let mut next = t0;
    let mut w = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now < next {
            std::thread::sleep((next - now).min(Duration::from_millis(5)));
            continue;
        }
        let changes = write_changes(cfg, w, keep);
        let n = changes.len() as u64;
        // The request is built before the clock starts: the figure is the DUT's.
        let timed = writer.prepare(t, &changes).and_then(|request| {
            let sent = Instant::now();
            writer.send(request).map(|()| (sent, sent.elapsed()))
        });
        match timed {
            Ok((sent, took)) => {
                u.writes += 1;
                u.changes += n;
                u.ms.push((sent.duration_since(t0).as_secs_f64(), took.as_secs_f64() * 1e3));
            }
            Err(e) => {
                u.refused += 1;
                u.first_error.get_or_insert(e);
            }
        }
        w += 1;
        // A writer that falls behind does not catch up in a burst: the rate it sustains is the
        // figure.
        next = (next + period).max(Instant::now() - period);
    }
    u.secs = t0.elapsed().as_secs_f64();
    u
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let k = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[k.min(sorted.len() - 1)]
}

/// Runs the test.
///
/// # Errors
/// [`LabError::NotRoot`], a bad config, the DUT not starting, or a generator failure.
pub fn run(cfg: &UpdateConfig, progress: &mut dyn FnMut(&str)) -> Result<UpdateResults, LabError> {
    if cfg.batch < 2 || cfg.updates_per_s < cfg.batch {
        return Err(LabError::Config(format!(
            "--batch {} and --updates {}: a write holds at least 2 changes, and at least one write per second",
            cfg.batch, cfg.updates_per_s
        )));
    }
    if !(0.0..=1.0).contains(&cfg.load) || cfg.load == 0.0 {
        return Err(LabError::Config(format!("--load {}: a fraction of the zero-loss rate, in (0, 1]", cfg.load)));
    }
    for ns in topo::cleanup_stale() {
        progress(&format!("removed {ns}, left behind by a lab run that no longer exists"));
    }
    let t = Topology::create(&TopoConfig::default())?;
    let tag = format!("fp-update-{}", std::process::id());
    let (spec, entries, sock) =
        (cfg.work_dir.join(format!("{tag}.toml")), cfg.work_dir.join(format!("{tag}.txt")), cfg.work_dir.join(format!("{tag}.sock")));
    let files = Cleanup(vec![spec.clone(), entries.clone(), sock.clone()]);
    let write = |p: &Path, s: &str| std::fs::write(p, s).map_err(|e| LabError::Io(format!("{}: {e}", p.display())));
    write(&spec, SPEC)?;
    write(&entries, &base_entries(t.sink_ip, t.sink_mac, cfg.base_routes, cfg.base_acl))?;
    let k = &cfg.port_kind;
    let mut dc = DutConfig::new(DutKind::Fastpath);
    let p = |s: &Path| s.to_string_lossy().into_owned();
    dc.fastpath_cmd = vec![p(&cfg.fastpath_exe), "run".into(), p(&spec), "--entries".into(), p(&entries)];
    dc.fastpath_cmd.extend(["--port".into(), format!("p0={k}:{{in}}"), "--port".into(), format!("p1={k}:{{out}}")]);
    let front = match cfg.via {
        Via::P4rt => ["--p4rt".to_string(), format!("unix:{}", p(&sock))],
        Via::Ctl => ["--ctl".to_string(), p(&sock)],
    };
    dc.fastpath_cmd.extend(["--core".into(), "1".into()]);
    dc.fastpath_cmd.extend(front);
    dc.fastpath_cmd.extend(cfg.fastpath_args.iter().cloned());
    dc.label = Some("fastpath".into());
    let dut = Dut::start(&t, &dc)?;
    let waited = Instant::now();
    while !sock.exists() {
        if waited.elapsed() > Duration::from_secs(20) {
            return Err(LabError::Io(format!("no {} socket at {} after 20 s", cfg.via.title(), sock.display())));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    progress(&format!("fastpath: started in {} with {} routes and {} ACL rules", t.dut_ns, cfg.base_routes + 1, cfg.base_acl));
    let mut writer = Writer::connect(cfg.via, &sock)?;
    progress(&format!(
        "updates through {}{}",
        cfg.via.title(),
        if cfg.via == Via::P4rt { " (the primary, election id 1, Writes of ROLLBACK_ON_ERROR)" } else { "" }
    ));
    let traffic = Traffic::attach(&t, cfg.mode)?;
    let (size, flows) = (cfg.frame_size, cfg.flows);
    let dur = Duration::from_secs_f64(cfg.trial_s);
    // Forwarding yet? (the workers load the base entries as they start).
    let ready = Instant::now();
    loop {
        let tr = traffic.trial(size, flows, 10_000, Duration::from_millis(200))?;
        if tr.received > 0 {
            break;
        }
        if ready.elapsed() > Duration::from_secs(20) {
            return Err(LabError::Io("fastpath forwards nothing 20 s after start".into()));
        }
    }
    let mut row = UpdateRow {
        test: "update-under-load",
        via: cfg.via.name(),
        frame_size: size,
        flows,
        updates_asked_per_s: cfg.updates_per_s,
        base_routes: cfg.base_routes + 1,
        base_acl: cfg.base_acl,
        ..UpdateRow::default()
    };
    let rate = if cfg.rate_pps > 0 {
        cfg.rate_pps as f64
    } else {
        let passes = |tr: &Trial| tr.loss() <= cfg.loss_threshold;
        let full = traffic.trial(size, flows, 0, dur)?;
        progress(&format!(
            "  full speed: offered {:.3} Mpps, delivered {:.3} Mpps (loss {:.3} %)",
            full.offered_mpps(),
            full.received_mpps(),
            full.loss() * 100.0
        ));
        // A rate is what was sent over the trial's length: a passing search trial offered at
        // least 95 % of the rate asked (the generator may take longer than the trial on a busy
        // machine; that stretch is not the DUT's).
        if passes(&full) {
            row.generator_limited = true;
            full.sent as f64 / cfg.trial_s
        } else {
            let hi = full.offered_mpps() * 1e6;
            let first = (full.received_mpps() * 1e6).clamp(1000.0, hi.max(1000.0));
            let search = Bisect { hi, first, max_trials: cfg.max_trials, resolution: cfg.resolution, trial_s: cfg.trial_s };
            let mut trials = 1;
            let best = search.run(
                &mut trials,
                |r| traffic.trial(size, flows, r as u64, dur),
                |tr| (tr.sent, passes(tr)),
                |r, tr, verdict| progress(&format!("  trial at {:.3} Mpps: sent {} received {} {verdict}", r / 1e6, tr.sent, tr.received)),
            )?;
            best.map_or(0.0, |b| b.sent as f64 / cfg.trial_s)
        }
    };
    row.zero_loss_mpps = rate / 1e6;
    if rate <= 0.0 {
        return Err(LabError::Io("no rate passed the zero-loss search; nothing to load the updates with".into()));
    }
    let load = (rate * cfg.load) as u64;
    progress(&format!(
        "zero-loss rate {:.3} Mpps{}; now {:.3} Mpps for {} s with {} changes/s in writes of {}",
        rate / 1e6,
        if row.generator_limited { " (generator-limited)" } else { "" },
        load as f64 / 1e6,
        cfg.duration_s,
        cfg.updates_per_s,
        cfg.batch
    ));
    let stop = AtomicBool::new(false);
    let (tr, upd) = std::thread::scope(|s| -> Result<(Trial, Updated), LabError> {
        let h = s.spawn(|| updater(&t, cfg, &mut writer, &stop));
        let tr = traffic.trial(size, flows, load, Duration::from_secs_f64(cfg.duration_s));
        stop.store(true, Ordering::Relaxed);
        let upd = h.join().map_err(|_| LabError::Io("the updater thread panicked".into()))?;
        Ok((tr?, upd))
    })?;
    if let Some(e) = &upd.first_error {
        progress(&format!("  {} write(s) refused; the first: {e}", upd.refused));
    }
    let mut ms: Vec<f64> = upd.ms.iter().map(|x| x.1).collect();
    ms.sort_by(f64::total_cmp);
    row.load_mpps = load as f64 / 1e6;
    row.offered_mpps = tr.offered_mpps();
    (row.sent, row.received, row.loss) = (tr.sent, tr.received, tr.loss());
    (row.writes, row.updates, row.refused) = (upd.writes, upd.changes, upd.refused);
    row.updates_per_s = upd.changes as f64 / upd.secs.max(1e-9);
    row.write_to_effect_ms = WriteMs { p50: percentile(&ms, 0.5), p99: percentile(&ms, 0.99), max: ms.last().copied().unwrap_or(0.0) };
    progress(&format!(
        "under updates through {}: offered {:.3} Mpps, received {} of {} (loss {:.4} %), {:.0} changes/s in {} writes, write→effect p50 {:.2} ms p99 {:.2} ms max {:.2} ms",
        cfg.via.title(),
        row.offered_mpps,
        row.received,
        row.sent,
        row.loss * 100.0,
        row.updates_per_s,
        row.writes,
        row.write_to_effect_ms.p50,
        row.write_to_effect_ms.p99,
        row.write_to_effect_ms.max
    ));
    drop(traffic);
    drop(writer);
    drop(dut);
    drop(files);
    Ok(UpdateResults { rows: vec![row], samples: upd.ms })
}

/// Removes the run's files when it ends, however it ends.
struct Cleanup(Vec<PathBuf>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastpath_pipeline::entries::EntryOp;
    use fastpath_pipeline::value::Match;

    const SINK: (Ipv4Addr, [u8; 6]) = (Ipv4Addr::new(198, 18, 0, 2), [2, 0, 0, 0, 0, 2]);

    #[test]
    fn writes_add_then_delete_what_they_added_and_keep_the_traffic_route() {
        let cfg = UpdateConfig { batch: 4, base_routes: 10, base_acl: 5, ..UpdateConfig::default() };
        let w0 = write_text(SINK.0, SINK.1, &cfg, 0, 2);
        assert_eq!(w0.lines().filter(|l| l.contains(" add ")).count(), 4, "{w0}");
        assert!(w0.lines().last().unwrap().starts_with("table fib4 modify"), "{w0}");
        let w2 = write_text(SINK.0, SINK.1, &cfg, 2, 2);
        // Write 2 deletes exactly what write 0 added.
        let added0: Vec<String> = w0
            .lines()
            .filter(|l| l.contains(" add "))
            .map(|l| l.split(" => ").next().unwrap().split(" priority ").next().unwrap().replace(" add ", " "))
            .collect();
        let deleted2: Vec<String> = w2.lines().filter(|l| l.contains(" del ")).map(|l| l.replace(" del ", " ")).collect();
        assert_eq!(added0, deleted2);
        assert_eq!(w2.lines().count(), 4 + 4 + 1);
    }

    #[test]
    fn every_write_and_the_base_entries_load_into_the_spec() {
        let cfg = UpdateConfig { batch: 10, base_routes: 50, base_acl: 20, ..UpdateConfig::default() };
        let prog = fastpath_pipeline::compile("update.toml", SPEC).unwrap();
        let mut p = prog.instantiate();
        p.set_ports(2).unwrap();
        p.load_entries("base", &base_entries(SINK.0, SINK.1, cfg.base_routes, cfg.base_acl)).unwrap();
        for w in 0..20 {
            let text = write_text(SINK.0, SINK.1, &cfg, w, 3);
            let ops: Vec<_> = text.lines().map(|l| p.program().parse_entry(l).unwrap()).collect();
            p.apply_ops(&ops).unwrap_or_else(|(k, e)| panic!("write {w} line {k}: {e}\n{text}"));
        }
        assert_eq!(p.table("fib4").unwrap().len(), 51 + 3 * 5, "the base and three writes' routes are live");
    }

    /// An op in comparable form: its kind, table, canonical key, and what an add or modify
    /// installs (priority, action, arguments; the priority only where the table orders by it).
    type Norm = (u8, usize, Vec<Match>, Option<(u32, usize, Vec<u128>)>);

    fn norm(prog: &fastpath_pipeline::Program, op: &EntryOp) -> Norm {
        use fastpath_p4rt::entry::canon_key;
        let spec = |kind: u8, e: &fastpath_pipeline::entries::EntrySpec| {
            let p = if fastpath_p4rt::p4info::has_priority(prog, e.table) { e.priority } else { 0 };
            (kind, e.table, canon_key(prog, e.table, &e.key).unwrap(), Some((p, e.action, e.args.to_vec())))
        };
        match op {
            EntryOp::Add(e) => spec(0, e),
            EntryOp::Modify(e) => spec(1, e),
            EntryOp::Del { table, key } => (2, *table, canon_key(prog, *table, key).unwrap(), None),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn p4runtime_writes_carry_the_same_changes_as_the_text_and_load_into_the_spec() {
        use fastpath_p4rt::entry::table_update;
        let cfg = UpdateConfig { batch: 10, base_routes: 50, base_acl: 20, ..UpdateConfig::default() };
        let prog = fastpath_pipeline::compile("update.toml", SPEC).unwrap();
        let names = Names::new(&fastpath_p4rt::p4info::p4info(&prog, ""));
        let mut p = prog.instantiate();
        p.set_ports(2).unwrap();
        p.load_entries("base", &base_entries(SINK.0, SINK.1, cfg.base_routes, cfg.base_acl)).unwrap();
        for w in 0..20 {
            let changes = write_changes(&cfg, w, 3);
            let ops: Vec<EntryOp> = changes
                .iter()
                .map(|&c| {
                    let u = change_update(&names, SINK.0, SINK.1, c).unwrap();
                    let Some(proto::entity::Entity::TableEntry(te)) = u.entity.and_then(|e| e.entity) else { panic!("{c:?}") };
                    table_update(&prog, u.r#type, &te).unwrap_or_else(|r| panic!("{c:?}: {}", r.msg)).op(&prog)
                })
                .collect();
            let text: Vec<EntryOp> = write_text(SINK.0, SINK.1, &cfg, w, 3).lines().map(|l| prog.parse_entry(l).unwrap()).collect();
            let (a, b): (Vec<_>, Vec<_>) = (ops.iter().map(|o| norm(&prog, o)).collect(), text.iter().map(|o| norm(&prog, o)).collect());
            assert_eq!(a, b, "write {w}: the P4Runtime updates and the text differ");
            p.apply_ops(&ops).unwrap_or_else(|(k, e)| panic!("write {w} update {k}: {e}"));
        }
        assert_eq!(p.table("fib4").unwrap().len(), 51 + 3 * 5, "the base and three writes' routes are live");
        assert_eq!(p.table("acl").unwrap().len(), 20 + 3 * 5, "and their rules");
    }

    #[test]
    fn via_parses_and_names_itself() {
        assert_eq!(Via::parse("p4rt"), Ok(Via::P4rt));
        assert_eq!(Via::parse("ctl").map(Via::name), Ok("ctl"));
        assert!(Via::parse("grpc").unwrap_err().contains("expected p4rt"));
        assert_eq!(UpdateConfig::default().via, Via::P4rt, "P4Runtime is the default");
    }
}
