package org.logbroker.spark.records;

/**
 * Strict UTF-8 validation (RFC 3629, as Python's {@code bytes.decode("utf-8")}):
 * no overlong forms, no surrogates, nothing above U+10FFFF.
 */
final class Utf8 {
    private Utf8() {
    }

    /** True when {@code b[start..end)} is valid UTF-8. */
    static boolean valid(byte[] b, int start, int end) {
        int i = start;
        while (i < end) {
            int c = b[i] & 0xFF;
            if (c < 0x80) {
                i++;
                continue;
            }
            int need;
            if (c >= 0xC2 && c <= 0xDF) {
                need = 1;
            } else if (c >= 0xE0 && c <= 0xEF) {
                need = 2;
            } else if (c >= 0xF0 && c <= 0xF4) {
                need = 3;
            } else {
                return false;
            }
            if (end - i <= need) {
                return false;
            }
            int lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
            int hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
            int c1 = b[i + 1] & 0xFF;
            if (c1 < lo || c1 > hi) {
                return false;
            }
            for (int k = 2; k <= need; k++) {
                if ((b[i + k] & 0xC0) != 0x80) {
                    return false;
                }
            }
            i += need + 1;
        }
        return true;
    }
}
