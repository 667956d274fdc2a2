package io.wattio.iobench;

import java.io.IOException;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Timeout;
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.infra.Blackhole;

/**
 * Write the text file of the size (Table V, Figures 7-9).
 *
 * <p>Single shot in a fresh JVM: {@code wattio iobench} runs one fork per measured run and
 * interleaves methods across runs. The checksum of what was read goes to the Blackhole.
 */
@BenchmarkMode(Mode.SingleShotTime)
@Warmup(iterations = 0)
@Measurement(iterations = 1)
@Fork(1)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Timeout(time = 12, timeUnit = TimeUnit.HOURS)
public class WriteBench {

    @State(Scope.Thread)
    public static class S extends BenchState {
        @Param({"8192"})
        public int buffer;

        @Override
        protected int buffer() {
            return buffer;
        }

        @Override
        protected Catalog.Op op() {
            return Catalog.Op.WRITE;
        }
    }

    @Benchmark
    public long apache(S s, Blackhole bh) throws IOException {
        long n = Methods.writeApache(s.job);
        bh.consume(s.job.sum().value());
        s.result = n;
        return n;
    }

    @Benchmark
    public long bfilewriter(S s, Blackhole bh) throws IOException {
        long n = Methods.writeBfilewriter(s.job);
        bh.consume(s.job.sum().value());
        s.result = n;
        return n;
    }

    @Benchmark
    public long biostream(S s, Blackhole bh) throws IOException {
        long n = Methods.writeBiostream(s.job);
        bh.consume(s.job.sum().value());
        s.result = n;
        return n;
    }

    @Benchmark
    public long channel(S s, Blackhole bh) throws IOException {
        long n = Methods.writeChannel(s.job);
        bh.consume(s.job.sum().value());
        s.result = n;
        return n;
    }

    @Benchmark
    public long filewriter(S s, Blackhole bh) throws IOException {
        long n = Methods.writeFilewriter(s.job);
        bh.consume(s.job.sum().value());
        s.result = n;
        return n;
    }

    @Benchmark
    public long guava(S s, Blackhole bh) throws IOException {
        long n = Methods.writeGuava(s.job);
        bh.consume(s.job.sum().value());
        s.result = n;
        return n;
    }

    @Benchmark
    public long iostream(S s, Blackhole bh) throws IOException {
        long n = Methods.writeIostream(s.job);
        bh.consume(s.job.sum().value());
        s.result = n;
        return n;
    }

    @Benchmark
    public long niof(S s, Blackhole bh) throws IOException {
        long n = Methods.writeNiof(s.job);
        bh.consume(s.job.sum().value());
        s.result = n;
        return n;
    }

    @Benchmark
    public long raf(S s, Blackhole bh) throws IOException {
        long n = Methods.writeRaf(s.job);
        bh.consume(s.job.sum().value());
        s.result = n;
        return n;
    }
}
