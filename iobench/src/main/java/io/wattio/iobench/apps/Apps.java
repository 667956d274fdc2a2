package io.wattio.iobench.apps;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.FileReader;
import java.io.FileWriter;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.GeneralSecurityException;
import java.util.List;
import java.util.zip.CRC32;
import java.util.zip.CheckedOutputStream;
import javax.crypto.Cipher;
import javax.crypto.CipherOutputStream;
import javax.crypto.spec.SecretKeySpec;
import net.lingala.zip4j.io.outputstream.ZipOutputStream;
import net.lingala.zip4j.model.ZipParameters;

/**
 * RQ2 of the paper: real programs whose read or write method is swapped among the study's
 * methods, with outputs identical across methods (the artifact's substitutions changed them):
 * our Fasta writer, our K-nucleotide reader, Zip4j compressing a file, javax.crypto AES decryption.
 */
public final class Apps {
    private Apps() {}

    public static final List<String> FASTA_METHODS = List.of("iostream", "biostream", "bfilewriter", "filewriter", "channel");
    public static final List<String> KNUC_METHODS = List.of("biostream", "bfilereader", "filereader", "niof", "channel");
    public static final List<String> STREAM_METHODS = List.of("iostream", "biostream", "niof", "channel", "omchannel");

    /** Fasta's n for a Table I size label: the output is about as large as that size's file. */
    public static long fastaN(String size) {
        switch (size) {
            case "tiny": return 10_000;
            case "small": return 1_500_000;
            case "medium": return 20_000_000;
            default: throw new IllegalArgumentException("the programs run on tiny, small or medium, not " + size);
        }
    }

    // ------------------------------------------------------------------ Fasta (write)

    /** A closable line sink. */
    interface Sink extends Fasta.LineOut, AutoCloseable {
        @Override
        void close() throws IOException;
    }

    static Sink sink(String method, Path out) throws IOException {
        switch (method) {
            case "iostream": return writerSink(new OutputStreamWriter(new FileOutputStream(out.toFile()), StandardCharsets.UTF_8));
            case "biostream": return writerSink(new OutputStreamWriter(new BufferedOutputStream(new FileOutputStream(out.toFile())), StandardCharsets.UTF_8));
            case "bfilewriter": return writerSink(new BufferedWriter(new FileWriter(out.toFile(), StandardCharsets.UTF_8)));
            case "filewriter": {
                FileWriter w = new FileWriter(out.toFile(), StandardCharsets.UTF_8);
                return new Sink() {
                    public void line(String s) throws IOException {
                        w.write(s, 0, s.length());
                    }

                    public void close() throws IOException {
                        w.close();
                    }
                };
            }
            case "channel": {
                FileChannel ch = FileChannel.open(out, StandardOpenOption.CREATE, StandardOpenOption.TRUNCATE_EXISTING, StandardOpenOption.WRITE);
                ByteBuffer bb = ByteBuffer.allocate(8192);
                return new Sink() {
                    public void line(String s) throws IOException {
                        byte[] b = s.getBytes(StandardCharsets.UTF_8);
                        int off = 0;
                        while (off < b.length) {
                            if (!bb.hasRemaining()) {
                                drain();
                            }
                            int k = Math.min(bb.remaining(), b.length - off);
                            bb.put(b, off, k);
                            off += k;
                        }
                    }

                    private void drain() throws IOException {
                        bb.flip();
                        while (bb.hasRemaining()) {
                            ch.write(bb);
                        }
                        bb.clear();
                    }

                    public void close() throws IOException {
                        drain();
                        ch.close();
                    }
                };
            }
            default: throw new IllegalArgumentException("fasta has no write method '" + method + "': use " + FASTA_METHODS);
        }
    }

    private static Sink writerSink(Writer w) {
        return new Sink() {
            public void line(String s) throws IOException {
                w.write(s);
            }

            public void close() throws IOException {
                w.close();
            }
        };
    }

    /** Runs Fasta for n into {@code out} with the write method; returns bytes written. */
    public static long fasta(String method, long n, Path out) throws IOException {
        try (Sink s = sink(method, out)) {
            Fasta.generate(n, s);
        }
        return Fasta.bytes(n);
    }

