package io.wattio;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.Channels;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A named region of a Java program whose energy {@code wattio measure} measures: the machine's
 * energy over the region and this process's CPU-time share of it, labelled with how they were
 * obtained.
 *
 * <pre>{@code
 * try (Region r = Region.open("parse")) {
 *     parse(input);
 * }   // r.attributedJ(), r.energyJ(), r.attributedLabel() once closed
 * }</pre>
 *
 * <p>Run the program as {@code wattio measure -- java -cp app.jar Main}: wattio hands it a Unix
 * socket in {@code WATTIO_REGION_SOCKET}. Outside {@code wattio measure}, or when the socket
 * fails, a region measures nothing, its figures are NaN and one warning says why: measuring
 * never breaks the program. Regions opened inside another on the same thread are named
 * by their path ({@code parse/tokenize}). The protocol is one line each way: {@code BEGIN name}
 * answered {@code OK id}, {@code END id} answered with one JSON object.
 */
public final class Region implements AutoCloseable {
    /** The environment variable naming wattio's socket. */
    public static final String SOCKET_ENV = "WATTIO_REGION_SOCKET";

    private static final Object LOCK = new Object();
    private static SocketChannel channel;
    private static BufferedReader reader;
    private static OutputStream writer;
    private static boolean warned;
    private static final ThreadLocal<Deque<String>> NAMES = ThreadLocal.withInitial(ArrayDeque::new);

    private final String path;
    private final String id;
    private double energyJ = Double.NaN;
    private double attributedJ = Double.NaN;
    private double cpuS = Double.NaN;
    private double windowS = Double.NaN;
    private String energyLabel;
    private String attributedLabel;

    private Region(String path, String id) {
        this.path = path;
        this.id = id;
    }

    /** Opens a region named {@code name} (non-empty, no control characters). */
    public static Region open(String name) {
        if (name == null || name.isEmpty() || name.chars().anyMatch(c -> c < 32 || c == 127)) {
            throw new IllegalArgumentException("a region name is non-empty text without control characters");
        }
        Deque<String> names = NAMES.get();
        String path = names.isEmpty() ? name : String.join("/", names) + "/" + name;
        String reply = request("BEGIN " + path);
        names.addLast(name);
        return new Region(path, reply == null || !reply.startsWith("OK ") ? null : reply.substring(3));
    }

    @Override
    public void close() {
        NAMES.get().pollLast();
        if (id == null) {
            return;
        }
        String json = request("END " + id);
        if (json == null) {
            return;
        }
        energyJ = number(json, "energy_j");
        attributedJ = number(json, "attributed_j");
        cpuS = number(json, "cpu_s");
        windowS = number(json, "window_s");
        energyLabel = text(json, "energy_label");
        attributedLabel = text(json, "attributed_label");
    }

    /** The region's name with its parents', as wattio records it. */
    public String path() { return path; }
    /** The machine's energy over the region, in joules. */
    public double energyJ() { return energyJ; }
    /** This process's CPU-time share of {@link #energyJ()}, in joules. */
    public double attributedJ() { return attributedJ; }
    /** CPU seconds of this process over the region. */
    public double cpuS() { return cpuS; }
    /** Wall seconds of the region. */
    public double windowS() { return windowS; }
    /** How {@link #energyJ()} was obtained, e.g. {@code measured (perf)} or {@code estimated (model: ...)}. */
    public String energyLabel() { return energyLabel; }
    /** How {@link #attributedJ()} was obtained. */
    public String attributedLabel() { return attributedLabel; }

    private static void warnOnce(String why) {
        if (!warned) {
            warned = true;
            System.err.println("wattio Region: " + why);
        }
    }

    /** The reply to {@code line}, or null (warned once) when there is none to have. */
    private static String request(String line) {
        String socket = System.getenv(SOCKET_ENV);
        synchronized (LOCK) {
            if (socket == null || socket.isEmpty()) {
                warnOnce("not run under `wattio measure` (no " + SOCKET_ENV + "): regions measure nothing");
                return null;
            }
            try {
                if (channel == null) {
                    channel = SocketChannel.open(StandardProtocolFamily.UNIX);
                    channel.connect(UnixDomainSocketAddress.of(Path.of(socket)));
                    reader = new BufferedReader(new InputStreamReader(Channels.newInputStream(channel), StandardCharsets.UTF_8));
                    writer = Channels.newOutputStream(channel);
                }
                writer.write((line + "\n").getBytes(StandardCharsets.UTF_8));
                writer.flush();
                String reply = reader.readLine();
                if (reply == null) {
                    throw new IOException("wattio closed the region socket (over its connection bound, or the run ended)");
                }
                if (reply.startsWith("ERR ")) {
                    warnOnce("wattio refused '" + line + "': " + reply.substring(4));
                    return null;
                }
                return reply;
            } catch (IOException e) {
                // A broken channel is dropped, so the next region tries a fresh one.
                try {
                    if (channel != null) {
                        channel.close();
                    }
                } catch (IOException ignored) {
                    // Already broken.
                }
                channel = null;
                warnOnce("the wattio socket " + socket + " failed (" + e.getMessage() + "): this region measures nothing");
                return null;
            }
        }
    }

    private static double number(String json, String key) {
        Matcher m = Pattern.compile("\"" + key + "\":(-?[0-9.eE+-]+)").matcher(json);
        return m.find() ? Double.parseDouble(m.group(1)) : Double.NaN;
    }

    private static String text(String json, String key) {
        Matcher m = Pattern.compile("\"" + key + "\":\"((?:[^\"\\\\]|\\\\.)*)\"").matcher(json);
        return m.find() ? m.group(1).replace("\\\"", "\"").replace("\\\\", "\\") : null;
    }
}
