package cd.go.contrib.elasticagent.ecs.jar;

import com.thoughtworks.go.plugin.api.GoPlugin;
import com.thoughtworks.go.plugin.api.GoPluginIdentifier;
import org.junit.jupiter.api.Test;
import org.w3c.dom.Document;
import org.w3c.dom.Element;

import javax.xml.parsers.DocumentBuilderFactory;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The jar as GoCD sees it: plugin.xml, one {@code @Extension}, lib/, the embedded binary. */
class PluginJarIT {

    static String crateVersion() throws Exception {
        String toml = Files.readString(Path.of(System.getProperty("crate.manifest")));
        Matcher m = Pattern.compile("(?m)^version = \"([^\"]+)\"").matcher(toml);
        assertTrue(m.find(), "Cargo.toml has a version");
        return m.group(1);
    }

    @Test
    void pluginXmlSaysWhoThePluginIs() throws Exception {
        PluginJar jar = PluginJar.load();
        Document doc;
        try (InputStream in = jar.loader.getResourceAsStream("plugin.xml")) {
            assertNotNull(in, "plugin.xml at the jar's root");
            doc = DocumentBuilderFactory.newInstance().newDocumentBuilder().parse(in);
        }
        Element root = doc.getDocumentElement();
        assertEquals("go-plugin", root.getTagName());
        assertEquals("cd.go.contrib.elastic-agent.ecs", root.getAttribute("id"));
        assertEquals("1", root.getAttribute("version"));
        Element about = (Element) root.getElementsByTagName("about").item(0);
        assertEquals(crateVersion(), text(about, "version"), "plugin.xml version is the crate's");
        assertEquals("ECS and Fargate elastic agents", text(about, "name"));
        assertTrue(text(about, "target-go-version").matches("\\d+\\.\\d+\\.\\d+"));
        String description = text(about, "description");
        assertTrue(description.contains("ECS"), description);
        // GoCD's plugin page shows the description: it names the binaries the jar carries (both in
        // packaging/build.sh's release jar; x86_64 only in a jar built without the aarch64 one).
        assertTrue(description.contains("Linux x86_64"), description);
        assertEquals(jar.allEntries.contains("bin/linux-aarch64/ecs-elastic-agent"), description.contains("Linux aarch64"),
                description);
        assertTrue(!text((Element) about.getElementsByTagName("vendor").item(0), "name").isBlank());
        assertEquals("Linux", text((Element) about.getElementsByTagName("target-os").item(0), "value"));
    }

    @Test
    void theJarsNameAndManifestCarryTheCratesVersion() throws Exception {
        PluginJar jar = PluginJar.load();
        String version = crateVersion();
        assertEquals("ecs-elastic-agent-gocd-" + version + ".jar", jar.jar.getFileName().toString());
        try (java.util.jar.JarFile jf = new java.util.jar.JarFile(jar.jar.toFile())) {
            java.util.jar.Attributes main = jf.getManifest().getMainAttributes();
            assertEquals(version, main.getValue("Implementation-Version"), "MANIFEST.MF Implementation-Version");
            assertEquals("ecs-elastic-agent GoCD plugin", main.getValue("Implementation-Title"));
        }
    }

    @Test
    void oneExtensionClassOfElasticAgentV5() throws Exception {
        PluginJar jar = PluginJar.load();
        List<Class<?>> extensions = jar.extensionClasses();
        assertEquals(1, extensions.size(), "one @Extension class: " + extensions);
        Class<?> ext = extensions.get(0);
        assertTrue(GoPlugin.class.isAssignableFrom(ext), ext + " implements GoPlugin");
        assertTrue(ext.getClassLoader() == jar.loader, "loaded from the jar, not the test class path");
        GoPlugin plugin = jar.newPlugin();
        GoPluginIdentifier id = plugin.pluginIdentifier();
        assertEquals("elastic-agent", id.getExtension());
        assertEquals(List.of("5.0"), id.getSupportedExtensionVersions());
    }

    @Test
    void libHoldsGsonOnlyAndTheApiIsNotBundled() throws Exception {
        PluginJar jar = PluginJar.load();
        assertEquals(1, jar.libEntries.size(), "lib/: " + jar.libEntries);
        assertTrue(jar.libEntries.get(0).matches("lib/gson-[0-9.]+\\.jar"), jar.libEntries.toString());
        assertTrue(jar.allEntries.stream().noneMatch(e -> e.startsWith("com/thoughtworks/") || e.startsWith("com/google/")),
                "no plugin API or gson classes outside lib/");
        assertTrue(jar.allEntries.contains("bin/linux-x86_64/ecs-elastic-agent"));
        assertTrue(jar.allEntries.contains("bin/linux-x86_64/ecs-elastic-agent.sha256"));
        // The aarch64 binary is there when the build gave one (packaging/build.sh's release jar),
        // always with its checksum; and the jar says where each is.
        assertEquals(jar.allEntries.contains("bin/linux-aarch64/ecs-elastic-agent"),
                jar.allEntries.contains("bin/linux-aarch64/ecs-elastic-agent.sha256"));
        java.util.Properties build = new java.util.Properties();
        try (InputStream in = jar.loader.getResourceAsStream("ecs-elastic-agent-gocd.properties")) {
            build.load(in);
        }
        assertEquals("/bin/linux-x86_64/ecs-elastic-agent", build.getProperty("binary.resource.x86_64"));
        assertEquals("/bin/linux-aarch64/ecs-elastic-agent", build.getProperty("binary.resource.aarch64"));
    }

    @Test
    void theBinaryIsExtractedOnceExecutableIntoPluginsWorkReplacingEarlierOnes() throws Exception {
        PluginJar jar = PluginJar.load();
        String sha;
        try (InputStream in = jar.loader.getResourceAsStream("bin/linux-x86_64/ecs-elastic-agent.sha256")) {
            sha = new String(in.readAllBytes(), java.nio.charset.StandardCharsets.US_ASCII).trim().split("\\s+")[0];
        }
        Path bin = Path.of(System.getProperty("plugins.work.path"), "ecs-elastic-agent-bin",
                crateVersion() + "-" + sha.substring(0, 16), "ecs-elastic-agent").toAbsolutePath();
        Files.deleteIfExists(bin);
        Path stale = bin.getParent().resolveSibling("0.0.1-0123456789abcdef");
        Files.createDirectories(stale);
        Files.writeString(stale.resolve("ecs-elastic-agent"), "an earlier jar's binary");
        TestAccessor accessor = new TestAccessor();
        GoPlugin first = jar.start(Harness.noAws(), Map.of(), accessor);
        FileTime extracted;
        try {
            assertTrue(Files.isExecutable(bin), bin + " is extracted and executable");
            assertFalse(Files.exists(stale), "an earlier jar's binary is removed");
            extracted = Files.getLastModifiedTime(bin);
            long pid = PluginJar.binaryPid(first);
            assertTrue(pid > 0, "the binary runs");
            assertEquals(bin.toString(), ProcessHandle.of(pid).orElseThrow().info().command().orElse(bin.toString()));
        } finally {
            PluginJar.unload(first);
        }
        GoPlugin second = PluginJar.load().start(Harness.noAws(), Map.of(), accessor);
        try {
            assertEquals(extracted, Files.getLastModifiedTime(bin), "the second start reuses the extracted binary");
            assertEquals(200, PluginJar.handle(second, "cd.go.elastic-agent.get-capabilities", null).responseCode());
        } finally {
            PluginJar.unload(second);
        }
    }

    private static String text(Element parent, String tag) {
        return parent.getElementsByTagName(tag).item(0).getTextContent().trim();
    }
}
