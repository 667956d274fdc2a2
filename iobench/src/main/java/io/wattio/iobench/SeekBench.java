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
 * Seek in the binary file: read 100 bytes, move 10,000 bytes on, to the end (Table IV).
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
public class SeekBench {

    @State(Scope.Thread)
    public static class S extends BenchState {

        @Override
        protected Catalog.Op op() {
            return Catalog.Op.SEEK;
        }
    }

    @Benchmark
    public long channel(S s, Blackhole bh) throws IOException {
        long n = Methods.seekChannel(s.job);
        bh.consume(s.job.sum().value());
        s.result = n;
        return n;
    }

    @Benchmark
    public long iostream(S s, Blackhole bh) throws IOException {
        long n = Methods.seekIostream(s.job);
        bh.consume(s.job.sum().value());
        s.result = n;
        return n;
    }

    @Benchmark
    public long raf(S s, Blackhole bh) throws IOException {
        long n = Methods.seekRaf(s.job);
        bh.consume(s.job.sum().value());
        s.result = n;
        return n;
    }
}
