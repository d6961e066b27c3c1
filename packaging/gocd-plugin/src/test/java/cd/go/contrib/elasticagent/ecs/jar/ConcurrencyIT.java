package cd.go.contrib.elasticagent.ecs.jar;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import com.thoughtworks.go.plugin.api.response.GoPluginApiResponse;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * 200 GoCD threads in {@code handle()} at once, each with a body of its own: every one gets the
 * answer to its own body (the same answer the binary gives to that body alone).
 */
class ConcurrencyIT {

    static final int CALLS = 200;

    /** migrate-config of a config with one cluster profile and one elastic profile named after {@code i}. */
    static String migrate(int i) {
        JsonObject cluster = new JsonObject();
        cluster.addProperty("id", "cluster-" + i);
        cluster.addProperty("plugin_id", "cd.go.contrib.elastic-agent.ecs");
        cluster.add("properties", Bodies.clusterProfile("cluster-" + i));
        JsonObject elastic = new JsonObject();
        elastic.addProperty("id", "profile-" + i);
        elastic.addProperty("plugin_id", "cd.go.contrib.elastic-agent.ecs");
        elastic.addProperty("cluster_profile_id", "cluster-" + i);
        elastic.add("properties", Bodies.elasticProfile());
        JsonObject o = new JsonObject();
        o.add("plugin_settings", new JsonObject());
        JsonArray cs = new JsonArray();
        cs.add(cluster);
        JsonArray es = new JsonArray();
        es.add(elastic);
        o.add("cluster_profiles", cs);
        o.add("elastic_agent_profiles", es);
        return o.toString();
    }

    /** An elastic profile whose Cpu is wrong in its own way. */
    static String validate(int i) {
        JsonObject p = Bodies.elasticProfile();
        p.addProperty("Cpu", "cpu-" + i);
        return p.toString();
    }

    @Test
    void twoHundredConcurrentCallsEachGetTheirOwnAnswer() throws Exception {
        try (Harness h = new Harness()) {
            List<String[]> requests = new ArrayList<>();
            for (int i = 0; i < CALLS; i++) {
                requests.add(i % 2 == 0
                        ? new String[]{"cd.go.elastic-agent.migrate-config", migrate(i), "cluster-" + i}
                        : new String[]{"cd.go.elastic-agent.validate-elastic-agent-profile", validate(i), "cpu-" + i});
            }
            // The answer each body gets alone.
            List<String> alone = new ArrayList<>();
            for (String[] r : requests) {
                GoPluginApiResponse resp = h.handle(r[0], r[1]);
                assertEquals(200, resp.responseCode(), resp.responseBody());
                assertTrue(resp.responseBody().contains(r[2]), r[0] + " answered without " + r[2] + ": " + resp.responseBody());
                alone.add(resp.responseBody());
            }

            ExecutorService pool = Executors.newFixedThreadPool(CALLS);
            CountDownLatch go = new CountDownLatch(1);
            List<Future<GoPluginApiResponse>> futures = new ArrayList<>();
            for (String[] r : requests) {
                futures.add(pool.submit(() -> {
                    go.await();
                    return h.handle(r[0], r[1]);
                }));
            }
            long t0 = System.nanoTime();
            go.countDown();
            for (int i = 0; i < CALLS; i++) {
                GoPluginApiResponse resp = futures.get(i).get(60, TimeUnit.SECONDS);
                assertEquals(200, resp.responseCode(), resp.responseBody());
                assertEquals(alone.get(i), resp.responseBody(), "call " + i + " got another call's answer");
            }
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            pool.shutdown();
            System.out.println(CALLS + " concurrent calls answered in " + ms + " ms");
        }
    }
}
