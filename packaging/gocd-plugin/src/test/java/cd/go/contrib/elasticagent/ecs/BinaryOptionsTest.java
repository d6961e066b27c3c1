package cd.go.contrib.elasticagent.ecs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The binary's options from the server's system properties and environment (the property wins). */
class BinaryOptionsTest {

    private static BinaryOptions resolve(Map<String, String> properties, Map<String, String> env) {
        return BinaryOptions.resolve(properties::get, env);
    }

    private static int freePort() throws Exception {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    @Test
    void nothingSetIsPlainServe() {
        BinaryOptions o = resolve(Map.of(), Map.of("RUST_LOG", "debug"));
        assertEquals(List.of("/bin/x", "serve"), o.command("/bin/x"));
        assertTrue(o.env().isEmpty() && o.warnings().isEmpty() && o.applied().isEmpty(), o.toString());
    }

    @Test
    void propertiesBecomeTheBinarysOptionsAndEnvironment() throws Exception {
        String addr = "127.0.0.1:" + freePort();
        BinaryOptions o = resolve(Map.of(BinaryOptions.METRICS_PROPERTY, addr, BinaryOptions.FORMAT_PROPERTY, "JSON",
                BinaryOptions.LEVEL_PROPERTY, "info,ecs_elastic_agent=debug"), Map.of());
        assertEquals(List.of("/bin/x", "--log-format", "json", "serve", "--metrics-addr", addr), o.command("/bin/x"));
        assertEquals(Map.of("RUST_LOG", "info,ecs_elastic_agent=debug"), o.env());
        assertTrue(o.warnings().isEmpty(), o.warnings().toString());
        assertEquals(3, o.applied().size(), o.applied().toString());
    }

    @Test
    void theEnvironmentServesWhenNoPropertyIsSetAndThePropertyWins() throws Exception {
        String addr = "127.0.0.1:" + freePort();
        Map<String, String> env = Map.of(BinaryOptions.METRICS_ENV, addr, BinaryOptions.FORMAT_ENV, "json",
                BinaryOptions.LEVEL_ENV, "debug");
        BinaryOptions fromEnv = resolve(Map.of(), env);
        assertEquals(List.of("x", "--log-format", "json", "serve", "--metrics-addr", addr), fromEnv.command("x"));
        assertEquals("debug", fromEnv.env().get("RUST_LOG"));
        assertTrue(fromEnv.applied().get(0).contains(BinaryOptions.METRICS_ENV), fromEnv.applied().toString());

        BinaryOptions both = resolve(Map.of(BinaryOptions.FORMAT_PROPERTY, "text", BinaryOptions.LEVEL_PROPERTY, "warn"), env);
        assertEquals(List.of("x", "--log-format", "text", "serve", "--metrics-addr", addr), both.command("x"));
        assertEquals("warn", both.env().get("RUST_LOG"));
        assertTrue(both.applied().stream().anyMatch(a -> a.contains("-D" + BinaryOptions.LEVEL_PROPERTY)), both.applied().toString());
    }

    @Test
    void badValuesAreLeftOutWithAWarningNamingTheSettingAndWhatItTakes() throws Exception {
        BinaryOptions o = resolve(Map.of(BinaryOptions.METRICS_PROPERTY, "localhost:9464",
                BinaryOptions.FORMAT_PROPERTY, "yaml"), Map.of(BinaryOptions.LEVEL_ENV, "verbose=loud"));
        assertEquals(List.of("x", "serve"), o.command("x"));
        assertTrue(o.env().isEmpty());
        assertEquals(3, o.warnings().size(), o.warnings().toString());
        assertTrue(o.warnings().get(0).startsWith("-D" + BinaryOptions.METRICS_PROPERTY + "=\"localhost:9464\""), o.warnings().get(0));
        assertTrue(o.warnings().get(0).contains("IP:PORT"), o.warnings().get(0));
        assertTrue(o.warnings().get(1).contains("yaml") && o.warnings().get(1).contains("text or json"), o.warnings().get(1));
        assertTrue(o.warnings().get(2).startsWith(BinaryOptions.LEVEL_ENV + "=\"verbose=loud\""), o.warnings().get(2));
    }

    @Test
    void metricsAddresses() throws Exception {
        assertNull(BinaryOptions.metricsAddrProblem("127.0.0.1:" + freePort()));
        assertNull(BinaryOptions.metricsAddrProblem("127.0.0.1:0"));
        for (String bad : new String[] {"9464", ":9464", "127.0.0.1", "256.0.0.1:9464", "127.0.0.1:65536",
                "gocd.example.com:9464", "::1:9464", "[::1]", "127.0.0.1:9464/metrics", "http://127.0.0.1:9464"}) {
            assertNotNull(BinaryOptions.metricsAddrProblem(bad), bad);
        }
        try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            String problem = BinaryOptions.metricsAddrProblem("127.0.0.1:" + taken.getLocalPort());
            assertNotNull(problem);
            assertTrue(problem.contains("cannot be listened on"), problem);
        }
    }

    @Test
    void logLevels() {
        for (String good : new String[] {"debug", "INFO", "off", "info,ecs_elastic_agent=debug", "warn,aws_config=error",
                "ecs_elastic_agent::server=trace", "info,ecs_elastic_agent[request]=debug"}) {
            assertNull(BinaryOptions.logLevelProblem(good), good);
        }
        for (String bad : new String[] {"verbose", "debug,", "=debug", "info;debug", "ecs_elastic_agent=loud", "info debug", "ecs_elastic_agent"}) {
            assertNotNull(BinaryOptions.logLevelProblem(bad), bad);
        }
    }

    @Test
    void aMisspeltSettingIsWarnedOfNotIgnored() {
        List<String> warnings = BinaryOptions.unknownSettings(
                List.of("ecs.elastic.agent.metrics.address", BinaryOptions.LEVEL_PROPERTY, "ecs.elastic.agent.binary",
                        "java.version", "ecs.other"),
                List.of("ECS_ELASTIC_AGENT_LOGLEVEL", BinaryOptions.METRICS_ENV, "ECS_ELASTIC_AGENT_BINARY", "PATH"));
        assertEquals(2, warnings.size(), warnings.toString());
        assertTrue(warnings.get(0).startsWith("-Decs.elastic.agent.metrics.address is not a setting")
                && warnings.get(0).contains("-D" + BinaryOptions.METRICS_PROPERTY), warnings.get(0));
        assertTrue(warnings.get(1).startsWith("ECS_ELASTIC_AGENT_LOGLEVEL is not a setting")
                && warnings.get(1).contains(BinaryOptions.LEVEL_ENV), warnings.get(1));
        assertTrue(BinaryOptions.unknownSettings(BinaryOptions.KNOWN_PROPERTIES, BinaryOptions.KNOWN_ENV).isEmpty());
    }
}
