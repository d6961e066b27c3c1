package cd.go.contrib.elasticagent.ecs.jar;

import com.google.gson.JsonObject;
import com.thoughtworks.go.plugin.api.response.GoPluginApiResponse;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * One job end to end through the jar against moto: create-agent starts an ECS task,
 * should-assign-work answers true for its agent (and false for another job), job-completion stops
 * the task and deletes the agent in GoCD. Nothing secret reaches GoCD's log.
 */
class EndToEndIT {

    static final String CLUSTER = "gocd-jar";

    @Test
    void oneJobThroughTheJar() throws Exception {
        int mark = CapturedLog.get().size();
        String key = "e2e-auto-register-key-5ad1c0de";
        try (Harness h = new Harness()) {
            h.moto.createCluster(CLUSTER);
            assertEquals(200, h.handle("cd.go.elastic-agent.migrate-config",
                    "{\"plugin_settings\":{},\"cluster_profiles\":[],\"elastic_agent_profiles\":[]}").responseCode());

            GoPluginApiResponse created = h.handle("cd.go.elastic-agent.create-agent", Bodies.createAgent(CLUSTER, 4242, key));
            assertEquals(200, created.responseCode(), created.responseBody());

            JsonObject task = awaitOneLiveTask(h.moto);
            String agentId = Moto.tag(task, "gocd:elastic-agent-id");
            assertNotNull(agentId, "the task carries its agent id: " + task);
            h.accessor.register(agentId);

            GoPluginApiResponse other = h.handle("cd.go.elastic-agent.should-assign-work", Bodies.shouldAssignWork(CLUSTER, agentId, 4243));
            assertEquals(200, other.responseCode());
            assertEquals("false", other.responseBody(), "not another job's agent");
            GoPluginApiResponse assign = h.handle("cd.go.elastic-agent.should-assign-work", Bodies.shouldAssignWork(CLUSTER, agentId, 4242));
            assertEquals(200, assign.responseCode());
            assertEquals("true", assign.responseBody(), "the agent started for job 4242 gets it");

            GoPluginApiResponse done = h.handle("cd.go.elastic-agent.job-completion", Bodies.jobCompletion(CLUSTER, agentId, 4242));
            assertEquals(200, done.responseCode(), done.responseBody());
            awaitNoLiveTask(h.moto);
            assertTrue(h.accessor.apis().contains("go.processor.elastic-agents.disable-agents"), h.accessor.apis().toString());
            assertTrue(h.accessor.apis().contains("go.processor.elastic-agents.delete-agents"), h.accessor.apis().toString());
            assertFalse(h.accessor.agents.containsKey(agentId), "the agent is deleted in GoCD");

            assertEquals(200, h.handle("cd.go.elastic-agent.server-ping", Bodies.serverPing(CLUSTER)).responseCode());
        }
        List<CapturedLog.Line> lines = CapturedLog.get().since(mark);
        assertTrue(lines.stream().noneMatch(l -> l.message().contains(key)), "the auto-register key is in GoCD's log");
        assertTrue(lines.stream().anyMatch(l -> l.message().startsWith("ecs-elastic-agent[")), "the binary's stderr reaches the log");
        assertTrue(lines.stream().allMatch(l -> l.pluginId().equals("cd.go.contrib.elastic-agent.ecs")), "logged as the plugin");
        FaultsIT.assertNoBinaryLeft();
    }

    static JsonObject awaitOneLiveTask(Moto moto) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline) {
            List<JsonObject> live = moto.liveTasks(CLUSTER);
            if (!live.isEmpty()) {
                assertEquals(1, live.size(), "one task for one job: " + live);
                return live.get(0);
            }
            Thread.sleep(200);
        }
        throw new AssertionError("no task started in " + CLUSTER + " within 30 s");
    }

    static void awaitNoLiveTask(Moto moto) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline) {
            if (moto.liveTasks(CLUSTER).isEmpty()) {
                return;
            }
            Thread.sleep(200);
        }
        throw new AssertionError("tasks still live after job-completion: " + moto.liveTasks(CLUSTER));
    }
}
