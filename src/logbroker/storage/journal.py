"""A write-ahead journal per data dir: one append and one ``fdatasync`` make
a group commit of many logs durable, whatever the number of logs (issue 32;
docs/architecture.md decision 120).

The group commit hands the journal the logs of one turn (``flush``, the
barrier interface of ``SharedSync``, so durability.py's ``GroupCommit``
takes either). Each log gives up the appends it holds past its durable
end (``Log.journal_take``: the buffers its segment was written from, never
read back); the journal writes them, each behind a header naming the log
(journal_format.py), with one ``pwritev`` and one ``fdatasync`` of its
current file, then tells each log its new durable end (``Log.journaled``).
The segment files stay in the page cache. A log that holds nothing past
its durable end needs nothing; one that let go of its appends (over
``JOURNAL_HOLD_BYTES``, or not capturing) is made durable by one ``syncfs``
instead, as before the journal.

Checkpoints bound the journal: every ``CHECKPOINT_S`` (or once a file
passes ``ROTATE_BYTES``) the current file is closed, one ``syncfs`` makes
every segment write before it durable, each log written since learns its
recovery point (``flushed_by_barrier``), and the closed files are deleted.
A background thread runs them; the next write opens a new file.

A cut (a follower's truncation, a restart of a log, a failed fsync's cut)
voids the log's earlier entries: ``cut`` appends a CUT entry with the
log's new generation and syncs it before the cut returns, when the
journal holds entries of that log; a write racing the cut drops what it
took from the older generation (its offsets are gone).

Recovery (``replay``, at ``Store.open``, after every log is loaded): the
files' entries in order, each DATA entry of a live generation that extends
its log exactly at its end appended again (``Log.append_replicated``: the
same bytes, offsets, epochs and producer state); entries the log already
holds are skipped. Then the store makes the logs durable and deletes the
files (``discard``) before anything new is written.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from . import journal_format as jf
from .journal_replay import Replayed, replay_files
from .segment import fsync_dir, pwritev_all
from .shared_sync import SharedSync

log = logging.getLogger(__name__)
DIRNAME = "journal"
SUFFIX = ".wal"
CHECKPOINT_S = 2.0  # a checkpoint's syncfs at most this often while entries come
ROTATE_BYTES = 64 << 20  # a file this large is checkpointed at once (bounds the replay)


class Journal:
    def __init__(self, data_dir: str, *, checkpoint_s: float = CHECKPOINT_S,
                 rotate_bytes: int = ROTATE_BYTES) -> None:
        self.directory = os.path.join(data_dir, DIRNAME)
        os.makedirs(self.directory, exist_ok=True)
        self._barrier = SharedSync(data_dir)
        self._checkpoint_s, self._rotate_bytes = checkpoint_s, rotate_bytes
        self._lock = threading.Lock()  # the current file: writes, CUT entries, rotation
        self._ckpt_lock = threading.Lock()  # one checkpoint at a time
        self._found = self._existing()
        self._seq = self._found[-1][0] if self._found else 0
        self._fd, self._pos, self._born = -1, 0, 0.0
        self._files: dict[int, dict] = {}  # file number -> {pid: (log, name CRC)}, not yet retired
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: "threading.Thread | None" = None
        self.commits = 0  # journal writes (each one fdatasync)
        self.written = 0  # bytes written
        self.checkpoints = 0

    # -- the group commit's barrier interface ------------------------------------------
    @property
    def available(self) -> bool:
        return self._barrier.available

    def covers(self, lg) -> bool:
        return self._barrier.covers(lg)

    def flush(self, logs) -> list:
        """Make everything appended to ``logs`` so far durable (blocking: a
        worker thread's job); ``[(log, error | None)]``."""
        taken, rest = [], []
        for lg in logs:
            generation, held = lg.journal_take()
            if held is None:
                rest.append(lg)
            else:
                taken.append((lg, generation, held))
        out = []
        try:
            marks = self._write(taken)
        except OSError as exc:
            log.error("journal write failed (%s): %d logs synced through their files", exc,
                      len(taken))
            rest += [lg for lg, _, _ in taken]
        else:
            marked = set()
            for lg, generation, end in marks:
                marked.add(lg)
                try:
                    lg.journaled(generation, end)
                    out.append((lg, None))
                except Exception as failed:  # noqa: BLE001 - each log's own outcome
                    out.append((lg, failed))
            out += [(lg, None) for lg, _, _ in taken if lg not in marked]
        if rest:
            out += self._barrier.flush(rest)
        return out

    def _write(self, taken: list) -> list:
        """One write and one fdatasync of ``taken``'s held appends; the
        (log, generation, end) each made durable."""
        marks, iov, nbytes = [], [], 0
        with self._lock:
            owners = self._files.get(self._seq, {}) if self._fd >= 0 else {}
            for lg, generation, held in taken:
                if not held or generation != lg.generation:  # nothing, or cut since
                    continue
                known = owners.get(lg.pid)  # its name's CRC, once a file
                ncrc = known[1] if known is not None else jf.name_crc(lg.name)
                for base, end, buffers, n in held:
                    head = jf.data_head(lg.pid, ncrc, generation, base, end, buffers, n)
                    iov.append(head)
                    iov += buffers
                    nbytes += len(head) + n
                marks.append((lg, generation, held[-1][1], ncrc))
            if iov:
                self._append(iov, nbytes, [(lg, ncrc) for lg, _, _, ncrc in marks])
        return [m[:3] for m in marks]

    def _append(self, iov: list, nbytes: int, logs: list) -> None:
        """Write ``iov`` at the end of the current file (opened if none) and
        fdatasync it; the journal's lock is held. On failure the file is
        left (its torn tail ends it at replay) and the next write opens one."""
        if self._fd < 0:
            self._open_next()
        owners = self._files[self._seq]
        for lg, ncrc in logs:
            owners[lg.pid] = (lg, ncrc)
        try:
            pwritev_all(self._fd, iov, self._pos, self._pos + nbytes)
            os.fdatasync(self._fd)
        except OSError:
            self._close_file()
            raise
        self._pos += nbytes
        self.commits += 1
        self.written += nbytes
        if self._pos >= self._rotate_bytes:
            self._wake.set()

    def _open_next(self) -> None:
        self._seq += 1
        path = os.path.join(self.directory, f"{self._seq:020d}{SUFFIX}")
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        fsync_dir(self.directory)  # its entry is durable before anything in it counts
        self._pos, self._born = 0, time.monotonic()
        self._files[self._seq] = {}
        self._wake.set()  # the checkpoint thread times this file

    def _close_file(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    # -- cuts ---------------------------------------------------------------------------
    def cut(self, lg) -> None:
        """``lg`` was cut (its lock held): its entries of older generations
        are void. Durable on return when the journal holds any of them;
        raises OSError when that cannot be written."""
        with self._lock:
            if not any(lg.pid in owners for owners in self._files.values()):
                return
            ncrc = jf.name_crc(lg.name)
            entry = jf.cut_entry(lg.pid, ncrc, lg.generation)
            self._append([entry], len(entry), [(lg, ncrc)])

    # -- checkpoints --------------------------------------------------------------------
    def checkpoint_due(self) -> bool:
        return self._fd >= 0 and (self._pos >= self._rotate_bytes
                                  or time.monotonic() - self._born >= self._checkpoint_s)

    def checkpoint(self) -> int:
        """Retire the files written so far: close the current one, make every
        segment write before it durable with one barrier, move the logs'
        recovery points, delete the files. Returns the logs it covered."""
        with self._ckpt_lock:
            with self._lock:
                self._close_file()
                retiring = dict(self._files)
            if not retiring:
                return 0
            logs = {pid: lg for owners in retiring.values() for pid, (lg, _) in owners.items()}
            targets = [(lg, lg.flush_target()) for lg in logs.values() if lg.offline is None]
            self._barrier.sync()  # raises OSError: the files stay, the next one tries again
            for lg, target in targets:
                try:
                    lg.flushed_by_barrier(target)
                except Exception as exc:  # noqa: BLE001 - that log's fsync failed
                    log.error("checkpoint of %s: %s", lg.name, exc)
            self._remove(retiring)
            self.checkpoints += 1
            return len(logs)

    def _remove(self, numbers) -> None:
        for seq in numbers:
            try:
                os.unlink(os.path.join(self.directory, f"{seq:020d}{SUFFIX}"))
            except FileNotFoundError:
                pass
        fsync_dir(self.directory)  # gone for good before a cut stops writing CUT entries
        with self._lock:
            for seq in numbers:
                self._files.pop(seq, None)

    def start(self) -> None:
        """Run checkpoints in a background thread until ``close``."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="journal-checkpoints",
                                            daemon=True)
            self._thread.start()

    def _run(self) -> None:
        """Sleep until the open file's checkpoint is due (no file open: until
        one is; an idle journal never wakes), or a file grew past its size."""
        while not self._stop.is_set():
            born = self._born if self._fd >= 0 else None
            self._wake.wait(None if born is None
                            else max(0.0, born + self._checkpoint_s - time.monotonic()))
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                if self.checkpoint_due():
                    self.checkpoint()
            except Exception:  # noqa: BLE001 - a background loop recovers
                log.exception("journal checkpoint failed; retried")

    # -- recovery -----------------------------------------------------------------------
    def _existing(self) -> list[tuple[int, str]]:
        found = []
        for name in os.listdir(self.directory):
            if name.endswith(SUFFIX) and name[:-len(SUFFIX)].isdigit():
                found.append((int(name[:-len(SUFFIX)]), os.path.join(self.directory, name)))
        return sorted(found)

    def replay(self, logs_by_pid: dict) -> Replayed:
        """Append again what the files hold past each log's end
        (journal_replay.py); call once, before anything is written."""
        return replay_files([path for _, path in self._found], logs_by_pid)

    def settle(self, logs) -> list:
        """Make ``logs`` durable in their files (one barrier); ``[(log, error | None)]``."""
        return self._barrier.flush(logs) if logs else []

    def discard(self) -> None:
        """Delete the files ``replay`` read (their logs are durable now)."""
        self._remove([seq for seq, _ in self._found])
        self._found = []

    # -- shutdown -----------------------------------------------------------------------
    def _halt(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._thread = None

    def close(self) -> None:
        """Stop the thread, retire every file (the store flushed its logs
        first, so the barrier finds little to write), release the rest."""
        self._halt()
        self.checkpoint()
        self._barrier.close()

    def abandon(self) -> None:
        """As a killed process leaves it: the thread stopped, the file closed,
        nothing retired (tests' crash)."""
        self._halt()
        with self._lock:
            self._close_file()
        self._barrier.close()
