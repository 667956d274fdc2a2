package io.wattio.iobench;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.wattio.iobench.apps.Apps;
import io.wattio.iobench.apps.Fasta;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** RQ2 programs: every swappable method gives the same output. */
class AppsTest {
    @TempDir
    Path dir;

    @Test
    void fastaWritersWriteTheSameFile() throws Exception {
        long n = 2_345;
        byte[] first = null;
        for (String m : Apps.FASTA_METHODS) {
            Path out = dir.resolve("f-" + m);
            assertEquals(Fasta.bytes(n), Apps.fasta(m, n, out));
            byte[] b = Files.readAllBytes(out);
            assertEquals(Fasta.bytes(n), b.length, m);
            if (first == null) {
                first = b;
            } else {
                assertArrayEquals(first, b, m);
            }
            assertEquals(Apps.fastaCrc(n), BenchState.crc32(out), m);
        }
        String text = new String(first, StandardCharsets.US_ASCII);
        // The shape the benchmark describes: three headers, lines of at most 60 nucleotides.
        assertTrue(text.startsWith(">ONE Homo sapiens alu\n"));
        assertTrue(text.contains("\n>TWO IUB ambiguity codes\n") && text.contains("\n>THREE Homo sapiens frequency\n"));
        for (String l : text.split("\n")) {
            assertTrue(l.startsWith(">") || (l.length() <= 60 && l.matches("[ACGTacgtBDHKMNRSVWY]+")), l);
        }
    }

    @Test
    void knucleotideReadersAgree() throws Exception {
        Path in = dir.resolve("fasta.txt");
        Apps.fasta("iostream", 25_000, in);
        String want = Apps.knucleotideReference(in);
        assertTrue(want.contains("\tGGT\n"), want);
        // Frequencies of the four letters add up to 100%.
        double sum = 0;
        for (String l : want.split("\n\n")[0].split("\n")) {
            sum += Double.parseDouble(l.split(" ")[1]);
        }
        assertEquals(100.0, sum, 0.01);
        for (String m : Apps.KNUC_METHODS) {
            assertEquals(want, Apps.knucleotide(m, in), m);
        }
    }

    @Test
    void zipAndDecryptGiveTheOriginalBytes() throws Exception {
        Sums s = FileGen.ensure(dir, Size.TINY);
        Path text = FileGen.text(dir, Size.TINY);
        Path enc = dir.resolve("enc.bin");
        Apps.ensureEncrypted(text, enc);
        assertEquals((100_000 / 16 + 1) * 16, Files.size(enc));
        for (String m : Apps.STREAM_METHODS) {
            Path zip = dir.resolve("z-" + m + ".zip");
            assertEquals(100_000, Apps.zip4j(m, text, zip), m);
            assertEquals(s.textCrc32(), Apps.unzipCrc(zip), m);
            assertTrue(Files.size(zip) < 100_000, "the text compresses");
            assertEquals(s.textCrc32(), Apps.decrypt(m, enc), m);
        }
    }
}
