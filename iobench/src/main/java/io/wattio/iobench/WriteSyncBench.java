package io.wattio.iobench;

import java.io.IOException;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.infra.Blackhole;

/**
 * Write the text file of the size with each method of {@link WriteBench}, then force it to the
 * disk ({@code FileChannel.force(true)}, fsync(2)) inside the window: the flushed variant beside
 * the paper's unflushed protocol, so that the writeback each method causes is in its energy.
 */
public class WriteSyncBench extends SingleShotBench {

    @State(Scope.Thread)
    public static class S extends BufferedBenchState {
        @Override
        protected Catalog.Op op() {
            return Catalog.Op.WRITESYNC;
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
