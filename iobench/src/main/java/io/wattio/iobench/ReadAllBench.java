package io.wattio.iobench;

import java.io.IOException;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.infra.Blackhole;

/**
 * Read the whole text file at once (Figure 1).
 *
 * <p>Single shot in a fresh JVM: {@code wattio iobench} runs one fork per measured run and
 * interleaves methods across runs. The checksum of what was read goes to the Blackhole.
 */
public class ReadAllBench extends SingleShotBench {

    @State(Scope.Thread)
    public static class S extends BenchState {
        @Override
        protected Catalog.Op op() {
            return Catalog.Op.READALL;
        }
    }

    @Benchmark
    public long apache(S s, Blackhole bh) throws IOException {
        return s.done(Methods.readallApache(s.job), bh);
    }

    @Benchmark
    public long apachebytes(S s, Blackhole bh) throws IOException {
        return s.done(Methods.readallApachebytes(s.job), bh);
    }

    @Benchmark
    public long guava(S s, Blackhole bh) throws IOException {
        return s.done(Methods.readallGuava(s.job), bh);
    }

    @Benchmark
    public long iostream(S s, Blackhole bh) throws IOException {
        return s.done(Methods.readallIostream(s.job), bh);
    }

    @Benchmark
    public long niof(S s, Blackhole bh) throws IOException {
        return s.done(Methods.readallNiof(s.job), bh);
    }
}
