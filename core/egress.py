"""Where the platform may connect to when an admin-supplied URL says where: one rule, used by every
outbound HTTP client that takes its address from data (model profiles, OpenAPI documents and calls,
MCP over HTTP, the receipt witness).

The rule, for a URL:

1. when the caller's host allow-list (WARRANT_MODEL_ALLOWED_HOSTS, WARRANT_TOOL_ALLOWED_HOSTS, ...)
   is not empty, the URL's host must be on it;
2. the host is resolved and EVERY address it resolves to must be public, unless the host is named
   on that allow-list or the address is in WARRANT_EGRESS_PRIVATE_NETWORKS (under DJANGO_DEBUG,
   loopback: a model server on localhost works out of the box). Loopback, private, link-local,
   shared, reserved, multicast and unspecified addresses are not public, whatever way the URL
   spells them (decimal, octal or IPv4-mapped forms resolve to what they mean).

A check before connecting is not enough: a name can resolve to a public address for the check and
to 127.0.0.1 for the connection (DNS rebinding). So the clients made here resolve, check and connect
to the checked address themselves, in the connection layer (TLS still verifies the name); redirects
are re-checked the same way because every connection goes through it.
"""

import ipaddress
import socket
from collections.abc import Iterable

import httpx
import httpcore
from django.conf import settings


class EgressRefused(Exception):
    """The URL's host or one of its addresses is not allowed; nothing was sent. The message names
    neither (it is shown where URLs are not)."""


def private_networks() -> tuple:
    return tuple(settings.WARRANT.get("EGRESS_PRIVATE_NETWORKS") or ())


class _Rule:
    def __init__(self, allowed_hosts: Iterable[str], setting: str):
        self.allowed = tuple(h.lower() for h in allowed_hosts or ())
        self.setting = setting or "the deployment's allowed hosts"

    def check_host(self, host: str) -> None:
        if self.allowed and host.lower() not in self.allowed:
            raise EgressRefused(f"the host is not among the hosts this deployment allows ({self.setting})")

    def check_addresses(self, host: str, addresses: list[str]) -> None:
        if not addresses:
            raise EgressRefused("the host does not resolve to any address")
        if host.lower() in self.allowed:
            return  # named by the platform engineer: an internal host they meant
        for raw in addresses:
            address = _address(raw)
            if not _public(address) and not any(address in network for network in _networks()):
                raise EgressRefused(
                    f"the host resolves to a {_kind(address)} address; list the host in {self.setting} or the "
                    "network in WARRANT_EGRESS_PRIVATE_NETWORKS to allow it")

    def vet(self, host: str, port: int) -> list[str]:
        """Check `host` and every address it resolves to; the addresses to connect to, in order."""
        self.check_host(host)
        addresses = _resolve(host, port)
        self.check_addresses(host, addresses)
        return addresses


def _address(raw: str):
    address = ipaddress.ip_address(raw.split("%", 1)[0])
    if address.version == 6 and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _kind(address) -> str:
    # Named without the address: messages reach /readyz and sync reports, which show no URLs.
    for kind in ("loopback", "link_local", "private", "multicast", "unspecified", "reserved"):
        if getattr(address, f"is_{kind}"):
            return kind.replace("_", "-")
    return "non-public"


def _public(address) -> bool:
    return address.is_global and not address.is_multicast


def _networks() -> list:
    found = []
    for entry in private_networks():
        try:
            found.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            continue  # a host name, not a network: only rule 1's list names hosts
    return found


