"""The asyncio ``Admin`` (``logbroker.aio.Admin``): the sync ``Admin``'s
twin over the same ``AdminCore`` (admin/core.py), on the caller's event
loop; every method is a coroutine with the sync one's contract
(admin/sync.py's docstrings)."""

from __future__ import annotations

from typing import Iterable

from ..waiting import AsyncShell
from .core import AdminCore
from .results import ClusterDescription


class Admin(AsyncShell):
    """asyncio twin of ``logbroker.Admin``: the same methods, as coroutines."""

    def __init__(self, bootstrap="127.0.0.1:9555", **options) -> None:
        """The same arguments as ``logbroker.Admin``."""
        self._core = AdminCore.make(bootstrap, **options)
        self.options = self._core.options

    # -- topics ------------------------------------------------------------------------------------
    async def create_topics(self, topics: Iterable, raise_errors: bool = True) -> dict:
        """As ``logbroker.Admin.create_topics``."""
        return await self._await(self._core.create_topics(topics, raise_errors))

    async def create_topic(self, name: str, partitions: int = 1, configs: "dict | None" = None,
                           *, replication_factor: "int | None" = None,
                           exist_ok: bool = False) -> bool:
        """As ``logbroker.Admin.create_topic``."""
        return await self._await(self._core.create_topic(
            name, partitions, configs, replication_factor=replication_factor, exist_ok=exist_ok))

    async def delete_topics(self, names: Iterable[str], raise_errors: bool = True) -> dict:
        """As ``logbroker.Admin.delete_topics``."""
        return await self._await(self._core.delete_topics(names, raise_errors))

    async def create_partitions(self, counts: dict, validate_only: bool = False,
                                raise_errors: bool = True) -> dict:
        """As ``logbroker.Admin.create_partitions``."""
        return await self._await(self._core.create_partitions(counts, validate_only,
                                                              raise_errors))

    async def delete_records(self, offsets: dict, raise_errors: bool = True) -> dict:
        """As ``logbroker.Admin.delete_records``."""
        return await self._await(self._core.delete_records(offsets, raise_errors))

    async def list_topics(self) -> dict[str, int]:
        """As ``logbroker.Admin.list_topics``."""
        return await self._await(self._core.list_topics())

    async def describe_topics(self, names: "Iterable[str] | None" = None) -> dict:
        """As ``logbroker.Admin.describe_topics``."""
        return await self._await(self._core.describe_topics(names))

    # -- the cluster -------------------------------------------------------------------------------
    async def describe_cluster(self, topics: "Iterable[str] | None" = None) -> ClusterDescription:
        """As ``logbroker.Admin.describe_cluster``."""
        return await self._await(self._core.describe_cluster(topics))

    async def elect_leaders(self, topics: "Iterable[str] | None" = None) -> dict:
        """As ``logbroker.Admin.elect_leaders``."""
        return await self._await(self._core.elect_leaders(topics))

    async def reassign_partitions(self, moves: dict, raise_errors: bool = True) -> dict:
        """As ``logbroker.Admin.reassign_partitions``."""
        return await self._await(self._core.reassign_partitions(moves, raise_errors))

    async def list_partition_reassignments(self, topics: "Iterable[str] | None" = None) -> dict:
        """As ``logbroker.Admin.list_partition_reassignments``."""
        return await self._await(self._core.list_partition_reassignments(topics))

    # -- groups ------------------------------------------------------------------------------------
    async def list_groups(self, kinds: bool = False) -> "list[str] | dict":
        """As ``logbroker.Admin.list_groups``."""
        return await self._await(self._core.list_groups(kinds))

    async def describe_transactions(self, transactional_ids, raise_errors: bool = True) -> dict:
        """As ``logbroker.Admin.describe_transactions``."""
        return await self._await(self._core.describe_transactions(transactional_ids,
                                                                  raise_errors))

    async def list_transactions(self, states=()) -> list:
        """As ``logbroker.Admin.list_transactions``."""
        return await self._await(self._core.list_transactions(states))

    async def describe_producers(self, partitions) -> dict:
        """As ``logbroker.Admin.describe_producers``."""
        return await self._await(self._core.describe_producers(partitions))

    async def abort_transaction(self, topic: str, partition: int, producer_id: int,
                                producer_epoch: int = -1, coordinator_epoch: int = -1) -> None:
        """As ``logbroker.Admin.abort_transaction``."""
        await self._await(self._core.abort_transaction(topic, partition, producer_id,
                                                       producer_epoch, coordinator_epoch))

    async def describe_groups(self, groups: Iterable[str]) -> dict:
        """As ``logbroker.Admin.describe_groups``."""
        return await self._await(self._core.describe_groups(groups))

    async def delete_groups(self, groups: Iterable[str], raise_errors: bool = True) -> dict:
        """As ``logbroker.Admin.delete_groups``."""
        return await self._await(self._core.delete_groups(groups, raise_errors))

    # -- offsets -----------------------------------------------------------------------------------
    async def commit_offsets(self, group: str, offsets: dict) -> None:
        """As ``logbroker.Admin.commit_offsets``."""
        return await self._await(self._core.commit_offsets(group, offsets))

    async def fetch_offsets(self, group: str, partitions=None) -> dict:
        """As ``logbroker.Admin.fetch_offsets``."""
        return await self._await(self._core.fetch_offsets(group, partitions))

    async def delete_offsets(self, group: str, partitions, raise_errors: bool = True) -> dict:
        """As ``logbroker.Admin.delete_offsets``."""
        return await self._await(self._core.delete_offsets(group, partitions, raise_errors))

    async def list_offsets(self, partitions, spec="latest", *, raise_errors: bool = True,
                           isolation_level: str = "read_uncommitted") -> dict:
        """As ``logbroker.Admin.list_offsets``."""
        return await self._await(self._core.list_offsets(partitions, spec,
                                                         raise_errors=raise_errors,
                                                         isolation_level=isolation_level))

    # -- users (docs/security.md) ------------------------------------------------------------------
    async def create_user(self, name: str, password: str, iterations: int = 4096,
                          sha512_password: "str | None" = None) -> bool:
        """As ``logbroker.Admin.create_user``."""
        return await self._await(self._core.create_user(name, password, iterations,
                                                        sha512_password))

    async def delete_user(self, name: str) -> None:
        """As ``logbroker.Admin.delete_user``."""
        return await self._await(self._core.delete_user(name))

    async def list_users(self) -> list:
        """As ``logbroker.Admin.list_users``."""
        return await self._await(self._core.list_users())

    # -- ACLs (docs/security.md, "Authorization") --------------------------------------------------
    async def create_acls(self, acls: Iterable) -> int:
        """As ``logbroker.Admin.create_acls``."""
        return await self._await(self._core.create_acls(acls))

    async def delete_acls(self, principal: str = "", resource_type: str = "", name: str = "",
                          pattern: str = "", operation: str = "", permission: str = "") -> list:
        """As ``logbroker.Admin.delete_acls``."""
        return await self._await(self._core.delete_acls(principal, resource_type, name, pattern,
                                                        operation, permission))

    async def describe_acls(self, principal: str = "", resource_type: str = "", name: str = "",
                            pattern: str = "", operation: str = "", permission: str = "") -> list:
        """As ``logbroker.Admin.describe_acls``."""
        return await self._await(self._core.describe_acls(principal, resource_type, name,
                                                          pattern, operation, permission))

    # -- closing ---------------------------------------------------------------------------------
    async def describe_configs(self, topic: str):
        """As ``logbroker.Admin.describe_configs``."""
        return await self._await(self._core.describe_configs(topic))

    async def alter_configs(self, topic: str, set: "dict | None" = None, delete: Iterable = (),
                            *, validate_only: bool = False) -> None:
        """As ``logbroker.Admin.alter_configs``."""
        return await self._await(self._core.alter_configs(topic, set, delete,
                                                          validate_only=validate_only))

    async def close(self) -> None:
        """Close the connections. Idempotent."""
        await self._core.aclose()
