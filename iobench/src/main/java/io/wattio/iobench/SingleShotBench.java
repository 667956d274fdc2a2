package io.wattio.iobench;

import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Timeout;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The JMH run shape shared by every benchmark class: one single-shot invocation in a fresh JVM.
 * {@code wattio iobench} runs one fork per measured run and interleaves methods across runs.
 *
 * <p>JMH reads these class-level annotations from the superclass of a benchmark class, so each
 * concrete benchmark class only extends this one.
 */
@BenchmarkMode(Mode.SingleShotTime)
@Warmup(iterations = 0)
@Measurement(iterations = 1)
@Fork(1)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Timeout(time = 12, timeUnit = TimeUnit.HOURS)
public abstract class SingleShotBench {
}
