package io.wattio.iobench;

import java.nio.ByteBuffer;

/**
 * The order-dependent checksum every read method feeds with what it read (Fletcher-style, two
 * 64-bit sums). Every method pays the same per-character cost, so the checksum is part of the
 * equal work: lines are folded with their '\n' so line readers and chunk readers agree.
 */
public final class Checksum {
    private long a;
    private long b;

    public void add(int c) {
        a += c & 0xff;
        b += a;
    }

    public void addBytes(byte[] buf, int off, int len) {
        long x = a, y = b;
        for (int i = off, end = off + len; i < end; i++) {
            x += buf[i] & 0xff;
            y += x;
        }
        a = x;
        b = y;
    }

    public void addChars(char[] buf, int off, int len) {
        long x = a, y = b;
        for (int i = off, end = off + len; i < end; i++) {
            x += buf[i] & 0xff;
            y += x;
        }
        a = x;
        b = y;
    }

    public void addString(CharSequence s) {
        long x = a, y = b;
        for (int i = 0, n = s.length(); i < n; i++) {
            x += s.charAt(i) & 0xff;
            y += x;
        }
        a = x;
        b = y;
    }

    /** A line as returned by readLine(): its characters, then the '\n' the reader removed. */
    public void addLine(CharSequence s) {
        addString(s);
        add('\n');
    }

    /** The remaining bytes of {@code bb} (position to limit); the position is not moved. */
    public void addBuffer(ByteBuffer bb) {
        if (bb.hasArray()) {
            addBytes(bb.array(), bb.arrayOffset() + bb.position(), bb.remaining());
        } else {
            long x = a, y = b;
            for (int i = bb.position(), end = bb.limit(); i < end; i++) {
                x += bb.get(i) & 0xff;
                y += x;
            }
            a = x;
            b = y;
        }
    }

    public long value() {
        return (a * 0x9E3779B97F4A7C15L) ^ b;
    }

    public String hex() {
        return String.format("%016x", value());
    }

    public void reset() {
        a = 0;
        b = 0;
    }
}
