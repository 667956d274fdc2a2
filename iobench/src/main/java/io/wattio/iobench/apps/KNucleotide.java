package io.wattio.iobench.apps;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The counting of the Benchmarks Game's "k-nucleotide" program, written from its description:
 * take the sequence after the {@code >THREE} header (upper-cased), print the frequencies of all
 * 1- and 2-nucleotide strings (descending frequency, then key), then the counts of GGT, GGTA,
 * GGTATT, GGTATTTTAATT and GGTATTTTAATTTATAGT. Input arrives line by line from whichever read
 * method is being measured ({@link #line}); the report is identical for every method.
 */
public final class KNucleotide {
    private final StringBuilder seq = new StringBuilder();
    private boolean inThree;
    private boolean done;

    static final String[] QUERIES = {"GGT", "GGTA", "GGTATT", "GGTATTTTAATT", "GGTATTTTAATTTATAGT"};

    /** One input line without its '\n'. */
    public void line(CharSequence l) {
        if (done) {
            return;
        }
        if (l.length() > 0 && l.charAt(0) == '>') {
            if (inThree) {
                done = true;
            }
            inThree = l.length() >= 6 && l.subSequence(0, 6).toString().equals(">THREE");
            return;
        }
        if (inThree) {
            for (int i = 0; i < l.length(); i++) {
                seq.append(Character.toUpperCase(l.charAt(i)));
            }
        }
    }

    /** Counts of every k-letter string (k = 1 or 2) by a table over the letters' codes. */
    private static Map<String, Integer> count(String s, int k) {
        int[] c = new int[128 * 128];
        for (int i = 0; i + k <= s.length(); i++) {
            int key = s.charAt(i) & 127;
            if (k == 2) {
                key = key * 128 + (s.charAt(i + 1) & 127);
            }
            c[key]++;
        }
        Map<String, Integer> m = new HashMap<>();
        for (int key = 0; key < c.length; key++) {
            if (c[key] > 0) {
                m.put(k == 1 ? String.valueOf((char) key) : "" + (char) (key / 128) + (char) (key % 128), c[key]);
            }
        }
        return m;
    }

    /** The report. */
    public String report() {
        String s = seq.toString();
        StringBuilder out = new StringBuilder();
        for (int k = 1; k <= 2; k++) {
            Map<String, Integer> m = count(s, k);
            List<Map.Entry<String, Integer>> es = new ArrayList<>(m.entrySet());
            es.sort((a, b) -> b.getValue().equals(a.getValue()) ? a.getKey().compareTo(b.getKey()) : b.getValue() - a.getValue());
            long total = Math.max(1, s.length() - k + 1);
            for (Map.Entry<String, Integer> e : es) {
                out.append(String.format(Locale.ROOT, "%s %.3f%n", e.getKey(), 100.0 * e.getValue() / total));
            }
            out.append('\n');
        }
        for (String q : QUERIES) {
            int c = 0;
            for (int i = s.indexOf(q); i >= 0; i = s.indexOf(q, i + 1)) {
                c++;
            }
            out.append(c).append('\t').append(q).append('\n');
        }
        return out.toString();
    }
}
