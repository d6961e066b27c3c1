package cd.go.contrib.elasticagent.ecs.jar;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The local AWS of every test (the same moto server the crate's tests use, from {@code MOTO_SERVER}
 * that scripts/test exports): started on a free loopback port, tasks kept RUNNING until stopped,
 * and ECS spoken to through its JSON API. Without {@code MOTO_SERVER} the tests fail, never skip.
 */
final class Moto implements AutoCloseable {

    static final String REGION = "us-east-1";
    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    private final Process process;
    private final int port;

    private Moto(Process process, int port) {
        this.process = process;
        this.port = port;
    }

    static Moto start() throws Exception {
        String server = System.getenv("MOTO_SERVER");
        if (server == null || server.isBlank() || !Files.isExecutable(Path.of(server))) {
            throw new IllegalStateException("MOTO_SERVER must name moto_server (export MOTO_SERVER=\"$(scripts/moto.sh)\"); it is " + server);
        }
        String last = "";
        for (int attempt = 0; attempt < 3; attempt++) {
            int port;
            try (ServerSocket s = new ServerSocket(0)) {
                port = s.getLocalPort();
            }
            Process p = new ProcessBuilder(server, "-H", "127.0.0.1", "-p", Integer.toString(port))
                    .redirectOutput(ProcessBuilder.Redirect.DISCARD)
                    .redirectError(ProcessBuilder.Redirect.DISCARD)
                    .start();
            Moto moto = new Moto(p, port);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (System.nanoTime() < deadline && p.isAlive()) {
                try {
                    if (moto.http("GET", "/moto-api/", null, Map.of()).statusCode() == 200) {
                        moto.http("POST", "/moto-api/state-manager/set-transition",
                                "{\"model_name\":\"ecs::task\",\"transition\":{\"progression\":\"manual\",\"times\":1000000000}}", Map.of());
                        return moto;
                    }
                } catch (IOException notYet) {
                    last = notYet.toString();
                }
                Thread.sleep(100);
            }
            last = "moto on port " + port + " did not answer (" + last + ")";
            moto.close();
        }
        throw new IllegalStateException("moto did not start: " + last);
    }

    String endpoint() {
        return "http://127.0.0.1:" + port;
    }

    /** What the binary needs to reach this moto. */
    Map<String, String> env() {
        return Map.of("AWS_ENDPOINT_URL", endpoint(), "AWS_ACCESS_KEY_ID", "testing", "AWS_SECRET_ACCESS_KEY", "testing",
                "AWS_REGION", REGION, "RUST_LOG", "info");
    }

    private HttpResponse<String> http(String method, String path, String body, Map<String, String> headers)
            throws IOException, InterruptedException {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(endpoint() + path)).timeout(Duration.ofSeconds(30))
                .method(method, body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body));
        headers.forEach(b::header);
        return HTTP.send(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    /** One ECS JSON API call; fails the test on an error answer. */
    JsonObject ecs(String action, String body) throws IOException, InterruptedException {
        HttpResponse<String> r = http("POST", "/", body, Map.of(
                "X-Amz-Target", "AmazonEC2ContainerServiceV20141113." + action,
                "Content-Type", "application/x-amz-json-1.1",
                "Authorization", "AWS4-HMAC-SHA256 Credential=testing/20260101/" + REGION
                        + "/ecs/aws4_request, SignedHeaders=host, Signature=x"));
        if (r.statusCode() != 200) {
            throw new IllegalStateException("ECS " + action + " answered " + r.statusCode() + ": " + r.body());
        }
        return JsonParser.parseString(r.body()).getAsJsonObject();
    }

    void createCluster(String name) throws IOException, InterruptedException {
        ecs("CreateCluster", "{\"clusterName\":\"" + name + "\"}");
    }

    /** Tasks of the cluster with the given desired status (RUNNING or STOPPED), with their tags. */
    List<JsonObject> tasks(String cluster, String desiredStatus) throws IOException, InterruptedException {
        JsonArray arns = ecs("ListTasks", "{\"cluster\":\"" + cluster + "\",\"desiredStatus\":\"" + desiredStatus + "\"}")
                .getAsJsonArray("taskArns");
        List<JsonObject> out = new ArrayList<>();
        if (arns.isEmpty()) {
            return out;
        }
        JsonObject req = new JsonObject();
        req.addProperty("cluster", cluster);
        req.add("tasks", arns);
        JsonArray include = new JsonArray();
        include.add("TAGS");
        req.add("include", include);
        for (JsonElement t : ecs("DescribeTasks", req.toString()).getAsJsonArray("tasks")) {
            JsonObject task = t.getAsJsonObject();
            String clusterArn = task.has("clusterArn") ? task.get("clusterArn").getAsString() : "";
            if (clusterArn.equals(cluster) || clusterArn.endsWith(":cluster/" + cluster)) {
                out.add(task);
            }
        }
        return out;
    }

    /** Tasks still meant to run and not STOPPED. */
    List<JsonObject> liveTasks(String cluster) throws IOException, InterruptedException {
        List<JsonObject> live = new ArrayList<>();
        for (JsonObject t : tasks(cluster, "RUNNING")) {
            if (!"STOPPED".equals(t.has("lastStatus") ? t.get("lastStatus").getAsString() : null)) {
                live.add(t);
            }
        }
        return live;
    }

    static String tag(JsonObject task, String key) {
        if (!task.has("tags")) {
            return null;
        }
        for (JsonElement e : task.getAsJsonArray("tags")) {
            JsonObject t = e.getAsJsonObject();
            if (key.equals(t.get("key").getAsString())) {
                return t.get("value").getAsString();
            }
        }
        return null;
    }

    @Override
    public void close() {
        process.destroy();
        try {
            if (!process.waitFor(10, TimeUnit.SECONDS)) {
                process.destroyForcibly();
                process.waitFor(5, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            process.destroyForcibly();
            Thread.currentThread().interrupt();
        }
    }
}
