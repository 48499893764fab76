package org.logbroker.spark;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.spark.SparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerTaskEnd;

/**
 * Counts finished tasks by the locality Spark ran them at
 * ({@code taskInfo().taskLocality()}: PROCESS_LOCAL, NODE_LOCAL, RACK_LOCAL,
 * NO_PREF, ANY), for every task of the application: how often a read's
 * preferred locations (the replicas' hosts) were honoured. Counts are
 * static, so PySpark reads them through py4j:
 *
 * <pre>
 * L = spark._jvm.org.logbroker.spark.LocalityListener
 * L.register(spark.sparkContext._jsc.sc())   # once per SparkContext
 * L.reset(); df.collect(); dict(L.snapshot())  # {"NODE_LOCAL": 4}
 * </pre>
 *
 * Spark delivers task-end events on its listener bus, after the job's
 * result: a caller waits until the counts reach the job's tasks
 * ({@link #total()}).
 */
public final class LocalityListener extends SparkListener {
  private static final Map<String, AtomicLong> COUNTS = new ConcurrentHashMap<>();
  private static SparkContext registered;

  /** Adds a listener to {@code sc} unless one was added to it already. */
  public static synchronized void register(SparkContext sc) {
    if (registered != sc) {
      sc.addSparkListener(new LocalityListener());
      registered = sc;
    }
  }

  /** Forget the counts so far. */
  public static void reset() {
    COUNTS.clear();
  }

  /** Finished tasks by locality name, in name order. */
  public static Map<String, Long> snapshot() {
    Map<String, Long> out = new TreeMap<>();
    COUNTS.forEach((k, v) -> out.put(k, v.get()));
    return out;
  }

  /** Finished tasks counted since the last reset. */
  public static long total() {
    long n = 0;
    for (AtomicLong v : COUNTS.values()) n += v.get();
    return n;
  }

  @Override
  public void onTaskEnd(SparkListenerTaskEnd taskEnd) {
    if (taskEnd.taskInfo() == null) return;
    String locality = String.valueOf(taskEnd.taskInfo().taskLocality());
    COUNTS.computeIfAbsent(locality, k -> new AtomicLong()).incrementAndGet();
  }
}
