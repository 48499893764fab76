"""Topic admin requests: create, delete, describe."""

from __future__ import annotations


from ..errors import LogbrokerError
from ..protocol import messages as m
from ..storage.store import Store


def _err(exc: LogbrokerError) -> tuple[int, str]:
    return exc.code, exc.message


def create_topics(store: Store, req: m.CreateTopics) -> m.CreateTopicsResponse:
    out = []
    for name, partitions, configs in req.topics:
        try:
            store.create_topic(name, partitions, **configs)
            out.append((name, 0, ""))
        except LogbrokerError as exc:
            out.append((name, *_err(exc)))
    return m.CreateTopicsResponse(topics=tuple(out))


def delete_topics(store: Store, req: m.DeleteTopics) -> m.DeleteTopicsResponse:
    out = []
    for name in req.topics:
        try:
            store.delete_topic(name)
            out.append((name, 0, ""))
        except LogbrokerError as exc:
            out.append((name, *_err(exc)))
    return m.DeleteTopicsResponse(topics=tuple(out))


def describe_topics(store: Store, req: m.DescribeTopics) -> m.DescribeTopicsResponse:
    names = req.topics if req.topics is not None else [t.name for t in store.topics.list()]
    out = []
    for name in names:
        topic = store.topics.get(name)
        if topic is None:
            out.append((name, 3, f"unknown topic {name!r}", {}, ()))
            continue
        parts = []
        for p in range(topic.partitions):
            try:
                lg = store.get_log(name, p)
                parts.append((p, lg.log_start_offset, lg.log_end_offset, lg.high_watermark,
                              lg.size_in_bytes(), len(lg.segments)))
            except LogbrokerError:
                parts.append((p, -1, -1, -1, 0, 0))
        configs = topic.log_config(store.config.log).to_dict()
        configs["partitions"] = topic.partitions
        out.append((name, 0, "", configs, tuple(parts)))
    return m.DescribeTopicsResponse(topics=tuple(out))
