package cd.go.contrib.elasticagent.ecs.jar;

import com.thoughtworks.go.plugin.api.logging.Logger;
import com.thoughtworks.go.plugin.internal.api.LoggingService;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Collectors;

/**
 * GoCD's plugin log, as the tests see it: installed once into the plugin API's {@link Logger} (as
 * GoCD's plugin activator does), it keeps every line the plugin logs, with its level.
 */
final class CapturedLog implements LoggingService {

    record Line(String level, String pluginId, String logger, String message) {
        @Override
        public String toString() {
            return level + " " + logger.substring(logger.lastIndexOf('.') + 1) + ": " + message;
        }
    }

    static final CapturedLog INSTANCE = new CapturedLog();
    private final List<Line> lines = new CopyOnWriteArrayList<>();

    static {
        Logger.initialize(INSTANCE);
    }

    static CapturedLog get() {
        return INSTANCE;
    }

    List<Line> lines() {
        return List.copyOf(lines);
    }

    int size() {
        return lines.size();
    }

    List<Line> since(int mark) {
        List<Line> all = lines();
        return all.subList(Math.min(mark, all.size()), all.size());
    }

    String dump(int mark) {
        return since(mark).stream().map(Line::toString).collect(Collectors.joining("\n  ", "\n  ", ""));
    }

    private void add(String level, String pluginId, String logger, String message, Throwable t) {
        lines.add(new Line(level, pluginId, logger, t == null ? message : message + " (" + t + ")"));
    }

    @Override public void debug(String p, String l, String m) { add("DEBUG", p, l, m, null); }
    @Override public void debug(String p, String l, String m, Throwable t) { add("DEBUG", p, l, m, t); }
    @Override public void debug(String p, String l, String m, Object a) { add("DEBUG", p, l, m, null); }
    @Override public void debug(String p, String l, String m, Object a, Object b) { add("DEBUG", p, l, m, null); }
    @Override public void debug(String p, String l, String m, Object... a) { add("DEBUG", p, l, m, null); }
    @Override public void info(String p, String l, String m) { add("INFO", p, l, m, null); }
    @Override public void info(String p, String l, String m, Throwable t) { add("INFO", p, l, m, t); }
    @Override public void info(String p, String l, String m, Object a) { add("INFO", p, l, m, null); }
    @Override public void info(String p, String l, String m, Object a, Object b) { add("INFO", p, l, m, null); }
    @Override public void info(String p, String l, String m, Object... a) { add("INFO", p, l, m, null); }
    @Override public void warn(String p, String l, String m) { add("WARN", p, l, m, null); }
    @Override public void warn(String p, String l, String m, Throwable t) { add("WARN", p, l, m, t); }
    @Override public void warn(String p, String l, String m, Object a) { add("WARN", p, l, m, null); }
    @Override public void warn(String p, String l, String m, Object a, Object b) { add("WARN", p, l, m, null); }
    @Override public void warn(String p, String l, String m, Object... a) { add("WARN", p, l, m, null); }
    @Override public void error(String p, String l, String m) { add("ERROR", p, l, m, null); }
    @Override public void error(String p, String l, String m, Throwable t) { add("ERROR", p, l, m, t); }
    @Override public void error(String p, String l, String m, Object a) { add("ERROR", p, l, m, null); }
    @Override public void error(String p, String l, String m, Object a, Object b) { add("ERROR", p, l, m, null); }
    @Override public void error(String p, String l, String m, Object... a) { add("ERROR", p, l, m, null); }
}
