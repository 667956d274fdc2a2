package io.wattio.iobench;

import java.util.AbstractList;

/**
 * The deterministic content of the study's files.
 *
 * <p>Text: line {@code i} is {@code pool[i % POOL]} followed by '\n', where the pool holds 4,096
 * random lines of {@code lineLength - 1} characters from [0-9A-Za-z] (a period of ≥ 400 KB, far
 * beyond deflate's 32 KB window). Writers write exactly the text file of their size, so a written
 * file is checked against the generated one, and the lines exist before the measured window opens
 * (the artifact generated random text inside it). Binary: bytes of a xorshift64* stream.
 */
public final class Content {
    public static final int POOL = 4096;
    /** Seek use case: read this many bytes ... */
    public static final int SEEK_READ = 100;
    /** ... then move this many bytes on. */
    public static final int SEEK_SKIP = 10_000;
    public static final int SEEK_STRIDE = SEEK_READ + SEEK_SKIP;

    private static final char[] ALPHABET =
            "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".toCharArray();

    private Content() {}

    /** The pool of lines (without '\n') for a line length that counts the '\n'. */
    public static String[] pool(int lineLength) {
        if (lineLength < 2) {
            throw new IllegalArgumentException("line length must be ≥ 2, got " + lineLength);
        }
        long s = 0x5EED_0000L ^ lineLength;
        String[] out = new String[POOL];
        char[] line = new char[lineLength - 1];
        for (int i = 0; i < POOL; i++) {
            for (int j = 0; j < line.length; j++) {
                s = next(s);
                line[j] = ALPHABET[(int) ((s >>> 33) % ALPHABET.length)];
            }
            out[i] = new String(line);
        }
        return out;
    }

    /** The same pool with each line's '\n' appended (for writers that write one string a line). */
    public static String[] poolWithNewlines(String[] pool) {
        String[] out = new String[pool.length];
        for (int i = 0; i < pool.length; i++) {
            out[i] = pool[i] + '\n';
        }
        return out;
    }

    /** The file's lines (without '\n') as a list that generates nothing: views into the pool. */
    public static java.util.List<String> lines(String[] pool, long count) {
        if (count > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("more than 2^31 lines cannot be listed: " + count);
        }
        final int n = (int) count;
        return new AbstractList<>() {
            @Override
            public String get(int i) {
                return pool[i % pool.length];
            }

            @Override
            public int size() {
                return n;
            }
        };
    }

    /** xorshift64* step. */
    public static long next(long s) {
        s ^= s >>> 12;
        s ^= s << 25;
        s ^= s >>> 27;
        return s * 0x2545F4914F6CDD1DL;
    }

    /** Fills {@code buf} with the binary stream's bytes and returns the new state. */
    public static long fillBinary(long state, byte[] buf, int len) {
        long s = state;
        int i = 0;
        while (i < len) {
            s = next(s);
            long v = s;
            for (int k = 0; k < 8 && i < len; k++, i++) {
                buf[i] = (byte) v;
                v >>>= 8;
            }
        }
        return s;
    }

    public static long binarySeed(long size) {
        return 0xB1_0000_0000L ^ size | 1L;
    }
}
