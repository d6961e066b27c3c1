package com.thoughtworks.go.plugin.internal.api;

/**
 * GoCD's logging service interface (gocd/gocd plugin-infra/go-plugin-api-internal), which is not
 * published: the plugin API's Logger sends everything here once GoCD calls Logger.initialize. The
 * tests implement it to read what the plugin logs, as GoCD's plugin log would show it.
 */
public interface LoggingService {
    void debug(String pluginId, String loggerName, String message);

    void debug(String pluginId, String loggerName, String message, Throwable throwable);

    void debug(String pluginId, String loggerName, String message, Object arg);

    void debug(String pluginId, String loggerName, String message, Object arg1, Object arg2);

    void debug(String pluginId, String loggerName, String message, Object... arguments);

    void info(String pluginId, String loggerName, String message);

    void info(String pluginId, String loggerName, String message, Throwable throwable);

    void info(String pluginId, String loggerName, String message, Object arg);

    void info(String pluginId, String loggerName, String message, Object arg1, Object arg2);

    void info(String pluginId, String loggerName, String message, Object... arguments);

    void warn(String pluginId, String loggerName, String message);

    void warn(String pluginId, String loggerName, String message, Throwable throwable);

    void warn(String pluginId, String loggerName, String message, Object arg);

    void warn(String pluginId, String loggerName, String message, Object arg1, Object arg2);

    void warn(String pluginId, String loggerName, String message, Object... arguments);

    void error(String pluginId, String loggerName, String message);

    void error(String pluginId, String loggerName, String message, Throwable throwable);

    void error(String pluginId, String loggerName, String message, Object arg);

    void error(String pluginId, String loggerName, String message, Object arg1, Object arg2);

    void error(String pluginId, String loggerName, String message, Object... arguments);
}
