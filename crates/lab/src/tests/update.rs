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
//!    rules (deny rules on /32 destinations in 10.192.0.0/10, added then deleted), half are
//!    routes (/24s in 10.128.0.0/9, added then deleted): prefixes of their own, never a base
//!    entry's ([`write_changes`]). Every write also replaces a route of the traffic by an equal
//!    one, so every write touches the table the packets use. Up to `in_flight` writes wait for
//!    their replies at once.
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
//! batches, never inside one (the control crate's tests). After the run the DUT's own stamps
//! of each hand-off (`fastpath ctl show writes`) say where the time went.
//!
//! **Scheduling.** The updater is pinned off the DUT's core and real-time, like the latency
//! probes; the DUT runs its control threads real-time (`--control-rt`, [`CONTROL_RT`]); the
//! lab's session autogroup takes the lab's nice for the run (`/proc/self/autogroup`). Each removed a
//! wait for someone else's time slice that had been most of a write's time (docs/lab.md).

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
    /// Writes the updater keeps in flight at most (1 ..= [`MAX_IN_FLIGHT`]): a write is sent
    /// on its schedule while fewer than this wait for their replies.
    pub in_flight: u32,
    /// The DUT's control threads real-time at this priority (`fastpath run --control-rt`;
    /// 0: the ordinary scheduler).
    pub control_rt: u32,
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
            in_flight: 1,
            control_rt: CONTROL_RT,
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

impl UpdateConfig {
    /// Writes after which the updater deletes what a write added: about one second of
    /// changes stays live.
    pub fn keep(&self) -> u64 {
        (u64::from(self.updates_per_s) / u64::from(self.batch.max(1))).max(u64::from(self.in_flight) + 1)
    }

    /// Checks that the schedule fits: writes of at least 2 changes, at least one write per
    /// second, the base entries and the live changes within their spaces ([`ROUTE_SLOTS`],
    /// [`RULE_SLOTS`]), 1 ..= [`MAX_IN_FLIGHT`] writes in flight.
    ///
    /// # Errors
    /// [`LabError::Config`] naming the values that do not fit.
    pub fn check(&self) -> Result<(), LabError> {
        if self.batch < 2 || self.updates_per_s < self.batch {
            return Err(LabError::Config(format!(
                "--batch {} and --updates {}: a write holds at least 2 changes, and at least one write per second",
                self.batch, self.updates_per_s
            )));
        }
        if !(1..=MAX_IN_FLIGHT).contains(&self.in_flight) {
            return Err(LabError::Config(format!("--in-flight {}: 1 to {MAX_IN_FLIGHT} writes", self.in_flight)));
        }
        if self.base_routes > ROUTE_SLOTS || self.base_acl > RULE_SLOTS {
            return Err(LabError::Config(format!(
                "--base-entries: {} routes and {} ACL rules; the schedule has room for {ROUTE_SLOTS} and {RULE_SLOTS}",
                self.base_routes, self.base_acl
            )));
        }
        let live = live_at_most(self, self.keep());
        if live >= u64::from(ROUTE_SLOTS) {
            return Err(LabError::Config(format!(
                "--updates {} in writes of {}: about {live} routes would be live at once, more than the {ROUTE_SLOTS} the changes go round",
                self.updates_per_s, self.batch
            )));
        }
        Ok(())
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
    /// Writes the updater kept in flight at most.
    pub in_flight: u32,
    /// The DUT's control threads' real-time priority (0: ordinary).
    pub control_rt: u32,
    /// Writes refused (each with its reason in the log; there should be none).
    pub refused: u64,
    /// Time from a write to its reply, which comes once every worker applied it.
    pub write_to_effect_ms: WriteMs,
    /// Where the time went inside fastpath, per stage (`fastpath ctl show writes`).
    pub stages_us: Vec<StageRow>,
    /// Routes and ACL rules at start.
    pub base_routes: u32,
    /// ACL rules at start.
    pub base_acl: u32,
}

/// One stage of a write inside fastpath, µs over the run's writes.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StageRow {
    /// The stage, as `show writes` names it.
    pub stage: String,
    /// Median.
    pub p50: u32,
    /// 99th percentile.
    pub p99: u32,
    /// Largest.
    pub max: u32,
}

