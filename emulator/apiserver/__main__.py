"""``python -m emulator.apiserver``: run kemu's API server against an existing Redis.

    python -m emulator.apiserver --redis-url redis://127.0.0.1:6379/0 [--host 127.0.0.1] [--port 6443]
        [--workers N] [--token TOKEN | env KEMU_API_TOKEN] [--require-token] [--kubeconfig PATH]
        [--tls-dir DIR] [--authorization-mode RBAC|AlwaysAllow]

Binding a non-loopback address turns ``--require-token`` on (a token is
generated if none is given). ``--kubeconfig PATH`` writes a kubeconfig for
the server. ``--tls-dir DIR`` serves HTTPS with the CA and certificate in DIR
(generated there when missing, :mod:`emulator.apiserver.tls`).
``--from-env`` is how :class:`~emulator.apiserver.process.ApiServerProcess`
passes complete settings (JSON in ``KEMU_APISERVER_SETTINGS``), with
``--listen-fd``, the socket it bound for the child.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path

from emulator.apiserver import kubeconfig
from emulator.apiserver.process import ApiServerError, serve
from emulator.apiserver.settings import ServerSettings, is_loopback


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m emulator.apiserver", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--from-env", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--listen-fd", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--redis-url", default=os.environ.get("KEMU_REDIS_URL"))
    ap.add_argument("--prefix", default="kemu:", help="store key prefix (must match the cluster's)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=6443)
    ap.add_argument("--workers", type=int, default=1, help="worker processes sharing the port")
    ap.add_argument("--token", default=os.environ.get("KEMU_API_TOKEN", ""), help="bearer token (env KEMU_API_TOKEN)")
    ap.add_argument("--require-token", action="store_true", help="401 for requests without the token")
    ap.add_argument("--clock-speed", type=float, default=1.0)
    ap.add_argument("--bookmark-interval", type=float, default=60.0)
    ap.add_argument("--kubeconfig", help="also write a kubeconfig for this server here")
    ap.add_argument("--log-level", default="warning")
    ap.add_argument("--tls-dir", help="serve HTTPS with the CA/certificate in this directory (made if missing)")
    ap.add_argument("--authorization-mode", choices=("RBAC", "AlwaysAllow"), default="RBAC")
    args = ap.parse_args(argv)
    if args.from_env:
        sock = socket.socket(fileno=args.listen_fd) if args.listen_fd is not None else None
        return serve(ServerSettings.from_env(), sock)
    if not args.redis_url:
        ap.error("--redis-url (or KEMU_REDIS_URL) is required")
    require = args.require_token or not is_loopback(args.host)
    token = args.token or (kubeconfig.generate_token() if require or args.kubeconfig else "")
    tls: dict[str, str] = {}
    ca_pem = None
    if args.tls_dir:
        from emulator.apiserver.tls import ensure_certificates

        ca, cert, key = ensure_certificates(Path(args.tls_dir), [args.host])
        tls = {"tls_cert_file": str(cert), "tls_key_file": str(key), "tls_ca_file": str(ca)}
        ca_pem = ca.read_bytes()
    settings = ServerSettings(redis_url=args.redis_url, prefix=args.prefix, host=args.host, port=args.port,
                              workers=args.workers, token=token, require_token=require, clock_speed=args.clock_speed,
                              bookmark_interval=args.bookmark_interval, log_level=args.log_level,
                              authorization_mode=args.authorization_mode, **tls)
    if args.kubeconfig:
        path = kubeconfig.write(Path(args.kubeconfig), kubeconfig.client_url(args.host, args.port, bool(tls)), token,
                                ca_pem=ca_pem)
        print(f"kubeconfig written to {path}", flush=True)
    try:
        return serve(settings)
    except ApiServerError as e:
        print(f"kemu apiserver: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
