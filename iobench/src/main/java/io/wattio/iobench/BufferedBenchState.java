package io.wattio.iobench;

import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.State;

/** A {@link BenchState} whose buffer size is a JMH parameter ({@code -p buffer=...}, 8 KiB by default). */
@State(Scope.Thread)
public abstract class BufferedBenchState extends BenchState {
    @Param({"8192"})
    public int buffer;

    @Override
    protected int buffer() {
        return buffer;
    }
}
