#!/usr/bin/env python3
"""Reads `perf script --ns` output of a `fastpath lab rfc2544` latency phase (see
scripts/latency-breakdown) and prints where each latency probe's time went.

A probe is a frame the tester sends on gen0 with an AF_PACKET `sendto`: its `net_dev_start_xmit`
on gen0 starts it. The veth delivers it in the sending thread's softirq, inside that same
`sendto`, so the probe is the last frame that call puts into the DUT (the CPU was the sender's
alone) and, for a DUT that forwards in that softirq (the Linux bridge), the last frame that call
hands to sink0 (`netif_rx` on sink0). For fastpath the call ends at the AF_XDP socket (an
`xdp_redirect` into an XSK map, to_ifindex=0); the worker then sends it with its next `sendto`,
in which sink0 receives it. Probes whose frame the sender's call did not carry through (the
veth's NAPI already running in another thread) are counted as not attributed.

Also: every task that ran on the DUT core during the probes, other than the DUT's poller (the
thread that ran there most), with how often and how long — the preemptions behind the tail.
"""
import bisect
import re
import sys
from collections import defaultdict

LINE = re.compile(r"\s*(.+?)\s+(\d+)\s+\[(\d+)\]\s+(\d+\.\d+):\s+(\S+):\s*(.*)")


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p / 100 * len(v)))]


def row(name, v):
    if not v:
        return f"  {name:<34} (none)"
    return f"  {name:<34} p50 {pct(v, 50):6.1f}  p90 {pct(v, 90):6.1f}  p99 {pct(v, 99):7.1f}  max {max(v):8.1f}  (n {len(v)})"


def main(path, dut_core):
    ev = []
    for line in open(path, errors="replace"):
        m = LINE.match(line)
        if m:
            comm, tid, cpu, t, name, rest = m.groups()
            ev.append((float(t) * 1e6, int(tid), int(cpu), comm, name, rest))
    ev.sort(key=lambda e: e[0])
    probes = [e for e in ev if e[4] == "net:net_dev_start_xmit" and "dev=gen0 " in e[5]]
    if not probes:
        sys.exit("no probe in the trace (net_dev_start_xmit on gen0)")
    lo, hi = probes[0][0], probes[-1][0] + 1e4
    ev = [e for e in ev if lo <= e[0] <= hi]
    # The sender's own events, per thread, in time order.
    by_tid = defaultdict(list)
    for e in ev:
        by_tid[e[1]].append(e)
    worker_sends = [e[0] for e in ev if e[4] == "syscalls:sys_enter_sendto" and e[3].startswith("fp-worker")]
    sink_rx = [e for e in ev if e[4] == "net:netif_rx" and "dev=sink0 " in e[5]]
    sink_t = [e[0] for e in sink_rx]
    seg = defaultdict(list)
    unattributed = 0
    for p in probes:
        mine = by_tid[p[1]]
        i = bisect.bisect_left([e[0] for e in mine], p[0])
        # The rest of the sender's sendto.
        call = []
        for e in mine[i + 1:]:
            if e[4] == "syscalls:sys_exit_sendto":
                break
            call.append(e)
        to_xsk = [e[0] for e in call if e[4] == "xdp:xdp_redirect" and "to_ifindex=0 " in e[5]]
        to_sink = [e[0] for e in call if e[4] == "net:netif_rx" and "dev=sink0 " in e[5]]
        if to_sink:
            seg["sender to sink0 (one softirq)"].append(to_sink[-1] - p[0])
            seg["total"].append(to_sink[-1] - p[0])
        elif to_xsk and worker_sends:
            x = to_xsk[-1]
            j = bisect.bisect_left(worker_sends, x)
            if j == len(worker_sends):
                unattributed += 1
                continue
            w = worker_sends[j]
            k = bisect.bisect_left(sink_t, w)
            if k == len(sink_t):
                unattributed += 1
                continue
            r = sink_t[k]
            seg["sender to the AF_XDP socket"].append(x - p[0])
            seg["socket to the worker's sendto"].append(w - x)
            seg["worker's sendto to sink0"].append(r - w)
            seg["total"].append(r - p[0])
        else:
            unattributed += 1
    print(f"{len(probes)} probes over {(hi - lo) / 1e6:.1f} s, {unattributed} not attributed; µs (with tracing on):")
    for name in ["sender to the AF_XDP socket", "socket to the worker's sendto", "worker's sendto to sink0",
                 "sender to sink0 (one softirq)", "total"]:
        if seg[name]:
            print(row(name, seg[name]))
    # Who ran on the DUT core, and for how long each time.
    on = {}
    ran = defaultdict(list)
    for e in ev:
        if e[2] != dut_core or e[4] != "sched:sched_switch":
            continue
        m = re.search(r"prev_comm=(.+?) prev_pid=(\d+).*next_comm=(.+?) next_pid=(\d+)", e[5])
        if not m:
            continue
        prev = (m.group(1), int(m.group(2)))
        if prev in on:
            ran[prev].append(e[0] - on.pop(prev))
        on[(m.group(3), int(m.group(4)))] = e[0]
    if ran:
        poller = max(ran, key=lambda k: sum(ran[k]))
        others = {k: v for k, v in ran.items() if k != poller and not k[0].startswith("swapper")}
        total = sum(sum(v) for v in others.values())
        print(f"  on the DUT core (CPU {dut_core}) besides {poller[0]}: {total / 1e3:.1f} ms in all")
        for k in sorted(others, key=lambda k: -sum(others[k]))[:8]:
            v = others[k]
            print(f"    {k[0]:<24} {len(v):5d} times, {sum(v) / 1e3:8.2f} ms, longest {max(v):8.1f} µs")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: latency-breakdown.py PERF_SCRIPT_OUTPUT DUT_CORE")
    main(sys.argv[1], int(sys.argv[2]))
