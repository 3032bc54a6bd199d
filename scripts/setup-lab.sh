#!/usr/bin/env bash
# Installs the Debian packages the fastpath lab uses: traffic programs (iperf3, iperf 2), the
# baseline DUTs (DPDK testpmd, Open vSwitch userspace datapath), and the tools the topology needs
# (iproute2 with tc, ethtool, procps for sysctl, util-linux for taskset), nftables (the overlay
# test's kernel VXLAN gateway enforces its ACL with it; the switch tests — incast, burst,
# fairness — count each sender's frames at the receiver with it) and prometheus (its server and
# promtool check `fastpath run --metrics`, crates/fastpath/tests/live_prom.rs), and the DHCP
# clients the control plane's live tests serve (busybox udhcpc, ISC dhclient) and the external DHCP
# server its relay mode relays to (dnsmasq-base: the binary, no system service; crates/bng/tests/live.rs),
# and a C compiler (build-essential) for the SQLite that crates/bng builds from source,
# and python3-scapy (its PFCP layer is the independent peer of crates/pfcp/tests/scapy.rs),
# and chromium (headless, it opens the `fastpath run --web` page in crates/fastpath/tests/live_web.rs),
# and tshark (`fastpath lab tcp --check` reads the receiver's capture with it;
# crates/fastpath/tests/live_tcp_offload.rs).
# and kea-admin (its perfdhcp is the DHCP load generator of `fastpath lab bng-dhcp`).
#
# Idempotent: packages already installed are skipped; `apt-get update` runs at most once, and only
# when something is missing. Noninteractive. Needs root. A package that cannot be installed is
# reported and skipped (the lab then skips the DUT that needs it, with a message).
set -u
bash "$(dirname "$0")/setup-python.sh" || echo "setup-lab: scripts/setup-python.sh failed (the P4Runtime tests need its packages)" >&2

# dpdk-testpmd ships in dpdk-dev on Debian 12; its AF_XDP/AF_PACKET drivers are separate packages.
want=(iproute2 ethtool iperf3 iperf dpdk dpdk-dev librte-net-af-xdp23 librte-net-af-packet23
      librte-mempool-ring23 openvswitch-switch procps util-linux iputils-ping nftables prometheus
      busybox isc-dhcp-client dnsmasq-base build-essential python3-scapy chromium tshark kea-admin)
missing=()
for p in "${want[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "setup-lab: all packages present"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "setup-lab: missing ${missing[*]} and not root; run as root" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
echo "setup-lab: installing ${missing[*]}"
apt-get update -qq
# iperf3 asks whether to start a daemon; answer no.
echo "iperf3 iperf3/start_daemon boolean false" | debconf-set-selections 2>/dev/null || true
failed=()
if ! apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
    # Retry one by one so one broken package does not block the others.
    for p in "${missing[@]}"; do
        apt-get install -y -qq --no-install-recommends "$p" || failed+=("$p")
    done
fi
# openvswitch-switch and prometheus start their system daemons; the lab and the tests run their
# own instances in a temp dir.
if command -v systemctl >/dev/null 2>&1; then
    systemctl stop openvswitch-switch ovs-vswitchd ovsdb-server >/dev/null 2>&1 || true
    systemctl stop prometheus >/dev/null 2>&1 || true
fi
if [ ${#failed[@]} -ne 0 ]; then
    echo "setup-lab: could not install: ${failed[*]} (the lab skips the DUTs that need them)" >&2
fi
echo "setup-lab: done"
