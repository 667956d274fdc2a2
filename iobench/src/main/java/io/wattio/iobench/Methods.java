package io.wattio.iobench;

import java.io.BufferedOutputStream;
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.File;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.FileReader;
import java.io.FileWriter;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.RandomAccessFile;
import java.io.Writer;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.Scanner;
import org.apache.commons.io.FileUtils;
import org.apache.commons.io.LineIterator;

/**
 * The study's methods (Table II), one static method per method and use case, all doing equal work.
 *
 * <p>Each read returns the number of bytes (= characters: the text is ASCII) it consumed and
 * folds every byte or character, newlines included, into {@link Job#sum()}. Each write writes
 * exactly the generated text file of its size. Fixes of the released artifact (anchors note §1.5):
 * the Apache line read no longer also reads the whole file; Guava and {@code Files} write in one
 * open instead of re-opening (and, for Guava, truncating) per line; chunk readers fold only the
 * bytes actually read; the channel reuses one buffer; "omchannel" really maps the file; the three
 * seek methods visit the same offsets and read the same 100 bytes.
 */
public final class Methods {
    private Methods() {}

    private static final java.nio.charset.Charset UTF8 = StandardCharsets.UTF_8;
    /** Largest region mapped at once (a MappedByteBuffer is int-indexed). */
    static final long MAP_WINDOW = 1L << 30;

    // ---------------------------------------------------------------- read (by chunks or lines)

    /** IOSTREAM: {@code FileInputStream.read(byte[])}. */
    public static long readIostream(Job j) throws IOException {
        long n = 0;
        try (FileInputStream in = new FileInputStream(j.input().toFile())) {
            byte[] b = new byte[j.buffer()];
            int r;
            while ((r = in.read(b)) >= 0) {
                j.sum().addBytes(b, 0, r);
                n += r;
            }
        }
        return n;
    }

    /** FILEREADER: {@code FileReader.read(char[])}, honouring the count it returns. */
    public static long readFilereader(Job j) throws IOException {
        long n = 0;
        try (FileReader in = new FileReader(j.input().toFile(), UTF8)) {
            char[] b = new char[j.buffer()];
            int r;
            while ((r = in.read(b)) >= 0) {
                j.sum().addChars(b, 0, r);
                n += r;
            }
        }
        return n;
    }

    private static long lines(BufferedReader in, Checksum sum) throws IOException {
        long n = 0;
        String line;
        while ((line = in.readLine()) != null) {
            sum.addLine(line);
            n += line.length() + 1;
        }
        return n;
    }

    /** BFILEREADER: {@code BufferedReader(FileReader).readLine()}. */
    public static long readBfilereader(Job j) throws IOException {
        try (BufferedReader in = new BufferedReader(new FileReader(j.input().toFile(), UTF8), j.buffer())) {
            return lines(in, j.sum());
        }
    }

    /** BIOSTREAM: {@code BufferedReader(InputStreamReader(FileInputStream)).readLine()}. */
    public static long readBiostream(Job j) throws IOException {
        try (BufferedReader in = new BufferedReader(
                new java.io.InputStreamReader(new FileInputStream(j.input().toFile()), UTF8), j.buffer())) {
            return lines(in, j.sum());
        }
    }

    /** NIOF: {@code Files.newBufferedReader(path).readLine()} (JDK-chosen buffer). */
    public static long readNiof(Job j) throws IOException {
        try (BufferedReader in = java.nio.file.Files.newBufferedReader(j.input(), UTF8)) {
            return lines(in, j.sum());
        }
    }

    /** GUAVA: {@code Files.asCharSource(file, UTF_8).openBufferedStream().readLine()}. */
    public static long readGuava(Job j) throws IOException {
        try (BufferedReader in = com.google.common.io.Files.asCharSource(j.input().toFile(), UTF8)
                .openBufferedStream()) {
            return lines(in, j.sum());
        }
    }

    /** APACHE: {@code FileUtils.lineIterator(file, "UTF-8")} (only; no second whole-file read). */
    public static long readApache(Job j) throws IOException {
        long n = 0;
        LineIterator it = FileUtils.lineIterator(j.input().toFile(), "UTF-8");
        try {
            while (it.hasNext()) {
                String line = it.nextLine();
                j.sum().addLine(line);
                n += line.length() + 1;
            }
        } finally {
            it.close();
        }
        return n;
    }

    /** SCANNER: {@code Scanner(file, "UTF-8").nextLine()}. */
    public static long readScanner(Job j) throws IOException {
        long n = 0;
        try (Scanner in = new Scanner(j.input().toFile(), "UTF-8")) {
            while (in.hasNextLine()) {
                String line = in.nextLine();
                j.sum().addLine(line);
                n += line.length() + 1;
            }
            if (in.ioException() != null) {
                throw in.ioException();
            }
        }
        return n;
    }

    /** RAF: {@code RandomAccessFile.readLine()} (the API reads byte by byte: that is its cost). */
    public static long readRaf(Job j) throws IOException {
        long n = 0;
        try (RandomAccessFile in = new RandomAccessFile(j.input().toFile(), "r")) {
            String line;
            while ((line = in.readLine()) != null) {
                j.sum().addLine(line);
                n += line.length() + 1;
            }
        }
        return n;
    }