    /** CRC32 of Fasta's output for n, computed without any file (the reference). */
    public static long fastaCrc(long n) throws IOException {
        CheckedOutputStream c = new CheckedOutputStream(OutputStream.nullOutputStream(), new CRC32());
        Fasta.generate(n, s -> c.write(s.getBytes(StandardCharsets.US_ASCII)));
        return c.getChecksum().getValue();
    }

    // ------------------------------------------------------------------ K-nucleotide (read)

    /** Runs K-nucleotide over {@code in} read with the method; returns its report. */
    public static String knucleotide(String method, Path in) throws IOException {
        KNucleotide k = new KNucleotide();
        switch (method) {
            case "biostream":
                try (BufferedReader r = new BufferedReader(new java.io.InputStreamReader(new FileInputStream(in.toFile()), StandardCharsets.UTF_8))) {
                    lines(r, k);
                }
                break;
            case "bfilereader":
                try (BufferedReader r = new BufferedReader(new FileReader(in.toFile(), StandardCharsets.UTF_8))) {
                    lines(r, k);
                }
                break;
            case "niof":
                try (BufferedReader r = Files.newBufferedReader(in, StandardCharsets.UTF_8)) {
                    lines(r, k);
                }
                break;
            case "filereader":
                try (FileReader r = new FileReader(in.toFile(), StandardCharsets.UTF_8)) {
                    char[] b = new char[8192];
                    StringBuilder line = new StringBuilder();
                    int n;
                    while ((n = r.read(b)) >= 0) {
                        for (int i = 0; i < n; i++) {
                            if (b[i] == '\n') {
                                k.line(line);
                                line.setLength(0);
                            } else {
                                line.append(b[i]);
                            }
                        }
                    }
                    if (line.length() > 0) {
                        k.line(line);
                    }
                }
                break;
            case "channel":
                try (FileChannel ch = FileChannel.open(in, StandardOpenOption.READ)) {
                    ByteBuffer bb = ByteBuffer.allocate(8192);
                    StringBuilder line = new StringBuilder();
                    while (ch.read(bb) >= 0) {
                        bb.flip();
                        byte[] a = bb.array();
                        for (int i = 0, end = bb.limit(); i < end; i++) {
                            if (a[i] == '\n') {
                                k.line(line);
                                line.setLength(0);
                            } else {
                                line.append((char) (a[i] & 0xff)); // the input is ASCII
                            }
                        }
                        bb.clear();
                    }
                    if (line.length() > 0) {
                        k.line(line);
                    }
                }
                break;
            default: throw new IllegalArgumentException("k-nucleotide has no read method '" + method + "': use " + KNUC_METHODS);
        }
        return k.report();
    }

    private static void lines(BufferedReader r, KNucleotide k) throws IOException {
        String l;
        while ((l = r.readLine()) != null) {
            k.line(l);
        }
    }

    /** The reference report: the whole file split into lines in memory. */
    public static String knucleotideReference(Path in) throws IOException {
        KNucleotide k = new KNucleotide();
        for (String l : Files.readString(in, StandardCharsets.US_ASCII).split("\n", -1)) {
            k.line(l);
        }
        return k.report();
    }

    // ------------------------------------------------------------------ byte streams (Zip4j, crypto)

    /** Receives each chunk read. */
    @FunctionalInterface
    interface Chunks {
        void chunk(byte[] b, int off, int len) throws IOException;
    }

