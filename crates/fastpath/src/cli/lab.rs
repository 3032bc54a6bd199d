//! `fastpath lab`: end-to-end tests through real ports between network namespaces.
//!
//! A thin command line over the `fastpath-lab` runners (`rfc2544`, `tcp`, `gen`): each builds
//! generator ▸ DUT ▸ sink namespaces with veth pairs (198.18.0.0/15), starts every `--dut` in
//! turn, measures, tears everything down (also on Ctrl-C), and returns results that become JSON
//! lines and an HTML report with SVG charts. RFC 2544 (throughput by binary search at a loss
//! threshold, latency at a fraction of the found rate) follows RFC 2544 §26.1 and §26.2.
//!
//! The `fastpath` DUT is this very binary (`std::env::current_exe()`), started by the lab
//! inside the DUT namespace as
//! `fastpath run <l2fwd spec> --entries <generated> --port p0=afxdp:dut0 --port p1=afxdp:dut1
//! --core <DUT core> --counters-out <file>` plus any `--fastpath-arg`; the DUT's final counters
//! (per port, per stage with cycles per packet) are printed on stderr after the run; the spec and entries are written to a
//! temporary directory so the binary needs no source tree. The `fastpath-xdp` DUT is the same
//! command with `--port p0=xdp:dut0 --port p1=xdp:dut1 --mode skb`: the pipeline compiled to an
//! XDP program (`fastpath_xdp`) that forwards in the ports' receive path; `fastpath-tc` runs
//! the same program at the tc hook (`--mode tc`).
//!
//! `fastpath lab overlay` is different: tenant A ▸ DUT ▸ tenant B namespaces whose kernels run
//! real VXLAN interfaces; DUTs `fastpath` (this binary running `pipelines/sdn-overlay.toml`),
//! `fastpath-tc` (the same pipeline as the eBPF datapath at tc ingress) and `linux-vxlan`
//! (kernel VXLAN devices on a bridge); ping, iperf3 and a stateful-ACL check
//! (see `fastpath_lab::tests::overlay`).
//!
//! `fastpath lab bng-rfc2544` measures the broadband gateway (`pipelines/vbng.toml`, its
//! sessions generated for `--subscribers N`) against a Linux gateway of per-subscriber routes
//! and HTB classes (see `fastpath_lab::tests::bng_rfc2544`).
//!
//! `fastpath lab bng-dhcp` runs real DHCP clients (busybox udhcpc, ISC dhclient) in N
//! subscriber namespaces through the user plane (`fastpath run pipelines/vbng.toml --cpri
//! --pfcp`) and the control plane (`fastpath bng-cp`), both this binary: leases, sessions,
//! forwarding, spoofing, release, expiry, restarts and perfdhcp's DORA rate (see
//! `fastpath_lab::tests::bng_dhcp`).
//!
//! `fastpath lab incast | burst | fairness` are the switch tests: N sender namespaces and one
//! receiver behind a DUT with N + 1 ports whose receiver port is shaped to R
//! (`fastpath_lab::fanin_topo`); DUTs `fastpath` (this binary on a generated L2 spec with a
//! `[tm]` section, AF_XDP ports by default) and `linux-tc` (a bridge with HTB + bfifo or TBF
//! on that port), both by default (see `fastpath_lab::tests::{incast, burst, fairness}`).
//!
//! `fastpath lab metrics-cost` measures what Prometheus scrapes of `/metrics` cost the workers:
//! windows with and without scraping while fastpath forwards above its capacity (see
//! `fastpath_lab::tests::metrics_cost`).

use clap::{Args, ValueEnum};
use fastpath_lab::dut::{DutConfig, DutKind};
use fastpath_lab::gen::{self, GenConfig, Sizes, RFC2544_SIZES};
use fastpath_lab::tests::bng_dhcp::{self, DhcpConfig};
use fastpath_lab::tests::bng_rfc2544::{self, BngConfig, BngDut};
use fastpath_lab::tests::burst::{self, BurstConfig, BURST_SIZES};
use fastpath_lab::tests::fairness::{self, FairnessConfig};
use fastpath_lab::tests::incast::{self, IncastConfig};
use fastpath_lab::tests::metrics_cost::{self, MetricsCostConfig};
use fastpath_lab::tests::overlay::{self, OverlayConfig, OverlayDut};
use fastpath_lab::tests::rfc2544::{self, LatencyLoad, Rfc2544Config};
use fastpath_lab::tests::switch::{parse_bytes, parse_rate, LinuxShaper, Shaping, SwitchConfig, SwitchDut};
use fastpath_lab::tests::tcp::{self, TcpConfig, TcpTool};
use fastpath_lab::tests::update::{self, UpdateConfig};
use fastpath_lab::topo;
use std::path::PathBuf;

/// The l2fwd spec the `fastpath` DUT runs (the repository's `pipelines/l2fwd.toml`).
const L2FWD_SPEC: &str = include_str!("../../../../pipelines/l2fwd.toml");
/// The broadband gateway spec the `bng-rfc2544` test's fastpath DUT runs.
const VBNG_SPEC: &str = include_str!("../../../../pipelines/vbng.toml");
/// Its entries: each DUT port forwards to the other.
const L2FWD_ENTRIES: &str = "table port_pair add 0 => forward(1)\ntable port_pair add 1 => forward(0)\n";

/// The tcp test's DUTs when none is named: both fastpath datapaths and the baselines a switch
/// user would otherwise run.
const TCP_DUTS: [DutKind; 5] = [DutKind::Fastpath, DutKind::FastpathXdp, DutKind::FastpathTc, DutKind::LinuxBridge, DutKind::OvsAfXdp];

/// Which lab test.
#[derive(Clone, Copy, ValueEnum)]
pub enum LabTest {
    /// RFC 2544 throughput (binary search at a loss threshold) and latency per frame size.
    Rfc2544,
    /// iperf3 / iperf 2 TCP through the DUT with the endpoints' offloads on: N port pairs at
    /// once, throughput per pair and summed over time, file-transfer times, CPU per core and
    /// per Gbit/s.
    Tcp,
    /// The generator alone into an XDP sink (its own ceiling).
    Gen,
    /// The sdn-overlay pipeline as VXLAN gateway between kernel VXLAN tenants: ping, iperf3, stateful ACL.
    Overlay,
    /// TCP incast: N senders × M flows of a fixed size into one port shaped to R; completion
    /// time vs bytes ÷ R, rates over time, Jain's index, retransmits, drops.
    Incast,
    /// Burst absorption: the largest 2-to-1 / 4-to-1 burst through a port shaped to R with zero
    /// loss, per frame size (192–9216 B), fastpath's shared buffer vs Linux's per-port share.
    Burst,
    /// Fairness: N-to-1 UDP offered above R; each sender's share and Jain's index.
    Fairness,
    /// ACL invariance: RFC 2544 throughput and latency of pipelines/switch-acl.toml with 0, 24
    /// and 10,000 ACL rules (fastpath on AF_XDP ports), and each figure's ratio to no rules.
    AclInvariance,
    /// Broadband gateway: pipelines/vbng.toml with N Q-in-Q subscribers (--subscribers) against
    /// Linux routes + HTB, 1400 B frames 8:1 downstream:upstream; RFC 2544 throughput at
    /// < 0.5 % loss, latency at 90 % of it, CPU per Gbit/s, setup time.
    BngRfc2544,
    /// Hot updates under load: fastpath (an ACL and an LPM table) at 90 % of its zero-loss rate
    /// while ACL rules and routes change at --updates per second through the control socket;
    /// loss, changes per second sustained, write-to-effect p50/p99.
    UpdateUnderLoad,
    /// Broadband control plane with real clients: N subscriber namespaces (--subscribers, up
    /// to 1000) each behind its own S-VLAN/C-VLAN pair run udhcpc (and --dhclients ISC
    /// dhclient) through the vbng user plane and bng-cp: leases per second and lease latency,
    /// sessions, ping and iperf3 to a core host, spoofing, release, expiry, control-plane and
    /// user-plane restarts, then perfdhcp DORA exchanges per second.
    BngDhcp,
    /// The cost of Prometheus scrapes: fastpath (l2fwd, --metrics) forwards traffic offered above
    /// its capacity in windows without scraping and with --scrape-rate scrapes per second,
    /// --repeat rounds; forwarded Mpps per kind of window (median), its ratio to no scraping, the
    /// spread of the unscraped windows as the noise, and the scrapes' latency and size.
    MetricsCost,
}

