package io.wattio.iobench;

import java.io.IOException;
import java.io.Reader;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Properties;

/**
 * What the generator says a size's files contain, computed while writing them (not by any of the
 * methods under test): the text file's checksum and CRC32, the bytes the seek pattern visits in the
 * binary file, and sizes. Stored next to the files as {@code <size>.sums}.
 */
public record Sums(long textBytes, String textChecksum, long textCrc32, long binBytes,
                   String seekChecksum, long seekBytes) {

    public static Path file(Path dir, Size size) {
        return dir.resolve(size.label() + ".sums");
    }

    public void save(Path p) throws IOException {
        Properties pr = new Properties();
        pr.setProperty("text.bytes", Long.toString(textBytes));
        pr.setProperty("text.checksum", textChecksum);
        pr.setProperty("text.crc32", Long.toString(textCrc32));
        pr.setProperty("bin.bytes", Long.toString(binBytes));
        pr.setProperty("seek.checksum", seekChecksum);
        pr.setProperty("seek.bytes", Long.toString(seekBytes));
        Path tmp = p.resolveSibling(p.getFileName() + ".tmp");
        try (Writer w = Files.newBufferedWriter(tmp, StandardCharsets.UTF_8)) {
            pr.store(w, "wattio iobench file sums (written by FileGen)");
        }
        Files.move(tmp, p, java.nio.file.StandardCopyOption.REPLACE_EXISTING,
                java.nio.file.StandardCopyOption.ATOMIC_MOVE);
    }

    public static Sums load(Path p) throws IOException {
        Properties pr = new Properties();
        try (Reader r = Files.newBufferedReader(p, StandardCharsets.UTF_8)) {
            pr.load(r);
        }
        try {
            return new Sums(Long.parseLong(pr.getProperty("text.bytes")), pr.getProperty("text.checksum"),
                    Long.parseLong(pr.getProperty("text.crc32")), Long.parseLong(pr.getProperty("bin.bytes")),
                    pr.getProperty("seek.checksum"), Long.parseLong(pr.getProperty("seek.bytes")));
        } catch (RuntimeException e) {
            throw new IOException(p + " is not a sums file (" + e + "): delete it and regenerate the files", e);
        }
    }
}
