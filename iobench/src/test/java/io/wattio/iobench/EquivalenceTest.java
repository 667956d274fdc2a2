package io.wattio.iobench;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * All methods of a use case do the same work: the same bytes read and folded the same way, the
 * same file written. Expected values come from the file's bytes with this test's own arithmetic,
 * not from the code under test.
 */
class EquivalenceTest {
    @TempDir
    static Path dir;

    /** Table I's tiny, plus an odd shape: short lines, a size that is not a multiple of any buffer or stride. */
    static final String[][] SHAPES = {{"tiny", "1000", "100"}, {"odd", "3001", "37"}};
    static final int[] BUFFERS = {1024, 8192, 1 << 20};

    @BeforeAll
    static void generate() throws Exception {
        for (String[] s : SHAPES) {
            FileGen.ensure(dir, s[0], Long.parseLong(s[1]), Integer.parseInt(s[2]));
        }
    }

    /** The two-sum checksum, written out independently of {@link Checksum}. */
    static String reference(byte[] data, boolean seekOnly) {
        long a = 0, b = 0;
        for (int i = 0; i < data.length; i++) {
            if (seekOnly && i % 10_100 >= 100) {
                continue;
            }
            a += data[i] & 0xff;
            b += a;
        }
        return String.format("%016x", (a * 0x9E3779B97F4A7C15L) ^ b);
    }

    static long seekBytes(long size) {
        long n = 0;
        for (long pos = 0; pos < size; pos += 10_100) {
            n += Math.min(100, size - pos);
        }
        return n;
    }

    @Test
    void everyReadMethodReadsTheSameBytes() throws Exception {
        List<String> failures = new ArrayList<>();
        for (String[] s : SHAPES) {
            Path text = dir.resolve("text-" + s[0] + ".txt");
            byte[] bytes = Files.readAllBytes(text);
            String want = reference(bytes, false);
            for (Catalog.Op op : new Catalog.Op[] {Catalog.Op.READ, Catalog.Op.READALL}) {
                for (Catalog.Entry e : Catalog.of(op)) {
                    for (int buf : e.buffered() ? BUFFERS : new int[] {8192}) {
                        Job j = Job.forRead(text, buf);
                        long n = e.task().run(j);
                        if (n != bytes.length || !j.sum().hex().equals(want)) {
                            failures.add(op.label() + "/" + e.method() + " buf=" + buf + " on " + s[0] + ": " + n
                                    + " bytes, " + j.sum().hex() + " (want " + bytes.length + ", " + want + ")");
                        }
                    }
                }
            }
        }
        assertEquals(List.of(), failures);
    }

    @Test
    void everySeekMethodVisitsTheSameOffsets() throws Exception {
        List<String> failures = new ArrayList<>();
        for (String[] s : SHAPES) {
            Path bin = dir.resolve("bin-" + s[0] + ".bin");
            byte[] bytes = Files.readAllBytes(bin);
            String want = reference(bytes, true);
            for (Catalog.Entry e : Catalog.of(Catalog.Op.SEEK)) {
                Job j = Job.forRead(bin, 8192);
                long n = e.task().run(j);
                if (n != seekBytes(bytes.length) || !j.sum().hex().equals(want)) {
                    failures.add("seek/" + e.method() + " on " + s[0] + ": " + n + " bytes, " + j.sum().hex());
                }
            }
        }
        assertEquals(List.of(), failures);
    }

    @Test
    void everyWriteMethodWritesTheGeneratedFile() throws Exception {
        for (String[] s : SHAPES) {
            byte[] want = Files.readAllBytes(dir.resolve("text-" + s[0] + ".txt"));
            for (Catalog.Entry e : Catalog.of(Catalog.Op.WRITE)) {
                for (int buf : e.buffered() ? BUFFERS : new int[] {8192}) {
                    Path out = dir.resolve("w-" + e.method() + "-" + buf + ".out");
                    // A stale longer file must not survive: every writer truncates.
                    Files.write(out, new byte[want.length + 1234]);
                    Job j = Job.forWrite(out, buf, Long.parseLong(s[1]), Integer.parseInt(s[2]));
                    long n = e.task().run(j);
                    assertEquals(want.length, n, "write/" + e.method() + " returned count");
                    assertArrayEquals(want, Files.readAllBytes(out), "write/" + e.method() + " buf=" + buf + " on " + s[0]);
                    Files.delete(out);
                }
            }
        }
    }

    @Test
    void catalogCoversTableTwo() {
        // 11 read, 5 read-all, 3 seek, 9 write methods (Tables III-V and Figure 1 of the paper).
        assertEquals(11, Catalog.of(Catalog.Op.READ).size());
        assertEquals(5, Catalog.of(Catalog.Op.READALL).size());
        assertEquals(3, Catalog.of(Catalog.Op.SEEK).size());
        assertEquals(9, Catalog.of(Catalog.Op.WRITE).size());
    }

    @Test
    void checksumDependsOnOrder() {
        Checksum x = new Checksum();
        x.addString("ab");
        Checksum y = new Checksum();
        y.addString("ba");
        assertFalse(x.hex().equals(y.hex()));
    }
}
