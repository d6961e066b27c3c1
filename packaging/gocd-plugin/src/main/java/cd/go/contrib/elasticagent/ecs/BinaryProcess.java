package cd.go.contrib.elasticagent.ecs;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.thoughtworks.go.plugin.api.logging.Logger;

import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * The life of the binary: starts {@code ecs-elastic-agent serve} (with the operator's
 * {@link BinaryOptions}), checks its hello, sends it GoCD's
 * requests, and restarts it with backoff when it exits or stops answering (it adopts its tasks from
 * AWS, so nothing is lost; requests in flight fail with a 500 and GoCD asks again). A binary that
 * stays silent while requests wait gets a cheap probe request; an unanswered probe means it hangs,
 * and it is killed. At shutdown the binary gets EOF and SIGTERM and is waited for.
 */
final class BinaryProcess implements WireConnection.Listener {

    static final String PLUGIN_ID = "cd.go.contrib.elastic-agent.ecs";
    static final String EXTENSION = "elastic-agent";
    static final String EXTENSION_VERSION = "5.0";
    private static final String PROBE = "cd.go.elastic-agent.get-capabilities";

    private static final Logger LOG = Logger.getLoggerFor(BinaryProcess.class);

    /** One started binary. */
    private static final class Run {
        final Process process;
        final WireConnection conn;
        final long startedNanos = System.nanoTime();
        volatile String killedBecause;
        CompletableFuture<Reply> probe;
        long probeSentNanos;

        Run(Process process, WireConnection conn) {
            this.process = process;
            this.conn = conn;
        }
    }

    private final BinaryLocator locator;
    private final Map<String, String> extraEnv;
    private final BinaryOptions options;
    private final HostCalls hostCalls;
    private final Tuning tuning;
    private final ScheduledExecutorService supervisor;

    private final Object lock = new Object();
    private Run current; // guarded by lock; null while no binary serves
    private boolean stopping; // guarded by lock
    private volatile String down = "it has not started yet";
    private volatile String fatal;
    private Duration backoff; // guarded by lock
    private int restarts; // guarded by lock