    /** CHANNEL: {@code FileChannel.read(ByteBuffer)} into one reused heap buffer. */
    public static long readChannel(Job j) throws IOException {
        long n = 0;
        try (FileChannel ch = FileChannel.open(j.input(), StandardOpenOption.READ)) {
            ByteBuffer bb = ByteBuffer.allocate(j.buffer());
            while (ch.read(bb) >= 0) {
                bb.flip();
                j.sum().addBuffer(bb);
                n += bb.remaining();
                bb.clear();
            }
        }
        return n;
    }

    /** OMCHANNEL: {@code FileChannel.map(READ_ONLY, ...)}, ≤ 1 GiB windows, copied out by chunks. */
    public static long readOmchannel(Job j) throws IOException {
        long n = 0;
        try (FileChannel ch = FileChannel.open(j.input(), StandardOpenOption.READ)) {
            long size = ch.size();
            byte[] b = new byte[j.buffer()];
            for (long off = 0; off < size; off += MAP_WINDOW) {
                MappedByteBuffer m = ch.map(FileChannel.MapMode.READ_ONLY, off, Math.min(MAP_WINDOW, size - off));
                while (m.hasRemaining()) {
                    int k = Math.min(b.length, m.remaining());
                    m.get(b, 0, k);
                    j.sum().addBytes(b, 0, k);
                    n += k;
                }
            }
        }
        return n;
    }

    // ---------------------------------------------------------------- read the whole file at once

    /** IOSTREAM: {@code FileInputStream.readAllBytes()}. */
    public static long readallIostream(Job j) throws IOException {
        try (FileInputStream in = new FileInputStream(j.input().toFile())) {
            byte[] b = in.readAllBytes();
            j.sum().addBytes(b, 0, b.length);
            return b.length;
        }
    }

    /** APACHE: {@code FileUtils.readFileToByteArray(file)}. */
    public static long readallApachebytes(Job j) throws IOException {
        byte[] b = FileUtils.readFileToByteArray(j.input().toFile());
        j.sum().addBytes(b, 0, b.length);
        return b.length;
    }

    /** APACHE: {@code FileUtils.readFileToString(file, "UTF-8")}. */
    public static long readallApache(Job j) throws IOException {
        String s = FileUtils.readFileToString(j.input().toFile(), "UTF-8");
        j.sum().addString(s);
        return s.length();
    }

    private static long foldLines(List<String> lines, Checksum sum) {
        long n = 0;
        for (String line : lines) {
            sum.addLine(line);
            n += line.length() + 1;
        }
        return n;
    }

    /** NIOF: {@code Files.readAllLines(path, UTF_8)}. */
    public static long readallNiof(Job j) throws IOException {
        return foldLines(java.nio.file.Files.readAllLines(j.input(), UTF8), j.sum());
    }

    /** GUAVA: {@code Files.readLines(file, UTF_8)}. */
    public static long readallGuava(Job j) throws IOException {
        return foldLines(com.google.common.io.Files.readLines(j.input().toFile(), UTF8), j.sum());
    }

    // ---------------------------------------------------------------- seek: read 100 B, skip 10,000 B

    /** CHANNEL: {@code FileChannel.position(long)} then {@code read(ByteBuffer)}. */
    public static long seekChannel(Job j) throws IOException {
        long n = 0;
        try (FileChannel ch = FileChannel.open(j.input(), StandardOpenOption.READ)) {
            long size = ch.size();
            ByteBuffer bb = ByteBuffer.allocate(Content.SEEK_READ);
            for (long pos = 0; pos < size; pos += Content.SEEK_STRIDE) {
                bb.clear();
                bb.limit((int) Math.min(Content.SEEK_READ, size - pos));
                ch.position(pos);
                while (bb.hasRemaining() && ch.read(bb) >= 0) {
                    // a short read continues where it stopped
                }
                bb.flip();
                j.sum().addBuffer(bb);
                n += bb.remaining();
            }
        }
        return n;
    }

    /** IOSTREAM: {@code FileInputStream.readNBytes} then {@code skip(long)} until the end. */
    public static long seekIostream(Job j) throws IOException {
        long n = 0;
        try (FileInputStream in = new FileInputStream(j.input().toFile())) {
            byte[] b = new byte[Content.SEEK_READ];
            while (true) {
                int r = in.readNBytes(b, 0, b.length);
                j.sum().addBytes(b, 0, r);
                n += r;
                if (r < b.length) {
                    break;
                }
                long left = Content.SEEK_SKIP;
                while (left > 0) {
                    long s = in.skip(left);
                    if (s <= 0) {
                        break; // FileInputStream.skip may go past the end; the next read sees EOF
                    }
                    left -= s;
                }
            }
        }
        return n;
    }