/// The stages of a `show writes` table (lines of a name and three numbers).
pub fn parse_stages(table: &str) -> Vec<StageRow> {
    table
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let [name @ .., p50, p99, max] = w.as_slice() else { return None };
            let n = |x: &str| x.parse::<u32>().ok();
            Some(StageRow { stage: name.join(" "), p50: n(p50)?, p99: n(p99)?, max: n(max)? }).filter(|r| !r.stage.is_empty())
        })
        .collect()
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
                    format!("{:.0} of {} ({} in flight)", r.updates_per_s, r.updates_asked_per_s, r.in_flight),
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

/// Routes the schedule can name: /24s, the base's in 10.0.0.0/9 and the changes' in
/// 10.128.0.0/9, 2¹⁵ of each.
pub const ROUTE_SLOTS: u32 = 1 << 15;

/// ACL rules the schedule can name: /32 destinations, the base's in 10.128.0.0/10 and the
/// changes' in 10.192.0.0/10, 2²² of each.
pub const RULE_SLOTS: u32 = 1 << 22;

/// Where a route or rule of the schedule lives: loaded at start, or added (and deleted) by the
/// updater. The two never share a key, so an INSERT of a change never meets a base entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Space {
    /// The entries file loaded at start.
    Base,
    /// The updater's writes.
    Changes,
}

/// The network of route `k` (< [`ROUTE_SLOTS`]) of `space`: a /24.
pub fn route_net(space: Space, k: u32) -> u32 {
    let top = match space {
        Space::Base => 0,
        Space::Changes => ROUTE_SLOTS,
    };
    0x0a00_0000 | (top | (k % ROUTE_SLOTS)) << 8
}

/// The destination of ACL rule `k` (< [`RULE_SLOTS`]) of `space`: a /32.
pub fn rule_dst(space: Space, k: u32) -> u32 {
    let top = match space {
        Space::Base => 0,
        Space::Changes => RULE_SLOTS,
    };
    0x0a80_0000 | top | (k % RULE_SLOTS)
}

/// The route that carries the traffic (`variant` 0: the sink's /32), or one of the routes
/// that cover it (`variant` j: the sink's /(32 − j)), which the /32 outranks. A write
/// replaces one of them; writes in flight together replace different ones.
pub fn traffic_route(sink_ip: Ipv4Addr, variant: u32) -> (u32, u8) {
    let len = 32 - variant.min(MAX_IN_FLIGHT - 1) as u8;
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    (u32::from(sink_ip) & mask, len)
}

/// The DUT's control threads' real-time priority by default: below the lab's probes and
/// updater ([`crate::gen::PROBE_RT_PRIORITY`]).
pub const CONTROL_RT: u32 = 5;

/// Most writes the updater keeps in flight ([`UpdateConfig::in_flight`]).
pub const MAX_IN_FLIGHT: u32 = 8;

/// The entries loaded at start: the routes of the traffic (its /32 and the `in_flight − 1`
/// routes that cover it, [`traffic_route`]), `routes` others in 10.0.0.0/9 and `acl` deny
/// rules on destinations in 10.128.0.0/10 (none matches the traffic).
pub fn base_entries(sink_ip: Ipv4Addr, sink_mac: [u8; 6], routes: u32, acl: u32, in_flight: u32) -> String {
    let mut s = String::new();
    let sink = mac_text(sink_mac);
    for v in 0..in_flight.clamp(1, MAX_IN_FLIGHT) {
        let (net, len) = traffic_route(sink_ip, v);
        s.push_str(&format!("table fib4 add {}/{len} => nexthop(1, {sink}, {DUT_MAC})\n", Ipv4Addr::from(net)));
    }
    for k in 0..routes {
        s.push_str(&format!("table fib4 add {} => nexthop(1, {sink}, {DUT_MAC})\n", route_prefix(Space::Base, k)));
    }
    for k in 0..acl {
        s.push_str(&format!("table acl add {} priority {} => deny\n", acl_key(Space::Base, k), 1000 + k));
    }
    s
}

