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
   * dir, Python for a {@code bootstrap} read, whose protocol client is
   * Python's).
   */
  public static String engine(Map<String, String> options) {
    String raw = get(options, "engine", "auto").trim().toLowerCase();
    boolean remote = !get(options, "bootstrap", "").trim().isEmpty();
    switch (raw) {
      case "auto":
        return remote ? "python" : "jvm";
      case "python":
        return "python";
      case "jvm":
        if (remote) {
          throw new IllegalArgumentException("engine jvm reads a data dir (option path); a "
              + "bootstrap read runs on the python engine (engine auto or python)");
        }
        return "jvm";
      default:
        throw new IllegalArgumentException(
            "option engine must be jvm, python or auto, got '" + raw + "'");
    }
  }
}
