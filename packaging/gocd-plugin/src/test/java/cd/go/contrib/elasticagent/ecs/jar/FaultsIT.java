package cd.go.contrib.elasticagent.ecs.jar;

import com.thoughtworks.go.plugin.api.GoPlugin;
import com.thoughtworks.go.plugin.api.response.GoPluginApiResponse;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The bridge's faults: a binary killed mid-request, a binary that hangs, shutdown, a wrong binary,
 * a body that is not JSON. In each, GoCD gets an answer (a 500 with a clear message), the binary
 * is restarted and serves again, and no process is left behind.
 */
class FaultsIT {

    static final Map<String, String> QUICK = Map.of("backoffMin", "200", "backoffMax", "1000", "probeAfter", "500",
            "probeTimeout", "1000", "startWait", "10000");
    static final String CAPABILITIES = "cd.go.elastic-agent.get-capabilities";

    @Test
    void aBinaryKilledMidRequestFailsItsRequestsWith500AndIsRestarted() throws Exception {
        try (Harness h = new Harness(QUICK)) {
            h.moto.createCluster("faults");
            // create-agent asks GoCD for the server's info first; GoCD (the test) holds that call,
            // so the request is in flight inside the binary when it dies.
            h.accessor.hold("go.processor.server-info.get");
            String body = Bodies.createAgent("faults", 7001, "fault-key-7001");
            CompletableFuture<GoPluginApiResponse> inFlight = CompletableFuture.supplyAsync(() -> call(h, "cd.go.elastic-agent.create-agent", body));
            assertTrue(h.accessor.awaitHeldCall(30), "create-agent called GoCD back: " + h.accessor.apis());
            long pid = h.binaryPid();
            int mark = CapturedLog.get().size();
            ProcessHandle.of(pid).orElseThrow().destroyForcibly();

            GoPluginApiResponse r = inFlight.get(20, TimeUnit.SECONDS);
            assertEquals(500, r.responseCode(), r.responseBody());
            assertTrue(r.responseBody().contains("ecs-elastic-agent exited") && r.responseBody().contains("create-agent"),
                    r.responseBody());
            h.accessor.release();

            awaitServing(h, pid);
            assertTrue(CapturedLog.get().since(mark).stream().anyMatch(l -> l.level().equals("WARN")
                    && l.message().contains("pid " + pid) && l.message().contains("restarting")), CapturedLog.get().dump(mark));
            assertTrue(CapturedLog.get().since(mark).stream().anyMatch(l -> l.message().contains("started") && l.message().contains("(restart 1)")),
                    CapturedLog.get().dump(mark));
        }
        assertNoBinaryLeft();
    }

    @Test
    void aBinaryThatStopsAnsweringIsKilledAndRestarted() throws Exception {
        try (Harness h = new Harness(QUICK)) {
            // It serves, with nothing in flight: no probe of a slow start can restart it below.
            assertEquals(200, h.handle(CAPABILITIES, null).responseCode());
            long pid = h.binaryPid();
            assertTrue(pid > 0, "a binary serves: " + pid);
            int mark = CapturedLog.get().size();
            assertEquals(0, new ProcessBuilder("kill", "-STOP", Long.toString(pid)).start().waitFor());
            awaitStopped(pid);
            long t0 = System.nanoTime();
            GoPluginApiResponse r = h.handle(CAPABILITIES, null);
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            long serving = h.binaryPid();
            assertEquals(500, r.responseCode(), () -> r.responseBody() + " (pid " + pid + " stopped, pid "
                    + serving + " serving now)\n" + CapturedLog.get().dump(mark));
            assertTrue(r.responseBody().contains("stopped answering"), r.responseBody());
            assertTrue(ms < 10_000, "the hung binary was given up within " + ms + " ms");
            awaitServing(h, pid);
            assertTrue(CapturedLog.get().since(mark).stream().anyMatch(l -> l.level().equals("ERROR")
                    && l.message().contains("stopped answering")), CapturedLog.get().dump(mark));
        }
        assertNoBinaryLeft();
    }

    @Test
    void unloadStopsTheBinaryWithEofAndSigtermAndWaitsForIt() throws Exception {
        Harness h = new Harness();
        long pid = h.binaryPid();
        ProcessHandle process = ProcessHandle.of(pid).orElseThrow();
        assertEquals(200, h.handle(CAPABILITIES, null).responseCode());
        int mark = CapturedLog.get().size();
        h.close();
        assertFalse(process.isAlive(), "the binary has exited when unload returns");
        assertTrue(CapturedLog.get().since(mark).stream().anyMatch(l -> l.message().contains("pid " + pid + " stopped (exit code 0)")),
                CapturedLog.get().dump(mark));
        GoPluginApiResponse after = h.handle(CAPABILITIES, null);
        assertEquals(500, after.responseCode());
        assertNoBinaryLeft();
    }

