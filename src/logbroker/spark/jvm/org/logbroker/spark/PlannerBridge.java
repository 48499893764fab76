package org.logbroker.spark;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.SparkEnv;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The driver's planner: one Python process per JVM running
 * {@code python -m logbroker.spark.bridge} (spark/bridge.py), started on
 * the first plan and asked one JSON line per plan. Planning stays in Python,
 * which owns the LMDB index and the option rules (decision 89); a plan
 * costs one round trip of a few milliseconds after the first.
 *
 * <p>The interpreter: conf {@code spark.logbroker.python}, else
 * {@code spark.pyspark.driver.python}, {@code spark.pyspark.python}, the
 * environment's {@code LOGBROKER_PYTHON}, {@code PYSPARK_DRIVER_PYTHON},
 * {@code PYSPARK_PYTHON}, else {@code python3}. A process that died is
 * started again on the next plan. Calls are serialized.
 */
final class PlannerBridge {
  static final int VERSION = 2; // spark/bridge.py VERSION: 2 adds replicas, locations
  private static final Logger LOG = LoggerFactory.getLogger("org.logbroker.spark");
  private static final ObjectMapper JSON = new ObjectMapper();
  private static PlannerBridge shared;

  private final Process process;
  private final BufferedWriter in;
  private final BufferedReader out;

  private PlannerBridge(String python) throws IOException {
    ProcessBuilder pb = new ProcessBuilder(python, "-m", "logbroker.spark.bridge");
    pb.redirectError(ProcessBuilder.Redirect.INHERIT);
    process = pb.start();
    in = new BufferedWriter(new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8));
    out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
  }

  /** The splits of one read; IllegalArgumentException with the planner's message on a user error. */
  static synchronized List<JsonNode> plan(Map<String, String> options, List<String> columns,
                                          JsonNode filters) {
    ObjectNode request = JSON.createObjectNode();
    request.put("op", "plan");
    ObjectNode opts = request.putObject("options");
    options.forEach(opts::put);
    columns.forEach(request.putArray("columns")::add);
    request.set("filters", filters);
    JsonNode answer = ask(request);
    if (answer.has("error")) {
      throw new IllegalArgumentException(answer.get("error").asText());
    }
    List<JsonNode> splits = new ArrayList<>();
    answer.get("splits").forEach(splits::add);
    return splits;
  }

  private static JsonNode ask(ObjectNode request) {
    for (int attempt = 0; ; attempt++) {
      try {
        if (shared == null || !shared.process.isAlive()) {
          shared = start();
        }
        return shared.call(request);
      } catch (IOException e) {
        shared = null;
        if (attempt > 0) {
          throw new IllegalStateException("the logbroker planner process (" + python()
              + " -m logbroker.spark.bridge) failed: " + e.getMessage() + "; set "
              + "spark.logbroker.python (or PYSPARK_PYTHON) to a Python with logbroker installed",
              e);
        }
      }
    }
  }

  private static PlannerBridge start() throws IOException {
    String python = python();
    PlannerBridge bridge = new PlannerBridge(python);
    ObjectNode hello = JSON.createObjectNode();
    hello.put("op", "hello");
    int version = bridge.call(hello).path("version").asInt(-1);
    if (version != VERSION) {
      bridge.process.destroy();
      throw new IOException("its version is " + version + ", this connector's " + VERSION
          + " (rebuild the jar: make spark-connector)");
    }
    LOG.info("logbroker planner started: {} -m logbroker.spark.bridge", python);
    return bridge;
  }

  private JsonNode call(ObjectNode request) throws IOException {
    in.write(JSON.writeValueAsString(request));
    in.write('\n');
    in.flush();
    String line = out.readLine();
    if (line == null) {
      process.destroy();
      throw new IOException("it exited (is logbroker installed for that interpreter?)");
    }
    return JSON.readTree(line);
  }

  static String python() {
    String[] confs = {"spark.logbroker.python", "spark.pyspark.driver.python", "spark.pyspark.python"};
    SparkEnv env = SparkEnv.get();
    if (env != null) {
      for (String key : confs) {
        String v = env.conf().get(key, null);
        if (v != null && !v.isEmpty()) return v;
      }
    }
    for (String key : new String[] {"LOGBROKER_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_PYTHON"}) {
      String v = System.getenv(key);
      if (v != null && !v.isEmpty()) return v;
    }
    return "python3";
  }
}