    BinaryProcess(BinaryLocator locator, BinaryOptions options, Map<String, String> extraEnv, HostCalls hostCalls,
                  Tuning tuning) {
        this.locator = locator;
        this.options = options;
        this.extraEnv = extraEnv;
        this.hostCalls = hostCalls;
        this.tuning = tuning;
        this.backoff = tuning.backoffMin();
        this.supervisor = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "ecs-elastic-agent-supervisor");
            t.setDaemon(true);
            return t;
        });
    }

    /** Starts the binary and waits for its hello; on failure, keeps trying in the background. */
    void start() {
        launch();
        long tick = Math.max(50, Math.min(500, tuning.probeAfter().toMillis() / 2));
        supervisor.scheduleWithFixedDelay(this::watch, tick, tick, TimeUnit.MILLISECONDS);
    }

    /** One request to the binary: its answer, or a 500 saying why there is none. */
    Reply call(String name, String version, String bodyJson) {
        try {
            Run run = awaitRun(tuning.startWait());
            if (run == null) {
                String why = fatal != null ? fatal : down;
                return Reply.internalError("ecs-elastic-agent is not running (" + why + "); GoCD will ask again");
            }
            return run.conn.request(name, version, bodyJson, tuning.requestTimeout());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Reply.internalError("interrupted while waiting for ecs-elastic-agent to answer " + name);
        }
    }

    /** How many times the binary was restarted. */
    int restartCount() {
        synchronized (lock) {
            return restarts;
        }
    }

    /** The pid of the binary serving now, or -1. */
    long pid() {
        synchronized (lock) {
            return current == null ? -1 : current.process.pid();
        }
    }

    private Run awaitRun(Duration wait) throws InterruptedException {
        long deadline = System.nanoTime() + wait.toNanos();
        synchronized (lock) {
            while (current == null && !stopping && fatal == null) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    break;
                }
                TimeUnit.NANOSECONDS.timedWait(lock, left);
            }
            return current;
        }
    }

    private void launch() {
        Process process = null;
        try {
            Path binary = locator.locate();
            ProcessBuilder pb = new ProcessBuilder(options.command(binary.toString()));
            pb.environment().putAll(options.env());
            pb.environment().putAll(extraEnv);
            process = pb.start();
            StderrLog.start(process.getErrorStream(), process.pid());
            WireConnection conn = new WireConnection(Long.toString(process.pid()), process.getInputStream(),
                    process.getOutputStream(), this);
            conn.start();
            JsonObject hello = conn.awaitHello(tuning.helloTimeout());
            String wrong = checkHello(hello);
            if (wrong != null) {
                fatal = "the binary " + binary + " " + wrong;
                LOG.error("ecs-elastic-agent cannot be used: " + fatal + ". Name the right binary with -D"
                        + BinaryLocator.PROPERTY + " or " + BinaryLocator.ENV + ", or use the binary in this jar.");
                conn.close("was refused");
                kill(process);
                synchronized (lock) {
                    lock.notifyAll();
                }
                return;
            }
            synchronized (lock) {
                if (stopping) {
                    conn.close("was stopped");
                    kill(process);
                    return;
                }
                if (conn.isClosed()) {
                    // It exited right after its hello, before it was ours (onEnd left it to us).
                    throw new IOException("it exited right after its hello (" + exitOf(process) + ")");
                }
                // Told before it serves, so that the log reads in order: started, then its answers.
                String version = string(hello, "version");
                if (!locator.version().equals(version)) {
                    LOG.warn("ecs-elastic-agent " + binary + " is version " + version + ", this jar " + locator.version());
                }
                LOG.info("ecs-elastic-agent " + version + " started: pid " + process.pid() + ", " + binary
                        + (restarts > 0 ? " (restart " + restarts + ")" : ""));
                current = new Run(process, conn);
                lock.notifyAll();
            }
        } catch (IOException e) {
            down = "it could not be started: " + e.getMessage();
            LOG.error("ecs-elastic-agent could not be started: " + e.getMessage());
            kill(process);
            scheduleRestart(Duration.ZERO);
        } catch (InterruptedException e) {
            kill(process);
            Thread.currentThread().interrupt();
        }
    }

    /** Why the hello is not ours, or null when it is. */
    private static String checkHello(JsonObject hello) {
        String pluginId = string(hello, "plugin_id");
        String extension = string(hello, "extension");
        JsonElement protocol = hello.get("protocol");
        JsonElement versions = hello.get("extension_versions");
        if (!PLUGIN_ID.equals(pluginId)) {
            return "is plugin " + pluginId + ", not " + PLUGIN_ID;
        }
        if (protocol == null || !protocol.isJsonPrimitive() || !"1".equals(protocol.getAsString())) {
            return "speaks wire protocol " + protocol + ", not 1";
        }
        boolean v5 = versions != null && versions.isJsonArray()
                && versions.getAsJsonArray().contains(new com.google.gson.JsonPrimitive(EXTENSION_VERSION));
        if (!EXTENSION.equals(extension) || !v5) {
            return "speaks extension " + extension + " " + versions + ", not " + EXTENSION + " " + EXTENSION_VERSION;
        }
        return null;
    }

    @Override
    public void onHostCall(WireConnection conn, JsonElement id, String name, String version, JsonElement body) {
        hostCalls.relay(conn, id, name, version, body);
    }

    @Override
    public void onEnd(WireConnection conn) {
        Run run;
        synchronized (lock) {
            if (current == null || current.conn != conn) {
                conn.close("exited"); // not serving yet: launch() sees it closed and restarts
                return;
            }
            run = current;
            current = null;
        }
        String what = run.killedBecause != null ? run.killedBecause : "exited (" + exitOf(run.process) + ")";
        down = "it " + what + " and is being restarted";
        int failed = conn.close(what);
        Duration ranFor = Duration.ofNanos(System.nanoTime() - run.startedNanos);
        synchronized (lock) {
            if (stopping) {
                return;
            }
        }
        LOG.warn("ecs-elastic-agent pid " + run.process.pid() + " " + what + " after " + ranFor.toSeconds() + " s; "
                + failed + " request(s) in flight failed with a 500; restarting it");
        scheduleRestart(ranFor);
    }

    private void scheduleRestart(Duration ranFor) {
        Duration delay;
        int restart;
        synchronized (lock) {
            if (stopping) {
                return;
            }
            if (ranFor.compareTo(tuning.stableAfter()) >= 0) {
                backoff = tuning.backoffMin();
            }
            delay = backoff;
            Duration doubled = backoff.multipliedBy(2);
            backoff = doubled.compareTo(tuning.backoffMax()) > 0 ? tuning.backoffMax() : doubled;
            restart = ++restarts;
        }
        LOG.info("ecs-elastic-agent restart " + restart + " in " + delay.toMillis() + " ms");
        try {
            supervisor.schedule(this::launch, delay.toMillis(), TimeUnit.MILLISECONDS);
        } catch (RejectedExecutionException shuttingDown) {
            // no more restarts
        }
    }

    /** Every tick: probe a silent binary that has requests waiting; kill it when the probe is not answered. */
    private void watch() {
        Run run;
        synchronized (lock) {
            run = current;
        }
        if (run == null) {
            return;
        }
        long now = System.nanoTime();
        if (run.probe != null) {
            if (run.probe.isDone()) {
                run.probe = null;
            } else if (now - run.probeSentNanos > tuning.probeTimeout().toNanos()) {
                long silent = Duration.ofNanos(now - run.conn.lastLineNanos()).toSeconds();
                run.killedBecause = "stopped answering (no line for " + silent + " s, a probe unanswered) and was killed";
                LOG.error("ecs-elastic-agent pid " + run.process.pid() + " " + run.killedBecause);
                run.process.destroyForcibly();
            }
            return;
        }
        long quiet = tuning.probeAfter().toNanos();
        if (run.conn.inFlight() > 0 && now - run.conn.lastLineNanos() > quiet && now - run.conn.oldestPendingNanos() > quiet) {
            run.probe = run.conn.requestAsync(PROBE, EXTENSION_VERSION, "null");
            run.probeSentNanos = now;
        }
    }

    /** EOF and SIGTERM; waits for the exit (SIGKILL after {@code stopGrace}). Idempotent. */
    void shutdown() {
        Run run;
        synchronized (lock) {
            if (stopping) {
                return;
            }
            stopping = true;
            run = current;
            current = null;
            lock.notifyAll();
        }
        supervisor.shutdownNow();
        try {
            supervisor.awaitTermination(tuning.helloTimeout().toMillis(), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (run != null) {
            Process p = run.process;
            run.conn.closeInput();
            p.destroy(); // SIGTERM
            try {
                if (!p.waitFor(tuning.stopGrace().toMillis(), TimeUnit.MILLISECONDS)) {
                    LOG.warn("ecs-elastic-agent pid " + p.pid() + " did not exit within " + tuning.stopGrace().toSeconds()
                            + " s of EOF and SIGTERM; killing it");
                    p.destroyForcibly();
                    p.waitFor(5, TimeUnit.SECONDS);
                }
            } catch (InterruptedException e) {
                p.destroyForcibly();
                Thread.currentThread().interrupt();
            }
            run.conn.close("was stopped at shutdown");
            LOG.info("ecs-elastic-agent pid " + p.pid() + " stopped (" + exitOf(p) + ")");
        }
        hostCalls.shutdown();
    }

    private static String exitOf(Process p) {
        try {
            if (!p.waitFor(2, TimeUnit.SECONDS)) {
                return "still running";
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "exit unknown";
        }
        int code = p.exitValue();
        return code > 128 ? "exit code " + code + ", signal " + (code - 128) : "exit code " + code;
    }

    private static void kill(Process p) {
        if (p != null) {
            p.destroyForcibly();
            try {
                p.waitFor(5, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private static String string(JsonObject o, String key) {
        JsonElement e = o.get(key);
        return e != null && e.isJsonPrimitive() ? e.getAsString() : null;
    }
}
