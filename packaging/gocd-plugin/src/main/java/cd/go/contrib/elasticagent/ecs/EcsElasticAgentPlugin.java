package cd.go.contrib.elasticagent.ecs;

import com.google.gson.JsonParser;
import com.thoughtworks.go.plugin.api.GoApplicationAccessor;
import com.thoughtworks.go.plugin.api.GoPlugin;
import com.thoughtworks.go.plugin.api.GoPluginIdentifier;
import com.thoughtworks.go.plugin.api.annotation.Extension;
import com.thoughtworks.go.plugin.api.annotation.UnLoad;
import com.thoughtworks.go.plugin.api.info.PluginContext;
import com.thoughtworks.go.plugin.api.logging.Logger;
import com.thoughtworks.go.plugin.api.request.GoPluginApiRequest;
import com.thoughtworks.go.plugin.api.response.DefaultGoPluginApiResponse;
import com.thoughtworks.go.plugin.api.response.GoPluginApiResponse;

import java.io.IOException;
import java.util.List;
import java.util.Map;

/**
 * The GoCD extension: elastic-agent v5, plugin id {@code cd.go.contrib.elastic-agent.ecs}. It owns
 * nothing of the plugin's logic: {@link #initializeGoApplicationAccessor} starts the binary, and
 * {@link #handle} passes each request (its JSON body as it is) to the binary and its answer back.
 * Everything else (icon, views, settings, AWS) comes from the binary.
 */
@Extension
public class EcsElasticAgentPlugin implements GoPlugin {

    private static final Logger LOG = Logger.getLoggerFor(EcsElasticAgentPlugin.class);
    private static final GoPluginIdentifier IDENTIFIER =
            new GoPluginIdentifier(BinaryProcess.EXTENSION, List.of(BinaryProcess.EXTENSION_VERSION));

    private final Map<String, String> extraEnv;
    private final Tuning tuning;
    private volatile BinaryProcess binary;
    private Thread shutdownHook;

    /** What GoCD calls. */
    public EcsElasticAgentPlugin() {
        this(Map.of(), Map.of());
    }

    /**
     * For the tests: environment added to the binary's (which otherwise is GoCD's own), and
     * {@link Tuning} fields to override, in milliseconds.
     */
    EcsElasticAgentPlugin(Map<String, String> extraEnv, Map<String, String> tuningMillis) {
        this.extraEnv = Map.copyOf(extraEnv);
        this.tuning = Tuning.withOverrides(tuningMillis);
    }

    @Override
    public synchronized void initializeGoApplicationAccessor(GoApplicationAccessor accessor) {
        if (binary != null) {
            binary.shutdown();
        }
        BinaryLocator locator;
        try {
            locator = new BinaryLocator();
        } catch (IOException e) {
            throw new IllegalStateException("ecs-elastic-agent plugin jar is incomplete: " + e.getMessage(), e);
        }
        BinaryOptions options = BinaryOptions.fromServer();
        for (String warning : options.warnings()) {
            LOG.warn("ecs-elastic-agent option left out: " + warning + " (packaging/INSTALL.md, \"Options under GoCD\")");
        }
        if (!options.applied().isEmpty()) {
            LOG.info("ecs-elastic-agent options: " + String.join(", ", options.applied()));
        }
        BinaryProcess process = new BinaryProcess(locator, options, extraEnv, new HostCalls(accessor, IDENTIFIER), tuning);
        binary = process;
        if (shutdownHook == null) {
            shutdownHook = new Thread(this::stop, "ecs-elastic-agent-shutdown");
            Runtime.getRuntime().addShutdownHook(shutdownHook);
        }
        process.start();
    }

    @Override
    public GoPluginApiResponse handle(GoPluginApiRequest request) {
        String name = request.requestName();
        BinaryProcess process = binary;
        if (process == null) {
            return response(Reply.internalError("the plugin is not initialised yet"));
        }
        String body = request.requestBody();
        String bodyJson;
        if (body == null || body.isBlank()) {
            bodyJson = "null";
        } else {
            try {
                // One line on the wire, whatever GoCD's formatting; the content stays as it is.
                bodyJson = JsonParser.parseString(body).toString();
            } catch (RuntimeException e) {
                LOG.warn("GoCD sent " + name + " with a body of " + body.length() + " characters that is not JSON");
                return response(Reply.error(Reply.BAD_REQUEST, "the body of " + name + " is not JSON"));
            }
        }
        String version = request.extensionVersion() == null ? BinaryProcess.EXTENSION_VERSION : request.extensionVersion();
        return response(process.call(name, version, bodyJson));
    }

    private static GoPluginApiResponse response(Reply reply) {
        return new DefaultGoPluginApiResponse(reply.code(), reply.body());
    }

    @Override
    public GoPluginIdentifier pluginIdentifier() {
        return IDENTIFIER;
    }

    /** GoCD unloads the plugin (shutdown, or the jar removed or replaced): stop the binary. */
    @UnLoad
    public void onUnload(PluginContext context) {
        stop();
        synchronized (this) {
            if (shutdownHook != null) {
                try {
                    Runtime.getRuntime().removeShutdownHook(shutdownHook);
                } catch (IllegalStateException shuttingDown) {
                    // the hook runs anyway
                }
                shutdownHook = null;
            }
        }
    }

    private void stop() {
        BinaryProcess process = binary;
        if (process != null) {
            process.shutdown();
        }
    }

    /** For the tests and the benchmark: the pid of the binary serving now, or -1. */
    long binaryPid() {
        BinaryProcess process = binary;
        return process == null ? -1 : process.pid();
    }
}
