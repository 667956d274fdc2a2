package io.wattio.iobench;

import io.wattio.iobench.apps.Apps;
import io.wattio.iobench.apps.Fasta;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.zip.CRC32;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.infra.BenchmarkParams;
import org.openjdk.jmh.infra.Blackhole;

/**
 * RQ2: the four programs with a swappable I/O method ({@code -p method=...}); the whole program
 * run is the measured window (not only its read phase, as in the artifact). Every run's output
 * is checked against a reference computed outside the window: the same bytes for every method.
 */
public class AppsBench extends SingleShotBench {

    @State(Scope.Thread)
    public static class S {
        @Param({"small"})
        public String size;

        @Param({"iostream"})
        public String method;

        String app;
        Path in;
        Path out;
        String want;
        String got;
        long bytes;
        long n;
        Window window;

        @Setup(Level.Trial)
        public void trial(BenchmarkParams params) throws IOException {
            String b = params.getBenchmark();
            app = b.substring(b.lastIndexOf('.') + 1);
            Path dir = BenchState.dataDir();
            Size sz = Size.parse(size);
            n = Apps.fastaN(size);
            switch (app) {
                case "fasta":
                    out = dir.resolve("fasta-" + method + "-" + size + ".out");
                    want = Long.toString(Apps.fastaCrc(n));
                    break;
                case "knucleotide":
                    in = dir.resolve("fasta-" + size + ".txt");
                    if (!Files.exists(in) || Files.size(in) != Fasta.bytes(n)) {
                        Path tmp = dir.resolve("fasta-" + size + ".txt.tmp");
                        Files.createDirectories(dir);
                        Apps.fasta("biostream", n, tmp);
                        Files.move(tmp, in, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
                    }
                    want = hash(Apps.knucleotideReference(in));
                    break;
                case "zip4j": {
                    Sums s = FileGen.ensure(dir, sz);
                    in = FileGen.text(dir, sz);
                    out = dir.resolve("zip-" + method + "-" + size + ".zip");
                    want = Long.toString(s.textCrc32());
                    break;
                }
                case "crypto": {
                    Sums s = FileGen.ensure(dir, sz);
                    in = dir.resolve("enc-" + size + ".bin");
                    Apps.ensureEncrypted(FileGen.text(dir, sz), in);
                    want = Long.toString(s.textCrc32());
                    break;
                }
                default:
                    throw new IllegalStateException("unknown program " + app);
            }
            window = Window.open(app, method, size, 0, in);
        }

        @Setup(Level.Invocation)
        public void begin() throws IOException {
            if (out != null) {
                Files.deleteIfExists(out);
            }
            window.begin();
        }

        @TearDown(Level.Invocation)
        public void end() throws IOException {
            window.end();
            if (app.equals("zip4j")) {
                got = Long.toString(Apps.unzipCrc(out));
            } else if (app.equals("fasta")) {
                got = Long.toString(BenchState.crc32(out));
                bytes = Files.size(out);
            }
            if (out != null) {
                Files.deleteIfExists(out);
            }
            boolean ok = want.equals(got);
            window.check(ok, bytes, got, want);
            if (!ok) {
                throw new IllegalStateException(app + " with " + method + " on " + size + " produced a different output: "
                        + got + ", expected " + want);
            }
        }

        @TearDown(Level.Trial)
        public void close() throws IOException {
            window.close();
        }
    }

    static String hash(String s) {
        CRC32 c = new CRC32();
        c.update(s.getBytes(StandardCharsets.UTF_8));
        return Long.toHexString(c.getValue()) + ":" + s.length();
    }

    @Benchmark
    public long fasta(S s, Blackhole bh) throws IOException {
        long b = Apps.fasta(s.method, s.n, s.out);
        bh.consume(b);
        return b;
    }

    @Benchmark
    public String knucleotide(S s, Blackhole bh) throws IOException {
        String r = Apps.knucleotide(s.method, s.in);
        s.got = hash(r);
        s.bytes = Files.size(s.in);
        bh.consume(r);
        return r;
    }

    @Benchmark
    public long zip4j(S s, Blackhole bh) throws IOException {
        long b = Apps.zip4j(s.method, s.in, s.out);
        s.bytes = b;
        bh.consume(b);
        return b;
    }

    @Benchmark
    public long crypto(S s, Blackhole bh) throws IOException {
        long crc = Apps.decrypt(s.method, s.in);
        s.got = Long.toString(crc);
        s.bytes = Files.size(s.in);
        bh.consume(crc);
        return crc;
    }
}
