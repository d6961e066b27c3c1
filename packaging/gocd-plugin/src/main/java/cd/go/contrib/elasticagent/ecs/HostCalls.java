package cd.go.contrib.elasticagent.ecs;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.google.gson.JsonPrimitive;
import com.thoughtworks.go.plugin.api.GoApplicationAccessor;
import com.thoughtworks.go.plugin.api.GoPluginIdentifier;
import com.thoughtworks.go.plugin.api.logging.Logger;
import com.thoughtworks.go.plugin.api.request.DefaultGoApiRequest;
import com.thoughtworks.go.plugin.api.response.GoApiResponse;

import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Relays the binary's {@code go.processor.*} requests to GoCD through the
 * {@link GoApplicationAccessor}, each on a thread of its own (GoCD may take its time, and the
 * binary keeps working meanwhile), and writes GoCD's answer back as a response line. The body
 * travels as JSON both ways; a non-JSON error text from GoCD becomes {@code {"message": text}}.
 */
final class HostCalls {

    private static final Logger LOG = Logger.getLoggerFor(HostCalls.class);
    private static final int MAX_ERROR_TEXT = 2000;

    private final GoApplicationAccessor accessor;
    private final GoPluginIdentifier identifier;
    private final ExecutorService threads;

    HostCalls(GoApplicationAccessor accessor, GoPluginIdentifier identifier) {
        this.accessor = accessor;
        this.identifier = identifier;
        AtomicInteger n = new AtomicInteger();
        this.threads = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "ecs-elastic-agent-host-call-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        });
    }

    /** Submits the call to GoCD and answers the binary, asynchronously. */
    void relay(WireConnection conn, JsonElement id, String name, String version, JsonElement body) {
        try {
            threads.execute(() -> conn.respond(id, submit(name, version, body)));
        } catch (RejectedExecutionException e) {
            conn.respond(id, Reply.internalError("the plugin is shutting down"));
        }
    }

    Reply submit(String name, String version, JsonElement body) {
        if (name == null) {
            return Reply.error(Reply.BAD_REQUEST, "a request without a name");
        }
        DefaultGoApiRequest request = new DefaultGoApiRequest(name, version == null ? "1.0" : version, identifier);
        if (body != null && !body.isJsonNull()) {
            request.setRequestBody(body.toString());
        }
        GoApiResponse response;
        try {
            response = accessor.submit(request);
        } catch (RuntimeException e) {
            LOG.warn("GoCD failed to process " + name + " " + version + ": " + e.getClass().getSimpleName());
            return Reply.internalError("GoCD failed to process " + name + ": " + clip(String.valueOf(e.getMessage())));
        }
        if (response == null) {
            return Reply.internalError("GoCD sent no response to " + name);
        }
        return new Reply(response.responseCode(), bodyJson(response.responseCode(), response.responseBody()));
    }

    /** GoCD's response body as a JSON text for the wire (null for none). */
    static String bodyJson(int code, String text) {
        if (text == null || text.isBlank()) {
            return null;
        }
        JsonElement parsed = null;
        try {
            parsed = JsonParser.parseString(text);
        } catch (RuntimeException notJson) {
            // GoCD's processors answer some errors in plain text
        }
        if (code == 200) {
            return parsed != null ? parsed.toString() : new JsonPrimitive(text).toString();
        }
        if (parsed != null && parsed.isJsonObject() && parsed.getAsJsonObject().has("message")) {
            return parsed.toString();
        }
        JsonObject o = new JsonObject();
        o.addProperty("message", clip(text));
        return o.toString();
    }

    private static String clip(String s) {
        return s.length() <= MAX_ERROR_TEXT ? s : s.substring(0, MAX_ERROR_TEXT) + "...";
    }

    void shutdown() {
        threads.shutdownNow();
    }
}
