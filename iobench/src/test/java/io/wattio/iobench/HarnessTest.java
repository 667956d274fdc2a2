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
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.RunnerException;
import org.openjdk.jmh.runner.options.Options;
import org.openjdk.jmh.runner.options.OptionsBuilder;

/**
 * The JMH harness against a stand-in of wattio's socket (a real Unix socket): one single-shot
 * invocation speaks HELLO, PREPARE, BEGIN, END, CHECK in that order, and a wrong output fails the
 * run. JMH runs in-process (forks = 0) to keep the test fast.
 */
class HarnessTest {
    @TempDir
    Path dir;

    private final List<String> seen = Collections.synchronizedList(new ArrayList<>());
    private ServerSocketChannel srv;
    private Thread thread;

    private Path serve() throws IOException {
        Path sock = dir.resolve("e.sock");
        srv = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        srv.bind(UnixDomainSocketAddress.of(sock));
        thread = new Thread(() -> {
            while (true) {
                try (SocketChannel c = srv.accept()) {
                    BufferedReader in = new BufferedReader(new InputStreamReader(Channels.newInputStream(c), StandardCharsets.UTF_8));
                    OutputStream out = Channels.newOutputStream(c);
                    String line;
                    while ((line = in.readLine()) != null) {
                        seen.add(line);
                        String reply = line.startsWith("END") ? "{\"energy_j\":0.5}" : "OK";
                        out.write((reply + "\n").getBytes(StandardCharsets.UTF_8));
                    }
                } catch (IOException e) {
                    return; // server closed
                }
            }
        });
        thread.start();
        return sock;
    }

    @AfterEach
    void stop() throws Exception {
        System.clearProperty(WattioClient.PROPERTY);
        System.clearProperty("wattio.iobench.data");
        if (srv != null) {
            srv.close();
            thread.join(5000);
        }
    }

    @org.junit.jupiter.api.BeforeEach
    void noGlobalLock() {
        // These in-process runs check the protocol, not timings: do not wait for, or block, a
        // study holding JMH's machine-wide lock.
        System.setProperty("jmh.ignoreLock", "true");
    }

    private Options opts(String bench) {
        return new OptionsBuilder().include(bench).forks(0).warmupIterations(0).measurementIterations(1)
                .param("size", "tiny").shouldFailOnError(true).output(dir.resolve("jmh-output.txt").toString()).build();
    }

    @Test
    void oneRunSpeaksTheProtocolInOrder() throws Exception {
        Path sock = serve();
        System.setProperty(WattioClient.PROPERTY, sock.toString());
        System.setProperty("wattio.iobench.data", dir.resolve("data").toString());
        new Runner(opts("io.wattio.iobench.ReadBench.channel$")).run();
        new Runner(opts("io.wattio.iobench.WriteBench.guava$")).run();
        List<String> cmds = new ArrayList<>();
        for (String l : seen) {
            cmds.add(l.split(" ")[0]);
        }
        assertEquals(List.of("HELLO", "PREPARE", "BEGIN", "END", "CHECK", "HELLO", "BEGIN", "END", "CHECK"), cmds);
        assertTrue(seen.get(0).startsWith("HELLO op=read method=channel size=tiny buffer=8192 pid="), seen.get(0));
        assertTrue(seen.get(1).endsWith("text-tiny.txt"), seen.get(1));
        assertTrue(seen.get(4).startsWith("CHECK ok=true bytes=100000 "), seen.get(4));
        assertTrue(seen.get(8).startsWith("CHECK ok=true bytes=100000 "), seen.get(8));
        // The written file is removed after its check.
        assertTrue(Files.notExists(dir.resolve("data/write-guava-tiny.out")));
    }

    @Test
    void aWrongOutputFailsTheRun() throws Exception {
        Path sock = serve();
        System.setProperty(WattioClient.PROPERTY, sock.toString());
        Path data = dir.resolve("data");
        System.setProperty("wattio.iobench.data", data.toString());
        FileGen.ensure(data, Size.TINY);
        // Same length, one byte changed: the sums no longer match what any reader sees.
        Path text = FileGen.text(data, Size.TINY);
        byte[] b = Files.readAllBytes(text);
        b[500] = (byte) (b[500] == 'a' ? 'b' : 'a');
        Files.write(text, b);
        assertThrows(RunnerException.class, () -> new Runner(opts("io.wattio.iobench.ReadBench.niof$")).run());
        assertTrue(seen.stream().anyMatch(l -> l.startsWith("CHECK ok=false")), seen.toString());
    }
}
