"""A stand-in for a Riverlog service process, so the launcher can be tested without the real
services: it takes the agreed command line, serves gRPC on --port (0: any free port), writes
the ready file, and as a gateway answers DescribeCluster with the storage nodes whose ready
files sit beside its own. Environment knobs: FAKE_FAIL_ROLE (exit 3 at once in that role),
FAKE_IGNORE_SIGTERM (needs SIGKILL), FAKE_NO_CONTROLLER (gateway reports controller -1).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from concurrent import futures
from pathlib import Path

import grpc

from riverlog.v1 import admin_pb2, common_pb2, gateway_pb2_grpc


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rpartition(")")[2].split()[0] != "Z"


class FakeGateway(gateway_pb2_grpc.GatewayServicer):
    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir

    def DescribeCluster(self, request, context):
        nodes = []
        for ready in sorted(self.run_dir.glob("storage-*.ready")):
            info = json.loads(ready.read_text())
            if _alive(int(info["pid"])):
                host, _, port = info["address"].rpartition(":")
                node_id = int(ready.stem.rpartition("-")[2])
                nodes.append(
                    common_pb2.Node(
                        node_id=node_id,
                        kind=common_pb2.NODE_KIND_STORAGE,
                        host=host,
                        port=int(port),
                    )
                )
        controller = -1 if os.environ.get("FAKE_NO_CONTROLLER") else 1
        return admin_pb2.DescribeClusterResponse(
            cluster_id="fake", controller_id=controller, controller_epoch=7, nodes=nodes
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--instance-id", type=int)
    parser.add_argument("--node-id", type=int)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--zero-copy-port", type=int)
    parser.add_argument("--direct-port", type=int)
    parser.add_argument("--log-dirs")
    parser.add_argument("--etcd")
    parser.add_argument("--metadata")
    parser.add_argument("--rack")
    parser.add_argument("--ready-file", required=True)
    parser.add_argument("--config", action="append", default=[])
    args = parser.parse_args()
    role = "metadata" if args.instance_id is not None else "storage" if args.log_dirs else "gateway"
    print(f"fake {role} starting with {sys.argv[1:]}", flush=True)
    if os.environ.get("FAKE_FAIL_ROLE") == role:
        print("boom: configured to fail", flush=True)
        sys.exit(3)
    stop = threading.Event()
    if os.environ.get("FAKE_IGNORE_SIGTERM"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    if role == "gateway":
        run_dir = Path(args.ready_file).parent
        gateway_pb2_grpc.add_GatewayServicer_to_server(FakeGateway(run_dir), server)
    port = server.add_insecure_port(f"{args.host}:{args.port}")
    if port == 0:
        print(f"cannot bind port {args.port}", flush=True)
        sys.exit(4)
    server.start()
    info = {"pid": os.getpid(), "address": f"{args.host}:{port}", "role": role}
    if args.zero_copy_port is not None:
        info["zero_copy_port"] = (
            40000 + (args.node_id or 0) if args.zero_copy_port == 0 else args.zero_copy_port
        )
        info["config"] = args.config
    if args.rack:
        info["rack"] = args.rack
    tmp = args.ready_file + ".tmp"
    Path(tmp).write_text(json.dumps(info))
    os.replace(tmp, args.ready_file)
    while not stop.wait(0.2):
        pass
    server.stop(0.5).wait()
    print("fake stopped", flush=True)


if __name__ == "__main__":
    main()
