"""HTTP delivery that a catalog cannot fool: no redirect taken for a delivery.

The OpenLineage client's HTTP transport posts with a `requests` session, which follows
redirects the way browsers do: a 301, 302 or 303 turns the POST into a bodiless GET, whose
answer (say a 200 from a login page) counts as delivered. Only a 307 or 308 keeps the method
and the body, and only a target at the configured catalog (same scheme, host and port) may be
trusted with the event and its credentials. `CatalogAdapter`, the `requests` transport adapter
the session of every HTTP transport of a delivery is given (`dws_dagster._compat.openlineage
.set_http_adapter`), follows those few hops itself and refuses every other 3xx answer
(`RedirectRefusedError`), so the event stays pending and the error says why. Its connections
serve the deadlines of `deadline.watching`.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urljoin, urlsplit

import requests
from requests.adapters import HTTPAdapter

from dws_dagster.ol.transport.deadline import WATCHED_POOLS, DeadlineRetry

#: Redirects followed for one event (307/308 within the catalog), as browsers allow about 20.
MAX_REDIRECTS = 5
#: Statuses that keep the method and the body.
_KEEPING = (307, 308)
_DEFAULT_PORTS = {"http": 80, "https": 443}


class RedirectRefusedError(requests.exceptions.RequestException):
    """The catalog answered a redirect (or another 3xx) that a delivery does not follow."""


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of `url`, the port given even where it is the scheme's default."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port or _DEFAULT_PORTS.get(scheme)


class CatalogAdapter(HTTPAdapter):
    """A `requests` adapter for a delivery to the catalog at `catalog_url`: never returns a
    3xx answer (so `requests` never follows one), follows 307/308 to the same catalog itself,
    and serves every deadline of `watching` (its connections register their sockets)."""

    def __init__(self, catalog_url: str, retry: dict[str, Any]) -> None:
        self.catalog = origin(catalog_url)
        super().__init__(max_retries=DeadlineRetry(**retry))

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = dict(WATCHED_POOLS)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if not proxy.lower().startswith("socks"):  # SOCKS pools have connections of their own
            manager.pool_classes_by_scheme = dict(WATCHED_POOLS)
        return manager

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> Any:
        hops = 0
        while True:
            response = super().send(request, *args, **kwargs)
            if not 300 <= response.status_code < 400:
                return response
            location = response.headers.get("location")
            target = urljoin(str(request.url), location) if location else None
            response.close()
            keeps = response.status_code in _KEEPING and target is not None
            if keeps and origin(target) == self.catalog and hops < MAX_REDIRECTS:  # type: ignore[arg-type]
                hops += 1
                request = request.copy()
                request.url = target
                continue
            raise RedirectRefusedError(self._refusal(request, response, target, keeps, hops))

    def _refusal(
        self,
        request: requests.PreparedRequest,
        response: Any,
        target: str | None,
        keeps: bool,
        hops: int,
    ) -> str:
        answer = f"{response.status_code} {_printable(response.reason or '')}".strip()
        text = f"the catalog answered {answer} to {request.method} {_printable(str(request.url))}"
        if target is None:
            return f"{text}, which is not a delivery (events stay pending)"
        text += f", redirecting to {_printable(target)}"
        scheme, host, port = self.catalog
        if not keeps:
            why = (
                "a redirect is followed only when it keeps the method and the body (307, "
                "308): this one would send a bodiless GET"
            )
        elif hops >= MAX_REDIRECTS:
            why = f"a delivery follows at most {MAX_REDIRECTS} redirects"
        else:
            why = (
                f"a redirect is followed only within the configured catalog ({scheme}://"
                f"{host}:{port})"
            )
        return (
            f"{text}; {why}, so the events stay pending: set the transport's url to where the "
            "catalog is now"
        )


def _printable(text: str, limit: int = 200) -> str:
    """Text a catalog sent (a reason phrase, a Location), as it may be shown: control and
    formatting characters escaped, cut short."""
    shown = "".join(
        c if c.isprintable() and c not in "\u202a\u202b\u202c\u202d\u202e" else f"\\u{ord(c):04x}"
        for c in text[:limit]
    )
    return shown + ("…" if len(text) > limit else "")
