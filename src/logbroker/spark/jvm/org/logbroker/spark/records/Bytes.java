package org.logbroker.spark.records;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/**
 * Fixed-width integers read from byte arrays: big-endian (the batch header)
 * and little-endian (our columnar records section). Callers check bounds.
 */
final class Bytes {
    private static final VarHandle I16_BE =
            MethodHandles.byteArrayViewVarHandle(short[].class, ByteOrder.BIG_ENDIAN);
    private static final VarHandle I32_BE =
            MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.BIG_ENDIAN);
    private static final VarHandle I64_BE =
            MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);
    private static final VarHandle I32_LE =
            MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);

    private Bytes() {
    }

    static short i16be(byte[] b, int pos) {
        return (short) I16_BE.get(b, pos);
    }

    static int u16be(byte[] b, int pos) {
        return i16be(b, pos) & 0xFFFF;
    }

    static int i32be(byte[] b, int pos) {
        return (int) I32_BE.get(b, pos);
    }

    static long u32be(byte[] b, int pos) {
        return i32be(b, pos) & 0xFFFFFFFFL;
    }

    static long i64be(byte[] b, int pos) {
        return (long) I64_BE.get(b, pos);
    }

    static int i32le(byte[] b, int pos) {
        return (int) I32_LE.get(b, pos);
    }
}
