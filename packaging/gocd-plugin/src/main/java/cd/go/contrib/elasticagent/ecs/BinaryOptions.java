package cd.go.contrib.elasticagent.ecs;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The binary's options under GoCD, which starts the jar and never the binary: read from the GoCD
 * server's JVM system properties, else its environment (the property wins), checked, and turned
 * into the binary's command line and environment (packaging/INSTALL.md, "Options under GoCD").
 *
 * <ul>
 *   <li>{@value #METRICS_PROPERTY} / {@value #METRICS_ENV}: {@code IP:PORT} (an IP literal, IPv6 in
 *       brackets) → {@code serve --metrics-addr IP:PORT}, Prometheus text at {@code http://IP:PORT/metrics};</li>
 *   <li>{@value #FORMAT_PROPERTY} / {@value #FORMAT_ENV}: {@code text} or {@code json} →
 *       {@code --log-format};</li>
 *   <li>{@value #LEVEL_PROPERTY} / {@value #LEVEL_ENV}: {@code RUST_LOG} directives
 *       ({@code debug}, {@code info,ecs_elastic_agent=debug}) → the binary's {@code RUST_LOG}.</li>
 * </ul>
 *
 * A value that is not valid is left out with a warning naming the setting, its value and what it
 * takes; the binary then starts without it. A setting under the same prefix that the jar does
 * not read (a misspelt name) is warned of too. Nothing here stops the plugin from loading.
 */
record BinaryOptions(List<String> globalArgs, List<String> serveArgs, Map<String, String> env,
                     List<String> applied, List<String> warnings) {

    static final String METRICS_PROPERTY = "ecs.elastic.agent.metrics.addr";
    static final String METRICS_ENV = "ECS_ELASTIC_AGENT_METRICS_ADDR";
    static final String FORMAT_PROPERTY = "ecs.elastic.agent.log.format";
    static final String FORMAT_ENV = "ECS_ELASTIC_AGENT_LOG_FORMAT";
    static final String LEVEL_PROPERTY = "ecs.elastic.agent.log.level";
    static final String LEVEL_ENV = "ECS_ELASTIC_AGENT_LOG_LEVEL";

    private static final Pattern IPV4_PORT = Pattern.compile("(\\d{1,3})\\.(\\d{1,3})\\.(\\d{1,3})\\.(\\d{1,3}):(\\d{1,5})");
    private static final Pattern IPV6_PORT = Pattern.compile("\\[([0-9A-Fa-f:.]+)\\]:(\\d{1,5})");
    private static final String LEVELS = "trace|debug|info|warn|error|off";
    /**
     * One EnvFilter directive: a level, or target=level (a span filter in brackets allowed). A bare
     * target, which EnvFilter reads as "that target at trace", is refused: it is far more often a
     * misspelt level ("verbose") than meant.
     */
    private static final Pattern DIRECTIVE = Pattern.compile(
            "(?i)(" + LEVELS + ")|[A-Za-z_][A-Za-z0-9_\\-]*(::[A-Za-z_][A-Za-z0-9_\\-]*)*(\\[[^\\]=,]*(\\{[^}]*\\})?\\])?=(" + LEVELS + ")");

    /** The settings the jar reads: system properties, then the environment variables. */
    static final List<String> KNOWN_PROPERTIES =
            List.of(METRICS_PROPERTY, FORMAT_PROPERTY, LEVEL_PROPERTY, BinaryLocator.PROPERTY);
    static final List<String> KNOWN_ENV = List.of(METRICS_ENV, FORMAT_ENV, LEVEL_ENV, BinaryLocator.ENV);
    private static final String PROPERTY_PREFIX = "ecs.elastic.agent.";
    private static final String ENV_PREFIX = "ECS_ELASTIC_AGENT_";

    /** From this JVM's system properties and environment. */
    static BinaryOptions fromServer() {
        BinaryOptions options = resolve(System::getProperty, System.getenv());
        List<String> unknown = unknownSettings(System.getProperties().stringPropertyNames(), System.getenv().keySet());
        if (unknown.isEmpty()) {
            return options;
        }
        List<String> warnings = new ArrayList<>(options.warnings);
        warnings.addAll(unknown);
        return new BinaryOptions(options.globalArgs, options.serveArgs, options.env, options.applied,
                List.copyOf(warnings));
    }

    /**
     * A warning for each system property under {@code ecs.elastic.agent.} and each environment
     * variable under {@code ECS_ELASTIC_AGENT_} that the jar does not read: a misspelt setting
     * ({@code -Decs.elastic.agent.metrics.address}) would otherwise be ignored without a word.
     */
    static List<String> unknownSettings(Iterable<String> propertyNames, Iterable<String> envNames) {
        List<String> warnings = new ArrayList<>();
        for (String name : sorted(propertyNames)) {
            if (name.startsWith(PROPERTY_PREFIX) && !KNOWN_PROPERTIES.contains(name)) {
                warnings.add("-D" + name + " is not a setting of this plugin and is ignored. It reads -D"
                        + String.join(", -D", KNOWN_PROPERTIES));
            }
        }
        for (String name : sorted(envNames)) {
            if (name.startsWith(ENV_PREFIX) && !KNOWN_ENV.contains(name)) {
                warnings.add(name + " is not a setting of this plugin and is ignored. It reads "
                        + String.join(", ", KNOWN_ENV));
            }
        }
        return List.copyOf(warnings);
    }

    private static List<String> sorted(Iterable<String> names) {
        List<String> out = new ArrayList<>();
        names.forEach(out::add);
        out.sort(null);
        return out;
    }

    /** From {@code properties} (a system property's value or null) and {@code environment}. */
    static BinaryOptions resolve(Function<String, String> properties, Map<String, String> environment) {
        List<String> global = new ArrayList<>();
        List<String> serve = new ArrayList<>();
        Map<String, String> env = new LinkedHashMap<>();
        List<String> applied = new ArrayList<>();
        List<String> warnings = new ArrayList<>();

        Setting metrics = Setting.read(properties, environment, METRICS_PROPERTY, METRICS_ENV);
        if (metrics != null) {
            String wrong = metricsAddrProblem(metrics.value);
            if (wrong == null) {
                serve.add("--metrics-addr");
                serve.add(metrics.value);
                applied.add("serve --metrics-addr " + metrics.value + " (" + metrics.source + "; Prometheus text at http://"
                        + metrics.value + "/metrics)");
            } else {
                warnings.add(metrics.source + "=\"" + metrics.value + "\" " + wrong
                        + ": the binary starts without metrics. It takes IP:PORT, an IP address of this machine"
                        + " (127.0.0.1:9464, 0.0.0.0:9464, [::1]:9464)");
            }
        }

        Setting format = Setting.read(properties, environment, FORMAT_PROPERTY, FORMAT_ENV);
        if (format != null) {
            String f = format.value.toLowerCase(Locale.ROOT);
            if (f.equals("text") || f.equals("json")) {
                global.add("--log-format");
                global.add(f);
                applied.add("--log-format " + f + " (" + format.source + ")");
            } else {
                warnings.add(format.source + "=\"" + format.value + "\" is not a log format: the binary logs as text."
                        + " It takes text or json");
            }
        }

        Setting level = Setting.read(properties, environment, LEVEL_PROPERTY, LEVEL_ENV);
        if (level != null) {
            String wrong = logLevelProblem(level.value);
            if (wrong == null) {
                env.put("RUST_LOG", level.value);
                applied.add("RUST_LOG=" + level.value + " (" + level.source + ")");
            } else {
                warnings.add(level.source + "=\"" + level.value + "\" " + wrong + ": the binary logs at "
                        + (environment.get("RUST_LOG") != null ? "the server's RUST_LOG" : "info")
                        + ". It takes a level (trace, debug, info, warn, error, off) or RUST_LOG directives"
                        + " such as info,ecs_elastic_agent=debug");
            }
        }
        return new BinaryOptions(List.copyOf(global), List.copyOf(serve), Map.copyOf(env), List.copyOf(applied),
                List.copyOf(warnings));
    }

    /** {@code binary [global] serve [serve]}. */
    List<String> command(String binary) {
        List<String> cmd = new ArrayList<>();
        cmd.add(binary);
        cmd.addAll(globalArgs);
        cmd.add("serve");
        cmd.addAll(serveArgs);
        return cmd;
    }

    /** Why {@code addr} cannot be the metrics address, or null when it can. */
    static String metricsAddrProblem(String addr) {
        String host;
        String port;
        Matcher v4 = IPV4_PORT.matcher(addr);
        Matcher v6 = IPV6_PORT.matcher(addr);
        if (v4.matches()) {
            for (int i = 1; i <= 4; i++) {
                if (Integer.parseInt(v4.group(i)) > 255) {
                    return "is not IP:PORT (" + v4.group(i) + " is not an IPv4 octet)";
                }
            }
            host = addr.substring(0, addr.lastIndexOf(':'));
            port = v4.group(5);
        } else if (v6.matches() && v6.group(1).contains(":")) {
            host = v6.group(1);
            port = v6.group(2);
        } else {
            return "is not IP:PORT (a host name is not taken, an IPv6 address goes in brackets)";
        }
        int p = Integer.parseInt(port);
        if (p > 65535) {
            return "is not IP:PORT (" + port + " is not a port)";
        }
        InetSocketAddress socket;
        try {
            socket = new InetSocketAddress(InetAddress.getByName(host), p); // a literal: no name lookup
        } catch (IOException e) {
            return "is not IP:PORT (" + host + " is not an IP address)";
        }
        // The binary exits when it cannot listen (and would be restarted, failing again): try first.
        try (ServerSocket s = new ServerSocket()) {
            s.setReuseAddress(true);
            s.bind(socket);
        } catch (IOException e) {
            return "cannot be listened on (" + e.getMessage() + "; another process on the port, or an address"
                    + " this machine does not have)";
        }
        return null;
    }

    /** Why {@code directives} is not a RUST_LOG value the binary takes, or null. */
    static String logLevelProblem(String directives) {
        for (String d : directives.split(",", -1)) {
            if (!DIRECTIVE.matcher(d.trim()).matches()) {
                return "is not a log level (\"" + d.trim() + "\" is not a level or target=level)";
            }
        }
        return null;
    }

    /** One setting's value and where it came from; null when neither is set (blank is unset). */
    private record Setting(String value, String source) {
        static Setting read(Function<String, String> properties, Map<String, String> environment, String property,
                            String envName) {
            String v = properties.apply(property);
            if (v != null && !v.isBlank()) {
                return new Setting(v.trim(), "-D" + property);
            }
            v = environment.get(envName);
            if (v != null && !v.isBlank()) {
                return new Setting(v.trim(), envName);
            }
            return null;
        }
    }
}
