package io.wattio.iobench;

import java.nio.file.Path;
import java.util.List;

/**
 * Everything one measured operation needs, prepared before the window opens.
 *
 * @param input    file to read (text for read/readall, binary for seek)
 * @param output   file to write (write use case)
 * @param buffer   buffer size in bytes (chars for readers) for methods that take one
 * @param lines    number of lines to write
 * @param pool     the content pool (lines without '\n')
 * @param poolNl   the same lines with '\n'
 * @param sum      checksum fed by reads
 */
public record Job(Path input, Path output, int buffer, long lines, String[] pool, String[] poolNl,
                  Checksum sum) {

    /** The lines to write, as a view over the pool (nothing generated). */
    public List<String> lineList() {
        return Content.lines(pool, lines);
    }

    /** Line {@code i} with its '\n'. */
    public String lineNl(long i) {
        return poolNl[(int) (i % poolNl.length)];
    }

    public static Job forRead(Path input, int buffer) {
        return new Job(input, null, buffer, 0, null, null, new Checksum());
    }

    public static Job forWrite(Path output, int buffer, long lines, int lineLength) {
        String[] pool = Content.pool(lineLength);
        return new Job(null, output, buffer, lines, pool, Content.poolWithNewlines(pool), new Checksum());
    }
}
