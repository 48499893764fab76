package org.logbroker.spark;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The source's schema: Spark's Kafka source columns (key, value, topic,
 * partition, offset, timestamp, timestampType, and headers with
 * includeHeaders), the same as the Python source's ({@code spark_schema}
 * in source.py). A schema a user gives may pick some of them, each with its
 * own type and nullable, as {@code pick_columns} in source.py checks.
 */
public final class Schemas {
  private Schemas() {}

  public static final DataType HEADERS = DataTypes.createArrayType(new StructType()
      .add("key", DataTypes.StringType).add("value", DataTypes.BinaryType));

  /** The whole schema, with or without the headers column. */
  public static StructType full(boolean includeHeaders) {
    StructType s = new StructType()
        .add("key", DataTypes.BinaryType).add("value", DataTypes.BinaryType)
        .add("topic", DataTypes.StringType).add("partition", DataTypes.IntegerType)
        .add("offset", DataTypes.LongType).add("timestamp", DataTypes.TimestampType)
        .add("timestampType", DataTypes.IntegerType);
    return includeHeaders ? s.add("headers", HEADERS) : s;
  }

  /** includeHeaders from the options (any key case), checked as the Python source checks it. */
  public static boolean includeHeaders(Map<String, String> options) {
    String raw = Options.get(options, "includeHeaders", "false").trim().toLowerCase();
    if (!raw.equals("true") && !raw.equals("false")) {
      throw new IllegalArgumentException(
          "option includeHeaders must be true or false, got '" + raw + "'");
    }
    return raw.equals("true");
  }

  /**
   * The column names of a schema given to the reader, each checked against
   * the source's own (same name, type and nullable); the message is the
   * Python source's.
   */
  public static List<String> pick(StructType given) {
    StructType full = full(true);
    StringBuilder allowed = new StringBuilder();
    for (StructField f : full.fields()) {
      if (allowed.length() > 0) allowed.append(", ");
      allowed.append(f.name()).append(' ').append(f.dataType().simpleString());
    }
    if (given.fields().length == 0) {
      throw new IllegalArgumentException(
          "a schema for the logbroker source needs at least one of: " + allowed);
    }
    List<String> out = new ArrayList<>();
    for (StructField f : given.fields()) {
      DataType want = null;
      for (StructField g : full.fields()) {
        if (g.name().equals(f.name())) want = g.dataType();
      }
      if (want == null || !want.equals(f.dataType()) || !f.nullable()) {
        throw new IllegalArgumentException("column " + f.name() + " "
            + f.dataType().simpleString() + " is not one the logbroker source has (same type, "
            + "nullable, nested fields too); pick from: " + allowed);
      }
      out.add(f.name());
    }
    return out;
  }
}
