package cd.go.contrib.elasticagent.ecs;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.google.gson.JsonPrimitive;
import com.thoughtworks.go.plugin.api.logging.Logger;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The stdio wire to one running binary ({@code docs/protocol.md}, "Framing"): writes request and
 * response lines to its stdin, and owns the reader thread on its stdout, the map of requests in
 * flight by id, and the hello. Many threads may send at once; each waits only for the answer with
 * its own id. Once the binary's stdout ends, every request still in flight fails with a 500 saying
 * why.
 *
 * <p>Never logs a body: only names, ids and sizes.
 */
final class WireConnection {

    /** What the owner hears from the reader thread. */
    interface Listener {
        /** A {@code go.processor.*} request from the binary; answer with {@link #respond}. */
        void onHostCall(WireConnection conn, JsonElement id, String name, String version, JsonElement body);

        /** The binary's stdout ended (it exited, or closed it): call {@link #close} with the reason. */
        void onEnd(WireConnection conn);
    }

    private record Pending(String name, long startedNanos, CompletableFuture<Reply> future) {
    }

    private static final Logger LOG = Logger.getLoggerFor(WireConnection.class);

    private final String label;
    private final InputStream stdout;
    private final OutputStream stdin;
    private final Listener listener;
    private final ReentrantLock writeLock = new ReentrantLock();
    private final Map<Long, Pending> pending = new ConcurrentHashMap<>();
    private final AtomicLong nextId = new AtomicLong();
    private final CompletableFuture<JsonObject> hello = new CompletableFuture<>();
    private final Thread reader;
    private volatile boolean closed;
    private volatile long lastLineNanos = System.nanoTime();

    WireConnection(String label, InputStream stdout, OutputStream stdin, Listener listener) {
        this.label = label;
        this.stdout = stdout;
        this.stdin = stdin;
        this.listener = listener;
        this.reader = new Thread(this::readLoop, "ecs-elastic-agent-stdout-" + label);
        this.reader.setDaemon(true);
    }

    void start() {
        reader.start();
    }

    /**
     * The hello line ({@code docs/protocol.md}, "Hello"); fails when the first line is something
     * else or never comes.
     */
    JsonObject awaitHello(Duration timeout) throws IOException, InterruptedException {
        try {
            return hello.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            throw new IOException("no hello line within " + timeout.toSeconds() + " s");
        } catch (ExecutionException e) {
            throw new IOException(e.getCause().getMessage());
        }
    }

    /** Sends one request and waits for its answer; a 500 when none comes within {@code timeout}. */
    Reply request(String name, String version, String bodyJson, Duration timeout) throws InterruptedException {
        long id = nextId.incrementAndGet();
        CompletableFuture<Reply> future = send(id, name, version, bodyJson);
        try {
            return future.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            pending.remove(id);
            LOG.warn("ecs-elastic-agent (" + label + ") did not answer " + name + " #" + id + " within "
                    + timeout.toSeconds() + " s");
            return Reply.internalError("ecs-elastic-agent did not answer " + name + " within " + timeout.toSeconds() + " s");
        } catch (ExecutionException e) {
            return Reply.internalError("ecs-elastic-agent failed to answer " + name);
        }
    }

    /** Sends one request without waiting (the liveness probe). */
    CompletableFuture<Reply> requestAsync(String name, String version, String bodyJson) {
        return send(nextId.incrementAndGet(), name, version, bodyJson);
    }

    private CompletableFuture<Reply> send(long id, String name, String version, String bodyJson) {
        Pending p = new Pending(name, System.nanoTime(), new CompletableFuture<>());
        pending.put(id, p);
        if (closed) {
            pending.remove(id);
            p.future.complete(Reply.internalError("ecs-elastic-agent is restarting; GoCD will ask again"));
            return p.future;
        }
        String line = "{\"type\":\"request\",\"id\":" + id + ",\"name\":" + new JsonPrimitive(name)
                + ",\"version\":" + new JsonPrimitive(version) + ",\"body\":" + bodyJson + "}";
        try {
            writeLine(line);
        } catch (IOException e) {
            pending.remove(id);
            p.future.complete(Reply.internalError("could not write to ecs-elastic-agent: " + e.getMessage()));
        }
        return p.future;
    }

    /** Answers a request of the binary's. Dropped when the binary is gone. */
    void respond(JsonElement id, Reply reply) {
        String line = "{\"type\":\"response\",\"id\":" + id + ",\"code\":" + reply.code() + ",\"body\":"
                + (reply.body() == null ? "null" : reply.body()) + "}";
        try {
            writeLine(line);
        } catch (IOException e) {
            LOG.debug("ecs-elastic-agent (" + label + ") is gone; dropped the answer to its request " + id);
        }
    }

