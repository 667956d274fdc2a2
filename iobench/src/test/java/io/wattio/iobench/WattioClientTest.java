package io.wattio.iobench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.Channels;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The client side of the energy socket, against a real Unix-domain socket server. */
class WattioClientTest {
    @TempDir
    Path dir;

    @Test
    void requestReplyAndErrors() throws Exception {
        Path sock = dir.resolve("e.sock");
        List<String> seen = Collections.synchronizedList(new ArrayList<>());
        try (ServerSocketChannel srv = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
            srv.bind(UnixDomainSocketAddress.of(sock));
            Thread t = new Thread(() -> {
                try (SocketChannel c = srv.accept()) {
                    BufferedReader in = new BufferedReader(new InputStreamReader(Channels.newInputStream(c), StandardCharsets.UTF_8));
                    OutputStream out = Channels.newOutputStream(c);
                    String line;
                    while ((line = in.readLine()) != null) {
                        seen.add(line);
                        String reply = line.startsWith("BAD") ? "ERR no such request" : "OK " + line.length();
                        out.write((reply + "\n").getBytes(StandardCharsets.UTF_8));
                    }
                } catch (IOException ignored) {
                    // the client closed
                }
            });
            t.start();
            try (WattioClient c = WattioClient.connect(sock.toString())) {
                assertTrue(c.enabled());
                assertEquals("OK 5", c.call("BEGIN"));
                IOException e = assertThrows(IOException.class, () -> c.call("BAD x"));
                assertTrue(e.getMessage().contains("no such request"), e.getMessage());
            }
            t.join(5000);
        }
        assertEquals(List.of("BEGIN", "BAD x"), seen);
    }

    @Test
    void missingSocketSaysWhatToDo() {
        IOException e = assertThrows(IOException.class, () -> WattioClient.connect(dir.resolve("none.sock").toString()));
        assertTrue(e.getMessage().contains("wattio iobench"), e.getMessage());
    }
}
