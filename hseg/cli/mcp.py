"""``hseg mcp``: serve a store's retrieval tools to agents over the Model Context Protocol.

Example::

    hseg mcp --db ./hseg-db                  # stdio: what an MCP client starts
    hseg mcp --db ./hseg-db --http 8765      # streamable HTTP at http://127.0.0.1:8765/mcp

The process opens the store, loads its encoder and brings the lexical index in step once, before the
first request, and keeps them: each question then costs what a search costs. Every search sees other
processes' writes, as any reader of the store does (:mod:`hseg.store.freshness`, :mod:`hseg.store.lexical`).
The tools only read (:mod:`hseg.tools`).
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import sys
from typing import Any

from hseg.cli.chroma import CliError, add_location, check_location, existing_store, location_label, server_errors
from hseg.cli.options import add_encoder_option, positive_int, quiet_model_loading

logger = logging.getLogger(__name__)

#: the address a streamable HTTP server binds unless told otherwise: this machine only
DEFAULT_BIND = "127.0.0.1"
#: the path of the streamable HTTP endpoint
HTTP_PATH = "/mcp"


def _http_port(text: str) -> int:
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"expected a port in 1..65535, got {text!r}")
    return value


def register(sub: Any) -> None:
    p = sub.add_parser(
        "mcp",
        help="serve the store's retrieval tools to agents (Model Context Protocol)",
        description="Serve search, read, expand, lexical_search and list_documents over an index written by "
                    "'hseg index', as a Model Context Protocol server: over stdio (what an MCP client such as "
                    "Claude Desktop starts), or streamable HTTP with --http. Every result carries exact "
                    "character spans; no tool writes. Needs pip install 'hseg[mcp]'.",
        epilog='Example: hseg mcp --db ./hseg-db   (client configuration: {"command": "hseg", '
               '"args": ["mcp", "--db", "/abs/path/hseg-db"]})',
    )
    add_location(p, db_help="directory of the embedded Chroma database written by 'hseg index'")
    add_encoder_option(p, default="the model recorded in the collection")
    p.add_argument("--http", type=_http_port, default=None, metavar="PORT",
                   help=f"serve streamable HTTP on --bind:PORT (endpoint {HTTP_PATH}) instead of stdio")
    p.add_argument("--bind", default=DEFAULT_BIND, metavar="ADDRESS",
                   help=f"the address --http listens on (default {DEFAULT_BIND}: this machine only; the server "
                        "has no authentication)")
    p.set_defaults(func=run_mcp)


def run_mcp(args: argparse.Namespace) -> int:
    check_location(args)
    if args.http is None and args.bind != DEFAULT_BIND:
        args._parser.error("--bind needs --http")
    from hseg.tools.server import INSTALL_HINT, build_server, require_mcp

    try:
        require_mcp()
    except ModuleNotFoundError:
        raise CliError(INSTALL_HINT) from None
    from hseg.tools import StoreTools

    store = existing_store(args)
    quiet_model_loading()
    from hseg.encoders import factory

    encoder = factory.load_encoder(args.encoder or store.encoder_name, args.backend)
    with server_errors(args):
        store.use_encoder(encoder)  # the collection's encoder, or an EncoderMismatchError
        if store.count() == 0:
            raise CliError(f"collection {args.collection!r} at {location_label(args)} is empty; "
                           "run 'hseg index' first")
        warm(store)
    server = build_server(StoreTools(store))
    if args.http is None:
        logger.info("hseg mcp: serving %s over stdio", location_label(args))
        server.run("stdio")
        return 0
    if not is_loopback(args.bind):
        print(f"hseg mcp: warning: listening on {args.bind}, reachable from other machines; the server has no "
              "authentication", file=sys.stderr)
    print(f"hseg mcp: serving {location_label(args)} at http://{args.bind}:{args.http}{HTTP_PATH}", file=sys.stderr)
    server.run("streamable-http", host=args.bind, port=args.http, streamable_http_path=HTTP_PATH)
    return 0


def warm(store: Any) -> None:
    """One search before the first request: the encoder's first call and the lexical index's
    catching up (a server's cache may build itself) are paid here, not by the client's first question."""
    store.search("warm up", budget_tokens=16, unit="auto")


def is_loopback(address: str) -> bool:
    """Whether ``address`` is this machine only (``127.0.0.1``, ``::1``, ``localhost``)."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False
