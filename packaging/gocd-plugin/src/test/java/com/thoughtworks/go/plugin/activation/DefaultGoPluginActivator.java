package com.thoughtworks.go.plugin.activation;

/**
 * Stands in for GoCD's plugin activator (gocd/gocd plugin-infra/go-plugin-activator), which GoCD
 * puts into every plugin bundle: the plugin API's Logger reads the plugin id from its static
 * {@code pluginId}, through the plugin class's own class loader.
 */
public final class DefaultGoPluginActivator {
    @SuppressWarnings("unused")
    private static String pluginId = "cd.go.contrib.elastic-agent.ecs";

    private DefaultGoPluginActivator() {
    }
}
