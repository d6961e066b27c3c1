package cd.go.contrib.elasticagent.ecs.jar;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.thoughtworks.go.plugin.api.response.GoPluginApiResponse;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.util.Base64;
import java.util.LinkedHashSet;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Every elastic-agent v5 request and the two plugin-settings calls, with GoCD's own bodies
 * ({@code docs/protocol.md}, "The v5 messages"; in gocd-v5-requests.json), through
 * {@code handle()} of the jar: each is answered, with what GoCD's converters need of a 200, or
 * with {@code {"message"}} otherwise.
 */
class V5RequestsIT {

    static final Set<String> V5 = Set.of("get-icon", "get-capabilities", "get-elastic-agent-profile-metadata",
            "get-elastic-agent-profile-view", "validate-elastic-agent-profile", "get-cluster-profile-metadata",
            "get-cluster-profile-view", "validate-cluster-profile", "create-agent", "server-ping", "should-assign-work",
            "job-completion", "plugin-status-report", "agent-status-report", "cluster-status-report", "migrate-config",
            "cluster-profile-changed");

    static final Set<String> ON_A_CLUSTER = Set.of("create-agent", "job-completion", "agent-status-report", "cluster-status-report");

    static Harness h;

    @BeforeAll
    static void start() throws Exception {
        h = new Harness();
    }

    @AfterAll
    static void stop() throws Exception {
        h.close();
    }

    @Test
    void everyRequestWithGocdsOwnBodiesIsAnswered() throws Exception {
        JsonArray examples = Bodies.gocdExamples();
        Set<String> seen = new LinkedHashSet<>();
        for (JsonElement e : examples) {
            JsonObject ex = e.getAsJsonObject();
            String name = ex.get("name").getAsString();
            String source = ex.get("source").getAsString();
            String body = Bodies.text(ex.get("body"));
            GoPluginApiResponse r = h.handle(name, body);
            String what = name + " (" + source + ") answered " + r.responseCode() + ": " + r.responseBody();
            seen.add(name.replaceFirst("^cd\\.go\\.elastic-agent\\.", ""));
            if (r.responseCode() != 200) {
                // GoCD's examples carry other plugins' cluster profiles (DockerURI, Image, ...):
                // the requests that act on a cluster profile refuse them, saying why.
                assertTrue(ON_A_CLUSTER.contains(name.replaceFirst("^cd\\.go\\.elastic-agent\\.", "")), what);
                assertEquals(500, r.responseCode(), what);
                assertNotNull(r.responseBody(), what);
                JsonObject err = Harness.json(r).getAsJsonObject();
                assertFalse(err.get("message").getAsString().isBlank(), what);
                continue;
            }
            checkSuccess(name, r, what);
        }
        for (String v5 : V5) {
            assertTrue(seen.contains(v5), "no example for " + v5);
        }
        assertTrue(seen.contains("go.plugin-settings.get-configuration") && seen.contains("go.plugin-settings.get-view"));
    }

    /** What GoCD's converters read of a 200 ({@code docs/protocol.md}, each message's answer). */
    private static void checkSuccess(String name, GoPluginApiResponse r, String what) {
        String n = name.replaceFirst("^cd\\.go\\.elastic-agent\\.", "");
        switch (n) {
            case "get-icon" -> {
                JsonObject o = Harness.json(r).getAsJsonObject();
                assertTrue(o.get("content_type").getAsString().startsWith("image/"), what);
                assertTrue(Base64.getDecoder().decode(o.get("data").getAsString()).length > 0, what);
            }
            case "get-capabilities" -> {
                JsonObject o = Harness.json(r).getAsJsonObject();
                for (String k : new String[]{"supports_plugin_status_report", "supports_agent_status_report", "supports_cluster_status_report"}) {
                    assertTrue(o.get(k).getAsBoolean(), what);
                }
            }
            case "get-elastic-agent-profile-metadata", "get-cluster-profile-metadata" -> {
                JsonArray a = Harness.json(r).getAsJsonArray();
                assertFalse(a.isEmpty(), what);
                for (JsonElement k : a) {
                    assertFalse(k.getAsJsonObject().get("key").getAsString().isBlank(), what);
                    assertTrue(k.getAsJsonObject().getAsJsonObject("metadata").has("secure"), what);
                }
            }
            case "get-elastic-agent-profile-view", "get-cluster-profile-view" ->
                    assertFalse(Harness.json(r).getAsJsonObject().get("template").getAsString().isBlank(), what);
            case "validate-elastic-agent-profile", "validate-cluster-profile" -> {
                JsonArray errors = Harness.json(r).getAsJsonArray();
                for (JsonElement err : errors) {
                    assertTrue(err.getAsJsonObject().has("message"), what);
                }
            }
            case "should-assign-work" -> assertEquals("false", r.responseBody(), what + " (an agent this plugin never started)");
            case "plugin-status-report", "agent-status-report", "cluster-status-report" ->
                    assertFalse(Harness.json(r).getAsJsonObject().get("view").getAsString().isBlank(), what);
            case "migrate-config" -> {
                JsonObject o = Harness.json(r).getAsJsonObject();
                assertTrue(o.get("cluster_profiles").isJsonArray() && o.get("elastic_agent_profiles").isJsonArray(), what);
            }
            default -> {
                // create-agent, server-ping, job-completion, cluster-profile-changed, plugin settings: body ignored or free
            }
        }
    }

    @Test
    void statusReportsOfAClusterProfileOfThisPlugin() throws Exception {
        h.moto.createCluster("reports");
        JsonObject cluster = new JsonObject();
        cluster.add("cluster_profile_properties", Bodies.clusterProfile("reports"));
        GoPluginApiResponse report = h.handle("cd.go.elastic-agent.cluster-status-report", cluster.toString());
        assertEquals(200, report.responseCode(), report.responseBody());
        assertFalse(Harness.json(report).getAsJsonObject().get("view").getAsString().isBlank());

        JsonObject agent = new JsonObject();
        agent.add("cluster_profile_properties", Bodies.clusterProfile("reports"));
        agent.addProperty("elastic_agent_id", "no-such-agent");
        agent.add("job_identifier", Bodies.job(77));
        GoPluginApiResponse agentReport = h.handle("cd.go.elastic-agent.agent-status-report", agent.toString());
        assertEquals(200, agentReport.responseCode(), agentReport.responseBody());
        assertFalse(Harness.json(agentReport).getAsJsonObject().get("view").getAsString().isBlank());

        JsonObject done = JsonParser.parseString(Bodies.jobCompletion("reports", "no-such-agent", 77)).getAsJsonObject();
        assertEquals(200, h.handle("cd.go.elastic-agent.job-completion", done.toString()).responseCode());
    }

    @Test
    void validationAnswersTheProfilesErrors() throws Exception {
        JsonObject bad = Bodies.elasticProfile();
        bad.addProperty("Cpu", "lots");
        GoPluginApiResponse r = h.handle("cd.go.elastic-agent.validate-elastic-agent-profile", bad.toString());
        assertEquals(200, r.responseCode());
        JsonArray errors = Harness.json(r).getAsJsonArray();
        assertTrue(errors.toString().contains("Cpu"), errors.toString());

        GoPluginApiResponse ok = h.handle("cd.go.elastic-agent.validate-elastic-agent-profile", Bodies.elasticProfile().toString());
        assertEquals("[]", ok.responseBody());
    }
}
