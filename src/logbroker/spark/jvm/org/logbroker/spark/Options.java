package org.logbroker.spark;

import java.util.Map;

/** Spark's options as the source reads them: keys in any case. */
public final class Options {
  private Options() {}

  /** The value of option {@code name} in {@code options} (any key case), or {@code fallback}. */
  public static String get(Map<String, String> options, String name, String fallback) {
    for (Map.Entry<String, String> e : options.entrySet()) {
      if (e.getKey().equalsIgnoreCase(name)) return e.getValue();
    }
    return fallback;
  }

  /**
   * The engine a read runs on: {@code "jvm"} or {@code "python"}. Option
   * {@code engine} = jvm | python | auto (the default: the JVM for a data
   * dir and for a {@code bootstrap} read with {@code paths}, whose tasks
   * read the replicas' segment files on their hosts; Python for a
   * {@code bootstrap} read without {@code paths}, which fetches from the
   * leaders through Python's protocol client).
   */
  public static String engine(Map<String, String> options) {
    String raw = get(options, "engine", "auto").trim().toLowerCase();
    boolean remote = !get(options, "bootstrap", "").trim().isEmpty();
    boolean local = !remote || !get(options, "paths", "").trim().isEmpty();
    switch (raw) {
      case "auto":
        return local ? "jvm" : "python";
      case "python":
        return "python";
      case "jvm":
        if (!local) {
          throw new IllegalArgumentException("engine jvm reads files: a bootstrap read on it "
              + "needs option paths (each broker's data dir, JSON like {\"1\":\"/var/lib/"
              + "logbroker\"}); without it use engine auto or python (Fetch from the leaders)");
        }
        return "jvm";
      default:
        throw new IllegalArgumentException(
            "option engine must be jvm, python or auto, got '" + raw + "'");
    }
  }
}
