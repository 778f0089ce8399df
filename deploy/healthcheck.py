"""Container healthcheck: exit 0 when the gRPC server on 127.0.0.1:PORT reports SERVING on the
standard grpc.health.v1 service (every Riverlog service serves it), 1 otherwise.

    python /opt/riverlog/healthcheck.py PORT
"""

from __future__ import annotations

import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].isdigit():
        print("usage: healthcheck.py PORT", file=sys.stderr)
        return 2
    with grpc.insecure_channel(f"127.0.0.1:{argv[0]}") as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=3.0
            )
        except grpc.RpcError as exc:
            print(f"not healthy: {exc.code()}", file=sys.stderr)
            return 1
    return 0 if reply.status == health_pb2.HealthCheckResponse.SERVING else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