/// Route `k` of `space` as text.
fn route_prefix(space: Space, k: u32) -> String {
    format!("{}/24", Ipv4Addr::from(route_net(space, k)))
}

/// ACL rule `k` of `space` as text: a /32 destination, UDP, ports 1000..1999.
fn acl_key(space: Space, k: u32) -> String {
    format!("* {}/32 17/0xff 1000..1999", Ipv4Addr::from(rule_dst(space, k)))
}

/// One change of a write, as both front ends name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Route `k` of the changes' space ([`route_net`]) added, to the sink.
    AddRoute(u32),
    /// Route `k` deleted.
    DelRoute(u32),
    /// ACL rule `k` of the changes' space ([`rule_dst`]) added as a deny with fastpath
    /// priority `p` (smaller wins).
    AddRule(u32, u32),
    /// ACL rule `k` (fastpath priority `p`) deleted.
    DelRule(u32, u32),
    /// A route of the traffic ([`traffic_route`], this variant) replaced by an equal one.
    ReplaceTrafficRoute(u32),
}

/// Routes (and as many rules) the schedule has live at most: `keep` writes' adds plus the
/// write under way.
pub fn live_at_most(cfg: &UpdateConfig, keep: u64) -> u64 {
    (keep + 1) * u64::from(cfg.batch / 2)
}

