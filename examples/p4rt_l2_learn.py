#!/usr/bin/env python3
"""A MAC-learning controller for fastpath, over P4Runtime (pipeline: examples/p4rt_l2_learn.toml).

    fastpath run examples/p4rt_l2_learn.toml --port p0=afpacket:eth1 --port p1=afpacket:eth2 \\
        --p4rt 127.0.0.1:9559
    target/python/bin/python examples/p4rt_l2_learn.py --addr 127.0.0.1:9559 --ports 2

The switch punts every frame whose source MAC its `smac` table does not know (packet-in, with
the port it came in on). For each packet-in this controller learns the source on that port --
`smac` gets the address, so its frames are no longer punted, and `dmac` forwards frames to it
out of that port (MODIFY when the address moved) -- and floods the frame out of every other
port (packet-out), so the first frames of a conversation are delivered too.

Needs p4runtime-shell (scripts/setup-python.sh installs it into target/python).
"""
import argparse
import sys
import time

import grpc
import p4runtime_sh.shell as sh
from p4runtime_sh.p4runtime import P4RuntimeWriteException

INGRESS_PORT = 1  # packet_in metadata ids, from the P4Info fastpath serves
EGRESS_PORT = 1  # packet_out


def unix_authority():
    """gRPC's C core sends a unix socket's path as the HTTP/2 :authority, which fastpath's
    HTTP/2 stack refuses as malformed; name the authority "localhost", as grpc-go does."""
    plain = grpc.insecure_channel

    def channel(target, options=None, compression=None):
        opts = list(options or []) + [("grpc.default_authority", "localhost")]
        return plain(target, options=opts, compression=compression)

    grpc.insecure_channel = channel


def mac_text(b):
    return ":".join(f"{x:02x}" for x in b)


def write(entry, insert):
    """INSERT, or MODIFY when the entry exists already (a restarted controller)."""
    try:
        entry.insert() if insert else entry.modify()
    except P4RuntimeWriteException as e:
        if insert and "ALREADY_EXISTS" in str(e):
            entry.modify()
        else:
            raise


def learn(mac, port, known):
    """Installs `mac` on `port` (smac: known source; dmac: forward to it)."""
    if mac not in known:
        te = sh.TableEntry("smac")(action="no_action")
        te.match["eth.src"] = mac
        write(te, insert=True)
    te = sh.TableEntry("dmac")(action="forward")
    te.match["eth.dst"] = mac
    te.action["port"] = str(port)
    write(te, insert=mac not in known)
    known[mac] = port


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--addr", default="127.0.0.1:9559", help="fastpath's --p4rt address (IP:PORT or unix:PATH)")
    ap.add_argument("--device-id", type=int, default=1)
    ap.add_argument("--election-id", type=int, default=1, help="low 64 bits of the election id (the highest is primary)")
    ap.add_argument("--ports", type=int, default=2, help="ports of the switch, flooded by packet-out")
    ap.add_argument("--duration", type=float, help="stop after this many seconds (default: until Ctrl-C)")
    a = ap.parse_args()
    if a.addr.startswith("unix:"):
        unix_authority()
    sh.setup(device_id=a.device_id, grpc_addr=a.addr, election_id=(0, a.election_id), verbose=False)
    print(f"connected to {a.addr} as device {a.device_id}; learning from packet-ins", flush=True)
    known = {}
    punts = 0
    end = None if a.duration is None else time.time() + a.duration
    try:
        while end is None or time.time() < end:
            msg = sh.client.get_stream_packet("packet", timeout=0.2)
            if msg is None:
                continue
            pkt = msg.packet
            port = next((int.from_bytes(m.value, "big") for m in pkt.metadata if m.metadata_id == INGRESS_PORT), None)
            if port is None or len(pkt.payload) < 14:
                continue
            punts += 1
            src = mac_text(pkt.payload[6:12])
            if known.get(src) != port:
                learn(src, port, known)
                print(f"learned {src} on port {port}", flush=True)
            for p in range(a.ports):
                if p != port:
                    sh.PacketOut(payload=pkt.payload, egress_port=str(p)).send()
    except KeyboardInterrupt:
        pass
    finally:
        print(f"{punts} packet-ins, {len(known)} addresses learned", flush=True)
        sh.teardown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
