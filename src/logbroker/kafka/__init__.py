"""The Kafka wire protocol (issue 15; docs/kafka.md).

The codec is pure bytes (no sockets, no asyncio): ``codec`` decodes requests
and encodes responses of the API profile in ``apis`` (and the reverse pair,
for tests and clients), ``framing`` splits a byte stream into frames,
``api_versions`` answers ApiVersions, and ``record_batch`` builds Kafka
RecordBatch v2 (``records/kafka_v2`` reads them, for every reader). The
``serve_*`` modules translate each request into one of ours (a ``plan``),
which the broker's one pipeline answers (api/registry.KAFKA); the listener
and its connections are net/kafka_listener.py and net/kafka_connection.py.
"""