    private void writeLine(String line) throws IOException {
        byte[] bytes = (line + "\n").getBytes(StandardCharsets.UTF_8);
        writeLock.lock();
        try {
            if (closed) {
                throw new IOException("the connection is closed");
            }
            stdin.write(bytes);
            stdin.flush();
        } finally {
            writeLock.unlock();
        }
    }

    /**
     * EOF on the binary's stdin: it finishes what is in flight and exits ({@code docs/protocol.md},
     * "Shutdown"). Gives up after a second when a writer is stuck on a binary that reads no more
     * (SIGTERM follows anyway).
     */
    void closeInput() {
        try {
            if (!writeLock.tryLock(1, TimeUnit.SECONDS)) {
                return;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return;
        }
        try {
            stdin.close();
        } catch (IOException ignored) {
            // already gone
        } finally {
            writeLock.unlock();
        }
    }

    /**
     * Marks the connection dead and fails every request in flight with a 500 naming {@code what}
     * (for example "exited (exit code 137)"). Returns how many failed.
     */
    int close(String what) {
        closed = true;
        hello.completeExceptionally(new IOException("ecs-elastic-agent " + what + " before its hello line"));
        int failed = 0;
        for (Long id : pending.keySet()) {
            Pending p = pending.remove(id);
            if (p != null) {
                failed++;
                p.future.complete(Reply.internalError("ecs-elastic-agent " + what + " before answering " + p.name
                        + "; the plugin restarts it, and GoCD will ask again"));
            }
        }
        closeInput();
        return failed;
    }

    boolean isClosed() {
        return closed;
    }

    int inFlight() {
        return pending.size();
    }

    long lastLineNanos() {
        return lastLineNanos;
    }

    /** When the oldest request in flight was sent ({@code System.nanoTime()}), or now when none is. */
    long oldestPendingNanos() {
        long now = System.nanoTime();
        long oldest = now;
        for (Pending p : pending.values()) {
            if (p.startedNanos - oldest < 0) {
                oldest = p.startedNanos;
            }
        }
        return oldest;
    }

    private void readLoop() {
        boolean first = true;
        try (BufferedReader in = new BufferedReader(new InputStreamReader(stdout, StandardCharsets.UTF_8), 1 << 16)) {
            String line;
            while ((line = in.readLine()) != null) {
                lastLineNanos = System.nanoTime();
                JsonObject o;
                try {
                    JsonElement e = JsonParser.parseString(line);
                    o = e.getAsJsonObject();
                } catch (RuntimeException e) {
                    LOG.warn("ecs-elastic-agent (" + label + ") wrote a line of " + line.length()
                            + " characters on stdout that is not a JSON object; ignored");
                    continue;
                }
                String type = string(o, "type");
                if (first) {
                    first = false;
                    if ("hello".equals(type)) {
                        hello.complete(o);
                        continue;
                    }
                    hello.completeExceptionally(new IOException("the first line was of type " + type + ", not a hello"));
                }
                if ("response".equals(type)) {
                    onResponse(o);
                } else if ("request".equals(type)) {
                    JsonElement body = o.get("body");
                    listener.onHostCall(this, o.get("id"), string(o, "name"), string(o, "version"), body);
                } else {
                    LOG.warn("ecs-elastic-agent (" + label + ") wrote a line of type " + type + "; ignored");
                }
            }
        } catch (IOException | RuntimeException e) {
            LOG.debug("reading ecs-elastic-agent's stdout (" + label + ") ended: " + e);
        }
        listener.onEnd(this);
    }

    private void onResponse(JsonObject o) {
        JsonElement idElement = o.get("id");
        Long id = null;
        try {
            if (idElement != null && idElement.isJsonPrimitive()) {
                id = idElement.getAsLong();
            }
        } catch (NumberFormatException ignored) {
            // not one of ours
        }
        Pending p = id == null ? null : pending.remove(id);
        if (p == null) {
            LOG.warn("ecs-elastic-agent (" + label + ") answered id " + idElement + ", which is not in flight"
                    + (o.has("code") ? " (code " + o.get("code") + ")" : ""));
            return;
        }
        JsonElement code = o.get("code");
        JsonElement body = o.get("body");
        if (code == null || !code.isJsonPrimitive()) {
            p.future.complete(Reply.internalError("ecs-elastic-agent answered " + p.name + " without a code"));
            return;
        }
        p.future.complete(new Reply(code.getAsInt(), body == null || body.isJsonNull() ? null : body.toString()));
    }

    private static String string(JsonObject o, String key) {
        JsonElement e = o.get(key);
        return e != null && e.isJsonPrimitive() ? e.getAsString() : null;
    }
}
