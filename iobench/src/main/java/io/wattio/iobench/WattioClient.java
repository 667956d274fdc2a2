package io.wattio.iobench;

import java.io.BufferedReader;
import java.io.Closeable;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.Channels;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;

/**
 * Client of the energy interface served by {@code wattio iobench} (docs/iobench.md): a Unix-domain
 * socket, one request line, one reply line. The JVM never reads energy counters itself; it tells
 * wattio where the measured window begins and ends, and wattio answers with the energy.
 *
 * <p>The socket path comes from the system property {@code wattio.iobench.socket} or the
 * environment variable {@code WATTIO_IOBENCH_SOCKET}. Without either, the client is disabled
 * (benchmarks still run and JMH still times them, but no energy is recorded).
 */
public final class WattioClient implements Closeable {
    public static final String PROPERTY = "wattio.iobench.socket";
    public static final String ENV = "WATTIO_IOBENCH_SOCKET";

    private final SocketChannel ch;
    private final BufferedReader in;
    private final OutputStream out;

    private WattioClient(SocketChannel ch) {
        this.ch = ch;
        this.in = ch == null ? null
                : new BufferedReader(new InputStreamReader(Channels.newInputStream(ch), StandardCharsets.UTF_8));
        this.out = ch == null ? null : Channels.newOutputStream(ch);
    }

    /** The configured socket path, or null. */
    public static String configuredPath() {
        String p = System.getProperty(PROPERTY);
        if (p == null || p.isEmpty()) {
            p = System.getenv(ENV);
        }
        return (p == null || p.isEmpty()) ? null : p;
    }

    /** Connects to the configured socket, or returns a disabled client when none is configured. */
    public static WattioClient connect() throws IOException {
        String p = configuredPath();
        return p == null ? new WattioClient(null) : connect(p);
    }

    public static WattioClient connect(String path) throws IOException {
        SocketChannel ch = SocketChannel.open(StandardProtocolFamily.UNIX);
        try {
            ch.connect(UnixDomainSocketAddress.of(path));
        } catch (IOException e) {
            ch.close();
            throw new IOException("cannot connect to the wattio energy socket " + path + " (" + e.getMessage()
                    + "): run the benchmarks through `wattio iobench`, or unset " + ENV, e);
        }
        return new WattioClient(ch);
    }

    public boolean enabled() {
        return ch != null;
    }

    /**
     * Sends one request line and returns the reply line ("" when disabled).
     *
     * @throws IOException on a closed socket or an {@code ERR ...} reply
     */
    public String call(String line) throws IOException {
        if (ch == null) {
            return "";
        }
        if (line.indexOf('\n') >= 0) {
            throw new IllegalArgumentException("request lines cannot contain newlines");
        }
        out.write((line + "\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
        String reply = in.readLine();
        if (reply == null) {
            throw new IOException("wattio closed the energy socket during '" + line.split(" ")[0] + "'");
        }
        if (reply.startsWith("ERR")) {
            throw new IOException("wattio refused '" + line.split(" ")[0] + "': " + reply.substring(3).trim());
        }
        return reply;
    }

    @Override
    public void close() throws IOException {
        if (ch != null) {
            ch.close();
        }
    }
}
