"""Storage engine: segments, index, log, store, recovery, retention, compaction, kill -9 (src/logbroker/storage)."""
