"""The scale bench's ratios to one partition and their ceilings
(bench/scale/ratios.py) over hand-made rounds: taken within a round,
against the same flush's one partition, the ceiling set by the side with
more CPU per record, cases without a one-partition twin left out."""

from __future__ import annotations

import pytest

from bench.scale.ratios import ratio_table, ratios


def case(partitions, flush, produce, consume, client=(1.0, 0.2), broker=(0.5, 0.1), kind=None):
    """A case of a round: rates (records/s) and CPU us a record (produce, consume)."""
    row = {"partitions": partitions, "flush": flush, "produce_rec_s": produce,
           "consume_rec_s": consume, "produce_client_us": client[0],
           "consume_client_us": client[1], "produce_broker_us": broker[0],
           "consume_broker_us": broker[1]}
    if kind:
        row["case"] = kind
    return row


def test_ratios_are_taken_within_a_round_against_the_same_flush():
    rounds = [
        [case(1, "fsync", 500_000, 2_000_000), case(1, "lazy", 250_000, 1_000_000),
         case(1000, "fsync", 350_000, 1_000_000, client=(2.5, 0.5), broker=(1.5, 0.2)),
         case(1000, "lazy", 200_000, 900_000, client=(3.0, 0.6), broker=(4.0, 0.3))],
        [case(1, "fsync", 250_000, 4_000_000),
         case(1000, "fsync", 200_000, 1_000_000, client=(2.0, 0.4), broker=(5.0, 0.2))],
    ]
    fsync, lazy = ratios(rounds)[0], ratios(rounds)[1]
    assert (fsync["partitions"], fsync["flush"], lazy["flush"]) == (1000, "fsync", "lazy")
    assert fsync["produce"]["x_one"] == pytest.approx([0.7, 0.8])
    assert fsync["consume"]["x_one"] == pytest.approx([0.5, 0.25])
    # one partition's 2 us a record (500k/s) over the client's 2.5 at 1,000: 0.8; then
    # 4 us (250k/s) over the broker's 5.0: 0.8, set by the broker
    assert fsync["produce"]["ceiling"] == pytest.approx([0.8, 0.8])
    assert fsync["produce"]["bound"] == ["client", "broker"]
    assert fsync["consume"]["ceiling"] == pytest.approx([0.5 / 0.5, 0.25 / 0.4])
    assert lazy["produce"]["x_one"] == pytest.approx([0.8])  # against lazy's own one partition
    assert lazy["produce"]["ceiling"] == pytest.approx([4.0 / 4.0])
    assert lazy["produce"]["bound"] == ["broker"]


def test_cases_without_a_one_partition_twin_or_not_of_one_broker_are_left_out():
    rounds = [[case(1, "fsync", 500_000, 2_000_000), case(1000, "lazy", 1, 1),
               case(1000, "fsync", 1, 1, kind="rf3"), case(1000, "fsync", 1, 1, kind="redis")]]
    assert ratios(rounds) == []
    assert ratio_table({"rounds": rounds}) is None
    assert ratio_table({}) is None


def test_the_table_shows_medians_rounds_and_the_bounding_side():
    from bench.common.harness import tables_markdown

    rounds = [[case(1, "fsync", 400_000, 2_000_000),
               case(10_000, "fsync", 80_000, 200_000, client=(5.0, 2.5), broker=(10.0, 2.0))]]
    text = tables_markdown([ratio_table({"rounds": rounds})])
    assert "| 10,000 | fsync | 0.20 (0.20) | 0.25 (0.25) broker | 0.10 (0.10) | 0.20 (0.20) client |" \
        in text
