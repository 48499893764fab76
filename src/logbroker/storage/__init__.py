"""Storage engine: segmented partition logs, LMDB metadata, recovery, retention.

Never imports asyncio: the broker calls it from its own threads or loop.
"""