    @Test
    void aBinaryOfAnotherPluginIsRefused() throws Exception {
        Path fake = Files.createTempFile("not-ecs-elastic-agent", ".sh");
        Files.writeString(fake, "#!/bin/sh\necho '{\"type\":\"hello\",\"protocol\":1,\"plugin_id\":\"some.other.plugin\","
                + "\"name\":\"x\",\"version\":\"9\",\"extension\":\"elastic-agent\",\"extension_versions\":[\"5.0\"]}'\nexec cat >/dev/null\n");
        Files.setPosixFilePermissions(fake, PosixFilePermissions.fromString("rwx------"));
        System.setProperty("ecs.elastic.agent.binary", fake.toString());
        try {
            GoPlugin plugin = PluginJar.load().start(Harness.noAws(), QUICK, new TestAccessor());
            try {
                GoPluginApiResponse r = PluginJar.handle(plugin, CAPABILITIES, null);
                assertEquals(500, r.responseCode());
                assertTrue(r.responseBody().contains("is plugin some.other.plugin, not cd.go.contrib.elastic-agent.ecs"), r.responseBody());
            } finally {
                PluginJar.unload(plugin);
            }
        } finally {
            System.clearProperty("ecs.elastic.agent.binary");
            Files.deleteIfExists(fake);
        }
    }

    @Test
    void aMissingOverrideBinaryIsNamedInTheAnswer() throws Exception {
        System.setProperty("ecs.elastic.agent.binary", "/nonexistent/ecs-elastic-agent");
        try {
            GoPlugin plugin = PluginJar.load().start(Harness.noAws(), Map.of("startWait", "300", "backoffMin", "60000"), new TestAccessor());
            try {
                GoPluginApiResponse r = PluginJar.handle(plugin, CAPABILITIES, null);
                assertEquals(500, r.responseCode());
                assertTrue(r.responseBody().contains("/nonexistent/ecs-elastic-agent"), r.responseBody());
            } finally {
                PluginJar.unload(plugin);
            }
        } finally {
            System.clearProperty("ecs.elastic.agent.binary");
        }
    }

    @Test
    void aBodyThatIsNotJsonIsABadRequest() throws Exception {
        GoPlugin plugin = PluginJar.load().start(Harness.noAws(), Map.of(), new TestAccessor());
        try {
            GoPluginApiResponse r = PluginJar.handle(plugin, "cd.go.elastic-agent.validate-cluster-profile", "{not json");
            assertEquals(400, r.responseCode());
            assertTrue(r.responseBody().contains("not JSON"), r.responseBody());
            assertEquals(200, PluginJar.handle(plugin, CAPABILITIES, null).responseCode(), "and the binary serves on");
        } finally {
            PluginJar.unload(plugin);
        }
        assertNoBinaryLeft();
    }

    /** Waits until the kernel shows {@code pid} stopped (state T in its stat line). */
    static void awaitStopped(long pid) throws Exception {
        Path stat = Path.of("/proc", Long.toString(pid), "stat");
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        String line = "";
        while (System.nanoTime() < deadline) {
            line = Files.readString(stat);
            // pid (comm) state ...: comm may hold spaces and parentheses, the state follows the last ')'.
            if (line.substring(line.lastIndexOf(')') + 2).startsWith("T")) {
                return;
            }
            Thread.sleep(10);
        }
        throw new AssertionError("pid " + pid + " did not stop within 10 s: " + line);
    }

    /** Waits until a new binary (not {@code oldPid}) answers get-capabilities. */
    static void awaitServing(Harness h, long oldPid) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        GoPluginApiResponse last = null;
        while (System.nanoTime() < deadline) {
            last = h.handle(CAPABILITIES, null);
            if (last.responseCode() == 200) {
                long pid = h.binaryPid();
                assertNotEquals(oldPid, pid, "a new binary serves");
                assertFalse(ProcessHandle.of(oldPid).map(ProcessHandle::isAlive).orElse(false), "the old binary is gone");
                return;
            }
            Thread.sleep(100);
        }
        throw new AssertionError("the binary did not serve again within 30 s: " + (last == null ? null : last.responseBody()));
    }

    static void assertNoBinaryLeft() throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (!Harness.binaries().isEmpty() && System.nanoTime() < deadline) {
            Thread.sleep(50);
        }
        assertEquals(0, Harness.binaries().size(), "ecs-elastic-agent processes left: " + Harness.binaries());
    }

    private static GoPluginApiResponse call(Harness h, String name, String body) {
        try {
            return h.handle(name, body);
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }
}
