package org.logbroker.spark;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.spark.sql.connector.read.InputPartition;

/**
 * One planned split (spark/options.py {@code Split}): records [start, end)
 * of a topic-partition in a data dir, with the index hint of where
 * {@code start}'s batch lies, its estimated bytes and the hosts holding it.
 * A bootstrap read with option {@code paths} has no data dir but
 * {@code replicas}: the (host, data dir) of each in-sync replica with a
 * path, the leader first; the reader takes the first whose partition
 * directory is on its host ({@link ColumnarReader#open}).
 */
final class SplitPartition implements InputPartition {
  private static final long serialVersionUID = 1L;

  final String dataDir;
  final String topic;
  final int partition;
  final long start;
  final long end;
  final long hintSegment;
  final long hintPosition;
  final boolean failOnDataLoss;
  final boolean compacted;
  final long bytes;
  final String[] locations;
  final String[] replicaHosts;
  final String[] replicaDirs;
  /** (producer id, first offset) of each aborted transaction in range (read_committed), flat. */
  final long[] aborted;

  SplitPartition(JsonNode s) {
    dataDir = s.get("data_dir").asText();
    topic = s.get("topic").asText();
    partition = s.get("partition").asInt();
    start = s.get("start").asLong();
    end = s.get("end").asLong();
    hintSegment = s.get("hint_segment").asLong();
    hintPosition = s.get("hint_position").asLong();
    failOnDataLoss = s.get("fail_on_data_loss").asBoolean();
    compacted = s.get("compacted").asBoolean();
    bytes = s.path("bytes").asLong(0);
    JsonNode hosts = s.path("locations");
    locations = new String[hosts.size()];
    for (int i = 0; i < locations.length; i++) locations[i] = hosts.get(i).asText();
    JsonNode txns = s.path("aborted");
    aborted = new long[2 * txns.size()];
    for (int i = 0; i < txns.size(); i++) {
      for (int k = 0; k < 2; k++) aborted[2 * i + k] = txns.get(i).get(k).asLong();
    }
    JsonNode replicas = s.path("replicas");
    replicaHosts = new String[replicas.size()];
    replicaDirs = new String[replicas.size()];
    for (int i = 0; i < replicaHosts.length; i++) {
      replicaHosts[i] = replicas.get(i).get(0).asText();
      replicaDirs[i] = replicas.get(i).get(1).asText();
    }
  }

  @Override
  public String[] preferredLocations() {
    return locations;
  }

  @Override
  public String toString() {
    return "logbroker " + topic + "-" + partition + " [" + start + ", " + end + ")";
  }
}
