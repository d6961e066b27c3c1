package cd.go.contrib.elasticagent.ecs.jar;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.thoughtworks.go.plugin.api.GoPlugin;
import com.thoughtworks.go.plugin.api.response.GoPluginApiResponse;
import org.junit.jupiter.api.Test;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * What the jar adds per request, and what it costs in memory. Not part of the test run: one command
 * (README "GoCD plugin jar"):
 *
 * <pre>
 * mvn -B -q -f packaging/gocd-plugin/pom.xml verify -Dplugin.binary=/path/to/ecs-elastic-agent -Dit.test=BridgeBenchmark
 * </pre>
 *
 * Sends N cheap requests (get-capabilities, and should-assign-work for an agent the plugin does
 * not know) one after another, (a) as lines written straight to a binary of its own and (b)
 * through {@code handle()} of the jar, after a warm-up of each; prints p50/p99/max of both and the
 * difference, the heap the bridge holds, and the RSS of this JVM and of the binary. Writes the
 * table to {@code target/benchmark.md} too.
 */
class BridgeBenchmark {

    static final int N = Integer.getInteger("bench.requests", 10_000);
    static final int WARMUP = 2_000;
    static final String SHOULD_ASSIGN = Bodies.shouldAssignWork("bench", "agent-unknown", 1);

    @Test
    void latencyAddedByTheJarAndItsMemory() throws Exception {
        CapturedLog.get();
        Path binary = extractedBinary();
        StringBuilder out = new StringBuilder();
        out.append(String.format(Locale.ROOT, "ecs-elastic-agent GoCD jar: %d sequential requests each, after %d warm-up; %s; %d CPUs%n%n",
                N, WARMUP, System.getProperty("java.vm.name") + " " + System.getProperty("java.version"),
                Runtime.getRuntime().availableProcessors()));
        out.append("| request | direct p50 | direct p99 | jar p50 | jar p99 | jar max | added p50 | added p99 |\n");
        out.append("|---|---|---|---|---|---|---|---|\n");

        long heapBefore = usedHeapAfterGc();
        long rssBefore = rssKb(ProcessHandle.current().pid());
        GoPlugin plugin = PluginJar.load().start(Harness.noAws(), java.util.Map.of(), new TestAccessor());
        try {
            for (String[] req : new String[][]{{"cd.go.elastic-agent.get-capabilities", null},
                    {"cd.go.elastic-agent.should-assign-work", SHOULD_ASSIGN}}) {
                long[] direct = direct(binary, req[0], req[1]);
                long[] jar = viaJar(plugin, req[0], req[1]);
                out.append(String.format(Locale.ROOT, "| %s | %s | %s | %s | %s | %s | %s | %s |%n",
                        req[0].replace("cd.go.elastic-agent.", ""), us(pct(direct, 50)), us(pct(direct, 99)),
                        us(pct(jar, 50)), us(pct(jar, 99)), us(jar[jar.length - 1]),
                        us(pct(jar, 50) - pct(direct, 50)), us(pct(jar, 99) - pct(direct, 99))));
            }
            long heapAfter = usedHeapAfterGc();
            long pid = PluginJar.binaryPid(plugin);
            out.append(String.format(Locale.ROOT, "%nMemory: heap held by the bridge (loaded jar, plugin, after %d requests, after GC) %.1f MiB; "
                            + "JVM RSS %.0f MiB (%.0f MiB before loading the jar); binary RSS %.0f MiB; bridge threads %d.%n",
                    2 * (N + WARMUP), (heapAfter - heapBefore) / 1048576.0, rssKb(ProcessHandle.current().pid()) / 1024.0,
                    rssBefore / 1024.0, rssKb(pid) / 1024.0, bridgeThreads()));
        } finally {
            PluginJar.unload(plugin);
        }
        System.out.println(out);
        String report = System.getProperty("bench.report");
        if (report != null) {
            Files.writeString(Path.of(report), out.toString());
        }
    }

    /** Lines written straight to a binary of its own: request, wait for the response, next. */
    static long[] direct(Path binary, String name, String body) throws Exception {
        ProcessBuilder pb = new ProcessBuilder(binary.toString(), "serve").redirectError(ProcessBuilder.Redirect.DISCARD);
        pb.environment().putAll(Harness.noAws());
        Process p = pb.start();
        long[] t = new long[N];
        try (OutputStream in = p.getOutputStream();
             BufferedReader outLines = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
            JsonObject hello = JsonParser.parseString(outLines.readLine()).getAsJsonObject();
            assertEquals("hello", hello.get("type").getAsString());
            for (int i = 0; i < WARMUP + N; i++) {
                byte[] line = ("{\"type\":\"request\",\"id\":" + i + ",\"name\":\"" + name + "\",\"version\":\"5.0\",\"body\":"
                        + (body == null ? "null" : body) + "}\n").getBytes(StandardCharsets.UTF_8);
                long t0 = System.nanoTime();
                in.write(line);
                in.flush();
                String answer = outLines.readLine();
                JsonObject r = JsonParser.parseString(answer).getAsJsonObject();
                long t1 = System.nanoTime();
                assertEquals(i, r.get("id").getAsInt());
                assertEquals(200, r.get("code").getAsInt());
                if (i >= WARMUP) {
                    t[i - WARMUP] = t1 - t0;
                }
            }
        } finally {
            p.waitFor(10, TimeUnit.SECONDS);
            p.destroyForcibly();
        }
        return sorted(t);
    }

    static long[] viaJar(GoPlugin plugin, String name, String body) throws Exception {
        long[] t = new long[N];
        for (int i = 0; i < WARMUP + N; i++) {
            long t0 = System.nanoTime();
            GoPluginApiResponse r = PluginJar.handle(plugin, name, body);
            long t1 = System.nanoTime();
            assertEquals(200, r.responseCode(), r.responseBody());
            if (i >= WARMUP) {
                t[i - WARMUP] = t1 - t0;
            }
        }
        return sorted(t);
    }

    private static long[] sorted(long[] t) {
        long[] c = t.clone();
        Arrays.sort(c);
        return c;
    }

    static long pct(long[] sorted, int p) {
        return sorted[Math.min(sorted.length - 1, (int) Math.ceil(p / 100.0 * sorted.length) - 1)];
    }

    static String us(long nanos) {
        return String.format(Locale.ROOT, "%.0f µs", nanos / 1000.0);
    }

    static long usedHeapAfterGc() throws InterruptedException {
        for (int i = 0; i < 3; i++) {
            System.gc();
            Thread.sleep(100);
        }
        return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
    }

    static long rssKb(long pid) throws Exception {
        for (String line : Files.readAllLines(Path.of("/proc/" + pid + "/status"))) {
            if (line.startsWith("VmRSS:")) {
                return Long.parseLong(line.replaceAll("\\D+", ""));
            }
        }
        return -1;
    }

    static long bridgeThreads() {
        return Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().startsWith("ecs-elastic-agent-")).count();
    }

    /** The binary the jar extracted (the same for both sides of the comparison). */
    static Path extractedBinary() throws Exception {
        GoPlugin p = PluginJar.load().start(Harness.noAws(), java.util.Map.of(), new TestAccessor());
        long pid = PluginJar.binaryPid(p);
        Path bin = Path.of(ProcessHandle.of(pid).orElseThrow().info().command().orElseThrow());
        PluginJar.unload(p);
        return bin;
    }
}
