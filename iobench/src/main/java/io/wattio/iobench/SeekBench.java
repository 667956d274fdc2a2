package io.wattio.iobench;

import java.io.IOException;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.infra.Blackhole;

/**
 * Seek in the binary file: read 100 bytes, move 10,000 bytes on, to the end (Table IV).
 *
 * <p>Single shot in a fresh JVM: {@code wattio iobench} runs one fork per measured run and
 * interleaves methods across runs. The checksum of what was read goes to the Blackhole.
 */
public class SeekBench extends SingleShotBench {

    @State(Scope.Thread)
    public static class S extends BenchState {
        @Override
        protected Catalog.Op op() {
            return Catalog.Op.SEEK;
        }
    }

    @Benchmark
    public long channel(S s, Blackhole bh) throws IOException {
        return s.done(Methods.seekChannel(s.job), bh);
    }

    @Benchmark
    public long iostream(S s, Blackhole bh) throws IOException {
        return s.done(Methods.seekIostream(s.job), bh);
    }

    @Benchmark
    public long raf(S s, Blackhole bh) throws IOException {
        return s.done(Methods.seekRaf(s.job), bh);
    }
}
