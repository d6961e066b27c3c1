package cd.go.contrib.elasticagent.ecs.jar;

import com.google.gson.JsonElement;
import com.google.gson.JsonParser;
import com.thoughtworks.go.plugin.api.GoPlugin;
import com.thoughtworks.go.plugin.api.response.GoPluginApiResponse;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * One test world: a fresh moto, the jar loaded through a fresh class loader, one plugin instance
 * started against moto with a {@link TestAccessor} as GoCD. Closing unloads the plugin (the binary
 * stops) and stops moto.
 */
final class Harness implements AutoCloseable {

    final Moto moto;
    final PluginJar jar;
    final TestAccessor accessor = new TestAccessor();
    final GoPlugin plugin;

    Harness(Map<String, String> tuningMillis) throws Exception {
        CapturedLog.get();
        moto = Moto.start();
        try {
            jar = PluginJar.load();
            plugin = jar.start(moto.env(), tuningMillis, accessor);
        } catch (Exception | Error e) {
            moto.close();
            throw e;
        }
    }

    Harness() throws Exception {
        this(Map.of());
    }

    GoPluginApiResponse handle(String name, String body) throws Exception {
        return PluginJar.handle(plugin, name, body);
    }

    static JsonElement json(GoPluginApiResponse r) {
        return JsonParser.parseString(r.responseBody());
    }

    long binaryPid() throws ReflectiveOperationException {
        return PluginJar.binaryPid(plugin);
    }

    /** The ecs-elastic-agent processes below this JVM. */
    static List<ProcessHandle> binaries() {
        return ProcessHandle.current().descendants()
                .filter(p -> p.info().command().map(c -> c.endsWith("/ecs-elastic-agent")).orElse(false))
                .filter(ProcessHandle::isAlive)
                .toList();
    }

    static Optional<ProcessHandle> process(long pid) {
        return ProcessHandle.of(pid);
    }

    /** Environment for a binary that must not reach any AWS (tests without moto). */
    static Map<String, String> noAws() {
        Map<String, String> env = new HashMap<>();
        env.put("AWS_ENDPOINT_URL", "http://127.0.0.1:9");
        env.put("AWS_ACCESS_KEY_ID", "testing");
        env.put("AWS_SECRET_ACCESS_KEY", "testing");
        env.put("AWS_REGION", Moto.REGION);
        return env;
    }

    @Override
    public void close() throws Exception {
        try {
            PluginJar.unload(plugin);
        } finally {
            moto.close();
        }
    }
}