/// Arguments of `fastpath lab`.
#[derive(Args)]
#[command(after_help = "\
DUTs: fastpath, fastpath-xdp, fastpath-tc, linux-bridge, linux-bridge-tuned, testpmd-afxdp, testpmd-afpacket, ovs-afxdp \
(repeat --dut to measure several in one run). Needs root and a kernel with XDP sockets \
(>= 5.18 for the live-frames generator).\n\nExamples:\n  \
fastpath lab rfc2544 --dut fastpath --dut linux-bridge-tuned --sizes 64,1518 --runs 3 --json\n  \
fastpath lab tcp --streams 1,4 --pairs 2 --duration 10 --interval 1 --transfer 1G --check\n  \
fastpath lab tcp --dut fastpath-tc --dut linux-bridge --pairs 2 --duration 20 --interval 5 --runs 3\n  \
fastpath lab tcp --dut fastpath-tc --dut linux-bridge --pairs 2 --duration 600 --interval 60 --transfer 1G,4G,16G\n  \
fastpath lab gen --sizes 64,1518 --trial-s 2\n  \
fastpath lab overlay --dut fastpath --dut linux-vxlan --duration 10 --streams 4 --json\n  \
fastpath lab incast --senders 2,4,8,16 --flows-per-sender 2 --bytes 8m --rate 100mbit --buffer 1m\n  \
fastpath lab burst --senders 2,4 --sizes 192,1518,9216 --rate 100mbit --buffer 1m --alpha-log2 3\n  \
fastpath lab fairness --senders 2,4,8,16 --sizes 64,1518 --overload 1.5 --trial-s 5\n  \
fastpath lab bng-rfc2544 --subscribers 40000,80000,256000 --json\n  \
fastpath lab update-under-load --updates 10000 --batch 100 --load 0.9 --duration 10 --via p4rt\n  \
fastpath lab bng-dhcp --subscribers 1000 --perfdhcp-rate 500,1000,2000,5000 --json-out dhcp.jsonl --report dhcp.html\n  \
fastpath lab metrics-cost --scrape-rate 10,1 --repeat 6 --trial-s 3\n\n\
tcp (all five by default: fastpath, fastpath-xdp, fastpath-tc, linux-bridge, ovs-afxdp): N sender/receiver namespace \
pairs (--pairs) through one DUT, each pair on its own two DUT ports; the endpoints keep checksum offload, \
TSO, GSO and GRO on (--no-offloads: all off). fastpath runs with --multi-buffer (64 KB segments cut into \
MTU-sized ones with full checksums in its AF_XDP ports), fastpath-xdp in generic mode on DUT veths of MTU \
65535 (GSO segments cross whole, copied once by generic XDP), fastpath-tc at tc ingress (each skb forwarded \
whole by bpf_redirect, nothing copied). Each DUT first carries a probe transfer (4 MiB); one that cannot is \
reported with the counters that say why. Per run: throughput per pair and summed at every --interval, \
retransmits, CPU per core (machine, softirq, the DUT's threads) and CPU per Gbit/s; --transfer sizes: \
completion time with all pairs transferring at once; --check: tshark on the probe (checksums, \
retransmissions) and the receiver's TcpInCsumErrors.\n\n\
bng-dhcp: each subscriber is a namespace whose veth ends on an access bridge, where a tc program pushes its \
C-tag and S-tag (and pops them on the way back); the user plane (fastpath run pipelines/vbng.toml --cpri \
--pfcp, AF_PACKET ports) and the control plane (fastpath bng-cp) run in one namespace, a core host \
(198.18.0.1, VLAN 10) in another. Phases: every client starts at once (lease latency = client start to its \
hook's bound), the user plane's sessions are matched to the leases, every subscriber pings the core host \
and --iperf-clients run iperf3 both ways, one subscriber sets a foreign address (must be dropped as \
spoofed_source), a udhcpc release (SIGUSR2) and dhclient -r must remove their sessions, a short-lease \
subscriber (--expiry-lease-s) must lose its session at expiry, the control plane and then the user plane are \
killed and restarted (--restart) and must lose no session, and perfdhcp (Debian kea-admin) offers \
--perfdhcp-rate DORA exchanges per second (one run per rate, each with new clients) through a relay line \
into the same user plane; the highest rate with zero drops is reported. The command \
fails when a check fails.\n\n\
bng-rfc2544 DUTs (both by default): fastpath (pipelines/vbng.toml, every session loaded at start) and linux \
(per-subscriber /32 routes and HTB classes with u32 filters, forwarding the same traffic untagged).\n\n\
overlay DUTs: fastpath (pipelines/sdn-overlay.toml on AF_XDP), fastpath-tc (the same pipeline compiled \
to the eBPF datapath at tc ingress: the tenants keep their offloads and each 64 KB VXLAN segment crosses \
whole), linux-vxlan (kernel VXLAN devices on a bridge).\n\n\
Switch tests (incast, burst, fairness): N sender namespaces and one receiver, each on a veth into a DUT \
with N+1 ports; the receiver's port is shaped to --rate R with a buffer of --buffer bytes. DUTs (both \
by default): fastpath (this binary on a generated L2 spec, exact eth.dst -> forward(port), with a [tm] \
section: shared buffer, dynamic threshold alpha = 2^--alpha-log2, port shaper; AF_XDP ports) and \
linux-tc (a Linux bridge with static FDB entries, its receiver port shaped by HTB rate R with a bfifo \
of the buffer, or TBF when the kernel lacks HTB). burst gives Linux the same memory split evenly over \
its N+1 ports. Progress goes to stderr, a table (or --json lines) to stdout, charts to --report.")]
pub struct LabArgs {
    /// The test to run.
    #[arg(value_enum)]
    test: LabTest,
    /// A device under test; repeat for several (measured one after the other in this run).
    #[arg(long = "dut")]
    duts: Vec<String>,
    /// Frame sizes in bytes, with FCS, comma-separated [default: rfc2544 and gen
    /// 64,128,256,512,1024,1280,1518; burst 192,512,1024,1518,2048,4096,9216; fairness 64,1518].
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<u16>,
    /// Flow counts (UDP source ports), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    flows: Vec<u32>,
    /// Seconds per throughput trial (rfc2544, gen: default 2) or fairness trial (default 5).
    #[arg(long = "trial-s")]
    trial_s: Option<f64>,
    /// Most trials of the binary search per (frame size, flows) (rfc2544; burst: per frame size
    /// and sender count).
    #[arg(long = "max-trials", default_value_t = 10)]
    max_trials: u32,
    /// Times the whole rfc2544 measurement runs, every DUT once per run (in reverse order on
    /// every other run); each result is the median run, with the spread over the runs. A shared
    /// machine is noisy: give 3 or more for figures you publish. tcp: the throughput runs are
    /// repeated so, and a median line per DUT and stream count gives the ratios to the first
    /// non-fastpath DUT named (the check and the transfers run once).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    /// Acceptable loss ratio (0 = RFC 2544; 0.005 = 0.5 %) [default: 0; bng-rfc2544 0.005].
    #[arg(long)]
    loss: Option<f64>,
    /// bng-rfc2544: subscriber counts, comma-separated (e.g. 40000,80000,256000); bng-dhcp:
    /// the number of subscriber namespaces and DHCP clients (the first value, 1 to 1000).
    #[arg(long, value_delimiter = ',', default_value = "1000")]
    subscribers: Vec<u32>,
    /// bng-rfc2544: bound on each gateway's setup, seconds (fastpath to ready with every
    /// session loaded; each of Linux's ip and tc batches).
    #[arg(long = "setup-bound-s", default_value_t = 300)]
    setup_bound_s: u64,
    /// Seconds of the latency test (rfc2544).
    #[arg(long = "latency-s", default_value_t = 3.0)]
    latency_s: f64,
    /// Background load of the latency test (rfc2544) as a fraction of each DUT's found
    /// throughput; a comma-separated list measures latency at each (e.g. 0.1,0.5,0.9).
    #[arg(long = "latency-load", value_delimiter = ',', default_value = "0.5", conflicts_with = "latency_mpps")]
    latency_load: Vec<f64>,
    /// Background load of the latency test (rfc2544) as one rate for every DUT, Mpps (capped at
    /// a DUT's found throughput): compares latency at equal load; a comma-separated list
    /// measures latency at each (e.g. 0.02,0.1,0.25).
    #[arg(long = "latency-mpps", value_delimiter = ',')]
    latency_mpps: Vec<f64>,
    /// Parallel TCP stream counts (tcp: per pair; overlay), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    streams: Vec<u32>,
    /// Seconds per TCP run (tcp, overlay); tcp: 0 runs only the probe and the transfers.
    #[arg(long, visible_alias = "duration", default_value_t = 10)]
    seconds: u32,
    /// tcp: sender ▸ receiver namespace pairs through the DUT at once (1-64), each on its own two
    /// DUT ports; throughput per pair and summed.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pairs: u32,
    /// tcp: seconds between throughput and CPU samples (iperf -i), e.g. 60 for --duration 600.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    interval: u32,
    /// tcp: file transfers, bytes per pair, comma-separated (iperf3 -n; k/m/g/t are binary
    /// multiples, e.g. 1G,4G,16G): completion time with every pair transferring at once.
    #[arg(long = "transfer", value_delimiter = ',', value_parser = tcp::parse_size)]
    transfers: Vec<u64>,
    /// tcp: capture each DUT's probe transfer at the receiver and check it with tshark (bad IP/TCP
    /// checksums, retransmissions) and the receiver's TcpInCsumErrors.
    #[arg(long)]
    check: bool,
    /// Pings A→B per DUT (overlay).
    #[arg(long, default_value_t = 50)]
    pings: u32,
    /// Conntrack entries of the fastpath overlay DUT (the spec's 5,000,000 allocate ~640 MB).
    #[arg(long, default_value_t = 65536)]
    conntrack: u32,
    /// Capture the frames each overlay DUT sends towards tenant B (tshark) into this directory.
    #[arg(long)]
    capture: Option<PathBuf>,
    /// Overlay: tenants send without checksum offload, TSO and GSO for every DUT (by default the
    /// kernel gateway gets them; fastpath never does). tcp: the endpoints run with checksum
    /// offload, TSO, GSO and GRO off for every DUT (by default all on).
    #[arg(long = "no-offloads")]
    no_offloads: bool,
    /// The fastpath DUT's port kind (afxdp or afpacket) [default: afxdp].
    #[arg(long = "port-kind", value_parser = ["afxdp", "afpacket"])]
    port_kind: Option<String>,
    /// Switch tests: sender counts N, comma-separated [default: incast and fairness 2,4,8,16;
    /// burst 2,4].
    #[arg(long, value_delimiter = ',')]
    senders: Vec<usize>,
    /// Incast: TCP connections per sender (M).
    #[arg(long = "flows-per-sender", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    flows_per_sender: u32,
    /// Incast: bytes each sender transfers, split over its connections (e.g. 8m, 512k).
    #[arg(long, default_value = "8m", value_parser = parse_bytes)]
    bytes: u64,
    /// Switch tests: the receiver port's shaped rate R, bits/s (e.g. 100mbit, 400mbit). Low
    /// enough that the shaper, not the CPU, is the bottleneck.
    #[arg(long, default_value = "100mbit", value_parser = parse_rate)]
    rate: u64,
    /// Switch tests: the buffer, bytes: fastpath's shared buffer and the Linux port's FIFO
    /// (burst: Linux gets it split over its N+1 ports).
    #[arg(long, default_value = "1m", value_parser = parse_bytes)]
    buffer: u64,
    /// Switch tests: the shaper's bucket, bytes, for both DUTs [default: max(2 × 9216, R × 1 ms / 8)].
    #[arg(long = "shaper-burst", value_parser = parse_bytes)]
    shaper_burst: Option<u64>,
    /// Switch tests: fastpath's dynamic threshold exponent, alpha = 2^n, -4..=3 (one congested
    /// queue may hold alpha/(1+alpha) of the buffer) [default: burst and incast 3, fairness 0].
    #[arg(long = "alpha-log2", allow_hyphen_values = true, value_parser = clap::value_parser!(i8).range(-4..=3))]
    alpha_log2: Option<i8>,
    /// Switch tests: fastpath marks ECN (WRED profile with ecn = true) and the hosts request it;
    /// Linux has no RED qdisc here, so it still drops.
    #[arg(long)]
    ecn: bool,
    /// Switch tests: the Linux DUT's shaper, htb (HTB rate R with a bfifo child) or tbf
    /// [default: htb when the kernel has it].
    #[arg(long = "linux-shaper", value_parser = LinuxShaper::parse)]
    linux_shaper: Option<LinuxShaper>,
    /// Fairness: the offered load as a multiple of R, split evenly over the senders.
    #[arg(long, default_value_t = 1.5)]
    overload: f64,
    /// Also run iperf 2 (tcp).
    #[arg(long)]
    iperf2: bool,
    /// bng-dhcp: subscribers that run ISC dhclient (the first ones; the rest run udhcpc).
    #[arg(long, default_value_t = 1)]
    dhclients: u32,
    /// bng-dhcp: lease time of the short-lease subscriber's pool, seconds (0: no expiry check).
    #[arg(long = "expiry-lease-s", default_value_t = 8)]
    expiry_lease_s: u32,
    /// bng-dhcp: bound on the lease phase, seconds.
    #[arg(long = "lease-bound-s", default_value_t = 120)]
    lease_bound_s: u64,
    /// bng-dhcp: subscribers that run iperf3 to the core host (2 s each way, one after the other).
    #[arg(long = "iperf-clients", default_value_t = 1)]
    iperf_clients: u32,
    /// bng-dhcp: what to kill (SIGKILL) and restart mid-run, comma-separated: cp, up, none.
    #[arg(long, value_delimiter = ',', default_value = "cp,up", value_parser = ["cp", "up", "none"])]
    restart: Vec<String>,
    /// bng-dhcp: perfdhcp's offered rates, DORA exchanges per second, comma-separated, one run
    /// each (0: no perfdhcp phase).
    #[arg(long = "perfdhcp-rate", value_delimiter = ',', default_value = "500,1000,2000,5000")]
    perfdhcp_rate: Vec<u32>,
    /// bng-dhcp: perfdhcp's test period, seconds.
    #[arg(long = "perfdhcp-s", default_value_t = 5)]
    perfdhcp_s: u32,
    /// Print one JSON object per line on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Also write the JSON lines to this file.
    #[arg(long = "json-out")]
    json_out: Option<PathBuf>,
    /// Write the HTML report here.
    #[arg(long, default_value = "lab-report.html")]
    report: PathBuf,
    /// update-under-load: table changes per second (half ACL rules, half routes).
    #[arg(long, default_value_t = 10_000)]
    updates: u32,
    /// update-under-load: changes per write (one control request each).
    #[arg(long, default_value_t = 100)]
    batch: u32,
    /// update-under-load: writes the updater keeps in flight at most (1-8): a write is sent on
    /// its schedule while fewer than this wait for their replies; writes in flight together
    /// touch different entries.
    #[arg(long = "in-flight", default_value_t = 1)]
    in_flight: u32,
    /// update-under-load: the DUT's control threads real-time at this priority (fastpath run
    /// --control-rt); 0 leaves them on the ordinary scheduler.
    #[arg(long = "control-rt", default_value_t = update::CONTROL_RT, value_parser = clap::value_parser!(u32).range(0..=99))]
    control_rt: u32,
    /// update-under-load: the offered load as a fraction of the zero-loss rate.
    #[arg(long, default_value_t = 0.9)]
    load: f64,
    /// update-under-load: offer this rate instead of searching for the zero-loss rate, Mpps;
    /// metrics-cost: the offered rate [default: as fast as the generator goes].
    #[arg(long)]
    mpps: Option<f64>,
    /// metrics-cost: scrapes per second of the scraping windows, comma-separated (a window
    /// without scraping comes with them in every round).
    #[arg(long = "scrape-rate", value_delimiter = ',', default_value = "10,1")]
    scrape_rates: Vec<f64>,
    /// metrics-cost: rounds of windows (each kind once per round); the figures are medians. With
    /// n kinds of window (no scraping and each rate), 2n rounds put every kind after every other
    /// equally often (up to two rates): the default 6 for 10 and 1 scrapes/s.
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
    /// update-under-load: routes and ACL rules loaded at start.
    #[arg(long = "base-entries", default_value_t = 10_000)]
    base_entries: u32,
    /// update-under-load: the front end the changes go through: p4rt (P4Runtime Writes from a
    /// controller that is the primary; the DUT runs with --p4rt) or ctl (requests on the control
    /// socket, --ctl).
    #[arg(long, default_value = "p4rt", value_parser = update::Via::parse)]
    via: update::Via,
    /// Extra argument for the `fastpath`, `fastpath-xdp` and `fastpath-tc` DUTs' `fastpath run`
    /// (repeat), e.g. --fastpath-arg=--busy-poll=50 (AF_XDP ports), --fastpath-arg=--mode=native
    /// (xdp ports).
    #[arg(long = "fastpath-arg", allow_hyphen_values = true)]
    fastpath_args: Vec<String>,
}

fn parse_dut(s: &str) -> Result<DutKind, String> {
    DutKind::parse(s).map_err(|e| e.to_string())
}

/// The overlay test's configuration from the command line.
fn overlay_config(a: &LabArgs, exe: PathBuf) -> Result<OverlayConfig, String> {
    let duts = a.duts.iter().map(|d| OverlayDut::parse(d).map_err(|e| e.to_string())).collect::<Result<Vec<_>, _>>()?;
    Ok(OverlayConfig {
        duts,
        fastpath_exe: exe,
        fastpath_args: a.fastpath_args.clone(),
        conntrack_size: a.conntrack,
        pings: a.pings,
        streams: a.streams.clone(),
        duration_s: a.seconds,
        capture_dir: a.capture.clone(),
        kernel_offloads: !a.no_offloads,
        port_kind: a.port_kind.clone().unwrap_or_else(|| "afxdp".into()),
        ..OverlayConfig::default()
    })
}

/// Removes the temporary directory holding the DUT's spec and entries on every exit path.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The `fastpath run …` command line the lab starts for the `fastpath`, `fastpath-xdp` and
/// `fastpath-tc` DUTs.
fn fastpath_cmd(kind: DutKind, exe: &str, spec: &str, entries: &str, core: usize, extra: &[String]) -> Vec<String> {
    let [p0, p1] = kind.fastpath_ports();
    let mut v: Vec<String> =
        [exe, "run", spec, "--entries", entries, "--port", p0, "--port", p1, "--core"].iter().map(|s| (*s).to_owned()).collect();
    v.push(core.to_string());
    // The kind's lab mode, unless a --fastpath-arg gives one.
    if let Some(m) = kind.fastpath_mode().filter(|_| !extra.iter().any(|a| a.starts_with("--mode"))) {
        v.extend(["--mode".to_owned(), m.to_owned()]);
    }
    v.extend(extra.iter().cloned());
    v
}

/// A one-line-per-result table from the JSON lines (for a terminal).
fn table(lines: &str) -> String {
    let mut out = String::new();
    for l in lines.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(l) else { continue };
        let g = |k: &str| v.get(k).map(|x| x.to_string().trim_matches('"').to_owned()).unwrap_or_default();
        if let Some(line) = tcp_row(&v).or_else(|| metrics_cost_row(&v)) {
            out.push_str(&line);
        } else if let Some(m) = v.get("measurement").and_then(serde_json::Value::as_str) {
            let f = |x: &serde_json::Value| x.as_f64().unwrap_or(f64::NAN);
            out.push_str(&match m {
                "ping" => format!(
                    "{:<12} ping   {}/{} replies  loss {:.1} %  RTT ms min {:.3} avg {:.3} p99 {:.3} max {:.3}\n",
                    g("dut"),
                    g("received"),
                    g("sent"),
                    f(&v["loss_pct"]),
                    f(&v["rtt_ms"]["min"]),
                    f(&v["rtt_ms"]["avg"]),
                    f(&v["rtt_ms"]["p99"]),
                    f(&v["rtt_ms"]["max"])
                ),
                "tcp" => format!(
                    "{:<12} iperf3 {:>2} stream(s)  {:>7.2} Gbps  DUT CPU {:.0} %  machine CPU {:.0} %\n",
                    g("dut"),
                    g("streams"),
                    f(&v["gbps"]),
                    f(&v["dut_cpu_pct"]),
                    f(&v["machine_cpu_pct"])
                ),
                "acl" => format!(
                    "{:<12} acl    ({})  A→B port {} connects: {}  B→A blocked: {}\n",
                    g("dut"),
                    g("acl"),
                    g("port"),
                    g("allowed_connect"),
                    g("denied_connect_blocked")
                ),
                "capture" => format!("{:<12} capture of the frames towards B: {}\n", g("dut"), g("pcap")),
                "bng-rfc2544" => format!(
                    "{:<17} {:>7} subscribers  setup {:>6.1} s  {:.3} Mpps {:.2} Gbit/s{}  p99 {:.1} µs  CPU {:.0} % ({:.1} %/Gbit/s){}\n",
                    g("dut"),
                    g("subscribers"),
                    f(&v["setup_s"]),
                    f(&v["throughput_mpps"]),
                    f(&v["throughput_gbps"]),
                    if v["generator_limited"] == true { " (generator-limited)" } else { "" },
                    f(&v["latency_us"]["p99"]),
                    f(&v["dut_cpu_pct"]),
                    f(&v["cpu_pct_per_gbps"]),
                    v["fell_over"].as_str().map(|w| format!("  fell over: {w}")).unwrap_or_default()
                ),
                "bng-dhcp" => {
                    let check = |k: &str| {
                        let c = &v[k];
                        if c["detail"].as_str().is_some_and(|d| !d.is_empty()) {
                            format!(
                                "  {:<22} {}: {}\n",
                                k,
                                if c["ok"] == true { "ok" } else { "FAILED" },
                                c["detail"].as_str().unwrap_or("")
                            )
                        } else {
                            String::new()
                        }
                    };
                    let zero = v["perfdhcp_zero_drop_rate"].as_u64().unwrap_or(0);
                    let mut t = format!(
                        "bng-dhcp {} subscribers ({} dhclient): {} leases, {} failures, {:.1} leases/s, latency p50 {:.3} s p99 {:.3} s; \
                         {} sessions matching; {} reach the core host\n",
                        g("subscribers"),
                        g("dhclients"),
                        g("leases"),
                        g("lease_failures"),
                        f(&v["leases_per_s"]),
                        f(&v["lease_latency_p50_s"]),
                        f(&v["lease_latency_p99_s"]),
                        g("sessions_matching"),
                        g("pings_ok")
                    );
                    for run in v["iperf"].as_array().map_or(&[][..], Vec::as_slice) {
                        t.push_str(&format!(
                            "  iperf3 subscriber {} {}: {:.1} Mbit/s\n",
                            run["subscriber"],
                            run["direction"].as_str().unwrap_or(""),
                            f(&run["mbps"])
                        ));
                    }
                    for k in ["spoofing", "release_udhcpc", "release_dhclient", "expiry", "cp_restart", "up_restart"] {
                        t.push_str(&check(k));
                    }
                    if zero > 0 {
                        t.push_str(&format!("  perfdhcp: highest rate with zero drops {zero}/s\n"));
                    }
                    t
                }
                "bng-dhcp-perfdhcp" => format!(
                    "perfdhcp {:.0} DORA exchanges/s (offered {}/s for {} s): {} DISCOVERs, {} OFFERs, {} REQUESTs, {} ACKs, {} drops; {} UDP receive-buffer overflows\n",
                    f(&v["dora_per_s"]),
                    g("rate"),
                    g("seconds"),
                    g("discovers_sent"),
                    g("offers_received"),
                    g("requests_sent"),
                    g("acks_received"),
                    g("drops"),
                    g("udp_rcvbuf_errors")
                ),
                _ => format!("{l}\n"),
            });
        } else if let Some(line) = switch_row(&v) {
            out.push_str(&line);
        } else if v.get("throughput_mpps").is_some() {
            let lat = |k: &str| v.get("latency_us").and_then(|x| x.get(k)).and_then(serde_json::Value::as_f64).unwrap_or(f64::NAN);
            out.push_str(&format!(
                "{:<20} {:>5} B  flows {:>5}  {:>8.3} Mpps  {:>7.3} Gbps  latency us min {:.1} p50 {:.1} p99 {:.1} max {:.1}\n",
                g("dut"),
                g("frame_size"),
                g("flows"),
                v["throughput_mpps"].as_f64().unwrap_or(f64::NAN),
                v["throughput_gbps"].as_f64().unwrap_or(f64::NAN),
                lat("min"),
                lat("p50"),
                lat("p99"),
                lat("max")
            ));
            let runs = v.get("runs").and_then(serde_json::Value::as_array).map_or(&[][..], Vec::as_slice);
            if runs.len() > 1 {
                let each: Vec<String> = runs.iter().map(|r| format!("{:.3}", r["throughput_mpps"].as_f64().unwrap_or(f64::NAN))).collect();
                out.push_str(&format!(
                    "{:<20}   median of {} runs, {:.3}–{:.3} Mpps (each: {})\n",
                    "",
                    runs.len(),
                    v["throughput_min_mpps"].as_f64().unwrap_or(f64::NAN),
                    v["throughput_max_mpps"].as_f64().unwrap_or(f64::NAN),
                    each.join(", ")
                ));
            }
            let by_load = v.get("latency_by_load").and_then(serde_json::Value::as_array).map_or(&[][..], Vec::as_slice);
            if by_load.len() > 1 {
                for l in by_load {
                    let lat = |k: &str| l.get("latency_us").and_then(|x| x.get(k)).and_then(serde_json::Value::as_f64).unwrap_or(f64::NAN);
                    out.push_str(&format!(
                        "{:<20}   at a load of {:>6.3} Mpps:  latency us min {:.1} p50 {:.1} p99 {:.1} max {:.1}\n",
                        "",
                        l["load_mpps"].as_f64().unwrap_or(f64::NAN),
                        lat("min"),
                        lat("p50"),
                        lat("p99"),
                        lat("max")
                    ));
                }
            }
        } else {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

/// A table line for a `tcp` test row (throughput, transfer, check, unsupported); `None` for
/// other rows.
fn tcp_row(v: &serde_json::Value) -> Option<String> {
    if v.get("test")?.as_str()? != "tcp" {
        return None;
    }
    let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    let s = |k: &str| v[k].as_str().unwrap_or("").to_owned();
    let u = |k: &str| v[k].as_u64().unwrap_or(0);
    let nums = |k: &str| -> String {
        v[k].as_array()
            .map(|a| a.iter().map(|x| format!("{:.2}", x.as_f64().unwrap_or(f64::NAN))).collect::<Vec<_>>().join(" / "))
            .unwrap_or_default()
    };
    Some(match v.get("measurement").and_then(serde_json::Value::as_str) {
        Some("median") => {
            let ratio = |k: &str| v[k].as_f64().map_or("–".to_owned(), |x| format!("{x:.3}"));
            let vs = match v["baseline"].as_str() {
                Some(b) if b != v["dut"].as_str().unwrap_or("") => {
                    format!("  vs {b}: Gbit/s {}×, CPU per Gbit/s {}×", ratio("vs_baseline_gbps"), ratio("vs_baseline_cpu_per_gbps"))
                }
                _ => String::new(),
            };
            format!(
                "{:<13} median of {} runs, {:>2} stream(s): {:.2} Gbit/s ({:.2}–{:.2}), machine CPU % per Gbit/s {}{vs}\n",
                s("dut"),
                u("runs"),
                u("streams"),
                f("gbps"),
                f("gbps_min"),
                f("gbps_max"),
                v["machine_cpu_pct_per_gbps"].as_f64().map_or("–".to_owned(), |x| format!("{x:.1}"))
            )
        }
        Some("transfer") => format!(
            "{:<13} transfer {:>12} B per pair: done in {} s (all {:.2} s, {:.2} Gbit/s), {} retransmits, DUT CPU {:.0} %, machine CPU {:.0} %\n",
            s("dut"),
            u("bytes"),
            nums("completion_s"),
            f("all_done_s"),
            f("gbps"),
            u("retransmits"),
            f("dut_cpu_pct"),
            f("machine_cpu_pct")
        ),
        Some("check") => format!(
            "{:<13} check    {} B in {:.2} s: {} frames (largest {} B), bad IP/TCP checksums {}/{}, partial {}, retransmissions {} ({} spurious), lost before the receiver {}, sender RetransSegs {} / receiver D-SACKs {}, receiver TcpInCsumErrors {}\n",
            s("dut"),
            u("bytes"),
            f("seconds"),
            u("frames"),
            u("largest_frame"),
            u("bad_ip_checksums"),
            u("bad_tcp_checksums"),
            u("partial_tcp_checksums"),
            u("retransmissions"),
            u("spurious_retransmissions"),
            u("lost_segments"),
            u("sender_retrans_segs"),
            u("receiver_duplicates"),
            u("receiver_csum_errors")
        ),
        Some("unsupported") => format!("{:<13} {}\n", s("dut"), s("why")),
        _ => {
            let pairs: Vec<String> = v["per_pair"]
                .as_array()
                .map(|a| a.iter().map(|p| format!("{:.2}", p["gbps"].as_f64().unwrap_or(f64::NAN))).collect())
                .unwrap_or_default();
            let per = |k: &str| v[k].as_f64().map_or("–".to_owned(), |x| format!("{x:.1}"));
            let held = &v["vs_first_interval"];
            let held = match (held["min_ratio"].as_f64(), held["last_ratio"].as_f64()) {
                (Some(lo), Some(last)) => format!("  vs the first interval: lowest {lo:.3}, last {last:.3}"),
                _ => String::new(),
            };
            format!(
                "{:<13} {} {:>2} stream(s) × {} pair(s) {:>7.2} Gbit/s ({})  {} retransmits  DUT CPU {:.0} %  machine CPU {:.0} % (per core {})  CPU % per Gbit/s: DUT {} machine {}{held}\n",
                s("dut"),
                s("tool"),
                u("streams"),
                u("pairs").max(1),
                f("gbps"),
                pairs.join(" + "),
                u("retransmits"),
                f("dut_cpu_pct"),
                f("machine_cpu_pct"),
                nums("core_cpu_pct"),
                per("dut_cpu_pct_per_gbps"),
                per("machine_cpu_pct_per_gbps")
            )
        }
    })
}

/// A table line for an `incast`, `burst`, `fairness` or `acl-invariance` row; `None` for other
/// rows.
fn switch_row(v: &serde_json::Value) -> Option<String> {
    let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    let s = |k: &str| v[k].as_str().unwrap_or("").to_owned();
    let u = |k: &str| v[k].as_u64().unwrap_or(0);
    Some(match v.get("test")?.as_str()? {
        "acl-invariance" => format!(
            "{:<18} acl-invariance {:>5} B {} flow(s): throughput {:.3} Mpps = {:.3} × no rules; p99 {:.1} µs = {:.3} × no rules ({})\n",
            s("dut"),
            u("frame_size"),
            u("flows"),
            f("throughput_mpps"),
            f("throughput_vs_no_rules"),
            f("p99_us"),
            f("p99_vs_no_rules"),
            if v["p99_within_10pct"].as_bool() == Some(true) { "within ±10 %" } else { "outside ±10 %" }
        ),
        "incast" => {
            let drops: Vec<String> =
                v["dut_drops"].as_object().map(|m| m.iter().map(|(k, n)| format!("{k} {n}")).collect()).unwrap_or_default();
            format!(
                "{:<9} incast {:>2}×{:<2} done {:>7.2} s = {:.3} × ideal {:.2} s  {:>7.1} Mbit/s  Jain {:.4}  retransmits {}  CE {}  drops {}\n",
                s("dut"),
                u("senders"),
                u("flows_per_sender"),
                f("completion_s"),
                f("completion_vs_ideal"),
                f("ideal_s"),
                f("aggregate_mbps"),
                f("jain"),
                u("retransmits"),
                u("ecn_ce"),
                if drops.is_empty() { "0".into() } else { drops.join(", ") }
            )
        }
        "burst" => match v["unsupported"].as_str() {
            Some(why) => format!("{:<9} burst  {}-to-1 {:>5} B  not supported: {why}\n", s("dut"), u("senders"), u("frame_size")),
            None => format!(
                "{:<9} burst  {}-to-1 {:>5} B  absorbed {}{:>8.3} MB ({} frames) = {:.2} × its port buffer of {:.3} MB, arrival {:.0} Mbit/s\n",
                s("dut"),
                u("senders"),
                u("frame_size"),
                if v["lossy_frames"].is_null() { "≥" } else { " " },
                f("absorbed_mb"),
                u("absorbed_frames"),
                f("absorbed_of_port_buffer"),
                u("port_buffer_bytes") as f64 / 1e6,
                f("arrival_mbps")
            ),
        },
        "fairness" => {
            let shares: Vec<String> = v["share"].as_array().map(|a| a.iter().map(|x| format!("{:.3}", x.as_f64().unwrap_or(f64::NAN))).collect()).unwrap_or_default();
            format!(
                "{:<9} fairness {:>2}-to-1 {:>4} B  received {:>7.1} Mbit/s of R {:.0}  Jain {:.4}{}  shares {}\n",
                s("dut"),
                u("senders"),
                u("frame_size"),
                f("received_total_mbps"),
                u("rate_bps") as f64 / 1e6,
                f("jain"),
                if v["generator_limited"].as_bool() == Some(true) { " (generator-limited: offered ≤ R)" } else { "" },
                shares.join(" ")
            )
        }
        _ => return None,
    })
}

/// The latency test's background loads from `--latency-load` / `--latency-mpps`.
fn latency_loads(a: &LabArgs) -> Result<Vec<LatencyLoad>, String> {
    if !a.latency_mpps.is_empty() {
        return a
            .latency_mpps
            .iter()
            .map(|&m| match m {
                m if m > 0.0 && m.is_finite() => Ok(LatencyLoad::Pps((m * 1e6) as u64)),
                m => Err(format!("--latency-mpps {m}: give rates above 0 Mpps")),
            })
            .collect();
    }
    a.latency_load
        .iter()
        .map(|&f| match f {
            f if f > 0.0 && f <= 1.0 => Ok(LatencyLoad::Fraction(f)),
            f => Err(format!("--latency-load {f}: give fractions of the found rate, above 0 and at most 1")),
        })
        .collect()
}

/// `--sizes`, or the test's default.
fn sizes_or(a: &LabArgs, default: &[u16]) -> Vec<u16> {
    if a.sizes.is_empty() {
        default.to_vec()
    } else {
        a.sizes.clone()
    }
}

/// `--senders`, or the test's default.
fn senders_or(a: &LabArgs, default: &[usize]) -> Vec<usize> {
    if a.senders.is_empty() {
        default.to_vec()
    } else {
        a.senders.clone()
    }
}

/// The switch tests' DUTs (both when none is named), shaping and DUT settings from the command
/// line; `alpha_log2` is the test's default exponent.
fn switch_setup(a: &LabArgs, exe: &std::path::Path, alpha_log2: i8) -> Result<(Vec<SwitchDut>, Shaping, SwitchConfig), String> {
    let duts = if a.duts.is_empty() {
        SwitchDut::ALL.to_vec()
    } else {
        a.duts.iter().map(|d| SwitchDut::parse(d).map_err(|e| e.to_string())).collect::<Result<Vec<_>, _>>()?
    };
    let mut shaping = Shaping::new(a.rate, a.buffer);
    if let Some(b) = a.shaper_burst {
        shaping.burst_bytes = b;
    }
    shaping.alpha_log2 = a.alpha_log2.unwrap_or(alpha_log2);
    shaping.ecn = a.ecn;
    let sw = SwitchConfig {
        fastpath_exe: exe.to_path_buf(),
        fastpath_args: a.fastpath_args.clone(),
        port_kind: a.port_kind.clone().unwrap_or_else(|| "afxdp".into()),
        linux_shaper: a.linux_shaper,
        ..SwitchConfig::default()
    };
    Ok((duts, shaping, sw))
}

/// The RFC 2544 settings of the command line for `duts`, with `sizes` unless `--sizes` gives some.
fn rfc2544_config(a: &LabArgs, duts: Vec<DutConfig>, sizes: &[u16]) -> Result<Rfc2544Config, String> {
    Ok(Rfc2544Config {
        duts,
        frame_sizes: sizes_or(a, sizes),
        flows: a.flows.clone(),
        loss_threshold: a.loss.unwrap_or(0.0),
        trial_s: a.trial_s.unwrap_or(2.0),
        max_trials: a.max_trials,
        latency_s: a.latency_s,
        latency_loads: latency_loads(a)?,
        runs: a.runs,
        ..Rfc2544Config::default()
    })
}

/// The `bng-rfc2544` configuration from the command line: DUTs `fastpath` and `linux` (both by
/// default), the vbng spec written into `dir`.
fn bng_config(a: &LabArgs, exe: PathBuf, dir: &std::path::Path) -> Result<BngConfig, String> {
    let duts = if a.duts.is_empty() {
        vec![BngDut::Fastpath, BngDut::Linux]
    } else {
        a.duts
            .iter()
            .map(|d| match d.as_str() {
                "fastpath" | "fastpath-vbng" => Ok(BngDut::Fastpath),
                "linux" | "linux-routes-htb" => Ok(BngDut::Linux),
                other => Err(format!("bng-rfc2544 DUTs are fastpath and linux, not \"{other}\"")),
            })
            .collect::<Result<_, _>>()?
    };
    let spec = dir.join("vbng.toml");
    std::fs::write(&spec, VBNG_SPEC).map_err(|e| format!("{}: {e}", spec.display()))?;
    Ok(BngConfig {
        subscribers: a.subscribers.clone(),
        duts,
        frame_size: a.sizes.first().copied().unwrap_or(1400),
        trial_s: a.trial_s.unwrap_or(2.0),
        max_trials: a.max_trials,
        loss_threshold: a.loss.unwrap_or(0.005),
        latency_s: a.latency_s,
        setup_bound_s: a.setup_bound_s,
        fastpath_exe: exe,
        vbng_spec: spec,
        port_kind: a.port_kind.clone().unwrap_or_else(|| "afxdp".into()),
        fastpath_args: a.fastpath_args.clone(),
        work_dir: dir.to_path_buf(),
        ..BngConfig::default()
    })
}

/// The `bng-dhcp` configuration from the command line, the vbng spec written into `dir`.
fn bng_dhcp_config(a: &LabArgs, exe: PathBuf, dir: &std::path::Path) -> Result<DhcpConfig, String> {
    let subscribers = a.subscribers.first().copied().unwrap_or(1000);
    if a.subscribers.len() > 1 {
        return Err(format!("bng-dhcp takes one --subscribers count, not {:?}", a.subscribers));
    }
    let spec = dir.join("vbng.toml");
    std::fs::write(&spec, VBNG_SPEC).map_err(|e| format!("{}: {e}", spec.display()))?;
    let work_dir = dir.join("bng-dhcp");
    std::fs::create_dir_all(&work_dir).map_err(|e| format!("{}: {e}", work_dir.display()))?;
    Ok(DhcpConfig {
        subscribers,
        dhclients: a.dhclients,
        expiry_lease_s: a.expiry_lease_s,
        lease_bound_s: a.lease_bound_s,
        iperf_clients: a.iperf_clients,
        restart_cp: a.restart.iter().any(|r| r == "cp"),
        restart_up: a.restart.iter().any(|r| r == "up"),
        perfdhcp_rates: a.perfdhcp_rate.iter().copied().filter(|&r| r > 0).collect(),
        perfdhcp_s: a.perfdhcp_s,
        fastpath_exe: exe,
        vbng_spec: spec,
        work_dir,
        ..DhcpConfig::default()
    })
}

/// The `metrics-cost` configuration from the command line.
fn metrics_cost_config(a: &LabArgs, exe: PathBuf, dir: &std::path::Path) -> Result<MetricsCostConfig, String> {
    let offered_pps = match a.mpps {
        None => 0,
        Some(m) if m > 0.0 && m.is_finite() => (m * 1e6) as u64,
        Some(m) => return Err(format!("--mpps {m}: give a rate above 0 Mpps (or leave it out: as fast as the generator goes)")),
    };
    Ok(MetricsCostConfig {
        fastpath_exe: exe,
        fastpath_args: a.fastpath_args.clone(),
        port_kind: a.port_kind.clone().unwrap_or_else(|| "afxdp".into()),
        frame_size: a.sizes.first().copied().unwrap_or(64),
        flows: a.flows.first().copied().unwrap_or(1).max(1),
        scrape_rates: a.scrape_rates.clone(),
        window_s: a.trial_s.unwrap_or(3.0),
        rounds: a.repeat,
        offered_pps,
        work_dir: dir.to_path_buf(),
        ..MetricsCostConfig::default()
    })
}

/// A table line for a `metrics-cost` row; `None` for other rows.
fn metrics_cost_row(v: &serde_json::Value) -> Option<String> {
    if v.get("test")?.as_str()? != "metrics-cost" {
        return None;
    }
    let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    let rate = f("scrapes_per_s");
    let noise = match v["within_noise"].as_bool() {
        Some(true) => "within the noise",
        Some(false) => "OUTSIDE the noise",
        None => "one round: no noise figure",
    };
    let mut line = format!(
        "metrics-cost {:>14}: forwarded {:.3} Mpps (median of {}, {:.3}–{:.3}), workers {:.3} Mpps, ratio to none {:.4} ({noise} of {:.1} %)",
        if rate == 0.0 { "no scraping".to_owned() } else { format!("{rate} scrapes/s") },
        f("sink_mpps"),
        v["rounds"],
        f("sink_mpps_min"),
        f("sink_mpps_max"),
        f("worker_mpps"),
        f("ratio_vs_none"),
        f("noise_pct"),
    );
    if rate > 0.0 {
        line.push_str(&format!(
            "; {} scrapes ({} failed) of {} bytes, p50 {:.2} ms p99 {:.2} ms; the worker spent {:.2} µs per scrape, {:.4} % of its time",
            v["scrapes"],
            v["scrape_failures"],
            v["scrape_bytes"],
            v["scrape_ms"]["p50"].as_f64().unwrap_or(f64::NAN),
            v["scrape_ms"]["p99"].as_f64().unwrap_or(f64::NAN),
            f("worker_us_per_scrape"),
            f("worker_control_pct")
        ));
    }
    line.push('\n');
    Some(line)
}

/// The rule counts of the ACL-invariance test.
const ACL_RULE_COUNTS: [usize; 3] = [0, 24, 10_000];

/// One fastpath DUT per rule count, each running pipelines/switch-acl.toml with its rules, named
/// `switch-acl/N` in the results. The switch floods the generator's frames (their destination is
/// never learned) to its only other port, the sink's.
fn acl_invariance_duts(a: &LabArgs, exe: &std::path::Path, dir: &std::path::Path) -> Result<Vec<DutConfig>, String> {
    let spec = dir.join("switch-acl.toml");
    std::fs::write(&spec, crate::scenario::PIPELINES.iter().find(|(n, _)| *n == "switch-acl").map_or("", |(_, t)| *t))
        .map_err(|e| format!("{}: {e}", spec.display()))?;
    ACL_RULE_COUNTS
        .iter()
        .map(|&n| {
            let entries = dir.join(format!("acl-{n}.txt"));
            let text = match n {
                0 => String::new(),
                24 => crate::scenario::switch::ACL24.to_string(),
                n => crate::scenario::switch::generated_rules(fastpath_tables::acl::classbench::Kind::Acl, n, 1),
            };
            std::fs::write(&entries, text).map_err(|e| format!("{}: {e}", entries.display()))?;
            let mut c = DutConfig::new(DutKind::Fastpath);
            c.label = Some(format!("switch-acl/{n}"));
            let mut extra =
                vec!["--counters-out".to_owned(), dir.join(format!("switch-acl-{n}-counters.txt")).to_string_lossy().into_owned()];
            extra.extend(a.fastpath_args.iter().cloned());
            c.fastpath_cmd = fastpath_cmd(
                DutKind::Fastpath,
                &exe.to_string_lossy(),
                &spec.to_string_lossy(),
                &entries.to_string_lossy(),
                c.core,
                &extra,
            );
            Ok(c)
        })
        .collect()
}

/// One JSON line per (rule count, frame size, flows) with rules: throughput and p99 latency as
/// ratios to the same row with no rules (issue targets: p99 within ±10 %).
fn acl_invariance_summary(rows: &[fastpath_lab::tests::rfc2544::Rfc2544Row]) -> String {
    let mut out = String::new();
    for r in rows.iter().filter(|r| r.dut != "switch-acl/0") {
        let Some(base) = rows.iter().find(|b| b.dut == "switch-acl/0" && b.frame_size == r.frame_size && b.flows == r.flows) else {
            continue;
        };
        let ratio = |x: f64, y: f64| if y > 0.0 { x / y } else { f64::NAN };
        let v = serde_json::json!({
            "test": "acl-invariance",
            "dut": r.dut,
            "frame_size": r.frame_size,
            "flows": r.flows,
            "throughput_mpps": r.throughput_mpps,
            "throughput_vs_no_rules": ratio(r.throughput_mpps, base.throughput_mpps),
            "p99_us": r.latency_us.p99,
            "p99_vs_no_rules": ratio(r.latency_us.p99, base.latency_us.p99),
            "p99_within_10pct": (ratio(r.latency_us.p99, base.latency_us.p99) - 1.0).abs() <= 0.10,
        });
        out.push_str(&v.to_string());
        out.push('\n');
    }
    out
}

/// Runs `fastpath lab`.
pub fn run(a: LabArgs) -> Result<(), String> {
    if matches!(a.test, LabTest::Overlay) && a.duts.is_empty() {
        return Err("name at least one --dut (fastpath, fastpath-tc, linux-vxlan)".into());
    }
    let switch_test = matches!(a.test, LabTest::Incast | LabTest::Burst | LabTest::Fairness | LabTest::AclInvariance);
    let own_duts = switch_test
        || matches!(a.test, LabTest::Overlay | LabTest::BngRfc2544 | LabTest::UpdateUnderLoad | LabTest::BngDhcp | LabTest::MetricsCost);
    if !matches!(
        a.test,
        LabTest::Gen
            | LabTest::Overlay
            | LabTest::BngRfc2544
            | LabTest::UpdateUnderLoad
            | LabTest::Tcp
            | LabTest::BngDhcp
            | LabTest::MetricsCost
    ) && !switch_test
        && a.duts.is_empty()
    {
        return Err("name at least one --dut (fastpath, fastpath-xdp, fastpath-tc, linux-bridge, linux-bridge-tuned, testpmd-afxdp, testpmd-afpacket, ovs-afxdp)".into());
    }
    let exe = std::env::current_exe().map_err(|e| format!("finding this binary: {e}"))?;
    let dir = TempDir(std::env::temp_dir().join(format!("fastpath-lab-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).map_err(|e| format!("{}: {e}", dir.0.display()))?;
    let (spec, entries) = (dir.0.join("l2fwd.toml"), dir.0.join("l2fwd-entries.txt"));
    // Each fastpath DUT writes its final counters to its own file.
    let counters = |k: DutKind| dir.0.join(format!("{}-dut-counters.txt", k.name()));
    // TCP needs frames addressed to the receiving host: the DUT forwards them unchanged (io
    // forwarding, as testpmd does); the throughput tests keep l2fwd's MAC swap.
    let spec_text = if matches!(a.test, LabTest::Tcp) { L2FWD_SPEC.replace("swap eth.dst eth.src\n", "") } else { L2FWD_SPEC.to_owned() };
    std::fs::write(&spec, spec_text).map_err(|e| format!("{}: {e}", spec.display()))?;
    std::fs::write(&entries, L2FWD_ENTRIES).map_err(|e| format!("{}: {e}", entries.display()))?;
    let kinds: Vec<DutKind> = if own_duts {
        Vec::new()
    } else if matches!(a.test, LabTest::Tcp) && a.duts.is_empty() {
        TCP_DUTS.to_vec()
    } else {
        a.duts.iter().map(|d| parse_dut(d)).collect::<Result<_, _>>()?
    };
    let duts: Vec<DutConfig> = kinds
        .iter()
        .map(|&k| {
            let mut c = DutConfig::new(k);
            let mut extra = vec!["--counters-out".to_owned(), counters(k).to_string_lossy().into_owned()];
            extra.extend(a.fastpath_args.iter().cloned());
            c.fastpath_cmd = fastpath_cmd(k, &exe.to_string_lossy(), &spec.to_string_lossy(), &entries.to_string_lossy(), c.core, &extra);
            c
        })
        .collect();
    topo::install_ctrlc().map_err(|e| e.to_string())?;
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let mut report = fastpath_lab::tests::report("fastpath lab", &command);
    let mut progress = |l: &str| eprintln!("{l}");
    let mut failed = Vec::new();
    let lines = match a.test {
        LabTest::Rfc2544 => {
            let cfg = rfc2544_config(&a, duts, &RFC2544_SIZES)?;
            let r = rfc2544::run(&cfg, &mut progress).map_err(|e| e.to_string())?;
            r.add_to(&mut report);
            r.json_lines()
        }
        LabTest::Tcp => {
            let mut tools = vec![TcpTool::Iperf3];
            if a.iperf2 {
                tools.push(TcpTool::Iperf2);
            }
            let cfg = TcpConfig {
                duts,
                streams: a.streams.clone(),
                duration_s: a.seconds,
                tools,
                pairs: a.pairs as usize,
                interval_s: a.interval,
                transfers: a.transfers.clone(),
                check: a.check,
                offloads: !a.no_offloads,
                runs: a.runs,
                ..TcpConfig::default()
            };
            let r = tcp::run(&cfg, &mut progress).map_err(|e| e.to_string())?;
            r.add_to(&mut report);
            r.json_lines()
        }
        LabTest::Gen => {
            let cfg = GenConfig {
                sizes: Sizes::Sweep(sizes_or(&a, &RFC2544_SIZES)),
                flows: a.flows.first().copied().unwrap_or(1),
                duration_s: a.trial_s.unwrap_or(2.0),
                ..GenConfig::default()
            };
            let r = gen::run(&cfg, &mut progress).map_err(|e| e.to_string())?;
            r.trials.iter().filter_map(|t| serde_json::to_string(t).ok()).map(|s| s + "\n").collect()
        }
        LabTest::Overlay => {
            let r = overlay::run(&overlay_config(&a, exe.clone())?, &mut progress).map_err(|e| e.to_string())?;
            r.add_to(&mut report);
            if let Some(c) = &r.fastpath_counters {
                eprintln!("fastpath overlay DUT counters:\n{}", c.trim_end());
            }
            r.json_lines()
        }
        LabTest::Incast => {
            let (duts, shaping, sw) = switch_setup(&a, &exe, 3)?;
            let cfg = IncastConfig {
                duts,
                senders: senders_or(&a, &[2, 4, 8, 16]),
                flows_per_sender: a.flows_per_sender as usize,
                bytes_per_sender: a.bytes,
                shaping,
                switch: sw,
                ..IncastConfig::default()
            };
            let r = incast::run(&cfg, &mut progress).map_err(|e| e.to_string())?;
            r.add_to(&mut report);
            r.json_lines()
        }
        LabTest::AclInvariance => {
            let cfg = rfc2544_config(&a, acl_invariance_duts(&a, &exe, &dir.0)?, &[64, 1518])?;
            let r = rfc2544::run(&cfg, &mut progress).map_err(|e| e.to_string())?;
            r.add_to(&mut report);
            let mut lines = r.json_lines();
            lines.push_str(&acl_invariance_summary(&r.rows));
            lines
        }
        LabTest::BngRfc2544 => {
            let cfg = bng_config(&a, exe.clone(), &dir.0)?;
            let r = bng_rfc2544::run(&cfg, &mut progress).map_err(|e| e.to_string())?;
            r.add_to(&mut report);
            r.json_lines()
        }
        LabTest::UpdateUnderLoad => {
            let cfg = UpdateConfig {
                fastpath_exe: exe.clone(),
                fastpath_args: a.fastpath_args.clone(),
                port_kind: a.port_kind.clone().unwrap_or_else(|| "afxdp".into()),
                frame_size: a.sizes.first().copied().unwrap_or(64),
                flows: a.flows.first().copied().unwrap_or(1).max(1),
                base_routes: a.base_entries,
                base_acl: a.base_entries / 10,
                updates_per_s: a.updates,
                batch: a.batch,
                in_flight: a.in_flight,
                control_rt: a.control_rt,
                load: a.load,
                duration_s: f64::from(a.seconds),
                trial_s: a.trial_s.unwrap_or(2.0),
                max_trials: a.max_trials,
                loss_threshold: a.loss.unwrap_or(0.0),
                rate_pps: a.mpps.map_or(0, |m| (m * 1e6) as u64),
                via: a.via,
                work_dir: dir.0.clone(),
                ..UpdateConfig::default()
            };
            let r = update::run(&cfg, &mut progress).map_err(|e| e.to_string())?;
            r.add_to(&mut report);
            r.json_lines()
        }
        LabTest::MetricsCost => {
            let cfg = metrics_cost_config(&a, exe.clone(), &dir.0)?;
            let r = metrics_cost::run(&cfg, &mut progress).map_err(|e| e.to_string())?;
            r.add_to(&mut report);
            r.json_lines()
        }
        LabTest::BngDhcp => {
            let cfg = bng_dhcp_config(&a, exe.clone(), &dir.0)?;
            let r = bng_dhcp::run(&cfg, &mut progress).map_err(|e| e.to_string())?;
            r.add_to(&mut report);
            failed = r.failures();
            r.json_lines()
        }
        LabTest::Burst => {
            let (duts, shaping, sw) = switch_setup(&a, &exe, 3)?;
            let cfg = BurstConfig {
                duts,
                senders: senders_or(&a, &[2, 4]),
                frame_sizes: sizes_or(&a, &BURST_SIZES),
                shaping,
                max_trials: a.max_trials,
                switch: sw,
                ..BurstConfig::default()
            };
            let r = burst::run(&cfg, &mut progress).map_err(|e| e.to_string())?;
            r.add_to(&mut report);
            r.json_lines()
        }
        LabTest::Fairness => {
            let (duts, shaping, sw) = switch_setup(&a, &exe, 0)?;
            let cfg = FairnessConfig {
                duts,
                senders: senders_or(&a, &[2, 4, 8, 16]),
                frame_sizes: sizes_or(&a, &[64, 1518]),
                shaping,
                overload: a.overload,
                duration_s: a.trial_s.unwrap_or(5.0),
                switch: sw,
            };
            let r = fairness::run(&cfg, &mut progress).map_err(|e| e.to_string())?;
            r.add_to(&mut report);
            r.json_lines()
        }
    };
    for k in [DutKind::Fastpath, DutKind::FastpathXdp, DutKind::FastpathTc] {
        if let Ok(text) = std::fs::read_to_string(counters(k)) {
            // Where the DUT's packets (and cycles) went from its last start to its stop (all sizes).
            eprintln!("{} DUT counters (its last start):\n{}", k.name(), text.trim_end());
        }
    }
    if a.json {
        print!("{lines}");
    } else {
        print!("{}", table(&lines));
    }
    if let Some(p) = &a.json_out {
        std::fs::write(p, &lines).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    if !matches!(a.test, LabTest::Gen) {
        report.write(&a.report).map_err(|e| format!("{}: {e}", a.report.display()))?;
        eprintln!("report: {}", a.report.display());
    }
    if !failed.is_empty() {
        return Err(format!("{} check(s) failed:\n  {}", failed.len(), failed.join("\n  ")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fastpath_dut_runs_this_binary_on_the_dut_ports() {
        let v = fastpath_cmd(DutKind::Fastpath, "/bin/fp", "/t/l2fwd.toml", "/t/e.txt", 1, &["--busy-poll=50".into()]);
        assert_eq!(
            v.join(" "),
            "/bin/fp run /t/l2fwd.toml --entries /t/e.txt --port p0=afxdp:{in} --port p1=afxdp:{out} --core 1 --busy-poll=50"
        );
        let x = fastpath_cmd(DutKind::FastpathXdp, "/bin/fp", "/t/l2fwd.toml", "/t/e.txt", 1, &[]);
        assert_eq!(x.join(" "), "/bin/fp run /t/l2fwd.toml --entries /t/e.txt --port p0=xdp:{in} --port p1=xdp:{out} --core 1 --mode skb");
        let t = fastpath_cmd(DutKind::FastpathTc, "/bin/fp", "/t/l2fwd.toml", "/t/e.txt", 1, &[]);
        assert_eq!(t.join(" "), "/bin/fp run /t/l2fwd.toml --entries /t/e.txt --port p0=xdp:{in} --port p1=xdp:{out} --core 1 --mode tc");
        let n = fastpath_cmd(DutKind::FastpathXdp, "/bin/fp", "/t/l2fwd.toml", "/t/e.txt", 1, &["--mode=native".into()]);
        assert_eq!(
            n.join(" "),
            "/bin/fp run /t/l2fwd.toml --entries /t/e.txt --port p0=xdp:{in} --port p1=xdp:{out} --core 1 --mode=native"
        );
    }

    #[test]
    fn embedded_spec_compiles_with_its_entries() {
        let prog = fastpath_pipeline::compile("l2fwd.toml", L2FWD_SPEC).unwrap();
        let mut p = prog.instantiate();
        assert_eq!(p.load_entries("e", L2FWD_ENTRIES).unwrap(), 2);
    }

    /// `fastpath lab ARGS…` parsed, or clap's message.
    fn lab_args(args: &[&str]) -> Result<LabArgs, String> {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            lab: LabArgs,
        }
        Cli::try_parse_from(std::iter::once(&"x").chain(args)).map(|c| c.lab).map_err(|e| e.to_string())
    }

    #[test]
    fn bng_rows_print_as_one_line_each() {
        let l = r#"{"measurement":"bng-rfc2544","dut":"linux-routes-htb","subscribers":40000,"setup_s":1.1,"throughput_mpps":0.0,"throughput_gbps":0.0,"generator_limited":false,"latency_us":null,"dut_cpu_pct":0.0,"cpu_pct_per_gbps":0.0,"fell_over":"setup: tc did not finish within the 240 s bound"}"#;
        let t = table(l);
        assert!(t.starts_with("linux-routes-htb    40000 subscribers  setup    1.1 s  0.000 Mpps"), "{t}");
        assert!(t.trim_end().ends_with("fell over: setup: tc did not finish within the 240 s bound"), "{t}");
    }

    #[test]
    fn bng_dhcp_takes_one_count_its_restarts_and_perfdhcp_rates() {
        let dir = std::env::temp_dir().join(format!("fastpath-bng-dhcp-args-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = lab_args(&["bng-dhcp", "--subscribers", "100", "--restart", "cp", "--perfdhcp-rate", "500"]).unwrap();
        let cfg = bng_dhcp_config(&a, "/bin/fp".into(), &dir).unwrap();
        assert_eq!((cfg.subscribers, cfg.dhclients, cfg.restart_cp, cfg.restart_up), (100, 1, true, false));
        assert_eq!(cfg.perfdhcp_rates, vec![500]);
        assert!(std::fs::read_to_string(&cfg.vbng_spec).unwrap().contains("name = \"vbng\""));
        let a = lab_args(&["bng-dhcp"]).unwrap();
        let cfg = bng_dhcp_config(&a, "/bin/fp".into(), &dir).unwrap();
        assert_eq!((cfg.subscribers, cfg.restart_cp, cfg.restart_up), (1000, true, true));
        assert_eq!(cfg.perfdhcp_rates, vec![500, 1000, 2000, 5000]);
        let a = lab_args(&["bng-dhcp", "--perfdhcp-rate", "0", "--restart", "none"]).unwrap();
        let cfg = bng_dhcp_config(&a, "/bin/fp".into(), &dir).unwrap();
        assert!(cfg.perfdhcp_rates.is_empty() && !cfg.restart_cp && !cfg.restart_up);
        let a = lab_args(&["bng-dhcp", "--subscribers", "10,20"]).unwrap();
        assert!(bng_dhcp_config(&a, "/bin/fp".into(), &dir).unwrap_err().contains("one --subscribers count"));
        assert!(lab_args(&["bng-dhcp", "--restart", "dp"]).is_err(), "only cp, up, none");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bng_dhcp_rows_print_their_checks() {
        let l = r#"{"measurement":"bng-dhcp","subscribers":10,"dhclients":1,"leases":9,"lease_failures":0,"leases_per_s":25.0,"lease_latency_p50_s":0.1,"lease_latency_p99_s":0.2,"sessions_matching":9,"pings_ok":9,"iperf":[],"spoofing":{"ok":true,"detail":"0/3 pings answered","seconds":null},"up_restart":{"ok":false,"detail":"0 of 7 sessions back","seconds":null},"perfdhcp_zero_drop_rate":500}"#;
        let t = table(l);
        assert!(t.contains("bng-dhcp 10 subscribers (1 dhclient): 9 leases, 0 failures"), "{t}");
        assert!(t.contains("spoofing") && t.contains("ok: 0/3 pings answered"), "{t}");
        assert!(t.contains("up_restart") && t.contains("FAILED: 0 of 7 sessions back"), "{t}");
        assert!(t.contains("highest rate with zero drops 500/s"), "{t}");
    }

    #[test]
    fn bng_takes_subscriber_counts_and_its_own_duts() {
        let dir = std::env::temp_dir().join(format!("fastpath-bng-args-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = lab_args(&["bng-rfc2544", "--subscribers", "40000,80000,256000"]).unwrap();
        let cfg = bng_config(&a, "/bin/fp".into(), &dir).unwrap();
        assert_eq!(cfg.subscribers, vec![40000, 80000, 256000]);
        assert_eq!(cfg.duts, vec![BngDut::Fastpath, BngDut::Linux]);
        assert_eq!((cfg.frame_size, cfg.loss_threshold), (1400, 0.005));
        assert!(std::fs::read_to_string(&cfg.vbng_spec).unwrap().contains("name = \"vbng\""));
        let a = lab_args(&["bng-rfc2544", "--dut", "linux", "--loss", "0"]).unwrap();
        let cfg = bng_config(&a, "/bin/fp".into(), &dir).unwrap();
        assert_eq!((cfg.duts.clone(), cfg.subscribers.clone(), cfg.loss_threshold), (vec![BngDut::Linux], vec![1000], 0.0));
        let a = lab_args(&["bng-rfc2544", "--dut", "linux-bridge"]).unwrap();
        assert!(bng_config(&a, "/bin/fp".into(), &dir).unwrap_err().contains("fastpath and linux"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn overlay_takes_its_own_dut_names_and_rejects_others() {
        let a = lab_args(&["overlay", "--dut", "fastpath", "--dut", "linux-vxlan", "--duration", "3", "--streams", "2", "--pings", "7"])
            .unwrap();
        let cfg = overlay_config(&a, "/bin/fp".into()).unwrap();
        assert_eq!(cfg.duts, vec![OverlayDut::Fastpath, OverlayDut::LinuxVxlan]);
        assert_eq!((cfg.duration_s, cfg.pings, cfg.streams.clone()), (3, 7, vec![2]));
        let a = lab_args(&["overlay", "--dut", "linux-bridge"]).unwrap();
        assert!(overlay_config(&a, "/bin/fp".into()).unwrap_err().contains("linux-vxlan"));
    }

    #[test]
    fn latency_loads_are_fractions_or_rates_for_every_dut() {
        let load = |args: &[&str]| latency_loads(&lab_args(&[&["rfc2544"], args].concat())?);
        assert_eq!(load(&[]).unwrap(), vec![LatencyLoad::Fraction(0.5)]);
        assert_eq!(load(&["--latency-load", "0.9"]).unwrap(), vec![LatencyLoad::Fraction(0.9)]);
        assert_eq!(load(&["--latency-mpps", "0.25"]).unwrap(), vec![LatencyLoad::Pps(250_000)]);
        assert_eq!(
            load(&["--latency-load", "0.1,0.5,0.9"]).unwrap(),
            vec![LatencyLoad::Fraction(0.1), LatencyLoad::Fraction(0.5), LatencyLoad::Fraction(0.9)]
        );
        assert_eq!(load(&["--latency-mpps", "0.02,0.25"]).unwrap(), vec![LatencyLoad::Pps(20_000), LatencyLoad::Pps(250_000)]);
        assert!(load(&["--latency-load", "1.5"]).unwrap_err().contains("--latency-load 1.5"));
        assert!(load(&["--latency-load", "0.5,0"]).unwrap_err().contains("--latency-load 0:"));
        assert!(load(&["--latency-mpps", "0"]).unwrap_err().contains("--latency-mpps 0"));
        assert!(load(&["--latency-mpps", "0.1,-1"]).unwrap_err().contains("--latency-mpps -1"));
        assert!(load(&["--latency-load", "0.5", "--latency-mpps", "1"]).unwrap_err().contains("cannot be used with"));
        // One rate for every DUT, but never above what a DUT forwards without loss.
        assert_eq!(LatencyLoad::Pps(250_000).pps(100_000.0), 100_000);
        assert_eq!(LatencyLoad::Pps(250_000).pps(700_000.0), 250_000);
        assert_eq!(LatencyLoad::Fraction(0.5).pps(700_000.0), 350_000);
    }

    #[test]
    fn metrics_cost_takes_scrape_rates_rounds_and_an_offered_rate() {
        let dir = std::env::temp_dir();
        let cfg = |args: &[&str]| metrics_cost_config(&lab_args(&[&["metrics-cost"], args].concat()).unwrap(), "/bin/fp".into(), &dir);
        let c = cfg(&[]).unwrap();
        assert_eq!(
            (c.scrape_rates.clone(), c.rounds, c.window_s, c.offered_pps, c.frame_size, c.flows),
            (vec![10.0, 1.0], 6, 3.0, 0, 64, 1)
        );
        let c = cfg(&["--scrape-rate", "100", "--repeat", "5", "--mpps", "0.5", "--trial-s", "1", "--sizes", "1518"]).unwrap();
        assert_eq!((c.scrape_rates.clone(), c.rounds, c.window_s, c.offered_pps, c.frame_size), (vec![100.0], 5, 1.0, 500_000, 1518));
        assert!(cfg(&["--mpps", "0"]).unwrap_err().contains("--mpps 0"));
        assert!(lab_args(&["metrics-cost", "--repeat", "0"]).err().is_some_and(|e| e.contains("--repeat")));
        let l = r#"{"test":"metrics-cost","scrapes_per_s":10.0,"rounds":3,"sink_mpps":0.9,"sink_mpps_min":0.8,"sink_mpps_max":1.0,"worker_mpps":0.9,"ratio_vs_none":0.99,"noise_pct":4.0,"within_noise":true,"scrapes":90,"scrape_failures":0,"scrape_bytes":6000,"scrape_ms":{"p50":1.5,"p99":3.0,"max":4.0},"worker_us_per_scrape":2.5,"worker_control_pct":0.0025}"#;
        let t = table(l);
        assert!(t.contains("10 scrapes/s: forwarded 0.900 Mpps (median of 3, 0.800–1.000)"), "{t}");
        assert!(t.contains("ratio to none 0.9900 (within the noise of 4.0 %); 90 scrapes (0 failed) of 6000 bytes, p50 1.50 ms"), "{t}");
        assert!(t.trim_end().ends_with("the worker spent 2.50 µs per scrape, 0.0025 % of its time"), "{t}");
    }

    #[test]
    fn runs_default_to_one_and_zero_is_refused() {
        let runs = |args: &[&str]| lab_args(&[&["rfc2544"], args].concat()).map(|a| a.runs);
        assert_eq!(runs(&[]).unwrap(), 1);
        assert_eq!(runs(&["--runs", "3"]).unwrap(), 3);
        assert!(runs(&["--runs", "0"]).unwrap_err().contains("--runs"));
    }

    #[test]
    fn switch_tests_default_to_both_duts_and_their_own_sizes() {
        let a = lab_args(&["burst"]).unwrap();
        let (duts, s, sw) = switch_setup(&a, std::path::Path::new("/bin/fp"), 3).unwrap();
        assert_eq!(duts, vec![SwitchDut::Fastpath, SwitchDut::LinuxTc]);
        assert_eq!((s.rate_bps, s.buffer_bytes, s.alpha_log2, s.ecn), (100_000_000, 1 << 20, 3, false));
        assert_eq!(sw.port_kind, "afxdp");
        assert_eq!(sizes_or(&a, &BURST_SIZES), BURST_SIZES.to_vec());
        assert_eq!(senders_or(&a, &[2, 4]), vec![2, 4]);
        let a = lab_args(&[
            "incast",
            "--dut",
            "linux-tc",
            "--rate",
            "400mbit",
            "--buffer",
            "512k",
            "--alpha-log2",
            "-2",
            "--ecn",
            "--senders",
            "3,5",
            "--shaper-burst",
            "30000",
            "--bytes",
            "2m",
        ])
        .unwrap();
        let (duts, s, _) = switch_setup(&a, std::path::Path::new("/bin/fp"), 0).unwrap();
        assert_eq!(duts, vec![SwitchDut::LinuxTc]);
        assert_eq!((s.rate_bps, s.buffer_bytes, s.alpha_log2, s.ecn, s.burst_bytes), (400_000_000, 512 << 10, -2, true, 30_000));
        assert_eq!((senders_or(&a, &[2]), a.bytes), (vec![3, 5], 2 << 20));
        assert!(lab_args(&["incast", "--alpha-log2", "4"]).err().is_some_and(|e| e.contains("--alpha-log2")));
        assert!(lab_args(&["incast", "--rate", "fast"]).err().is_some_and(|e| e.contains("not a number")));
        let a = lab_args(&["fairness", "--dut", "ovs"]).unwrap();
        assert!(switch_setup(&a, std::path::Path::new("/bin/fp"), 0).unwrap_err().contains("linux-tc"));
        // rfc2544 keeps its sizes and trial length.
        let a = lab_args(&["rfc2544", "--dut", "fastpath"]).unwrap();
        assert_eq!((sizes_or(&a, &RFC2544_SIZES).len(), a.trial_s.unwrap_or(2.0)), (7, 2.0));
    }

    #[test]
    fn table_shows_switch_rows() {
        let l = r#"{"test":"burst","dut":"linux-tc","senders":2,"frame_size":1518,"absorbed_mb":0.118,"absorbed_frames":78,"absorbed_of_port_buffer":1.18,"port_buffer_bytes":100000,"arrival_mbps":2119.0}
{"test":"burst","dut":"fastpath","senders":2,"frame_size":9216,"unsupported":"too big"}
{"test":"fairness","dut":"fastpath","senders":2,"frame_size":64,"received_total_mbps":99.5,"rate_bps":100000000,"jain":0.9999,"share":[0.5,0.5]}
{"test":"incast","dut":"fastpath","senders":4,"flows_per_sender":2,"completion_s":3.3,"completion_vs_ideal":1.05,"ideal_s":3.14,"aggregate_mbps":95.2,"jain":0.98,"retransmits":12,"ecn_ce":0,"dut_drops":{"tm_threshold":12}}"#;
        let t = table(l);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        assert!(lines[0].contains("absorbed ≥   0.118 MB (78 frames) = 1.18"), "{t}");
        assert!(lines[1].contains("not supported: too big"), "{t}");
        assert!(lines[2].contains("Jain 0.9999") && lines[2].contains("shares 0.500 0.500"), "{t}");
        assert!(lines[3].contains("4×2") && lines[3].contains("1.050 × ideal") && lines[3].contains("tm_threshold 12"), "{t}");
    }

    #[test]
    fn tcp_takes_pairs_interval_transfers_and_check() {
        let a = lab_args(&["tcp", "--pairs", "2", "--duration", "600", "--interval", "60", "--transfer", "1G,4G,16G", "--check"]).unwrap();
        assert_eq!((a.pairs, a.seconds, a.interval, a.check, a.no_offloads), (2, 600, 60, true, false));
        assert_eq!(a.transfers, vec![1 << 30, 4 << 30, 16 << 30]);
        assert!(a.duts.is_empty(), "no --dut: the four TCP DUTs");
        assert_eq!(TCP_DUTS.map(DutKind::name), ["fastpath", "fastpath-xdp", "fastpath-tc", "linux-bridge", "ovs-afxdp"]);
        let a = lab_args(&["tcp", "--runs", "3"]).unwrap();
        assert_eq!(a.runs, 3);
        let a = lab_args(&["tcp"]).unwrap();
        assert_eq!((a.pairs, a.seconds, a.interval, a.transfers.len()), (1, 10, 1, 0));
        assert!(lab_args(&["tcp", "--pairs", "0"]).err().is_some_and(|e| e.contains("--pairs")));
        assert!(lab_args(&["tcp", "--pairs", "65"]).err().is_some_and(|e| e.contains("--pairs")));
        assert!(lab_args(&["tcp", "--interval", "0"]).err().is_some_and(|e| e.contains("--interval")));
        assert!(lab_args(&["tcp", "--transfer", "1Q"]).err().is_some_and(|e| e.contains("1Q")));
    }

    #[test]
    fn table_shows_tcp_rows() {
        let l = r#"{"test":"tcp","dut":"fastpath-xdp","tool":"iperf3","streams":1,"gbps":9.5,"pairs":2,"per_pair":[{"pair":0,"gbps":5.0},{"pair":1,"gbps":4.5}],"retransmits":12,"dut_cpu_pct":0.0,"machine_cpu_pct":190.0,"core_cpu_pct":[95.0,95.0],"machine_cpu_pct_per_gbps":20.0,"dut_cpu_pct_per_gbps":0.0,"vs_first_interval":{"first_gbps":9.8,"min_ratio":0.93,"min_at_s":120.0,"max_deviation":0.07,"last_ratio":0.99}}
{"test":"tcp","measurement":"transfer","dut":"linux-bridge","bytes":1073741824,"completion_s":[0.9,1.1],"all_done_s":1.1,"gbps":15.6,"retransmits":0,"dut_cpu_pct":0.0,"machine_cpu_pct":180.0}
{"test":"tcp","measurement":"check","dut":"fastpath","bytes":4194304,"seconds":0.02,"frames":2900,"largest_frame":1514,"bad_ip_checksums":0,"bad_tcp_checksums":0,"partial_tcp_checksums":0,"retransmissions":0,"receiver_csum_errors":0}
{"test":"tcp","measurement":"unsupported","dut":"ovs-afxdp","why":"cannot carry offloaded TCP: the probe did not complete"}
{"test":"tcp","measurement":"median","dut":"fastpath-tc","tool":"iperf3","streams":4,"runs":3,"gbps":12.27,"gbps_min":12.07,"gbps_max":12.47,"machine_cpu_pct_per_gbps":8.35,"baseline":"linux-bridge","vs_baseline_gbps":1.05,"vs_baseline_cpu_per_gbps":0.977}"#;
        let t = table(l);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 5, "{t}");
        assert!(
            lines[4].contains("median of 3 runs")
                && lines[4].contains("12.27 Gbit/s (12.07–12.47)")
                && lines[4].contains("vs linux-bridge: Gbit/s 1.050×, CPU per Gbit/s 0.977×"),
            "{t}"
        );
        assert!(
            lines[0].contains("× 2 pair(s)")
                && lines[0].contains("9.50 Gbit/s (5.00 + 4.50)")
                && lines[0].contains("machine 20.0")
                && lines[0].contains("vs the first interval: lowest 0.930, last 0.990"),
            "{t}"
        );
        assert!(lines[1].contains("done in 0.90 / 1.10 s") && lines[1].contains("15.60 Gbit/s"), "{t}");
        assert!(lines[2].contains("2900 frames (largest 1514 B)") && lines[2].contains("TcpInCsumErrors 0"), "{t}");
        assert!(lines[3].starts_with("ovs-afxdp") && lines[3].contains("cannot carry"), "{t}");
    }

    #[test]
    fn table_shows_overlay_rows() {
        let l = r#"{"test":"overlay","dut":"fastpath","measurement":"ping","sent":20,"received":20,"loss_pct":0.0,"rtt_ms":{"min":0.1,"avg":0.2,"p99":0.5,"max":0.6}}"#;
        let t = table(l);
        assert!(t.contains("20/20 replies") && t.contains("p99 0.500"), "{t}");
    }

    #[test]
    fn table_shows_throughput_and_latency() {
        let l = r#"{"dut":"fastpath","frame_size":64,"flows":1,"loss_threshold":0.0,"throughput_mpps":1.5,"throughput_gbps":1.008,"latency_us":{"min":3.0,"p50":5.0,"p99":9.5,"max":20.0}}"#;
        let t = table(l);
        assert!(t.contains("fastpath") && t.contains("1.500 Mpps") && t.contains("p99 9.5"), "{t}");
        assert_eq!(t.lines().count(), 1, "one load: one line\n{t}");
        let l = r#"{"dut":"fastpath","frame_size":64,"flows":1,"throughput_mpps":1.5,"throughput_gbps":1.008,"latency_us":{"min":3.0,"p50":5.0,"p99":9.5,"max":20.0},"latency_by_load":[{"load_mpps":0.02,"latency_us":{"min":3.0,"p50":5.0,"p99":9.5,"max":20.0}},{"load_mpps":0.25,"latency_us":{"min":3.1,"p50":6.0,"p99":14.5,"max":30.0}}]}"#;
        let t = table(l);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        assert!(lines[1].contains("0.020 Mpps") && lines[1].contains("p99 9.5"), "{t}");
        assert!(lines[2].contains("0.250 Mpps") && lines[2].contains("p99 14.5"), "{t}");
        let l = r#"{"dut":"fastpath","frame_size":64,"flows":1,"throughput_mpps":0.7,"throughput_gbps":0.47,"throughput_min_mpps":0.6,"throughput_max_mpps":0.9,"latency_us":{"min":3.0,"p50":5.0,"p99":9.5,"max":20.0},"runs":[{"throughput_mpps":0.9},{"throughput_mpps":0.6},{"throughput_mpps":0.7}]}"#;
        let t = table(l);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 2, "{t}");
        assert!(lines[0].contains("0.700 Mpps"), "the median: {t}");
        assert!(lines[1].contains("median of 3 runs, 0.600–0.900 Mpps (each: 0.900, 0.600, 0.700)"), "{t}");
    }
}
