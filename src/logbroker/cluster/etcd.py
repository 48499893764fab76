"""A small async facade over etcd v3 (through aetcd, gRPC).

Why aetcd: it is maintained (1.0, 2026), asyncio-native (the broker is one
asyncio loop: no thread per watch or keepalive), and covers what the
cluster needs: leases, transactions with revision compares, prefix
watches. Every etcd failure surfaces as ``ClusterUnavailableError``
(retriable); callers decide to retry.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import AsyncIterator
from urllib.parse import urlsplit

from ..errors import ClusterUnavailableError, InvalidConfigError

log = logging.getLogger("logbroker.cluster")


def parse_etcd_url(url: str) -> tuple[str, int]:
    """``http://host:port``, ``https://host:port`` (TLS, etcd_access.py) or
    ``host:port`` -> (host, port)."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme not in ("http", "https") or not parts.hostname \
            or parts.path not in ("", "/"):
        raise InvalidConfigError(f"etcd address must be http(s)://HOST:PORT, got {url!r}")
    try:
        port = parts.port or 2379
    except ValueError:
        raise InvalidConfigError(f"etcd address has a bad port: {url!r}") from None
    return parts.hostname, port


CONNECT_WAIT_S = 3.0  # aetcd's wait for a connection another call is making (its default)


async def _close(client) -> None:
    try:
        await asyncio.wait_for(client.close(), 2.0)
    except Exception:  # noqa: BLE001 - closing is best effort
        pass


@dataclass(frozen=True)
class Item:
    key: str
    value: bytes
    version: int  # mod_revision
    lease: int = 0
    created: int = 0  # create_revision


@dataclass(frozen=True)
class Written:
    """What ``Etcd.write`` did: ``applied`` False when its condition failed
    (nothing written); ``revision``: the store's revision after it;
    ``changed``: per operation, a put that created its key or a delete that
    removed one."""

    applied: bool
    revision: int = 0
    changed: tuple = ()


@dataclass(frozen=True)
class Event:
    key: str
    value: "bytes | None"  # None: deleted
    version: int
    created: int = 0


def _caller_cancelled() -> bool:
    """Whether the running task is being cancelled (else a CancelledError
    it met came from below it: a gRPC call of a closed client)."""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


