"""The CLI's cluster commands against a single node (the leader of
everything, epoch 0): cluster status and rebalance (table and --json),
topics create with replication settings, topics describe's leaders, and a
bootstrap list whose first broker is down."""

from __future__ import annotations

import json

import pytest

from tests.support.fixtures import closed_port, invoke_cli, invoked_error, invoked_ok

SHARE_BROKER = True  # one broker for the module (conftest's broker): every test has topics of its own


@pytest.fixture
def two(broker):
    """``-b`` naming a closed port first, then the broker."""
    return f"127.0.0.1:{closed_port()},{broker.bootstrap}"


def lb(bootstrap: str, *args: str):
    return invoke_cli(args, bootstrap=bootstrap)


def test_topics_create_with_replication_settings_and_describe_shows_leaders(broker, two):
    out = invoked_ok(lb(two, "topics", "create", "rep", "--partitions", "2",
                        "--replication-factor", "1", "--min-insync-replicas", "1",
                        "--unclean-leader-election"))
    assert out.strip() == "created topic rep with 2 partition(s), replication factor 1"
    invoked_ok(lb(two, "produce", "rep", "a", "b", "-p", "1"))
    [desc] = json.loads(invoked_ok(lb(two, "topics", "describe", "rep", "--json")))
    assert [(p["leader"], p["replicas"], p["isr"], p["log_end"]) for p in desc["partitions"]] == \
        [(0, [0], [0], 0), (0, [0], [0], 2)]
    lines = invoked_ok(lb(two, "topics", "describe", "rep")).splitlines()
    at = lines.index(next(line for line in lines if line.split() == ["replication"]))
    assert lines[at + 1].split() == ["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"]
    assert [line.split() for line in lines[at + 2:at + 4]] == [["rep", "0", "0", "0", "0"],
                                                               ["rep", "1", "0", "0", "0"]]
    message = invoked_error(lb(two, "topics", "create", "r3", "--replication-factor", "3"),
                            "INVALID_REPLICATION_FACTOR")
    assert "r3" in message
    invoked_error(lb(two, "topics", "create", "r0", "--replication-factor", "0"), "USAGE")
    assert "1..64" in invoked_error(lb(two, "topics", "create", "r9", "--replication-factor",
                                       "65"), "INVALID_CONFIG")


def test_cluster_status_of_a_single_node(broker, two):
    invoked_ok(lb(two, "produce", "st", "x", "y", "z"))
    status = json.loads(invoked_ok(lb(two, "cluster", "status", "st", "--json")))
    assert (status["cluster"], status["controller"], status["under_replicated"],
            status["offline"]) == ("", -1, 0, 0)
    assert status["brokers"] == [{"id": 0, "host": "127.0.0.1", "port": broker.port, "live": True}]
    assert status["partitions"] == [{
        "topic": "st", "partition": 0, "leader": 0, "leader_epoch": 0, "replicas": [0],
        "isr": [0], "preferred_leader": 0, "high_watermark": 3, "under_replicated": False,
        "state": "ok"}]
    lines = invoked_ok(lb(two, "cluster", "status")).splitlines()
    assert lines[0].startswith("cluster (single node), controller none, logbroker ")
    assert lines[1].split() == ["BROKER", "ADDRESS", "STATUS"]
    assert lines[2].split() == ["0", broker.bootstrap, "live"]
    assert lines[3].split() == ["TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR",
                                "HIGH-WATERMARK", "STATE"]
    assert ["st", "0", "0", "0", "0", "0", "3", "ok"] in [line.split() for line in lines]
    assert lines[-1].endswith("partition(s), 0 under-replicated, 0 offline")


def test_cluster_rebalance_of_a_single_node_moves_nothing(broker, two):
    invoked_ok(lb(two, "topics", "create", "rb", "--partitions", "3"))
    assert json.loads(invoked_ok(lb(two, "cluster", "rebalance", "rb", "--json"))) == \
        {"moved": [], "unchanged": 3, "failed": []}
    assert invoked_ok(lb(two, "cluster", "rebalance")).strip().startswith(
        "0 partition(s) moved to their preferred leader")


@pytest.mark.parametrize("command", ["status", "rebalance"])
def test_cluster_commands_name_an_unknown_topic(broker, command):
    assert "'nope'" in invoked_error(lb(broker.bootstrap, "cluster", command, "nope"),
                                     "UNKNOWN_TOPIC_OR_PARTITION")


def test_every_client_command_takes_a_bootstrap_list_whose_first_broker_is_down(broker, two):
    invoked_ok(lb(two, "produce", "bs", "one", "two"))
    assert invoked_ok(lb(two, "consume", "bs")).split() == ["one", "two"]
    assert {"topic": "bs", "partitions": 1} in json.loads(invoked_ok(lb(two, "topics", "list",
                                                                        "--json")))
    invoked_ok(lb(two, "consume", "bs", "-g", "grp"))
    [desc] = json.loads(invoked_ok(lb(two, "groups", "describe", "grp", "--json")))
    assert desc["partitions"][0]["lag"] == 0


def test_a_bootstrap_list_of_dead_brokers_names_them_all():
    a, b = closed_port(), closed_port()
    message = invoked_error(invoke_cli(["cluster", "status", "-b", f"127.0.0.1:{a},127.0.0.1:{b}",
                                        "--timeout", "0.5"]), "BROKER_UNAVAILABLE")
    assert message.startswith(f"cannot connect to 127.0.0.1:{a}, 127.0.0.1:{b} within 0.5 s: ")
