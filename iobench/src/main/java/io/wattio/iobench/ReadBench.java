package io.wattio.iobench;

import java.io.IOException;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.infra.Blackhole;

/**
 * Read the text file by chunks or lines (Table III, Figures 2-5).
 *
 * <p>Single shot in a fresh JVM: {@code wattio iobench} runs one fork per measured run and
 * interleaves methods across runs. The checksum of what was read goes to the Blackhole.
 */
public class ReadBench extends SingleShotBench {

    @State(Scope.Thread)
    public static class S extends BufferedBenchState {
        @Override
        protected Catalog.Op op() {
            return Catalog.Op.READ;
        }
    }

    @Benchmark
    public long apache(S s, Blackhole bh) throws IOException {
        return s.done(Methods.readApache(s.job), bh);
    }

    @Benchmark
    public long bfilereader(S s, Blackhole bh) throws IOException {
        return s.done(Methods.readBfilereader(s.job), bh);
    }

    @Benchmark
    public long biostream(S s, Blackhole bh) throws IOException {
        return s.done(Methods.readBiostream(s.job), bh);
    }

    @Benchmark
    public long channel(S s, Blackhole bh) throws IOException {
        return s.done(Methods.readChannel(s.job), bh);
    }

    @Benchmark
    public long filereader(S s, Blackhole bh) throws IOException {
        return s.done(Methods.readFilereader(s.job), bh);
    }

    @Benchmark
    public long guava(S s, Blackhole bh) throws IOException {
        return s.done(Methods.readGuava(s.job), bh);
    }

    @Benchmark
    public long iostream(S s, Blackhole bh) throws IOException {
        return s.done(Methods.readIostream(s.job), bh);
    }

    @Benchmark
    public long niof(S s, Blackhole bh) throws IOException {
        return s.done(Methods.readNiof(s.job), bh);
    }

    @Benchmark
    public long omchannel(S s, Blackhole bh) throws IOException {
        return s.done(Methods.readOmchannel(s.job), bh);
    }

    @Benchmark
    public long raf(S s, Blackhole bh) throws IOException {
        return s.done(Methods.readRaf(s.job), bh);
    }

    @Benchmark
    public long scanner(S s, Blackhole bh) throws IOException {
        return s.done(Methods.readScanner(s.job), bh);
    }
}
