package io.wattio.iobench;

import java.io.IOException;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.infra.Blackhole;

/**
 * Write the text file of the size (Table V, Figures 7-9), as the paper does: the window closes
 * when the method returns, before the kernel writes the data back ({@link WriteSyncBench} adds
 * the flush).
 *
 * <p>Single shot in a fresh JVM: {@code wattio iobench} runs one fork per measured run and
 * interleaves methods across runs. The checksum of what was read goes to the Blackhole.
 */
public class WriteBench extends SingleShotBench {

    @State(Scope.Thread)
    public static class S extends BufferedBenchState {
        @Override
        protected Catalog.Op op() {
            return Catalog.Op.WRITE;
        }
    }

    @Benchmark
    public long apache(S s, Blackhole bh) throws IOException {
        return s.done(Methods.writeApache(s.job), bh);
    }

    @Benchmark
    public long bfilewriter(S s, Blackhole bh) throws IOException {
        return s.done(Methods.writeBfilewriter(s.job), bh);
    }

    @Benchmark
    public long biostream(S s, Blackhole bh) throws IOException {
        return s.done(Methods.writeBiostream(s.job), bh);
    }

    @Benchmark
    public long channel(S s, Blackhole bh) throws IOException {
        return s.done(Methods.writeChannel(s.job), bh);
    }

    @Benchmark
    public long filewriter(S s, Blackhole bh) throws IOException {
        return s.done(Methods.writeFilewriter(s.job), bh);
    }

    @Benchmark
    public long guava(S s, Blackhole bh) throws IOException {
        return s.done(Methods.writeGuava(s.job), bh);
    }

    @Benchmark
    public long iostream(S s, Blackhole bh) throws IOException {
        return s.done(Methods.writeIostream(s.job), bh);
    }

    @Benchmark
    public long niof(S s, Blackhole bh) throws IOException {
        return s.done(Methods.writeNiof(s.job), bh);
    }

    @Benchmark
    public long raf(S s, Blackhole bh) throws IOException {
        return s.done(Methods.writeRaf(s.job), bh);
    }
}
