"""A data directory: every partition log, the LMDB metadata, the clean marker.

    <data>/meta.lmdb               LMDB environment (index, checkpoints, topics, groups)
    <data>/<topic>-<partition>/    one directory of segments per partition
    <data>/.clean_shutdown         present only between a clean close and the next open
    <data>/.lock                   flock held by the process that has the store open
    <data>/journal/                the write-ahead journal's files (storage/journal.py)

``Store.open`` removes the marker before anything is written, so any crash
afterwards is seen as unclean by the next open.

A single node hosts every partition of its topics (``create_topic``, or
in slices ``begin_topic`` .. ``finish_topic``; ``delete_topic``); a broker
of a cluster hosts some partitions of a topic (``ensure_partition``,
``ensure_partitions`` for a slice, ``drop_partition``), and keeps a local
topic record (its log settings) while it hosts any of them. Creation
costs two LMDB commits per slice, not per partition (storage/creation.py).
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from typing import Iterator

from .config import StorageConfig
from ..errors import (StorageError, TopicAlreadyExistsError,
                      UnknownTopicOrPartitionError)
from .files import FileCache
from .groups import GroupStore
from .journal import DIRNAME as JOURNAL_DIR, Journal
from .log import Log, now_ms
from .metastore import FILENAME, MetaStore
from .compaction import Compactor
from . import creation, growth
from .creation import TopicCreation
from .retention import apply_retention
from .segment import fsync_dir
from ..limits import check_topic_name
from .topic_ids import new_topic_id
from .topics import TopicConfig, TopicStore

log = logging.getLogger(__name__)
MARKER = ".clean_shutdown"
CLOSE_SLICE = 1000  # logs checkpointed per LMDB transaction (open, housekeeping, close)


def parse_partition_dir(name: str) -> "tuple[str, int] | None":
    topic, sep, part = name.rpartition("-")
    if not sep or not part.isdigit() or str(int(part)) != part:
        return None
    try:
        return check_topic_name(topic), int(part)
    except Exception:
        return None


class Store:
    """Owner of a data dir; use ``Store.open`` (or as a context manager)."""

    def __init__(self, path: str, config: StorageConfig, meta: MetaStore, lock_fd: int,
                 clean: bool, *, auto_hw: bool = True) -> None:
        self.path, self.config, self.meta = path, config, meta
        self.auto_hw = auto_hw  # False: replication drives every log's HW (cluster mode)
        self._lock_fd = lock_fd
        self.was_clean = clean
        self.files = FileCache(config.max_open_files)
        self.topics = TopicStore(meta)
        self.groups = GroupStore(meta)
        self._logs: dict[tuple[str, int], Log] = {}
        self._creating: set[str] = set()  # topics between begin_topic and finish_topic
        self._lock = threading.RLock()
        self._last_checkpoint = now_ms()
        self.compactor = Compactor(config.compaction_bytes_per_tick, config.compaction_map_bytes)
        self.journal: "Journal | None" = None
        if config.journal or os.path.isdir(os.path.join(path, JOURNAL_DIR)):
            # files of a run with it on replay even when it is off now
            try:
                self.journal = Journal(path, checkpoint_s=config.journal_checkpoint_ms / 1000)
            except OSError as exc:  # e.g. a file where its directory goes
                meta.close()
                os.close(lock_fd)
                raise StorageError(f"{os.path.join(path, JOURNAL_DIR)}: {exc.strerror}") from None
            if not self.journal.available:  # no syncfs (not Linux): the files sync each log
                self.journal.abandon()
                self.journal = None

    @classmethod
    def open(cls, path: str, config: "StorageConfig | None" = None, *,
             auto_hw: bool = True) -> "Store":
        """Open (creating if needed) the data dir ``path`` and every log in it;
        ``auto_hw=False`` (cluster mode) opens and creates every log with its
        HW left to the replication layer (``Log.set_replicated``)."""
        config = config or StorageConfig()
        os.makedirs(path, exist_ok=True)
        lock_fd = os.open(os.path.join(path, ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock_fd)
            raise StorageError(f"{path} is in use by another logbroker process") from None
        marker = os.path.join(path, MARKER)
        clean = os.path.exists(marker)
        meta = MetaStore(os.path.join(path, FILENAME), map_size=config.map_size,
                         max_dbs=config.max_dbs)
        if clean:
            os.unlink(marker)
            fsync_dir(path)
        store = cls(path, config, meta, lock_fd, clean, auto_hw=auto_hw)
        store._open_logs()
        store._recover_journal()
        return store

    def _recover_journal(self) -> None:
        """Replay the journal's files onto the logs just opened, make what
        grew durable in their files, delete the files; then run the journal
        (or, turned off, drop it)."""
        journal = self.journal
        if journal is None:
            return
        done = journal.replay({lg.pid: lg for lg in self._logs.values()})
        if done.files:
            grown = [lg for lg in done.logs if lg.offline is None]
            for lg in grown:
                if self.auto_hw:
                    lg.set_high_watermark(lg.log_end_offset)
            for lg, exc in journal.settle(grown):
                if exc is not None:
                    raise StorageError(f"{lg.name}: making the journal's records durable "
                                       f"failed: {exc}")
            for i in range(0, len(grown), CLOSE_SLICE):
                Log.checkpoint_many(grown[i:i + CLOSE_SLICE])
            journal.discard()
            # appended again: the files had lost what the journal acknowledged (a power cut)
            log.log(logging.WARNING if done.appended or done.torn else logging.INFO,
                    "journal replayed: %d file(s), %d entries, %d batches appended again to %d "
                    "log(s), %d entries skipped, %d torn tail(s)", done.files, done.entries,
                    done.appended, len(grown), done.skipped, done.torn)
        if self.config.journal:
            journal.start()
        else:
            journal.close()
            self.journal = None

    def _open_logs(self) -> None:
        creation.roll_back(self)  # topics a crash left half-created
        growth.roll_back(self)  # partitions a crash left half-added
        known = {t.name: t for t in self.topics.list()}
        found: dict[str, int] = {}
        with os.scandir(self.path) as it:  # the entries' types without a stat each
            dirs = sorted(e.name for e in it if e.is_dir())
        for entry in dirs:
            parsed = parse_partition_dir(entry)
            if parsed is None:
                continue
            topic, partition = parsed
            found[topic] = max(found.get(topic, 0), partition + 1)
            self._open_log(known.get(topic) or TopicConfig(topic), partition, self.was_clean,
                           checkpoint=False)
        # their first checkpoints, a slice a commit; none for a log opened clean
        # with nothing rebuilt (its stored checkpoint is what it would write)
        opened = [lg for lg in self._logs.values() if lg.offline is None and lg.checkpoint_due()]
        for i in range(0, len(opened), CLOSE_SLICE):
            Log.checkpoint_many(opened[i:i + CLOSE_SLICE])
        for topic, count in found.items():
            if topic not in known or known[topic].partitions < count:
                log.warning("topic %s had no stored config; recreated with %d partition(s)", topic, count)
                old = known.get(topic)
                self.topics.put(TopicConfig(topic, count, old.overrides if old else {},
                                            old.topic_id if old else new_topic_id()))
        for topic, partition in self._missing_dirs(known, set(dirs)):
            self._open_log(topic, partition, clean=False)

    def _missing_dirs(self, known: dict, dirs: set) -> list[tuple[TopicConfig, int]]:
        """Partitions LMDB records (``parts``) of a known topic whose directory
        is gone (a power cut after an unsynced creation: storage/creation.py):
        (topic, partition) to open again (``dirs``: the directories listed).
        One that held flushed data loads offline (its checkpoint names the
        missing segment); an empty one comes back empty."""
        with self.meta.read() as txn:
            names = [k.decode() for k, _ in txn.cursor(db=self.meta.db("parts"))]
        out = []
        for name in names:
            parsed = parse_partition_dir(name)
            if parsed is None or parsed[0] not in known or parsed[1] >= known[parsed[0]].partitions:
                continue
            if name not in dirs:
                log.warning("%s: its directory is missing; created again", name)
                out.append((known[parsed[0]], parsed[1]))
        return out

    # -- topics and logs --------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, **overrides) -> TopicConfig:
        """Create a topic at once (small ones: auto-creation, the offsets
        topic, tests); CreateTopics runs ``begin_topic`` in slices."""
        made = self.begin_topic(name, partitions, overrides)
        try:
            made.add(range(partitions))
        except BaseException:
            self.abandon_topic(made)
            raise
        return self.finish_topic(made)

    def begin_topic(self, name: str, partitions: int, overrides: dict) -> TopicCreation:
        """Start creating a topic (storage/creation.py): invisible until
        ``finish_topic``; ``add`` its partitions in slices meanwhile (any
        thread), or ``abandon_topic``. TOPIC_ALREADY_EXISTS if it exists or
        is being created."""
        topic = TopicConfig(name, partitions, overrides, new_topic_id())
        with self._lock:
            if name in self._creating:
                raise TopicAlreadyExistsError(f"topic {name!r} is being created")
            if self.topics.get(name) is not None:
                raise TopicAlreadyExistsError(f"topic {name!r} already exists")
            creation.put_marker(self.meta, topic)
            self._creating.add(name)
        return TopicCreation(self, topic)

    def finish_topic(self, made: TopicCreation) -> TopicConfig:
        """Publish ``made``: its row and the marker's removal in one commit,
        then its logs in the map, all at once."""
        topic = made.topic
        assert len(made.logs) == topic.partitions, "every partition is made before finishing"
        with self._lock:
            with self.meta.write() as txn:
                self.topics.put(topic, txn)
                creation.drop_marker(txn, self.meta, topic.name)
            for lg in made.logs:
                self._logs[(topic.name, lg.partition)] = lg
            self._creating.discard(topic.name)
        return topic

    def abandon_topic(self, made: TopicCreation) -> None:
        """Undo ``made``: its logs' files and rows, its marker (a failed or
        cancelled creation)."""
        name = made.topic.name
        try:
            creation.discard(self, made.logs, [f"{name}-{p}" for p in range(made.topic.partitions)])
            self.end_delete(name)
        finally:
            with self._lock:
                self._creating.discard(name)

    def begin_growth(self, name: str, count: int) -> "growth.TopicGrowth":
        """Start adding partitions to ``name`` up to ``count`` (storage/growth.py)."""
        with self._lock:
            return growth.begin_growth(self, name, count)

    def add_partitions(self, grown: "growth.TopicGrowth") -> TopicConfig:
        """Publish ``grown``'s new partitions, all at once (storage/growth.py)."""
        with self._lock:
            return grown.publish(self._logs)

    def creating(self, name: str) -> bool:
        """Whether ``name`` is being created (begun, not finished)."""
        return name in self._creating

    def partition_count(self) -> int:
        """Logs open here (a topic being created counts once finished)."""
        return len(self._logs)

    def delete_topic(self, name: str) -> None:
        """Delete a topic at once (small ones, tests); DeleteTopics removes
        the files of ``begin_delete``'s logs in slices."""
        logs = self.begin_delete(name)
        creation.discard(self, logs)
        self.end_delete(name)

    def begin_delete(self, name: str) -> list[Log]:
        """Unpublish topic ``name`` at once: its row removed and a marker
        written in one commit, its logs out of the map (clients see an
        unknown topic). Returns the logs, whose files and rows the caller
        removes (``creation.discard``, in slices, any thread), then calls
        ``end_delete``. A crash meanwhile: the next open finishes the removal."""
        with self._lock:
            topic = self.topics.get(name)
            if topic is None or name in self._creating:
                raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
            with self.meta.write() as txn:
                self.topics.delete(name, txn)
                creation.put_marker(self.meta, topic, txn)
            return [lg for p in range(topic.partitions)
                    if (lg := self._logs.pop((name, p), None)) is not None]

    def end_delete(self, name: str) -> None:
        """The marker of ``begin_delete`` removed: the deletion is complete
        (the removed directories' entries made durable first)."""
        fsync_dir(self.path)
        with self.meta.write() as txn:
            creation.drop_marker(txn, self.meta, name)

    def ensure_partition(self, topic: str, partition: int, overrides: dict) -> Log:
        """The log of ``topic``-``partition``, opened or created (idempotent):
        a cluster's broker hosting one partition of a topic. The topic's local
        record is created if missing and covers ``partition``; a new log gets
        ``overrides`` (they replace the record's: the caller's are current; a
        log already open keeps its settings until reopened)."""
        with self._lock:
            lg = self._logs.get((topic, partition))
            if lg is not None:
                return lg
            known = self.topics.get(topic)
            record = TopicConfig(topic, max(partition + 1, known.partitions if known else 1),
                                 dict(overrides), known.topic_id if known else b"")
            if record != known:
                self.topics.put(record)
            return self._open_log(record, partition, clean=False)

    def ensure_partitions(self, topic: str, partitions: list, overrides: dict,
                          epochs: "dict | None" = None) -> list[Log]:
        """``ensure_partition`` of a slice of one topic's partitions with a
        few LMDB commits in all (storage/creation.py; any thread). The caller
        (the cluster's node) never ensures one partition twice at once.
        ``epochs`` (partition -> leader epoch): the new leaders' epochs,
        assigned here with one commit (``Log.assign_epochs``)."""
        with self._lock:
            want = [p for p in partitions if (topic, p) not in self._logs]
            known = self.topics.get(topic)
            count = max([*partitions, (known.partitions - 1) if known else 0]) + 1
            record = TopicConfig(topic, count, dict(overrides), known.topic_id if known else b"")
            if record != known:
                self.topics.put(record)
        made = creation.make_logs(self, record, want) if want else []
        if epochs:
            Log.assign_epochs([(lg, epochs[lg.partition]) for lg in made
                               if lg.partition in epochs and lg.offline is None])
        with self._lock:
            for lg in made:
                self._logs.setdefault((topic, lg.partition), lg)
            return [self._logs[(topic, p)] for p in partitions]

    def alter_topic(self, name: str, overrides: dict) -> TopicConfig:
        """Replace topic ``name``'s overrides (its record, one commit) and
        apply them live to its logs open here (``Log.reconfigure``): a
        single node's AlterConfigs, or a cluster broker following etcd.
        UNKNOWN_TOPIC_OR_PARTITION if the topic has no record here."""
        with self._lock:
            known = self.topics.get(name)
            if known is None:
                raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
            record = TopicConfig(name, known.partitions, dict(overrides), known.topic_id)
            if record != known:
                self.topics.put(record)
            config = record.log_config(self.config.log)
            logs = [lg for p in range(known.partitions)
                    if (lg := self._logs.get((name, p))) is not None]
        for lg in logs:
            if lg.config != config:
                lg.reconfigure(config)
        return record

    def drop_partition(self, topic: str, partition: int) -> bool:
        """Stop hosting ``topic``-``partition``: close its log, remove its files
        and LMDB rows; the topic's local record goes with its last hosted
        partition. Returns False (nothing done) if it was not hosted here."""
        with self._lock:
            if not self._remove_log(topic, partition):
                return False
            if not any(t == topic for t, _ in self._logs):
                self.topics.delete(topic)
            return True

    def _open_log(self, topic: TopicConfig, partition: int, clean: bool, *,
                  checkpoint: bool = True) -> Log:
        lg = Log.open(os.path.join(self.path, f"{topic.name}-{partition}"), topic.name, partition,
                      config=topic.log_config(self.config.log), meta=self.meta, files=self.files,
                      clean=clean, auto_hw=self.auto_hw, checkpoint=checkpoint,
                      journal=self.journal if self.config.journal else None)
        self._logs[(topic.name, partition)] = lg
        return lg

    def _remove_log(self, topic: str, partition: int) -> bool:
        lg = self._logs.pop((topic, partition), None)
        if lg is None:
            return False
        lg.close()
        lg.remove_files()
        with self.meta.write() as txn:
            self.meta.forget_partition(txn, lg.name, lg.pid)
        return True

    def hosts(self, topic: str, partition: int) -> bool:
        """Whether the log of ``topic``-``partition`` is open here."""
        return (topic, partition) in self._logs

    def get_log(self, topic: str, partition: int) -> Log:
        try:
            return self._logs[(topic, partition)]
        except KeyError:
            raise UnknownTopicOrPartitionError(f"unknown topic-partition {topic}-{partition}") from None

    def logs(self) -> list[Log]:
        with self._lock:
            return list(self._logs.values())

    def __iter__(self) -> Iterator[Log]:
        return iter(self.logs())

    # -- background work ----------------------------------------------------------------
    def tick(self, now: "int | None" = None) -> dict[str, int]:
        """One pass of housekeeping: age rolls, retention, compaction (at most
        ``compaction_bytes_per_tick`` read, storage/compaction.py), purge of
        deleted files, periodic checkpoints, descriptors idle for a minute
        closed (storage/files.py). Never raises for one bad
        partition: its error is logged and the others go on. Returns counts
        for logging."""
        now = now_ms() if now is None else now
        stats = {"deleted_segments": 0, "purged_files": 0, "checkpoints": 0, "errors": 0}
        stats["compacted_bytes"] = self.compactor.tick(self.logs(), now)
        due = now - self._last_checkpoint >= self.config.checkpoint_interval_ms
        kept = []
        for lg in self.logs():
            if lg.offline is not None:
                continue
            try:
                stats["deleted_segments"] += len(apply_retention(lg, now))
                stats["purged_files"] += lg.purge_deleted(now)
                kept.append(lg)
            except Exception:  # noqa: BLE001 - a background pass must go on
                stats["errors"] += 1
                log.exception("housekeeping of %s failed", lg.name)
        if due:  # only the logs with something new: an idle one writes nothing
            kept = [lg for lg in kept if lg.checkpoint_due()]
            for i in range(0, len(kept), CLOSE_SLICE):
                self._checkpoint_slice(kept[i:i + CLOSE_SLICE], stats)
            self._last_checkpoint = now
        stats["closed_idle_files"] = self.files.close_idle()
        return stats

    def _checkpoint_slice(self, logs: list[Log], stats: dict) -> None:
        """Checkpoint ``logs`` in one commit; if that fails, one by one (so
        one bad partition does not stop the others')."""
        try:
            Log.checkpoint_many(logs)
            stats["checkpoints"] += len(logs)
            return
        except Exception:  # noqa: BLE001 - retried one by one below
            pass
        for lg in logs:
            try:
                lg.checkpoint()
                stats["checkpoints"] += 1
            except Exception:  # noqa: BLE001 - a background pass must go on
                stats["errors"] += 1
                log.exception("checkpoint of %s failed", lg.name)

    def close(self, shared=None) -> None:
        """Flush and checkpoint every log (not one whose stored checkpoint is
        clean and current: ``Log.needs_clean_checkpoint``), then write the
        clean-shutdown marker. The checkpoints go ``CLOSE_SLICE`` logs to a
        transaction: closing 20,000 partitions costs tens of LMDB commits.
        ``shared`` (a SharedSync): one syncfs flushes every log it covers
        first (20,000 lazy logs: one barrier, not 20,000 fsyncs)."""
        clean, flushed = True, []
        if shared is not None and shared.available:
            online = [lg for lg in self.logs() if lg.offline is None and shared.covers(lg)]
            for lg, exc in shared.flush(online) if len(online) > 1 else ():
                if exc is not None:
                    clean = False
                    log.error("closing %s failed: %s", lg.name, exc)
        for lg in self.logs():
            try:
                if lg.offline is None:
                    lg.flush()
                    if lg.needs_clean_checkpoint():
                        flushed.append(lg)
            except Exception:  # noqa: BLE001
                clean = False
                log.exception("closing %s failed", lg.name)
        if self.journal is not None:  # every log is flushed: its files go
            try:
                self.journal.close()
            except Exception:  # noqa: BLE001 - kept: the next open replays them harmlessly
                clean = False
                log.exception("retiring the journal failed")
        for i in range(0, len(flushed), CLOSE_SLICE):
            try:
                Log.checkpoint_many(flushed[i:i + CLOSE_SLICE], clean=True)
            except Exception:  # noqa: BLE001
                clean = False
                log.exception("checkpointing %d logs failed", len(flushed[i:i + CLOSE_SLICE]))
        for lg in self.logs():
            lg.release()
            clean = clean and lg.offline is None
        self.files.close_all()
        if clean:
            marker = os.path.join(self.path, MARKER)
            with open(marker, "w") as fh:
                fh.write("clean\n")
                fh.flush()
                os.fsync(fh.fileno())
            fsync_dir(self.path)
        self.meta.close()
        os.close(self._lock_fd)

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
