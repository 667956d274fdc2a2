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
 * Read the whole text file at once (Figure 1).
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
public class ReadAllBench {

    @State(Scope.Thread)
    public static class S extends BenchState {

        @Override
        protected Catalog.Op op() {
            return Catalog.Op.READALL;
        }
    }

    @Benchmark
    public long apache(S s, Blackhole bh) throws IOException {
        long n = Methods.readallApache(s.job);
        bh.consume(s.job.sum().value());
        s.result = n;
        return n;
    }

    @Benchmark
    public long apachebytes(S s, Blackhole bh) throws IOException {
        long n = Methods.readallApachebytes(s.job);
        bh.consume(s.job.sum().value());
        s.result = n;
        return n;
    }

    @Benchmark
    public long guava(S s, Blackhole bh) throws IOException {
        long n = Methods.readallGuava(s.job);
        bh.consume(s.job.sum().value());
        s.result = n;
        return n;
    }

    @Benchmark
    public long iostream(S s, Blackhole bh) throws IOException {
        long n = Methods.readallIostream(s.job);
        bh.consume(s.job.sum().value());
        s.result = n;
        return n;
    }

    @Benchmark
    public long niof(S s, Blackhole bh) throws IOException {
        long n = Methods.readallNiof(s.job);
        bh.consume(s.job.sum().value());
        s.result = n;
        return n;
    }
}
