package io.wattio.iobench.apps;

import java.io.IOException;

/**
 * A FASTA generator with the behaviour the Computer Language Benchmarks Game describes for its
 * "fasta" program (written from that description, not from any of its sources): three sequences
 * of 60-character lines — a repeated fixed sequence (2n nucleotides), then weighted random
 * selections from the IUB ambiguity alphabet (3n) and from the Homo sapiens frequencies (5n) —
 * with the linear congruential generator {@code seed = (seed * 3877 + 29573) % 139968}.
 *
 * <p>The repeated sequence here is a fixed 287-character pattern of our own (the benchmark's ALU
 * text is not copied), so the output has the benchmark's shape and size, not its bytes.
 */
public final class Fasta {
    private Fasta() {}

    /** Where generated lines go: one call per line, with its '\n'. */
    @FunctionalInterface
    public interface LineOut {
        void line(String s) throws IOException;
    }

    static final int LINE = 60;
    private static final int IM = 139968, IA = 3877, IC = 29573;

    static final String REPEAT;

    static {
        // 287 characters over ACGT from a fixed recurrence (stands in for the benchmark's ALU).
        StringBuilder b = new StringBuilder();
        long s = 11;
        for (int i = 0; i < 287; i++) {
            s = (s * 1103515245L + 12345) & 0x7fffffffL;
            b.append("ACGT".charAt((int) ((s >>> 16) & 3)));
        }
        REPEAT = b.toString();
    }

    static final char[] IUB = "acgtBDHKMNRSVWY".toCharArray();
    static final double[] IUB_P = {0.27, 0.12, 0.12, 0.27, 0.02, 0.02, 0.02, 0.02, 0.02, 0.02, 0.02, 0.02, 0.02, 0.02, 0.02};
    static final char[] HOMO = "acgt".toCharArray();
    static final double[] HOMO_P = {0.3029549426680, 0.1979883004921, 0.1975473066391, 0.3015094502008};

    /** Bytes {@link #generate} writes for {@code n} (each line of ≤ 60 characters plus '\n'). */
    public static long bytes(long n) {
        return header(">ONE Homo sapiens alu") + seqBytes(2 * n) + header(">TWO IUB ambiguity codes")
                + seqBytes(3 * n) + header(">THREE Homo sapiens frequency") + seqBytes(5 * n);
    }

    private static long header(String h) {
        return h.length() + 1;
    }

    private static long seqBytes(long k) {
        return k + (k + LINE - 1) / LINE;
    }

    /** Writes the three sequences for {@code n}. */
    public static void generate(long n, LineOut out) throws IOException {
        out.line(">ONE Homo sapiens alu\n");
        repeat(2 * n, out);
        int[] seed = {42};
        out.line(">TWO IUB ambiguity codes\n");
        random(3 * n, IUB, cumulative(IUB_P), seed, out);
        out.line(">THREE Homo sapiens frequency\n");
        random(5 * n, HOMO, cumulative(HOMO_P), seed, out);
    }

    private static double[] cumulative(double[] p) {
        double[] c = new double[p.length];
        double acc = 0;
        for (int i = 0; i < p.length; i++) {
            acc += p[i];
            c[i] = acc;
        }
        c[c.length - 1] = 1.0;
        return c;
    }

    private static void repeat(long k, LineOut out) throws IOException {
        char[] line = new char[LINE + 1];
        int pos = 0;
        while (k > 0) {
            int len = (int) Math.min(LINE, k);
            for (int i = 0; i < len; i++) {
                line[i] = REPEAT.charAt(pos);
                pos = pos + 1 == REPEAT.length() ? 0 : pos + 1;
            }
            line[len] = '\n';
            out.line(new String(line, 0, len + 1));
            k -= len;
        }
    }

    private static void random(long k, char[] alphabet, double[] cum, int[] seed, LineOut out) throws IOException {
        char[] line = new char[LINE + 1];
        while (k > 0) {
            int len = (int) Math.min(LINE, k);
            for (int i = 0; i < len; i++) {
                seed[0] = (seed[0] * IA + IC) % IM;
                double r = seed[0] / (double) IM;
                int j = 0;
                while (cum[j] < r) {
                    j++;
                }
                line[i] = alphabet[j];
            }
            line[len] = '\n';
            out.line(new String(line, 0, len + 1));
            k -= len;
        }
    }
}