def _resolve(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise EgressRefused(f"the host does not resolve ({type(exc).__name__})") from None
    return list(dict.fromkeys(info[4][0] for info in infos))


def _host_port(url: str) -> tuple[str, int]:
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise EgressRefused(f"not a URL this platform can reach: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise EgressRefused("only http:// and https:// URLs with a host are reached")
    return parsed.host, parsed.port or (443 if parsed.scheme == "https" else 80)


def host_allowed(url: str, *, allowed_hosts: Iterable[str] = ()) -> bool:
    """Rule 1 alone, without resolving (for validating a form field)."""
    try:
        host, _ = _host_port(url)
        _Rule(allowed_hosts, "").check_host(host)
    except EgressRefused:
        return False
    return True


def write_check(url: str, *, allowed_hosts: Iterable[str] = (), setting: str = "") -> None:
    """What can be decided when a URL is saved, without resolving names that may only resolve where the
    workers run: rule 1, and rule 2 for a host that is an address or `localhost`."""
    host, port = _host_port(url)
    rule = _Rule(allowed_hosts, setting)
    rule.check_host(host)
    try:
        literal = [str(ipaddress.ip_address(host.strip("[]")))]
    except ValueError:
        literal = ["127.0.0.1"] if host.lower().rstrip(".") == "localhost" else None
    if literal:
        rule.check_addresses(host, literal)


def egress_check(url: str, *, allowed_hosts: Iterable[str] = (), setting: str = "") -> None:
    """Raise EgressRefused unless `url` may be reached now. A pre-flight check only: connect with
    client() (or async_client()) so that the address connected to is the one checked."""
    host, port = _host_port(url)
    _Rule(allowed_hosts, setting).vet(host, port)


class _GuardedBackend(httpcore.NetworkBackend):
    def __init__(self, rule: _Rule):
        self._rule, self._inner = rule, httpcore.SyncBackend()

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        failure = None
        for address in self._rule.vet(host, port):  # each checked address in turn, as a resolver's order says
            try:
                return self._inner.connect_tcp(address, port, timeout=timeout, local_address=local_address,
                                               socket_options=socket_options)
            except httpcore.ConnectError as exc:
                failure = exc
        raise failure

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise EgressRefused("unix sockets are not reached from admin-supplied URLs")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def client(*, allowed_hosts: Iterable[str] = (), setting: str = "", **options) -> httpx.Client:
    """An httpx client whose every connection obeys the rule (no proxy from the environment)."""
    transport = httpx.HTTPTransport(trust_env=False)
    # httpcore's pool hands its network backend to each connection it opens: the one seam where
    # the address actually connected to is chosen.
    transport._pool._network_backend = _GuardedBackend(_Rule(allowed_hosts, setting))
    return httpx.Client(transport=transport, trust_env=False, **options)


def async_client(*, allowed_hosts: Iterable[str] = (), setting: str = "", **options):
    """The same for httpx2 (the MCP SDK's client), on asyncio or trio through anyio."""
    import anyio
    import httpcore2
    import httpx2

    rule = _Rule(allowed_hosts, setting)

    class GuardedAsyncBackend(httpcore2.AsyncNetworkBackend):
        def __init__(self):
            self._inner = httpcore2.AnyIOBackend()

        async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
            rule.check_host(host)
            try:
                infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except (socket.gaierror, UnicodeError) as exc:
                raise EgressRefused(f"the host does not resolve ({type(exc).__name__})") from None
            addresses = list(dict.fromkeys(info[4][0] for info in infos))
            rule.check_addresses(host, addresses)
            failure = None
            for address in addresses:
                try:
                    return await self._inner.connect_tcp(address, port, timeout=timeout, local_address=local_address,
                                                         socket_options=socket_options)
                except httpcore2.ConnectError as exc:
                    failure = exc
            raise failure

        async def connect_unix_socket(self, path, timeout=None, socket_options=None):
            raise EgressRefused("unix sockets are not reached from admin-supplied URLs")

        async def sleep(self, seconds: float) -> None:
            await self._inner.sleep(seconds)

    transport = httpx2.AsyncHTTPTransport(trust_env=False)
    transport._pool._network_backend = GuardedAsyncBackend()
    return httpx2.AsyncClient(transport=transport, trust_env=False, **options)