/// The changes of write `w` (`batch` of them, then a traffic route replaced): ACL rules and
/// routes are added in one write and deleted `keep` writes later (`delete`: the write
/// `w − keep` was applied; a refused write's adds are not live, so nothing deletes them), so
/// the tables stay near their size. Changes live in their own space ([`Space::Changes`]),
/// which they go round: with at most [`live_at_most`] live, fewer than the slots
/// ([`UpdateConfig::check`]), an add never names a live key and a delete only names one.
/// Write `w` replaces traffic route `w % in_flight`, so writes in flight together touch
/// different entries.
pub fn write_changes(cfg: &UpdateConfig, w: u64, keep: u64, delete: bool) -> Vec<Change> {
    let half = u64::from(cfg.batch / 2);
    let mut out = Vec::with_capacity(4 * half as usize + 1);
    let ids = |x: u64| (0..half).map(move |k| x * half + k);
    let route = |id: u64| (id % u64::from(ROUTE_SLOTS)) as u32;
    let rule = |id: u64| ((id % u64::from(RULE_SLOTS)) as u32, (100_000 + id % 1_000_000) as u32);
    if w >= keep && delete {
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
    out.push(Change::ReplaceTrafficRoute((w % u64::from(cfg.in_flight.clamp(1, MAX_IN_FLIGHT))) as u32));
    out
}

/// A change as a line of the control socket's text protocol.
pub fn change_text(sink_ip: Ipv4Addr, sink_mac: [u8; 6], c: Change) -> String {
    let sink = mac_text(sink_mac);
    match c {
        Change::AddRoute(k) => format!("table fib4 add {} => nexthop(1, {sink}, {DUT_MAC})", route_prefix(Space::Changes, k)),
        Change::DelRoute(k) => format!("table fib4 del {}", route_prefix(Space::Changes, k)),
        Change::AddRule(k, p) => format!("table acl add {} priority {p} => deny", acl_key(Space::Changes, k)),
        Change::DelRule(k, _) => format!("table acl del {}", acl_key(Space::Changes, k)),
        Change::ReplaceTrafficRoute(v) => {
            let (net, len) = traffic_route(sink_ip, v);
            format!("table fib4 modify {}/{len} => nexthop(1, {sink}, {DUT_MAC})", Ipv4Addr::from(net))
        }
    }
}

/// The text of write `w` ([`write_changes`], one line each).
pub fn write_text(sink_ip: Ipv4Addr, sink_mac: [u8; 6], cfg: &UpdateConfig, w: u64, keep: u64) -> String {
    write_changes(cfg, w, keep, true).into_iter().map(|c| change_text(sink_ip, sink_mac, c) + "\n").collect()
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
    let route_k = |k: u32| route(route_net(Space::Changes, k), 24);
    let rule = |k: u32, p: u32| {
        Entry::new("acl")
            .ternary("ipv4.dst", u128::from(rule_dst(Space::Changes, k)), u128::from(u32::MAX))
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
        Change::ReplaceTrafficRoute(v) => {
            let (net, len) = traffic_route(sink_ip, v);
            names.modify(&route(net, len))
        }
    }
}

/// One request on the control socket (the `fastpath ctl` protocol: the text, a half-close, the
/// reply `ok\n…` or `error CODE\n…`).
fn ctl_request(path: &Path, text: &str) -> Result<(), String> {
    ctl_output(path, text).map(|_| ())
}

/// [`ctl_request`], returning the reply's output (after `ok`).
fn ctl_output(path: &Path, text: &str) -> Result<String, String> {
    let mut c = UnixStream::connect(path).map_err(|e| format!("{}: {e}", path.display()))?;
    c.set_read_timeout(Some(Duration::from_secs(30))).map_err(|e| e.to_string())?;
    c.write_all(text.as_bytes()).map_err(|e| e.to_string())?;
    c.shutdown(std::net::Shutdown::Write).map_err(|e| e.to_string())?;
    let mut reply = String::new();
    c.read_to_string(&mut reply).map_err(|e| e.to_string())?;
    match reply.split_once('\n').map_or(reply.as_str(), |x| x.0) {
        "ok" => Ok(reply.split_once('\n').map_or("", |x| x.1).to_string()),
        status => Err(format!("{status}: {}", reply.lines().nth(1).unwrap_or_default())),
    }
}

/// The updater's connection to the DUT, with the tokio runtime its writes run on (one thread;
/// the control socket's requests, which block, go to its blocking threads).
struct Writer {
    rt: tokio::runtime::Runtime,
    to: To,
}

/// Where the writes go.
enum To {
    /// The control socket (one connection per request, as `fastpath ctl`).
    Ctl(PathBuf),
    /// A P4Runtime client that is the primary.
    P4rt(Box<Client>),
}

/// A write, ready to send.
enum Request {
    Text(PathBuf, String),
    Updates(fastpath_p4rt::client::Writes, Vec<proto::Update>),
}

impl Request {
    /// Sends the request and waits for its reply: how long that took.
    async fn send(self) -> Result<Duration, String> {
        match self {
            Request::Text(sock, text) => tokio::task::spawn_blocking(move || {
                let sent = Instant::now();
                ctl_request(&sock, &text).map(|()| sent.elapsed())
            })
            .await
            .map_err(|e| format!("the control request's thread: {e}"))?,
            Request::Updates(w, u) => {
                let sent = Instant::now();
                w.write_with(u, proto::atomicity::ROLLBACK_ON_ERROR).await.map(|()| sent.elapsed()).map_err(|e| match e {
                    // The update that failed, not the ones aborted because of it.
                    ClientError::Write { message, failed } => match failed.iter().find(|f| f.1 != fastpath_p4rt::client::Code::Aborted) {
                        Some((k, code, msg)) => format!("update {k} of the write: {code:?}: {msg} (the others aborted)"),
                        None => format!("{} of the write's updates failed: {message}", failed.len()),
                    },
                    other => other.to_string(),
                })
            }
        }
    }
}

impl Writer {
    /// Connects through `via` to the DUT's socket `sock`.
    fn connect(via: Via, sock: &Path) -> Result<Writer, LabError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| LabError::Io(format!("the updater's tokio runtime: {e}")))?;
        let to = match via {
            Via::Ctl => To::Ctl(sock.to_path_buf()),
            Via::P4rt => {
                let cfg = ClientConfig::new(format!("unix:{}", sock.display()), 1);
                let client = rt.block_on(Client::connect(&cfg)).map_err(|e| LabError::Io(format!("P4Runtime client: {e}")))?;
                To::P4rt(Box::new(client))
            }
        };
        Ok(Writer { rt, to })
    }

    /// `changes` as this front end's request.
    fn prepare(&self, t: &Topology, changes: &[Change]) -> Result<Request, String> {
        match &self.to {
            To::Ctl(sock) => {
                Ok(Request::Text(sock.clone(), changes.iter().map(|&c| change_text(t.sink_ip, t.sink_mac, c) + "\n").collect()))
            }
            To::P4rt(client) => changes
                .iter()
                .map(|&c| change_update(client.names(), t.sink_ip, t.sink_mac, c))
                .collect::<Result<_, _>>()
                .map(|u| Request::Updates(client.writes(), u))
                .map_err(|e| e.to_string()),
        }
    }
}

