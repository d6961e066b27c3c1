package cd.go.contrib.elasticagent.ecs.jar;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.thoughtworks.go.plugin.api.GoApplicationAccessor;
import com.thoughtworks.go.plugin.api.request.GoApiRequest;
import com.thoughtworks.go.plugin.api.response.DefaultGoApiResponse;
import com.thoughtworks.go.plugin.api.response.GoApiResponse;

import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * GoCD's side of the plugin's {@code go.processor.*} calls ({@code docs/protocol.md}, "Calls the
 * plugin makes"), as the server's processors answer them: server info, the elastic agents GoCD
 * knows (registered by the test), disable/delete of agents, server-health messages, console log
 * lines, plugin settings. Records every call; {@link #hold} makes one kind of call wait until
 * released.
 */
final class TestAccessor extends GoApplicationAccessor {

    record Call(String api, String version, String body, String pluginExtension) {
    }

    static final String SERVER_INFO =
            "{\"server_id\":\"test-server\",\"site_url\":\"http://localhost:8153/go\",\"secure_site_url\":\"https://localhost/go\"}";

    final List<Call> calls = new CopyOnWriteArrayList<>();
    /** agent id -> agent object (agent_state, build_state, config_state), as GoCD lists them. */
    final Map<String, JsonObject> agents = new ConcurrentHashMap<>();
    private volatile String heldApi;
    private volatile CountDownLatch held = new CountDownLatch(0);
    private final CountDownLatch heldArrived = new CountDownLatch(1);

    @Override
    public GoApiResponse submit(GoApiRequest request) {
        String api = request.api();
        calls.add(new Call(api, request.apiVersion(), request.requestBody(),
                request.pluginIdentifier() == null ? null : request.pluginIdentifier().getExtension()));
        if (api.equals(heldApi)) {
            heldArrived.countDown();
            try {
                held.await(60, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        switch (api) {
            case "go.processor.server-info.get":
                return DefaultGoApiResponse.success(SERVER_INFO);
            case "go.processor.elastic-agents.list-agents": {
                JsonArray a = new JsonArray();
                agents.values().forEach(a::add);
                return DefaultGoApiResponse.success(a.toString());
            }
            case "go.processor.elastic-agents.disable-agents":
                forEachAgentId(request.requestBody(), id -> {
                    JsonObject agent = agents.get(id);
                    if (agent != null) {
                        agent.addProperty("config_state", "Disabled");
                    }
                });
                return new DefaultGoApiResponse(200);
            case "go.processor.elastic-agents.delete-agents":
                forEachAgentId(request.requestBody(), agents::remove);
                return new DefaultGoApiResponse(200);
            case "go.processor.server-health.add-messages":
            case "go.processor.console-log.append":
                return new DefaultGoApiResponse(200);
            case "go.processor.plugin-settings.get":
                return DefaultGoApiResponse.success(null);
            default:
                return new DefaultGoApiResponse(404);
        }
    }

    /** GoCD registers an elastic agent (idle, enabled). */
    void register(String agentId) {
        JsonObject a = new JsonObject();
        a.addProperty("agent_id", agentId);
        a.addProperty("agent_state", "Idle");
        a.addProperty("build_state", "Idle");
        a.addProperty("config_state", "Enabled");
        agents.put(agentId, a);
    }

    /** From now on, calls of {@code api} wait until {@link #release}. */
    void hold(String api) {
        held = new CountDownLatch(1);
        heldApi = api;
    }

    boolean awaitHeldCall(long seconds) throws InterruptedException {
        return heldArrived.await(seconds, TimeUnit.SECONDS);
    }

    void release() {
        heldApi = null;
        held.countDown();
    }

    List<String> apis() {
        return calls.stream().map(Call::api).toList();
    }

    private static void forEachAgentId(String body, java.util.function.Consumer<String> f) {
        if (body == null) {
            return;
        }
        JsonElement e = JsonParser.parseString(body);
        if (e.isJsonArray()) {
            for (JsonElement a : e.getAsJsonArray()) {
                if (a.isJsonObject() && a.getAsJsonObject().has("agent_id")) {
                    f.accept(a.getAsJsonObject().get("agent_id").getAsString());
                }
            }
        }
    }
}
