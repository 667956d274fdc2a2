package io.wattio.iobench;

import java.io.Closeable;
import java.io.IOException;
import java.nio.file.Path;

/**
 * The measured window on the wattio socket, shared by every benchmark state: {@code HELLO} (and
 * {@code PREPARE} of the input) at trial set-up, {@code BEGIN} and {@code END ns=...} just around
 * the single-shot invocation, {@code CHECK} of the output after it.
 */
final class Window implements Closeable {
    private final WattioClient client;
    private long t0;

    private Window(WattioClient client) {
        this.client = client;
    }

    /** Connects, says {@code HELLO}, and asks wattio to {@code PREPARE} the input when there is one. */
    static Window open(String op, String method, String size, int buffer, Path input) throws IOException {
        WattioClient client = WattioClient.connect();
        client.call("HELLO op=" + op + " method=" + method + " size=" + size + " buffer=" + buffer + " pid="
                + ProcessHandle.current().pid());
        if (input != null) {
            client.call("PREPARE " + input.toAbsolutePath());
        }
        return new Window(client);
    }

    /** Opens the window: the last thing before the measured invocation. */
    void begin() throws IOException {
        client.call("BEGIN");
        t0 = System.nanoTime();
    }

    /** Closes the window: the first thing after the measured invocation. */
    void end() throws IOException {
        long ns = System.nanoTime() - t0;
        client.call("END ns=" + ns);
    }

    /** Reports the output check to wattio; the caller fails the run when {@code ok} is false. */
    void check(boolean ok, long bytes, String got, String want) throws IOException {
        client.call("CHECK ok=" + ok + " bytes=" + bytes + " got=" + got + " want=" + want);
    }

    @Override
    public void close() throws IOException {
        client.close();
    }
}
