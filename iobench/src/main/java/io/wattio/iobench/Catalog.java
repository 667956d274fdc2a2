package io.wattio.iobench;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The study's use cases and methods: the single list the benchmarks, the tests and
 * {@code wattio iobench} (through {@code Catalog list}) agree on.
 */
public final class Catalog {
    private Catalog() {}

    public enum Op {
        READ, READALL, SEEK, WRITE, WRITESYNC;

        public String label() {
            return name().toLowerCase(Locale.ROOT);
        }

        /** Whether the use case writes the text file (WRITESYNC: then forces it to the disk). */
        public boolean writes() {
            return this == WRITE || this == WRITESYNC;
        }
    }

    @FunctionalInterface
    public interface Task {
        long run(Job j) throws IOException;
    }

    /**
     * One method of one use case. {@code buffered}: takes the buffer size (the sweep varies it);
     * {@code acronym}: the paper's name for it.
     */
    public record Entry(Op op, String method, String acronym, boolean buffered, String api, Task task) {}

    public static final List<Entry> ALL = withFlushedWrites(List.of(
            new Entry(Op.READ, "apache", "APACHE", false, "FileUtils.lineIterator", Methods::readApache),
            new Entry(Op.READ, "bfilereader", "BFILEREADER", true, "BufferedReader(FileReader).readLine", Methods::readBfilereader),
            new Entry(Op.READ, "biostream", "BIOSTREAM", true, "BufferedReader(InputStreamReader(FileInputStream)).readLine", Methods::readBiostream),
            new Entry(Op.READ, "channel", "CHANNEL", true, "FileChannel.read(ByteBuffer)", Methods::readChannel),
            new Entry(Op.READ, "filereader", "FILEREADER", true, "FileReader.read(char[])", Methods::readFilereader),
            new Entry(Op.READ, "guava", "GUAVA", false, "Files.asCharSource(..).openBufferedStream().readLine", Methods::readGuava),
            new Entry(Op.READ, "iostream", "IOSTREAM", true, "FileInputStream.read(byte[])", Methods::readIostream),
            new Entry(Op.READ, "niof", "NIOF", false, "Files.newBufferedReader(..).readLine", Methods::readNiof),
            new Entry(Op.READ, "omchannel", "OMCHANNEL", true, "FileChannel.map(READ_ONLY,..)", Methods::readOmchannel),
            new Entry(Op.READ, "raf", "RAF", false, "RandomAccessFile.readLine", Methods::readRaf),
            new Entry(Op.READ, "scanner", "SCANNER", false, "Scanner.nextLine", Methods::readScanner),
            new Entry(Op.READALL, "apache", "APACHE", false, "FileUtils.readFileToString", Methods::readallApache),
            new Entry(Op.READALL, "apachebytes", "APACHE", false, "FileUtils.readFileToByteArray", Methods::readallApachebytes),
            new Entry(Op.READALL, "guava", "GUAVA", false, "Files.readLines", Methods::readallGuava),
            new Entry(Op.READALL, "iostream", "IOSTREAM", false, "FileInputStream.readAllBytes", Methods::readallIostream),
            new Entry(Op.READALL, "niof", "NIOF", false, "Files.readAllLines", Methods::readallNiof),
            new Entry(Op.SEEK, "channel", "CHANNEL", false, "FileChannel.position+read", Methods::seekChannel),
            new Entry(Op.SEEK, "iostream", "IOSTREAM", false, "FileInputStream.readNBytes+skip", Methods::seekIostream),
            new Entry(Op.SEEK, "raf", "RAF", false, "RandomAccessFile.seek+readFully", Methods::seekRaf),
            new Entry(Op.WRITE, "apache", "APACHE", false, "FileUtils.writeLines", Methods::writeApache),
            new Entry(Op.WRITE, "bfilewriter", "BFILEWRITER", true, "BufferedWriter(FileWriter).write(String)", Methods::writeBfilewriter),
            new Entry(Op.WRITE, "biostream", "BIOSTREAM", true, "OutputStreamWriter(BufferedOutputStream).write(String)", Methods::writeBiostream),
            new Entry(Op.WRITE, "channel", "CHANNEL", true, "FileChannel.write(ByteBuffer)", Methods::writeChannel),
            new Entry(Op.WRITE, "filewriter", "FILEWRITER", false, "FileWriter.write(String,int,int)", Methods::writeFilewriter),
            new Entry(Op.WRITE, "guava", "GUAVA", false, "Files.asCharSink(..).writeLines", Methods::writeGuava),
            new Entry(Op.WRITE, "iostream", "IOSTREAM", false, "OutputStreamWriter(FileOutputStream).write(String)", Methods::writeIostream),
            new Entry(Op.WRITE, "niof", "NIOF", false, "Files.write(path, lines)", Methods::writeNiof),
            new Entry(Op.WRITE, "raf", "RAF", false, "RandomAccessFile.writeBytes", Methods::writeRaf)));

    /**
     * {@code entries} and, after them, each WRITE method again under WRITESYNC: the flushed
     * protocol runs the same methods, and forces the file to the disk inside the window.
     */
    private static List<Entry> withFlushedWrites(List<Entry> entries) {
        List<Entry> out = new ArrayList<>(entries);
        for (Entry e : entries) {
            if (e.op() == Op.WRITE) {
                out.add(new Entry(Op.WRITESYNC, e.method(), e.acronym(), e.buffered(), e.api(), e.task()));
            }
        }
        return List.copyOf(out);
    }

    public static List<Entry> of(Op op) {
        List<Entry> out = new ArrayList<>();
        for (Entry e : ALL) {
            if (e.op() == op) {
                out.add(e);
            }
        }
        return out;
    }

    public static Entry find(Op op, String method) {
        for (Entry e : ALL) {
            if (e.op() == op && e.method().equals(method)) {
                return e;
            }
        }
        throw new IllegalArgumentException("no method '" + method + "' for use case " + op.label());
    }

    /** Prints {@code op method acronym buffered} lines (read by {@code wattio iobench}). */
    public static void main(String[] args) {
        for (Entry e : ALL) {
            System.out.println(e.op().label() + " " + e.method() + " " + e.acronym() + " " + e.buffered());
        }
        // The RQ2 programs and their swappable methods (AppsBench, -p method=...).
        String[][] apps = {{"fasta", String.join(",", io.wattio.iobench.apps.Apps.FASTA_METHODS)},
            {"knucleotide", String.join(",", io.wattio.iobench.apps.Apps.KNUC_METHODS)},
            {"zip4j", String.join(",", io.wattio.iobench.apps.Apps.STREAM_METHODS)},
            {"crypto", String.join(",", io.wattio.iobench.apps.Apps.STREAM_METHODS)}};
        for (String[] a : apps) {
            for (String m : a[1].split(",")) {
                System.out.println(a[0] + " " + m + " " + m.toUpperCase(Locale.ROOT) + " false");
            }
        }
    }
}
