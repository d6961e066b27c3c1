package cd.go.contrib.elasticagent.ecs.jar;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

/**
 * Request bodies as GoCD builds them ({@code docs/protocol.md}, "The v5 messages"): the fixed
 * examples of {@code gocd-v5-requests.json}, and the ones of a job against moto: a Fargate cluster
 * profile (ClusterName, Region) and a small Fargate elastic profile, as the crate's end-to-end
 * tests use.
 */
final class Bodies {

    static final String IMAGE = "gocd/gocd-agent-alpine-3.19:v24.1.0";

    private Bodies() {
    }

    /** [{"name", "source", "body"}] from gocd-v5-requests.json. */
    static JsonArray gocdExamples() throws IOException {
        try (InputStream in = Bodies.class.getResourceAsStream("/gocd-v5-requests.json")) {
            return JsonParser.parseReader(new InputStreamReader(in, StandardCharsets.UTF_8)).getAsJsonObject()
                    .getAsJsonArray("requests");
        }
    }

    static JsonObject clusterProfile(String cluster) {
        JsonObject o = new JsonObject();
        o.addProperty("ClusterName", cluster);
        o.addProperty("Region", Moto.REGION);
        return o;
    }

    static JsonObject elasticProfile() {
        JsonObject o = new JsonObject();
        o.addProperty("Image", IMAGE);
        o.addProperty("Cpu", "512");
        o.addProperty("Memory", "1024");
        return o;
    }

    static JsonObject job(long jobId) {
        JsonObject o = new JsonObject();
        o.addProperty("pipeline_name", "jar-pipeline");
        o.addProperty("pipeline_counter", 1);
        o.addProperty("pipeline_label", "1");
        o.addProperty("stage_name", "build");
        o.addProperty("stage_counter", "1");
        o.addProperty("job_name", "compile");
        o.addProperty("job_id", jobId);
        return o;
    }

    static String createAgent(String cluster, long jobId, String autoRegisterKey) {
        JsonObject o = new JsonObject();
        o.addProperty("auto_register_key", autoRegisterKey);
        o.add("elastic_agent_profile_properties", elasticProfile());
        o.add("cluster_profile_properties", clusterProfile(cluster));
        o.add("job_identifier", job(jobId));
        return o.toString();
    }

    static JsonObject agent(String agentId, String agentState, String buildState) {
        JsonObject a = new JsonObject();
        a.addProperty("agent_id", agentId);
        a.addProperty("agent_state", agentState);
        a.addProperty("build_state", buildState);
        a.addProperty("config_state", "Enabled");
        return a;
    }

    static String shouldAssignWork(String cluster, String agentId, long jobId) {
        JsonObject o = new JsonObject();
        o.add("agent", agent(agentId, "Idle", "Idle"));
        o.add("job_identifier", job(jobId));
        o.add("elastic_agent_profile_properties", elasticProfile());
        o.add("cluster_profile_properties", clusterProfile(cluster));
        return o.toString();
    }

    static String jobCompletion(String cluster, String agentId, long jobId) {
        JsonObject o = new JsonObject();
        o.addProperty("elastic_agent_id", agentId);
        o.add("job_identifier", job(jobId));
        o.add("elastic_agent_profile_properties", elasticProfile());
        o.add("cluster_profile_properties", clusterProfile(cluster));
        return o.toString();
    }

    static String serverPing(String cluster) {
        JsonObject o = new JsonObject();
        JsonArray all = new JsonArray();
        all.add(clusterProfile(cluster));
        o.add("all_cluster_profile_properties", all);
        return o.toString();
    }

    static String text(JsonElement body) {
        return body == null || body.isJsonNull() ? null : body.toString();
    }
}