    /** RAF: {@code RandomAccessFile.seek(long)} then {@code readFully(byte[], 0, 100)}. */
    public static long seekRaf(Job j) throws IOException {
        long n = 0;
        try (RandomAccessFile in = new RandomAccessFile(j.input().toFile(), "r")) {
            long size = in.length();
            byte[] b = new byte[Content.SEEK_READ];
            for (long pos = 0; pos < size; pos += Content.SEEK_STRIDE) {
                int k = (int) Math.min(Content.SEEK_READ, size - pos);
                in.seek(pos);
                in.readFully(b, 0, k);
                j.sum().addBytes(b, 0, k);
                n += k;
            }
        }
        return n;
    }

    // ---------------------------------------------------------------- write the text file

    private static long writeAll(Writer w, Job j) throws IOException {
        long n = 0;
        for (long i = 0; i < j.lines(); i++) {
            String s = j.lineNl(i);
            w.write(s);
            n += s.length();
        }
        return n;
    }

    /** IOSTREAM: {@code OutputStreamWriter(FileOutputStream).write(String)}. */
    public static long writeIostream(Job j) throws IOException {
        try (Writer w = new OutputStreamWriter(new FileOutputStream(j.output().toFile()), UTF8)) {
            return writeAll(w, j);
        }
    }

    /** BIOSTREAM: {@code OutputStreamWriter(BufferedOutputStream(FileOutputStream)).write(String)}. */
    public static long writeBiostream(Job j) throws IOException {
        try (Writer w = new OutputStreamWriter(
                new BufferedOutputStream(new FileOutputStream(j.output().toFile()), j.buffer()), UTF8)) {
            return writeAll(w, j);
        }
    }

    /** FILEWRITER: {@code FileWriter.write(String, int, int)}. */
    public static long writeFilewriter(Job j) throws IOException {
        long n = 0;
        try (FileWriter w = new FileWriter(j.output().toFile(), UTF8)) {
            for (long i = 0; i < j.lines(); i++) {
                String s = j.lineNl(i);
                w.write(s, 0, s.length());
                n += s.length();
            }
        }
        return n;
    }

    /** BFILEWRITER: {@code BufferedWriter(FileWriter).write(String)}. */
    public static long writeBfilewriter(Job j) throws IOException {
        try (Writer w = new BufferedWriter(new FileWriter(j.output().toFile(), UTF8), j.buffer())) {
            return writeAll(w, j);
        }
    }

    /**
     * CHANNEL: each line's bytes ({@code String.getBytes(UTF_8)}, as the artifact did) gathered in
     * one reused buffer, {@code FileChannel.write(ByteBuffer)} when it is full (the artifact wrote
     * one small buffer per line: one system call per line).
     */
    public static long writeChannel(Job j) throws IOException {
        long n = 0;
        try (FileChannel ch = FileChannel.open(j.output(), StandardOpenOption.CREATE,
                StandardOpenOption.TRUNCATE_EXISTING, StandardOpenOption.WRITE)) {
            ByteBuffer bb = ByteBuffer.allocate(j.buffer());
            for (long i = 0; i < j.lines(); i++) {
                byte[] b = j.lineNl(i).getBytes(UTF8);
                int off = 0;
                while (off < b.length) {
                    if (!bb.hasRemaining()) {
                        n += drain(ch, bb);
                    }
                    int k = Math.min(bb.remaining(), b.length - off);
                    bb.put(b, off, k);
                    off += k;
                }
            }
            n += drain(ch, bb);
        }
        return n;
    }

    private static long drain(FileChannel ch, ByteBuffer bb) throws IOException {
        bb.flip();
        long n = bb.remaining();
        while (bb.hasRemaining()) {
            ch.write(bb);
        }
        bb.clear();
        return n;
    }

    /** NIOF: {@code Files.write(path, lines, UTF_8)} (one open, JDK-buffered). */
    public static long writeNiof(Job j) throws IOException {
        java.nio.file.Files.write(j.output(), j.lineList(), UTF8);
        return bytesOf(j);
    }

    /** GUAVA: {@code Files.asCharSink(file, UTF_8).writeLines(lines, "\n")} (one open). */
    public static long writeGuava(Job j) throws IOException {
        com.google.common.io.Files.asCharSink(j.output().toFile(), UTF8).writeLines(j.lineList(), "\n");
        return bytesOf(j);
    }

    /** APACHE: {@code FileUtils.writeLines(file, "UTF-8", lines, "\n", false)} (one call). */
    public static long writeApache(Job j) throws IOException {
        FileUtils.writeLines(j.output().toFile(), "UTF-8", j.lineList(), "\n", false);
        return bytesOf(j);
    }

    /** RAF: {@code RandomAccessFile.writeBytes(String)} per line (unbuffered: that is its cost). */
    public static long writeRaf(Job j) throws IOException {
        long n = 0;
        File f = j.output().toFile();
        try (RandomAccessFile w = new RandomAccessFile(f, "rw")) {
            w.setLength(0);
            for (long i = 0; i < j.lines(); i++) {
                String s = j.lineNl(i);
                w.writeBytes(s);
                n += s.length();
            }
        }
        return n;
    }

    /** Every pool line has the same length, so the bytes written are lines × length. */
    private static long bytesOf(Job j) {
        return j.lines() * j.poolNl()[0].length();
    }
}
