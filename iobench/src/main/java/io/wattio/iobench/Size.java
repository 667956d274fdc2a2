package io.wattio.iobench;

import java.util.Locale;

/** Table I of the paper: file size = lines count × line length (the length counts the '\n'). */
public enum Size {
    TINY(1_000, 100),
    SMALL(100_000, 150),
    MEDIUM(1_000_000, 200),
    MEDLARGE(8_000_000, 400),
    LARGE(40_000_000, 400);

    public final long lines;
    public final int lineLength;

    Size(long lines, int lineLength) {
        this.lines = lines;
        this.lineLength = lineLength;
    }

    public long bytes() {
        return lines * lineLength;
    }

    public String label() {
        return name().toLowerCase(Locale.ROOT);
    }

    public static Size parse(String s) {
        for (Size z : values()) {
            if (z.label().equals(s.toLowerCase(Locale.ROOT))) {
                return z;
            }
        }
        throw new IllegalArgumentException("unknown size '" + s + "': use tiny, small, medium, medlarge or large");
    }
}
