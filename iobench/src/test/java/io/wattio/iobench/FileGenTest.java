package io.wattio.iobench;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.zip.CRC32;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class FileGenTest {
    @TempDir
    Path dir;

    @Test
    void tableOneSizes() {
        assertEquals(100_000L, Size.TINY.bytes());
        assertEquals(15_000_000L, Size.SMALL.bytes());
        assertEquals(200_000_000L, Size.MEDIUM.bytes());
        assertEquals(3_200_000_000L, Size.MEDLARGE.bytes());
        assertEquals(16_000_000_000L, Size.LARGE.bytes());
    }

    @Test
    void textHasTheTableShapeAndSumsMatch() throws Exception {
        Sums s = FileGen.ensure(dir, Size.TINY);
        byte[] text = Files.readAllBytes(FileGen.text(dir, Size.TINY));
        assertEquals(100_000, text.length);
        for (int line = 0; line < 1000; line++) {
            for (int k = 0; k < 99; k++) {
                int c = text[line * 100 + k];
                assertTrue(Character.isLetterOrDigit(c) && c < 128, "line " + line + " col " + k);
            }
            assertEquals('\n', text[line * 100 + 99]);
        }
        CRC32 crc = new CRC32();
        crc.update(text);
        assertEquals(crc.getValue(), s.textCrc32());
        assertEquals(EquivalenceTest.reference(text, false), s.textChecksum());
        byte[] bin = Files.readAllBytes(FileGen.binary(dir, Size.TINY));
        assertEquals(100_000, bin.length);
        assertEquals(EquivalenceTest.reference(bin, true), s.seekChecksum());
        assertEquals(EquivalenceTest.seekBytes(100_000), s.seekBytes());
    }

    @Test
    void generationIsDeterministicAndIdempotent(@TempDir Path other) throws Exception {
        FileGen.ensure(dir, Size.TINY);
        FileGen.ensure(other, Size.TINY);
        assertArrayEquals(Files.readAllBytes(FileGen.text(dir, Size.TINY)), Files.readAllBytes(FileGen.text(other, Size.TINY)));
        assertArrayEquals(Files.readAllBytes(FileGen.binary(dir, Size.TINY)), Files.readAllBytes(FileGen.binary(other, Size.TINY)));
        // A truncated file is noticed and regenerated.
        Path t = FileGen.text(dir, Size.TINY);
        Files.write(t, new byte[10]);
        FileGen.ensure(dir, Size.TINY);
        assertEquals(100_000, Files.size(t));
    }
}