    /** Reads {@code in} with a byte-oriented method in {@code buf}-byte chunks. */
    static long readBytes(String method, Path in, int buf, Chunks out) throws IOException {
        long total = 0;
        switch (method) {
            case "iostream":
            case "biostream":
            case "niof": {
                InputStream s = method.equals("iostream") ? new FileInputStream(in.toFile())
                        : method.equals("biostream") ? new BufferedInputStream(new FileInputStream(in.toFile()))
                        : Files.newInputStream(in);
                try (s) {
                    byte[] b = new byte[buf];
                    int n;
                    while ((n = s.read(b)) >= 0) {
                        out.chunk(b, 0, n);
                        total += n;
                    }
                }
                return total;
            }
            case "channel":
                try (FileChannel ch = FileChannel.open(in, StandardOpenOption.READ)) {
                    ByteBuffer bb = ByteBuffer.allocate(buf);
                    while (ch.read(bb) >= 0) {
                        out.chunk(bb.array(), 0, bb.position());
                        total += bb.position();
                        bb.clear();
                    }
                }
                return total;
            case "omchannel":
                try (FileChannel ch = FileChannel.open(in, StandardOpenOption.READ)) {
                    long size = ch.size();
                    byte[] b = new byte[buf];
                    for (long off = 0; off < size; off += 1L << 30) {
                        MappedByteBuffer m = ch.map(FileChannel.MapMode.READ_ONLY, off, Math.min(1L << 30, size - off));
                        while (m.hasRemaining()) {
                            int k = Math.min(b.length, m.remaining());
                            m.get(b, 0, k);
                            out.chunk(b, 0, k);
                            total += k;
                        }
                    }
                }
                return total;
            default: throw new IllegalArgumentException("no byte read method '" + method + "': use " + STREAM_METHODS);
        }
    }

    /** Compresses {@code in} into {@code zip} with Zip4j's ZipOutputStream, reading 4 KiB chunks (Zip4j's default buffer). */
    public static long zip4j(String method, Path in, Path zip) throws IOException {
        ZipParameters p = new ZipParameters();
        p.setFileNameInZip("data.txt");
        p.setLastModifiedFileTime(315532800000L); // fixed (1980-01-01) so archives are comparable
        long n;
        try (ZipOutputStream z = new ZipOutputStream(new FileOutputStream(zip.toFile()))) {
            z.putNextEntry(p);
            n = readBytes(method, in, 4096, z::write);
            z.closeEntry();
        }
        return n;
    }

    /** CRC32 of the single entry of {@code zip}, extracted with java.util.zip (an independent reader). */
    public static long unzipCrc(Path zip) throws IOException {
        try (java.util.zip.ZipInputStream z = new java.util.zip.ZipInputStream(Files.newInputStream(zip))) {
            if (z.getNextEntry() == null) {
                throw new IOException(zip + " has no entry");
            }
            CRC32 c = new CRC32();
            byte[] b = new byte[1 << 16];
            int n;
            while ((n = z.read(b)) > 0) {
                c.update(b, 0, n);
            }
            return c.getValue();
        }
    }

    private static final byte[] KEY = "AesEncryptionKey".getBytes(StandardCharsets.US_ASCII);
    private static final String AES = "AES/ECB/PKCS5Padding";

    /** Encrypts {@code plain} into {@code enc} (AES-128, the artifact's key and mode) if not there yet. */
    public static void ensureEncrypted(Path plain, Path enc) throws IOException {
        long want = (Files.size(plain) / 16 + 1) * 16;
        if (Files.exists(enc) && Files.size(enc) == want) {
            return;
        }
        Path tmp = enc.resolveSibling(enc.getFileName() + ".tmp");
        try {
            Cipher c = Cipher.getInstance(AES);
            c.init(Cipher.ENCRYPT_MODE, new SecretKeySpec(KEY, "AES"));
            try (InputStream in = Files.newInputStream(plain);
                 OutputStream out = new CipherOutputStream(new BufferedOutputStream(Files.newOutputStream(tmp)), c)) {
                in.transferTo(out);
            }
        } catch (GeneralSecurityException e) {
            throw new IOException("AES is unavailable: " + e, e);
        }
        Files.move(tmp, enc, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
    }

    /** Decrypts {@code enc} reading 8 KiB chunks with the method; returns the plaintext's CRC32. */
    public static long decrypt(String method, Path enc) throws IOException {
        try {
            Cipher c = Cipher.getInstance(AES);
            c.init(Cipher.DECRYPT_MODE, new SecretKeySpec(KEY, "AES"));
            CRC32 crc = new CRC32();
            readBytes(method, enc, 8192, (b, off, len) -> {
                byte[] o = c.update(b, off, len);
                if (o != null) {
                    crc.update(o);
                }
            });
            crc.update(c.doFinal());
            return crc.getValue();
        } catch (GeneralSecurityException e) {
            throw new IOException("decrypting " + enc + ": " + e, e);
        }
    }
}
