package cd.go.contrib.elasticagent.ecs.jar;

import com.google.gson.JsonElement;
import com.google.gson.JsonParser;
import com.thoughtworks.go.plugin.api.GoPlugin;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The binary's options under GoCD (packaging/INSTALL.md, "Options under GoCD"), set as an operator
 * sets them: the GoCD server JVM's system properties {@code ecs.elastic.agent.metrics.addr},
 * {@code ecs.elastic.agent.log.format} and {@code ecs.elastic.agent.log.level}. The real binary is
 * started through the jar; what it was given is read from /proc, and the metrics it serves over
 * HTTP. A bad value, or a misspelt setting, is a warning in the plugin log.
 */
class OptionsIT {

    static final String METRICS = "ecs.elastic.agent.metrics.addr";
    static final String FORMAT = "ecs.elastic.agent.log.format";
    static final String LEVEL = "ecs.elastic.agent.log.level";
    /** A misspelt {@link #METRICS}, as an operator might type it. */
    static final String MISSPELT = "ecs.elastic.agent.metrics.address";

    @AfterEach
    void clearProperties() {
        System.clearProperty(METRICS);
        System.clearProperty(FORMAT);
        System.clearProperty(LEVEL);
        System.clearProperty(MISSPELT);
    }

    static int freeLoopbackPort() throws Exception {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    static List<String> cmdline(long pid) throws Exception {
        String raw = new String(Files.readAllBytes(Path.of("/proc/" + pid + "/cmdline")), StandardCharsets.UTF_8);
        return Arrays.asList(raw.split("\0"));
    }

    static List<String> environ(long pid) throws Exception {
        String raw = new String(Files.readAllBytes(Path.of("/proc/" + pid + "/environ")), StandardCharsets.UTF_8);
        return Arrays.asList(raw.split("\0"));
    }

    /** The plugin-log lines the binary's stderr gave, without StderrLog's "ecs-elastic-agent[pid] " prefix. */
    static List<String> stderrLines(int mark, long pid) {
        String prefix = "ecs-elastic-agent[" + pid + "] ";
        return CapturedLog.get().since(mark).stream()
                .filter(l -> l.logger().endsWith(".StderrLog") && l.message().startsWith(prefix))
                .map(l -> l.message().substring(prefix.length()))
                .toList();
    }

    @Test
    void aMetricsAddressFromASystemPropertyServesPrometheusText() throws Exception {
        String addr = "127.0.0.1:" + freeLoopbackPort();
        System.setProperty(METRICS, addr);
        int mark = CapturedLog.get().size();
        GoPlugin plugin = PluginJar.load().start(Harness.noAws(), Map.of(), new TestAccessor());
        try {
            long pid = PluginJar.binaryPid(plugin);
            assertTrue(pid > 0, "the binary runs" + CapturedLog.get().dump(mark));
            List<String> cmd = cmdline(pid);
            assertEquals(List.of("serve", "--metrics-addr", addr), cmd.subList(1, cmd.size()));
            HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
            HttpResponse<String> r = null;
            for (int i = 0; i < 50; i++) {
                try {
                    r = http.send(HttpRequest.newBuilder(URI.create("http://" + addr + "/metrics"))
                            .timeout(Duration.ofSeconds(5)).build(), HttpResponse.BodyHandlers.ofString());
                    break;
                } catch (java.io.IOException notYet) {
                    Thread.sleep(100);
                }
            }
            assertTrue(r != null, "http://" + addr + "/metrics answered" + CapturedLog.get().dump(mark));
            assertEquals(200, r.statusCode(), r.body());
            assertTrue(r.headers().firstValue("content-type").orElse("").startsWith("text/plain"),
                    r.headers().map().toString());
            assertTrue(r.body().lines().anyMatch(l -> l.startsWith("ecs_ea_")), r.body());
            assertTrue(r.body().lines().anyMatch(l -> l.startsWith("# TYPE ecs_ea_")), r.body());
            assertTrue(CapturedLog.get().since(mark).stream().anyMatch(l -> l.level().equals("INFO")
                    && l.message().contains("ecs-elastic-agent options: serve --metrics-addr " + addr)),
                    "the jar says which options it gave" + CapturedLog.get().dump(mark));
        } finally {
            PluginJar.unload(plugin);
        }
    }

    @Test
    void aJsonLogFormatAndALogLevelReachTheBinary() throws Exception {
        System.setProperty(FORMAT, "json");
        System.setProperty(LEVEL, "debug");
        // With metrics the binary logs a line as it starts ("serving metrics"), whatever else it says.
        String addr = "127.0.0.1:" + freeLoopbackPort();
        System.setProperty(METRICS, addr);
        int mark = CapturedLog.get().size();
        GoPlugin plugin = PluginJar.load().start(Harness.noAws(), Map.of(), new TestAccessor());
        long pid;
        try {
            pid = PluginJar.binaryPid(plugin);
            assertTrue(pid > 0, "the binary runs" + CapturedLog.get().dump(mark));
            List<String> cmd = cmdline(pid);
            assertEquals(List.of("--log-format", "json", "serve", "--metrics-addr", addr), cmd.subList(1, cmd.size()));
            assertTrue(environ(pid).contains("RUST_LOG=debug"), "RUST_LOG=debug in the binary's environment");
            assertEquals(200, PluginJar.handle(plugin, "cd.go.elastic-agent.get-capabilities", null).responseCode());
        } finally {
            PluginJar.unload(plugin);
        }
        List<String> lines = List.of();
        for (int i = 0; i < 100 && lines.isEmpty(); i++) {
            lines = stderrLines(mark, pid);
            Thread.sleep(100);
        }
        assertFalse(lines.isEmpty(), "the binary logged" + CapturedLog.get().dump(mark));
        for (String line : lines) {
            JsonElement e = JsonParser.parseString(line);
            assertTrue(e.isJsonObject() && e.getAsJsonObject().has("level") && e.getAsJsonObject().has("timestamp"),
                    "a JSON log line: " + line);
        }
    }

    @Test
    void badValuesAreWarnedOfAndTheBinaryStartsWithoutThem() throws Exception {
        System.setProperty(METRICS, "localhost:9464");
        System.setProperty(FORMAT, "yaml");
        System.setProperty(LEVEL, "verbose");
        System.setProperty(MISSPELT, "127.0.0.1:9464");
        int mark = CapturedLog.get().size();
        GoPlugin plugin = PluginJar.load().start(Harness.noAws(), Map.of(), new TestAccessor());
        try {
            long pid = PluginJar.binaryPid(plugin);
            assertTrue(pid > 0, "the binary runs" + CapturedLog.get().dump(mark));
            List<String> cmd = cmdline(pid);
            assertEquals(List.of("serve"), cmd.subList(1, cmd.size()));
            assertFalse(environ(pid).contains("RUST_LOG=verbose"));
            assertEquals(200, PluginJar.handle(plugin, "cd.go.elastic-agent.get-capabilities", null).responseCode());
            List<CapturedLog.Line> warnings = CapturedLog.get().since(mark).stream()
                    .filter(l -> l.level().equals("WARN") && l.message().startsWith("ecs-elastic-agent option left out"))
                    .toList();
            String log = CapturedLog.get().dump(mark);
            assertEquals(4, warnings.size(), log);
            assertTrue(warnings.get(0).message().contains("-D" + METRICS + "=\"localhost:9464\"") && warnings.get(0).message().contains("IP:PORT"), log);
            assertTrue(warnings.get(1).message().contains("-D" + FORMAT + "=\"yaml\"") && warnings.get(1).message().contains("text or json"), log);
            assertTrue(warnings.get(2).message().contains("-D" + LEVEL + "=\"verbose\""), log);
            assertTrue(warnings.get(3).message().contains("-D" + MISSPELT + " is not a setting")
                    && warnings.get(3).message().contains("-D" + METRICS), log);
        } finally {
            PluginJar.unload(plugin);
        }
    }
}
