package io.wattio.iobench;

import java.io.IOException;
import java.io.InputStream;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.zip.CRC32;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.infra.BenchmarkParams;
import org.openjdk.jmh.infra.Blackhole;

/**
 * Per-fork state shared by the use cases: prepares the job before the window, brackets exactly
 * the measured invocation with {@code BEGIN}/{@code END} on the wattio socket, and checks the
 * output after the window ({@code CHECK}). A wrong output fails the run.
 *
 * <p>Window: {@code @Setup(Level.Invocation)} and {@code @TearDown(Level.Invocation)} run just
 * around the single-shot call (JMH excludes them from its own timing too), so JVM start-up, class
 * loading of the harness, file preparation and verification are outside it.
 */
@State(Scope.Thread)
public abstract class BenchState {
    /** The data directory: property {@code wattio.iobench.data}, env {@code WATTIO_IOBENCH_DATA}. */
    public static Path dataDir() {
        String p = System.getProperty("wattio.iobench.data");
        if (p == null || p.isEmpty()) {
            p = System.getenv("WATTIO_IOBENCH_DATA");
        }
        return Path.of(p == null || p.isEmpty() ? "target/iobench-data" : p);
    }

    @Param({"tiny"})
    public String size;

    protected Size sz;
    protected Sums sums;
    public Job job;
    protected String method;
    protected Window window;
    /** What the last invocation returned (bytes). */
    public long result;

    protected abstract Catalog.Op op();

    /** Buffer size for this fork (8 KiB unless the state has a buffer parameter). */
    protected int buffer() {
        return 8192;
    }

    @Setup(Level.Trial)
    public void trial(BenchmarkParams params) throws IOException {
        String b = params.getBenchmark();
        method = b.substring(b.lastIndexOf('.') + 1);
        sz = Size.parse(size);
        if (op() == Catalog.Op.READALL && sz.bytes() > Size.MEDIUM.bytes()) {
            throw new IllegalArgumentException("readall loads the whole file into the heap: sizes up to medium only");
        }
        Path dir = dataDir();
        sums = FileGen.ensure(dir, sz);
        Path input = op() == Catalog.Op.SEEK ? FileGen.binary(dir, sz) : FileGen.text(dir, sz);
        if (op().writes()) {
            Path out = dir.resolve("write-" + method + "-" + sz.label() + ".out");
            Files.deleteIfExists(out);
            job = Job.forWrite(out, buffer(), sz.lines, sz.lineLength);
        } else {
            job = Job.forRead(input, buffer());
        }
        window = Window.open(op().label(), method, sz.label(), buffer(), op().writes() ? null : input);
    }

    @Setup(Level.Invocation)
    public void begin() throws IOException {
        job.sum().reset();
        if (job.output() != null) {
            Files.deleteIfExists(job.output());
        }
        window.begin();
    }

    @TearDown(Level.Invocation)
    public void end() throws IOException {
        if (op() == Catalog.Op.WRITESYNC) {
            // Inside the window: the flushed protocol counts the writeback of what was written.
            try (FileChannel c = FileChannel.open(job.output(), StandardOpenOption.WRITE)) {
                c.force(true);
            }
        }
        window.end();
        String got;
        String want;
        long bytes;
        if (op().writes()) {
            bytes = Files.size(job.output());
            got = Long.toString(crc32(job.output()));
            want = Long.toString(sums.textCrc32());
            boolean ok = got.equals(want) && bytes == sums.textBytes() && result == bytes;
            Files.deleteIfExists(job.output());
            check(ok, bytes, got, want);
        } else {
            bytes = result;
            got = job.sum().hex();
            if (op() == Catalog.Op.SEEK) {
                want = sums.seekChecksum();
                check(got.equals(want) && bytes == sums.seekBytes(), bytes, got, want);
            } else {
                want = sums.textChecksum();
                check(got.equals(want) && bytes == sums.textBytes(), bytes, got, want);
            }
        }
    }

    private void check(boolean ok, long bytes, String got, String want) throws IOException {
        window.check(ok, bytes, got, want);
        if (!ok) {
            throw new IllegalStateException(op().label() + "/" + method + " on " + sz.label()
                    + " produced a wrong output: got " + got + " (" + bytes + " bytes), expected " + want);
        }
    }

    @TearDown(Level.Trial)
    public void close() throws IOException {
        if (window != null) {
            window.close();
        }
    }

    /**
     * Ends a benchmark method: the checksum of what was read goes to the Blackhole, and the byte
     * count is kept for the check after the window.
     */
    public final long done(long n, Blackhole bh) {
        bh.consume(job.sum().value());
        result = n;
        return n;
    }

    static long crc32(Path p) throws IOException {
        CRC32 c = new CRC32();
        byte[] b = new byte[1 << 16];
        try (InputStream in = Files.newInputStream(p)) {
            int r;
            while ((r = in.read(b)) > 0) {
                c.update(b, 0, r);
            }
        }
        return c.getValue();
    }
}
