"""Loopback HTTP servers the tests start themselves: bound on 127.0.0.1 (port 0 by default, one the
system picks, free whatever else runs beside), served from a daemon thread, and stopped promptly.

`serving(Handler)` binds a handler class for the length of a block; `running(server)` does the same
for a server already bound (a subclass of its own, a port from a range); `start` and `stop` are for a
server whose life is not one block (an object that closes it later)."""

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import BaseServer

# shutdown() waits for the serving loop to next look at its flag, which it does every poll_interval
# (0.5 s by default): each server stopped would cost a test up to half a second.
POLL_INTERVAL = 0.02


def start(server: BaseServer) -> threading.Thread:
    """Serve `server` (bound already) from a daemon thread until stop()."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": POLL_INTERVAL}, daemon=True)
    thread.start()
    return thread


def stop(server: BaseServer) -> None:
    """Stop serving and close the socket: the port is free again when it returns."""
    server.shutdown()
    server.server_close()


@contextlib.contextmanager
def running(server: BaseServer) -> Iterator[BaseServer]:
    """`server` served while the block runs, stopped after it whatever happened."""
    start(server)
    try:
        yield server
    finally:
        stop(server)


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler], *, port: int = 0) -> Iterator[ThreadingHTTPServer]:
    """`handler` served on 127.0.0.1:`port` while the block runs; its port is `server.server_address[1]`."""
    with running(ThreadingHTTPServer(("127.0.0.1", port), handler)) as server:
        yield server
