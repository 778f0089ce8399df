"""`riverlog console`: the web console (decision 0034) on http://HOST:PORT, talking to the
gateway(s) of `--bootstrap` (or $RIVERLOG_BOOTSTRAP, or the local cluster) through the SDK.

The console has no credentials of its own: each person signs in on its login page and every
call is made with their credentials, so the gateway's authentication and authorization apply.
`-X KEY=VALUE` passes SDK settings (e.g. security.protocol=ssl, ssl.ca.location=...) to the
clients it builds; credential keys are refused there. Its web dependencies are the optional
extra `riverlog[console]`.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..connection import key_value, local_cluster_tls, resolve_bootstrap
from ..console import EXIT_OK, EXIT_USAGE, CliError

DEFAULT_PORT = 8080


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
    return value


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "console",
        help="serve the web console (topics, messages, groups and lag, quotas, users)",
        description="Serve the web console over HTTP. People sign in with their own "
        "credentials; the console holds none.",
    )
    parser.add_argument(
        "--bootstrap",
        "--bootstrap-server",
        dest="bootstrap",
        metavar="HOST:PORT",
        help="gateway address(es), comma-separated (default: $RIVERLOG_BOOTSTRAP, else the "
        "local cluster started by `riverlog cluster up`)",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: %(default)s)"
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="HTTP port (default: %(default)s)"
    )
    parser.add_argument(
        "--sample-interval",
        type=_positive,
        default=10.0,
        metavar="SECONDS",
        help="how often lag and throughput graphs are sampled (default: %(default)s)",
    )
    parser.add_argument(
        "--history",
        type=int,
        default=360,
        metavar="POINTS",
        help="points kept per graph; older ones are dropped (default: %(default)s)",
    )
    parser.add_argument(
        "--session-idle-timeout",
        type=_positive,
        default=3600.0,
        metavar="SECONDS",
        help="sign a session out after this long unused (default: %(default)s)",
    )
    parser.add_argument(
        "-X",
        "--client-config",
        dest="client_config",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an SDK setting for the console's admin client and consumers (TLS to the gateway, "
        "timeouts; keys both know); repeat",
    )
    parser.add_argument(
        "--log-level",
        choices=("critical", "error", "warning", "info", "debug"),
        default="info",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        from riverlog.console.server import serve
        from riverlog.console.sessions import SessionStore
    except ImportError as e:
        raise CliError(
            f"the web console needs its optional dependencies ({e.name} is missing): "
            "pip install 'riverlog[console]'"
        ) from None
    if not 0 <= args.port < 65536:
        raise CliError(f"--port {args.port} is not a TCP port", EXIT_USAGE)
    if args.history < 2:
        raise CliError("--history must keep at least 2 points", EXIT_USAGE)
    bootstrap = resolve_bootstrap(args.bootstrap)
    # a local cluster of `cluster up --tls`: its CA, as every other command does
    client_conf = {**local_cluster_tls(args.bootstrap), **dict(args.client_config)}
    try:
        store = SessionStore(
            bootstrap,
            client_conf,
            sample_interval_s=args.sample_interval,
            history=args.history,
            idle_timeout_s=args.session_idle_timeout,
        )
    except ValueError as e:
        raise CliError(str(e), EXIT_USAGE) from None
    print(f"Riverlog console on http://{args.host}:{args.port} (gateway {bootstrap})", flush=True)
    serve(store, args.host, args.port, args.log_level)
    return EXIT_OK
