package io.wattio.iobench;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.zip.CRC32;

/**
 * Deterministic generator of the study's files (Table I), text and binary:
 * {@code text-<size>.txt}, {@code bin-<size>.bin} and {@code <size>.sums}.
 *
 * <p>Usage: {@code java -cp benchmarks.jar io.wattio.iobench.FileGen DIR SIZE...}. Files whose
 * sums file already exists and whose lengths match are kept (generation is idempotent).
 */
public final class FileGen {
    private FileGen() {}

    public static Path text(Path dir, Size s) {
        return dir.resolve("text-" + s.label() + ".txt");
    }

    public static Path binary(Path dir, Size s) {
        return dir.resolve("bin-" + s.label() + ".bin");
    }

    /** Generates (or keeps) the files of {@code size} in {@code dir}; returns their sums. */
    public static Sums ensure(Path dir, Size size) throws IOException {
        return ensure(dir, size.label(), size.lines, size.lineLength);
    }

    /**
     * Same for any lines × length (tests use odd shapes); files are named after {@code label}.
     */
    public static Sums ensure(Path dir, String label, long lines, int lineLength) throws IOException {
        Files.createDirectories(dir);
        Path txt = dir.resolve("text-" + label + ".txt");
        Path bin = dir.resolve("bin-" + label + ".bin");
        Path sums = dir.resolve(label + ".sums");
        long bytes = lines * lineLength;
        if (Files.exists(sums) && Files.exists(txt) && Files.exists(bin)) {
            Sums s = Sums.load(sums);
            if (s.textBytes() == bytes && Files.size(txt) == bytes && Files.size(bin) == bytes) {
                return s;
            }
        }
        Files.deleteIfExists(sums);
        // Text: stream the pool's lines, checksum and CRC them as written.
        String[] pool = Content.pool(lineLength);
        byte[][] enc = new byte[pool.length][];
        for (int i = 0; i < pool.length; i++) {
            enc[i] = (pool[i] + '\n').getBytes(StandardCharsets.US_ASCII);
        }
        Checksum tsum = new Checksum();
        CRC32 crc = new CRC32();
        Path ttmp = dir.resolve(txt.getFileName() + ".tmp");
        try (OutputStream out = new BufferedOutputStream(Files.newOutputStream(ttmp), 1 << 20)) {
            for (long i = 0; i < lines; i++) {
                byte[] l = enc[(int) (i % pool.length)];
                out.write(l);
                tsum.addBytes(l, 0, l.length);
                crc.update(l);
            }
        }
        Files.move(ttmp, txt, StandardCopyOption.REPLACE_EXISTING);
        // Binary: the xorshift stream; the seek checksum folds the bytes the seek pattern visits.
        Checksum ssum = new Checksum();
        long seekBytes = 0;
        Path btmp = dir.resolve(bin.getFileName() + ".tmp");
        byte[] block = new byte[1 << 20];
        long state = Content.binarySeed(bytes);
        try (OutputStream out = Files.newOutputStream(btmp)) {
            long off = 0;
            while (off < bytes) {
                int n = (int) Math.min(block.length, bytes - off);
                state = Content.fillBinary(state, block, n);
                out.write(block, 0, n);
                for (int i = 0; i < n; i++) {
                    if ((off + i) % Content.SEEK_STRIDE < Content.SEEK_READ) {
                        ssum.add(block[i]);
                        seekBytes++;
                    }
                }
                off += n;
            }
        }
        Files.move(btmp, bin, StandardCopyOption.REPLACE_EXISTING);
        Sums s = new Sums(bytes, tsum.hex(), crc.getValue(), bytes, ssum.hex(), seekBytes);
        s.save(sums);
        return s;
    }

    public static void main(String[] args) throws IOException {
        if (args.length < 2) {
            System.err.println("usage: FileGen DIR SIZE... (sizes: tiny small medium medlarge large)");
            System.exit(2);
        }
        Path dir = Path.of(args[0]);
        for (int i = 1; i < args.length; i++) {
            Size s = Size.parse(args[i]);
            Sums sums = ensure(dir, s);
            System.out.println(s.label() + " " + sums.textBytes() + " " + sums.textChecksum());
        }
    }
}
