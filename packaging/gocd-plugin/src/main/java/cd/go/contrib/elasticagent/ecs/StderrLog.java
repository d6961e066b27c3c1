package cd.go.contrib.elasticagent.ecs;

import com.thoughtworks.go.plugin.api.logging.Logger;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

/**
 * Copies the binary's stderr (its logs, one line each) into GoCD's plugin log through the plugin
 * API's {@link Logger}, at the level the line carries (text or JSON format of the binary). The
 * binary keeps secrets out of its own logs; this class adds nothing but the pid.
 */
final class StderrLog {

    private static final Logger LOG = Logger.getLoggerFor(StderrLog.class);
    private static final java.util.Set<String> LEVELS = java.util.Set.of("ERROR", "WARN", "INFO", "DEBUG", "TRACE");

    private StderrLog() {
    }

    static Thread start(InputStream stderr, long pid) {
        Thread t = new Thread(() -> pump(stderr, "ecs-elastic-agent[" + pid + "] "), "ecs-elastic-agent-stderr-" + pid);
        t.setDaemon(true);
        t.start();
        return t;
    }

    private static void pump(InputStream stderr, String prefix) {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(stderr, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isBlank()) {
                    continue;
                }
                String message = prefix + withoutTimeAndLevel(line);
                switch (level(line)) {
                    case "ERROR" -> LOG.error(message);
                    case "WARN" -> LOG.warn(message);
                    case "DEBUG", "TRACE" -> LOG.debug(message);
                    default -> LOG.info(message);
                }
            }
        } catch (IOException ignored) {
            // the binary is gone
        }
    }

    /** A text line without its time and level (GoCD's log has its own); a JSON line as it is. */
    static String withoutTimeAndLevel(String line) {
        String[] tokens = line.trim().split("\\s+", 3);
        if (tokens.length == 3 && LEVELS.contains(tokens[1]) && Character.isDigit(tokens[0].charAt(0))) {
            return tokens[2];
        }
        return line;
    }

    /** ERROR, WARN, INFO, DEBUG or TRACE: the level token of a text line, or the JSON "level". */
    static String level(String line) {
        if (line.startsWith("{")) {
            for (String l : new String[]{"ERROR", "WARN", "INFO", "DEBUG", "TRACE"}) {
                if (line.contains("\"level\":\"" + l + "\"")) {
                    return l;
                }
            }
            return "INFO";
        }
        // "2026-01-01T00:00:00.000000Z  WARN target: message"
        String[] tokens = line.trim().split("\\s+", 3);
        for (int i = 0; i < Math.min(2, tokens.length); i++) {
            if (LEVELS.contains(tokens[i])) {
                return tokens[i];
            }
        }
        return "INFO";
    }
}