class Etcd:
    def __init__(self, url: str, *, timeout: float = 5.0, access=None) -> None:
        """``access``: an ``EtcdAccess`` (etcd_access.py): TLS, client
        certificate, user and password; None: plain and anonymous."""
        import aetcd  # imported in cluster mode only (gRPC is heavy)

        from .etcd_client import client_class

        self.url = url
        host, port = parse_etcd_url(url)
        self._aetcd = aetcd
        # gRPC's default reconnect backoff (1 s, x1.6) outlasts a lease of 2 s after
        # a brief connection reset: every refresh would fail at once meanwhile
        options = {"grpc.initial_reconnect_backoff_ms": 100, "grpc.min_reconnect_backoff_ms": 100,
                   "grpc.max_reconnect_backoff_ms": 500}
        user = password = None
        if access is not None:
            user, password = access.user, access.password
        cls = client_class(access)
        self._new_client = lambda: cls(host=host, port=port, username=user, password=password,
                                       timeout=timeout, options=options)
        self._client = self._new_client()
        self._retired: set = set()  # clients replaced after a refused token, closing
        # a call's bound, whatever aetcd and gRPC do: its (re)connection (authenticating
        # included, or waiting up to CONNECT_WAIT_S for another call's), then the call
        self._bound = 2 * timeout + CONNECT_WAIT_S

    async def _call(self, coro):
        client = self._client
        try:
            return await asyncio.wait_for(coro, self._bound)
        except asyncio.CancelledError:
            if _caller_cancelled():
                raise
            raise self._cut_off("the call") from None
        except TimeoutError:  # ours, or aetcd's wait for another call's connection
            raise ClusterUnavailableError(f"etcd at {self.url}: no answer within "
                                          f"{self._bound:.0f} s") from None
        except self._aetcd.exceptions.UnauthenticatedError as exc:
            # etcd forgot our token (it restarted, or the token expired): the next call
            # goes through a new client, which authenticates again
            self._renew(client)
            raise ClusterUnavailableError(f"etcd at {self.url}: authentication: {exc}") from None
        except self._aetcd.exceptions.ClientError as exc:
            raise ClusterUnavailableError(f"etcd at {self.url}: {type(exc).__name__}: {exc}") from None

    def _cut_off(self, what: str) -> ClusterUnavailableError:
        """The error of a call or watch cancelled under its caller: its client
        was closed (``_renew``, after a broken watch or a refused token) while
        it ran. A caller must see an etcd failure, not a cancellation: a
        request handler taking it for its own was never answered (decision 119)."""
        return ClusterUnavailableError(f"etcd at {self.url}: {what} was cut off (its client "
                                       "was renewed)")

    def _renew(self, client) -> None:
        """Later calls go through a new client (a new channel, watcher and
        token); ``client`` is closed aside. Once: calls that failed through
        the old client leave the new one alone."""
        if client is self._client:
            self._client = self._new_client()
            task = asyncio.get_running_loop().create_task(_close(client))
            self._retired.add(task)
            task.add_done_callback(self._retired.discard)

    async def close(self) -> None:
        await _close(self._client)

    # -- reads --------------------------------------------------------------------------
    async def load(self, prefix: str) -> tuple[list[Item], int]:
        """Every key under ``prefix`` and the store revision of the read."""
        got = await self._call(self._client.get_prefix(prefix.encode()))
        items = [Item(kv.key.decode(), kv.value, kv.mod_revision, kv.lease, kv.create_revision)
                 for kv in got]
        return items, got.header.revision

    async def get(self, key: str) -> "Item | None":
        kv = await self._call(self._client.get(key.encode()))
        return None if kv is None else Item(key, kv.value, kv.mod_revision, kv.lease,
                                            kv.create_revision)

    async def get_at(self, key: str, revision: int) -> "Item | None":
        """``key`` as it was at store revision ``revision`` (etcd keeps the
        history until it is compacted: then ClusterUnavailableError)."""
        c, rpc = self._client, self._aetcd.rpc
        await self._call(c.connect())
        try:
            got = await c.kvstub.Range(rpc.RangeRequest(key=key.encode(), revision=revision),
                                       timeout=c._timeout, metadata=c.metadata)
        except rpc.AioRpcError as exc:
            raise ClusterUnavailableError(f"etcd at {self.url}: {exc.code().name}: "
                                          f"{exc.details()}") from None
        except asyncio.CancelledError:
            if _caller_cancelled():
                raise
            raise self._cut_off("the call") from None
        if not got.kvs:
            return None
        kv = got.kvs[0]
        return Item(key, kv.value, kv.mod_revision, kv.lease, kv.create_revision)

    async def watch(self, prefix: str, start_revision: int) -> AsyncIterator[Event]:
        """Events under ``prefix`` from ``start_revision`` on, in order; the
        iterator raises ClusterUnavailableError when the stream breaks or
        ends (its client renewed), never ends of its own."""
        client = self._client
        w = await self._call(client.watch_prefix(prefix.encode(), start_revision=start_revision))
        try:
            async for ev in w:
                deleted = ev.kind == "DELETE"
                yield Event(ev.kv.key.decode(), None if deleted else ev.kv.value, ev.kv.mod_revision,
                            ev.kv.create_revision)
            # a watch has no end of its own: its client was closed under it (``_renew``)
            raise self._cut_off("the watch")
        except asyncio.CancelledError:
            if _caller_cancelled():
                raise
            raise self._cut_off("the watch") from None
        except self._aetcd.exceptions.ClientError as exc:
            # a broken stream leaves aetcd's watcher of that client unable to deliver
            # the next watch's events (an etcd restart: a topic created after it never
            # reached the view): the next watch, and every call, use a new client
            self._renew(client)
            raise ClusterUnavailableError(f"etcd watch: {type(exc).__name__}: {exc}") from None
        finally:
            try:  # bounded: on a dead stream aetcd's cancel may wait for ever
                await asyncio.wait_for(w.cancel(), 1.0)
            except Exception:  # noqa: BLE001
                pass

    # -- writes -------------------------------------------------------------------------
    async def put(self, key: str, value: bytes, lease: int = 0) -> None:
        await self._call(self._client.put(key.encode(), value, lease=lease or None))

    async def cas(self, writes: dict[str, "bytes | None"], expect: dict[str, int],
                  lease: int = 0) -> bool:
        """Apply ``writes`` (None = delete) iff every key in ``expect`` has
        that mod_revision (0: the key does not exist). True if applied."""
        t = self._client.transactions
        compare = [t.mod(k.encode()) == v for k, v in expect.items()]
        ops = [t.delete(k.encode()) if v is None else t.put(k.encode(), v, lease=lease or None)
               for k, v in writes.items()]
        ok, _ = await self._call(self._client.transaction(compare=compare, success=ops, failure=[]))
        return bool(ok)

    async def write(self, ops: "list[tuple[str, bytes | None]]", *,
                    only_if_empty: "str | None" = None, absent: tuple = (),
                    present: tuple = ()) -> Written:
        """Apply ``ops`` (key, value; None = delete) in one transaction, in
        order; with ``only_if_empty``, only if no key under that prefix
        exists; only if no key of ``absent`` and every key of ``present`` exists."""
        t = self._client.transactions
        compare = []
        if only_if_empty is not None:
            start = only_if_empty.encode()
            compare = [t.version(start, self._aetcd.utils.prefix_range_end(start)) == 0]
        compare += [t.version(k.encode()) == 0 for k in absent]
        compare += [t.version(k.encode()) > 0 for k in present]
        reqs = [t.delete(k.encode()) if v is None else t.put(k.encode(), v, prev_kv=True)
                for k, v in ops]
        ok, replies = await self._call(self._client.transaction(compare=compare, success=reqs,
                                                                failure=[]))
        if not ok:
            return Written(False)
        revision, changed = 0, []
        for reply in replies:  # each carries the transaction's revision (etcd 3.4+)
            kind = reply.WhichOneof("response")
            sub = getattr(reply, kind)
            revision = max(revision, sub.header.revision)
            changed.append(not sub.HasField("prev_kv") if kind == "response_put"
                           else sub.deleted > 0)
        return Written(True, revision, tuple(changed))

    async def delete_prefix(self, prefix: str) -> None:
        await self._call(self._client.delete_prefix(prefix.encode()))

    # -- leases -------------------------------------------------------------------------
    async def grant(self, ttl: int) -> int:
        lease = await self._call(self._client.lease(ttl))
        return lease.id

    async def keepalive(self, lease_id: int) -> int:
        """Refresh a lease; its remaining TTL (s), <= 0 when it expired."""
        reply = await self._call(self._client.refresh_lease(lease_id))
        return -1 if reply is None else int(reply.TTL)

    async def revoke(self, lease_id: int) -> None:
        await self._call(self._client.revoke_lease(lease_id))