/// What the updater did.
#[derive(Debug, Default)]
struct Updated {
    writes: u64,
    changes: u64,
    refused: u64,
    /// (seconds into the run when sent, ms to the reply), by the time sent.
    ms: Vec<(f64, f64)>,
    first_error: Option<String>,
    secs: f64,
}

/// A finished write: its number, changes, when it was sent (s into the run) and how it went.
type Done = (u64, u64, f64, Result<Duration, String>);

impl Updated {
    fn record(&mut self, applied: &mut Vec<Option<bool>>, (w, n, at, r): Done) {
        let w = w as usize;
        if applied.len() <= w {
            applied.resize(w + 1, None);
        }
        applied[w] = Some(r.is_ok());
        match r {
            Ok(took) => {
                self.writes += 1;
                self.changes += n;
                self.ms.push((at, took.as_secs_f64() * 1e3));
            }
            Err(e) => {
                self.refused += 1;
                self.first_error.get_or_insert(e);
            }
        }
    }
}

/// Writes a request every `batch / updates_per_s` seconds until `stop`, with up to
/// `in_flight` waiting for their replies; returns what it did. A write waits, before it is
/// sent, for the write whose adds it deletes (`keep` earlier) and for the one `in_flight`
/// earlier (which replaced the same traffic route), so writes in flight together never touch
/// the same entry; a refused write's adds are not deleted later.
fn updater(t: &Topology, cfg: &UpdateConfig, writer: &Writer, stop: &AtomicBool) -> Updated {
    // The updater is the tester's clock, like the latency probes: off the DUT's core, and
    // real-time (its threads — the control socket's blocking ones too — inherit it), since it
    // sleeps but for building a request and taking a reply. An ordinary thread waking on the
    // generator's core waits for the generator's time slice (`gen::realtime_probe_thread`);
    // unpinned at nice 0 it also landed on the worker's core and waited there: the client then
    // saw 24 ms p50 for writes that took 1.6 ms inside fastpath.
    let _ = topo::pin_to_tester_cpus();
    let _ = fastpath_io::sys::set_realtime(crate::gen::PROBE_RT_PRIORITY);
    let period = Duration::from_secs_f64(f64::from(cfg.batch) / f64::from(cfg.updates_per_s.max(1)));
    let keep = cfg.keep();
    let depth = cfg.in_flight.clamp(1, MAX_IN_FLIGHT) as usize;
    let mut u = Updated::default();
    let t0 = Instant::now();
    writer.rt.block_on(async {
        let mut set: tokio::task::JoinSet<Done> = tokio::task::JoinSet::new();
        // Per write: None while in flight, then whether it was applied.
        let mut applied: Vec<Option<bool>> = Vec::new();
        let mut next = t0;
        let mut w = 0u64;
        loop {
            while let Some(Ok(d)) = set.try_join_next() {
                u.record(&mut applied, d);
            }
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let now = Instant::now();
            if now < next {
                tokio::time::sleep((next - now).min(Duration::from_millis(5))).await;
                continue;
            }
            // Room, and the writes this one depends on finished.
            let waits =
                |d: Option<u64>, applied: &Vec<Option<bool>>| d.is_some_and(|d| applied.get(d as usize).copied().flatten().is_none());
            if set.len() >= depth || waits(w.checked_sub(keep), &applied) || waits(w.checked_sub(depth as u64), &applied) {
                match set.join_next().await {
                    Some(Ok(d)) => u.record(&mut applied, d),
                    Some(Err(e)) => {
                        u.refused += 1;
                        u.first_error.get_or_insert(format!("a write's task failed: {e}"));
                    }
                    None => {}
                }
                continue;
            }
            let delete = w.checked_sub(keep).is_none_or(|d| applied.get(d as usize).copied().flatten() == Some(true));
            let changes = write_changes(cfg, w, keep, delete);
            let n = changes.len() as u64;
            // The request is built before the clock starts: the figure is the DUT's.
            let at = t0.elapsed().as_secs_f64();
            match writer.prepare(t, &changes) {
                Ok(request) => {
                    set.spawn(async move { (w, n, at, request.send().await) });
                }
                Err(e) => u.record(&mut applied, (w, n, at, Err(e))),
            }
            w += 1;
            // A writer that falls behind does not catch up in a burst: the rate it sustains is
            // the figure.
            next = (next + period).max(Instant::now() - period);
        }
        while let Some(r) = set.join_next().await {
            if let Ok(d) = r {
                u.record(&mut applied, d);
            }
        }
    });
    u.secs = t0.elapsed().as_secs_f64();
    u.ms.sort_by(|a, b| a.0.total_cmp(&b.0));
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
    cfg.check()?;
    if !(0.0..=1.0).contains(&cfg.load) || cfg.load == 0.0 {
        return Err(LabError::Config(format!("--load {}: a fraction of the zero-loss rate, in (0, 1]", cfg.load)));
    }
    for ns in topo::cleanup_stale() {
        progress(&format!("removed {ns}, left behind by a lab run that no longer exists"));
    }
    let _autogroup = Autogroup::raise(topo::LAB_NICE);
    let t = Topology::create(&TopoConfig::default())?;
    let tag = format!("fp-update-{}", std::process::id());
    let (spec, entries, sock) =
        (cfg.work_dir.join(format!("{tag}.toml")), cfg.work_dir.join(format!("{tag}.txt")), cfg.work_dir.join(format!("{tag}.sock")));
    let mut files = Cleanup(vec![spec.clone(), entries.clone(), sock.clone()]);
    let write = |p: &Path, s: &str| std::fs::write(p, s).map_err(|e| LabError::Io(format!("{}: {e}", p.display())));
    write(&spec, SPEC)?;
    write(&entries, &base_entries(t.sink_ip, t.sink_mac, cfg.base_routes, cfg.base_acl, cfg.in_flight))?;
    let k = &cfg.port_kind;
    let mut dc = DutConfig::new(DutKind::Fastpath);
    let p = |s: &Path| s.to_string_lossy().into_owned();
    dc.fastpath_cmd = vec![p(&cfg.fastpath_exe), "run".into(), p(&spec), "--entries".into(), p(&entries)];
    dc.fastpath_cmd.extend(["--port".into(), format!("p0={k}:{{in}}"), "--port".into(), format!("p1={k}:{{out}}")]);
    // The control socket also answers `show writes` (where the writes' time went) after the
    // run.
    let ctl_sock = match cfg.via {
        Via::P4rt => cfg.work_dir.join(format!("{tag}-ctl.sock")),
        Via::Ctl => sock.clone(),
    };
    files.0.push(ctl_sock.clone());
    let front = match cfg.via {
        Via::P4rt => vec!["--p4rt".to_string(), format!("unix:{}", p(&sock)), "--ctl".into(), p(&ctl_sock)],
        Via::Ctl => vec!["--ctl".to_string(), p(&sock)],
    };
    dc.fastpath_cmd.extend(["--core".into(), "1".into()]);
    if cfg.control_rt > 0 {
        dc.fastpath_cmd.extend(["--control-rt".into(), cfg.control_rt.to_string()]);
    }
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
    progress(&format!("fastpath: started in {} with {} routes and {} ACL rules", t.dut_ns, cfg.base_routes + cfg.in_flight, cfg.base_acl));
    let writer = Writer::connect(cfg.via, &sock)?;
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
        in_flight: cfg.in_flight,
        control_rt: cfg.control_rt,
        base_routes: cfg.base_routes + cfg.in_flight,
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
        "zero-loss rate {:.3} Mpps{}; now {:.3} Mpps for {} s with {} changes/s in writes of {}, up to {} in flight",
        rate / 1e6,
        if row.generator_limited { " (generator-limited)" } else { "" },
        load as f64 / 1e6,
        cfg.duration_s,
        cfg.updates_per_s,
        cfg.batch,
        cfg.in_flight
    ));
    let stop = AtomicBool::new(false);
    let (tr, upd) = std::thread::scope(|s| -> Result<(Trial, Updated), LabError> {
        let h = s.spawn(|| updater(&t, cfg, &writer, &stop));
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
    match ctl_output(&ctl_sock, "show writes\n") {
        Ok(table) => {
            progress(&format!("inside fastpath, per write (`fastpath ctl show writes`):\n{}", table.trim_end()));
            row.stages_us = parse_stages(&table);
        }
        Err(e) => progress(&format!("  show writes: {e}")),
    }
    drop(traffic);
    drop(writer);
    drop(dut);
    drop(files);
    Ok(UpdateResults { rows: vec![row], samples: upd.ms })
}

/// The nice value of the session's scheduler autogroup (`/proc/self/autogroup`), set for the
/// run and put back when it ends.
///
/// With autogroups on (`kernel.sched_autogroup_enabled`, Debian's default), CFS shares a CPU
/// fairly between sessions first and only then by nice value inside each: the DUT's worker at
/// nice −20 ([`topo::LAB_NICE`]) got ~72 % of its core against one `cargo build` of another
/// session at nice 0 (5 s of `/proc/PID/task/TID/schedstat`: 4.1 s run, 1.6 s waiting), and a
/// change waited 16 ms (p99) for the worker to take it from its mailbox. With the session's
/// autogroup at −20 as well, in the next run: 0.2 ms, and a write's p99 inside fastpath went
/// from 19.6 to 2.7 ms. The lab's processes (and the DUT, which it starts) are one session.
struct Autogroup(Option<String>);

impl Autogroup {
    fn raise(nice: i32) -> Autogroup {
        const PATH: &str = "/proc/self/autogroup";
        // "/autogroup-130 nice 0"
        let before = std::fs::read_to_string(PATH).ok().and_then(|s| s.split("nice").nth(1).map(|n| n.trim().to_string()));
        match before {
            Some(b) if std::fs::write(PATH, nice.to_string()).is_ok() => Autogroup(Some(b)),
            _ => Autogroup(None),
        }
    }
}

impl Drop for Autogroup {
    fn drop(&mut self) {
        if let Some(b) = &self.0 {
            let _ = std::fs::write("/proc/self/autogroup", b);
        }
    }
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

    /// A line of the text protocol as (verb, table and key): `table fib4 add 10.0.0.0/24 =>
    /// …` is ("add", "fib4 10.0.0.0/24"); an ACL rule's key leaves its priority out (the
    /// classifier knows a rule by its match).
    fn verb_key(line: &str) -> (String, String) {
        let mut w = line.strip_prefix("table ").unwrap().splitn(3, ' ');
        let (table, verb, rest) = (w.next().unwrap(), w.next().unwrap(), w.next().unwrap());
        let key = rest.split(" => ").next().unwrap().split(" priority ").next().unwrap();
        (verb.to_string(), format!("{table} {key}"))
    }

    /// Replays `writes` writes of the schedule against the set of keys the tables hold, as
    /// P4Runtime's INSERT, DELETE and MODIFY judge them, starting from the base entries: no add
    /// may name a key that is there, no delete or modify one that is not. Writes for which
    /// `refused(w)` holds are refused as a whole (their adds never live), as the updater sees
    /// it. Returns the live keys at the end.
    fn replay(cfg: &UpdateConfig, writes: u64, refused: impl Fn(u64) -> bool) -> std::collections::HashSet<String> {
        let keep = cfg.keep();
        let mut live = std::collections::HashSet::new();
        for l in base_entries(SINK.0, SINK.1, cfg.base_routes, cfg.base_acl, cfg.in_flight).lines() {
            assert!(live.insert(verb_key(l).1), "a base entry twice: {l}");
        }
        let base = live.len();
        for w in 0..writes {
            // As the updater: the deletes of a refused write's adds are left out.
            let delete = w.checked_sub(keep).is_none_or(|d| !refused(d));
            let changes = write_changes(cfg, w, keep, delete);
            if refused(w) {
                continue;
            }
            for c in changes {
                let line = change_text(SINK.0, SINK.1, c);
                let (verb, key) = verb_key(&line);
                match verb.as_str() {
                    "add" => assert!(live.insert(key), "write {w}: an INSERT of a key that is there: {line}"),
                    "del" => assert!(live.remove(&key), "write {w}: a DELETE of a key that is not there: {line}"),
                    "modify" => assert!(live.contains(&key), "write {w}: a MODIFY of a key that is not there: {line}"),
                    other => panic!("{other}: {line}"),
                }
            }
        }
        assert!(live.len() >= base, "base entries deleted");
        live
    }

    #[test]
    fn the_schedule_never_inserts_a_key_that_is_there_nor_deletes_one_that_is_not() {
        // The defaults, for longer than the changes take to go round their space twice (the
        // schedule of an earlier commit INSERTed base routes again after 455 writes).
        let cfg = UpdateConfig::default();
        cfg.check().unwrap();
        let half = u64::from(cfg.batch / 2);
        let round = u64::from(ROUTE_SLOTS) / half;
        let live = replay(&cfg, 2 * round + 50, |_| false);
        assert_eq!(live.len() as u64, u64::from(cfg.base_routes + cfg.base_acl + 1) + 2 * cfg.keep() * half, "a second of changes live");
        // The most the changes' space allows, several writes in flight, and the largest base.
        let big = UpdateConfig { updates_per_s: 60_000, in_flight: 4, base_routes: ROUTE_SLOTS, ..UpdateConfig::default() };
        big.check().unwrap();
        replay(&big, 2 * round + 50, |_| false);
        // Refused writes: their adds are not live and nothing deletes them.
        let live = replay(&cfg, 3 * cfg.keep(), |w| w % 7 == 3);
        assert!(live.len() as u64 > u64::from(cfg.base_routes), "{}", live.len());
        // Writes in flight together replace different traffic routes.
        let four = UpdateConfig { in_flight: 4, ..UpdateConfig::default() };
        let variant = |w| match write_changes(&four, w, four.keep(), true).last() {
            Some(&Change::ReplaceTrafficRoute(v)) => v,
            other => panic!("{other:?}"),
        };
        assert_eq!((0..8).map(variant).collect::<Vec<_>>(), [0, 1, 2, 3, 0, 1, 2, 3]);
    }

    #[test]
    fn a_schedule_that_does_not_fit_is_refused_with_its_values() {
        let ok = UpdateConfig::default();
        let err = |c: UpdateConfig| c.check().unwrap_err().to_string();
        assert!(err(UpdateConfig { updates_per_s: 70_000, ..ok.clone() }).contains("--updates 70000"));
        assert!(err(UpdateConfig { base_routes: ROUTE_SLOTS + 1, ..ok.clone() }).contains("32769 routes"));
        assert!(err(UpdateConfig { in_flight: 0, ..ok.clone() }).contains("--in-flight 0"));
        assert!(err(UpdateConfig { batch: 1, ..ok }).contains("--batch 1"));
    }

    #[test]
    fn every_write_and_the_base_entries_load_into_the_spec() {
        let cfg = UpdateConfig { batch: 10, base_routes: 50, base_acl: 20, ..UpdateConfig::default() };
        let prog = fastpath_pipeline::compile("update.toml", SPEC).unwrap();
        let mut p = prog.instantiate();
        p.set_ports(2).unwrap();
        p.load_entries("base", &base_entries(SINK.0, SINK.1, cfg.base_routes, cfg.base_acl, cfg.in_flight)).unwrap();
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
        p.load_entries("base", &base_entries(SINK.0, SINK.1, cfg.base_routes, cfg.base_acl, cfg.in_flight)).unwrap();
        for w in 0..20 {
            let changes = write_changes(&cfg, w, 3, true);
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
