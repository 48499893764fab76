package org.logbroker.spark;

import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;
import org.logbroker.spark.records.Binary;

/**
 * Read-only Spark column vectors over one decoded record batch: no per-row
 * objects, no copy of keys and values until Spark asks for one (each
 * {@code getBinary} copies that entry, as Spark's own vectors do). Row
 * {@code i} of a vector is record {@code lo + i} of its batch.
 */
final class Vectors {
  private Vectors() {}

  /** Every accessor refused; each vector overrides the ones of its type. */
  abstract static class Base extends ColumnVector {
    Base(DataType type) {
      super(type);
    }

    @Override public void close() {}
    @Override public boolean hasNull() { return false; }
    @Override public int numNulls() { return 0; }
    @Override public boolean isNullAt(int i) { return false; }
    @Override public boolean getBoolean(int i) { throw refused(); }
    @Override public byte getByte(int i) { throw refused(); }
    @Override public short getShort(int i) { throw refused(); }
    @Override public int getInt(int i) { throw refused(); }
    @Override public long getLong(int i) { throw refused(); }
    @Override public float getFloat(int i) { throw refused(); }
    @Override public double getDouble(int i) { throw refused(); }
    @Override public ColumnarArray getArray(int i) { throw refused(); }
    @Override public ColumnarMap getMap(int i) { throw refused(); }
    @Override public Decimal getDecimal(int i, int p, int s) { throw refused(); }
    @Override public UTF8String getUTF8String(int i) { throw refused(); }
    @Override public byte[] getBinary(int i) { throw refused(); }
    @Override public ColumnVector getChild(int i) { throw refused(); }

    private UnsupportedOperationException refused() {
      return new UnsupportedOperationException(getClass().getSimpleName() + " of " + type);
    }
  }

  /** Entries {@code lo..} of a binary column, as binary or (string) UTF-8. */
  static final class Bytes extends Base {
    private final Binary b;
    private final int lo;
    private final int rows;

    Bytes(DataType type, Binary b, int lo, int rows) {
      super(type);
      this.b = b;
      this.lo = lo;
      this.rows = rows;
    }

    @Override
    public boolean hasNull() {
      return numNulls() > 0;
    }

    @Override
    public int numNulls() {
      int n = 0;
      for (int i = 0; i < rows; i++) {
        if (b.isNull(lo + i)) n++;
      }
      return n;
    }

    @Override
    public boolean isNullAt(int i) {
      return b.isNull(lo + i);
    }

    @Override
    public byte[] getBinary(int i) {
      return b.isNull(lo + i) ? null : b.get(lo + i);
    }

    @Override
    public UTF8String getUTF8String(int i) {
      int at = lo + i;
      if (b.isNull(at)) return null;
      return UTF8String.fromBytes(b.data, b.start(at), b.length(at));
    }
  }

  /** Offsets {@code first, first + 1, ...}: no array. */
  static final class Offsets extends Base {
    private final long first;

    Offsets(long first) {
      super(DataTypes.LongType);
      this.first = first;
    }

    @Override
    public long getLong(int i) {
      return first + i;
    }
  }

  /** Timestamps in microseconds from record timestamps in ms (range checked by the caller). */
  static final class Micros extends Base {
    private final long[] ms;
    private final int lo;

    Micros(long[] ms, int lo) {
      super(DataTypes.TimestampType);
      this.ms = ms;
      this.lo = lo;
    }

    @Override
    public long getLong(int i) {
      return ms[lo + i] * 1000L;
    }
  }

  /** One int for every row. */
  static final class ConstInt extends Base {
    private final int value;

    ConstInt(int value) {
      super(DataTypes.IntegerType);
      this.value = value;
    }

    @Override
    public int getInt(int i) {
      return value;
    }
  }

  /** One string for every row. */
  static final class ConstString extends Base {
    private final UTF8String value;

    ConstString(String value) {
      super(DataTypes.StringType);
      this.value = UTF8String.fromString(value);
    }

    @Override
    public UTF8String getUTF8String(int i) {
      return value;
    }
  }

  /** array&lt;struct&lt;key string, value binary&gt;&gt;: record i's headers. */
  static final class Headers extends Base {
    private final int[] starts;  // record r's headers are entries starts[r]..starts[r+1]
    private final int lo;
    private final Entries entries;

    Headers(int[] starts, Binary keys, Binary values, int lo) {
      super(Schemas.HEADERS);
      this.starts = starts;
      this.lo = lo;
      this.entries = new Entries(keys, values);
    }

    @Override
    public ColumnarArray getArray(int i) {
      if (starts == null) return new ColumnarArray(entries, 0, 0);
      int from = starts[lo + i];
      return new ColumnarArray(entries, from, starts[lo + i + 1] - from);
    }
  }

  /** The header entries of a batch as a struct vector (key string, value binary). */
  static final class Entries extends Base {
    private final ColumnVector keys;
    private final ColumnVector values;

    Entries(Binary keys, Binary values) {
      super(((org.apache.spark.sql.types.ArrayType) Schemas.HEADERS).elementType());
      int n = keys == null ? 0 : keys.size();
      this.keys = new Bytes(DataTypes.StringType, keys, 0, n);
      this.values = new Bytes(DataTypes.BinaryType, values, 0, n);
    }

    @Override
    public ColumnVector getChild(int ordinal) {
      return ordinal == 0 ? keys : values;
    }
  }
}
