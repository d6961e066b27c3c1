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
 * (CONTRIBUTING.md, "The jar's overhead"):
 *
 * <pre>
 * mvn -B -q -f packaging/gocd-plugin/pom.xml verify -Dplugin.binary=/path/to/ecs-elastic-agent -Dit.test=BridgeBenchmark
 * </pre>
 *
 * Sends N cheap requests (get-capabilities, and should-assign-work for an agent the plugin does
 * not know) one after another, alternately (a) as lines written straight to a binary of its own
 * and (b) through {@code handle()} of the jar, after a warm-up of both; prints p50/p99/max of both and the
 * difference, the heap the bridge holds, and the RSS of this JVM and of the binary. Writes the
 * table to {@code target/benchmark.md} too.
 */
class BridgeBenchmark {

    static final int N = Integer.getInteger("bench.requests", 10_000);
    static final int WARMUP = 5_000;
    static final String SHOULD_ASSIGN = Bodies.shouldAssignWork("bench", "agent-unknown", 1);

    @Test
    void latencyAddedByTheJarAndItsMemory() throws Exception {
        CapturedLog.get();
        Path binary = extractedBinary();
        StringBuilder out = new StringBuilder();
        out.append(String.format(Locale.ROOT, "ecs-elastic-agent GoCD jar: %d sequential requests each, after %d warm-up of each, direct and jar interleaved; %s; %d CPUs; load average %s%n%n",
                N, WARMUP, System.getProperty("java.vm.name") + " " + System.getProperty("java.version"),
                Runtime.getRuntime().availableProcessors(), loadAverage()));
        out.append("| request | direct p50 | direct p99 | jar p50 | jar p99 | jar max | added p50 | added p99 |\n");
        out.append("|---|---|---|---|---|---|---|---|\n");

        long heapBefore = usedHeapAfterGc();
        long rssBefore = rssKb(ProcessHandle.current().pid());
        GoPlugin plugin = PluginJar.load().start(Harness.noAws(), java.util.Map.of(), new TestAccessor());
        try {
            try (Direct direct = new Direct(binary)) {
                String[][] requests = {{"cd.go.elastic-agent.get-capabilities", null},
                        {"cd.go.elastic-agent.should-assign-work", SHOULD_ASSIGN}};
                // Warm-up of both kinds first (the JIT), then each measured on its own; direct and
                // jar interleaved, so that both see the same load of the machine.
                for (int i = 0; i < WARMUP; i++) {
                    for (String[] req : requests) {
                        direct.call(req[0], req[1]);
                        viaJar(plugin, req[0], req[1]);
                    }
                }
                for (String[] req : requests) {
                    long[] d = new long[N];
                    long[] j = new long[N];
                    for (int i = 0; i < N; i++) {
                        d[i] = direct.call(req[0], req[1]);
                        j[i] = viaJar(plugin, req[0], req[1]);
                    }
                    d = sorted(d);
                    j = sorted(j);
                    out.append(String.format(Locale.ROOT, "| %s | %s | %s | %s | %s | %s | %s | %s |%n",
                            req[0].replace("cd.go.elastic-agent.", ""), us(pct(d, 50)), us(pct(d, 99)),
                            us(pct(j, 50)), us(pct(j, 99)), us(j[j.length - 1]),
                            us(pct(j, 50) - pct(d, 50)), us(pct(j, 99) - pct(d, 99))));
                }
            }
            long heapAfter = usedHeapAfterGc();
            long pid = PluginJar.binaryPid(plugin);
            out.append(String.format(Locale.ROOT, "%nMemory: heap held by the bridge (loaded jar, plugin, binary connection; after %d requests through it and a GC) %.1f MiB; "
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

    /** A binary of the benchmark's own, spoken to with lines directly: request, wait for the response. */
    static final class Direct implements AutoCloseable {
        final Process p;
        final OutputStream in;
        final BufferedReader out;
        int id;

        Direct(Path binary) throws Exception {
            ProcessBuilder pb = new ProcessBuilder(binary.toString(), "serve").redirectError(ProcessBuilder.Redirect.DISCARD);
            pb.environment().putAll(Harness.noAws());
            p = pb.start();
            in = p.getOutputStream();
            out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
            JsonObject hello = JsonParser.parseString(out.readLine()).getAsJsonObject();
            assertEquals("hello", hello.get("type").getAsString());
        }

        long call(String name, String body) throws Exception {
            int i = ++id;
            byte[] line = ("{\"type\":\"request\",\"id\":" + i + ",\"name\":\"" + name + "\",\"version\":\"5.0\",\"body\":"
                    + (body == null ? "null" : body) + "}\n").getBytes(StandardCharsets.UTF_8);
            long t0 = System.nanoTime();
            in.write(line);
            in.flush();
            JsonObject r = JsonParser.parseString(out.readLine()).getAsJsonObject();
            long t1 = System.nanoTime();
            assertEquals(i, r.get("id").getAsInt());
            assertEquals(200, r.get("code").getAsInt());
            return t1 - t0;
        }

        @Override
        public void close() throws Exception {
            in.close();
            p.waitFor(10, TimeUnit.SECONDS);
            p.destroyForcibly();
        }
    }

    static long viaJar(GoPlugin plugin, String name, String body) throws Exception {
        long t0 = System.nanoTime();
        GoPluginApiResponse r = PluginJar.handle(plugin, name, body);
        long t1 = System.nanoTime();
        assertEquals(200, r.responseCode(), r.responseBody());
        return t1 - t0;
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

    static String loadAverage() throws Exception {
        return Files.readString(Path.of("/proc/loadavg")).split(" ")[0];
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
