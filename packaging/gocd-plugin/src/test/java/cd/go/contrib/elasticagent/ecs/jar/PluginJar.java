package cd.go.contrib.elasticagent.ecs.jar;

import com.thoughtworks.go.plugin.api.GoApplicationAccessor;
import com.thoughtworks.go.plugin.api.GoPlugin;
import com.thoughtworks.go.plugin.api.annotation.Extension;
import com.thoughtworks.go.plugin.api.annotation.UnLoad;
import com.thoughtworks.go.plugin.api.info.PluginContext;
import com.thoughtworks.go.plugin.api.request.DefaultGoPluginApiRequest;
import com.thoughtworks.go.plugin.api.response.GoPluginApiResponse;

import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.List;
import java.util.Map;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;

/**
 * The built jar, loaded as GoCD loads a plugin bundle: a fresh class loader over the jar and its
 * {@code lib/*.jar}, which takes the plugin API ({@code com.thoughtworks.go.plugin.api.*}) and GoCD's
 * activator from the server (here: the tests' class path) and everything else (JDK aside) from the
 * bundle only; then every class
 * outside {@code lib/} and {@code META-INF/} scanned for {@code @Extension}.
 */
final class PluginJar {

    /** GoCD puts its activator into every bundle; the tests' stand-in comes from the class path. */
    static final String ACTIVATOR = "com.thoughtworks.go.plugin.activation.";

    /** Child-first, with the plugin API shared, like GoCD's OSGi bundle class loader. */
    static final class BundleClassLoader extends URLClassLoader {
        private final ClassLoader api;

        BundleClassLoader(URL[] urls, ClassLoader api) {
            super("gocd-plugin-bundle", urls, null);
            this.api = api;
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            synchronized (getClassLoadingLock(name)) {
                Class<?> c = findLoadedClass(name);
                if (c == null) {
                    if (name.startsWith("com.thoughtworks.go.plugin.api.") || name.startsWith(ACTIVATOR)) {
                        c = api.loadClass(name);
                    } else {
                        try {
                            c = ClassLoader.getPlatformClassLoader().loadClass(name);
                        } catch (ClassNotFoundException notJdk) {
                            c = findClass(name);
                        }
                    }
                }
                if (resolve) {
                    resolveClass(c);
                }
                return c;
            }
        }

        @Override
        public URL getResource(String name) {
            URL u = findResource(name);
            return u != null ? u : ClassLoader.getPlatformClassLoader().getResource(name);
        }
    }

    final Path jar;
    final BundleClassLoader loader;
    final List<String> classEntries = new ArrayList<>();
    final List<String> libEntries = new ArrayList<>();
    final List<String> allEntries = new ArrayList<>();

    private PluginJar(Path jar, BundleClassLoader loader) {
        this.jar = jar;
        this.loader = loader;
    }

    /** The jar the build made ({@code -Dplugin.jar}), with its lib/ exploded into a fresh directory. */
    static PluginJar load() throws IOException {
        CapturedLog.get();
        String prop = System.getProperty("plugin.jar");
        if (prop == null) {
            throw new IllegalStateException("-Dplugin.jar is not set (run through mvn verify)");
        }
        Path jar = Path.of(prop);
        Path bundleDir = Files.createTempDirectory("gocd-bundle");
        bundleDir.toFile().deleteOnExit();
        List<URL> urls = new ArrayList<>();
        urls.add(jar.toUri().toURL());
        List<String> classes = new ArrayList<>();
        List<String> libs = new ArrayList<>();
        List<String> all = new ArrayList<>();
        try (JarFile jf = new JarFile(jar.toFile())) {
            Enumeration<JarEntry> entries = jf.entries();
            while (entries.hasMoreElements()) {
                JarEntry e = entries.nextElement();
                all.add(e.getName());
                if (e.getName().startsWith("lib/") && e.getName().endsWith(".jar")) {
                    libs.add(e.getName());
                    Path out = bundleDir.resolve(e.getName());
                    Files.createDirectories(out.getParent());
                    try (InputStream in = jf.getInputStream(e)) {
                        Files.copy(in, out, StandardCopyOption.REPLACE_EXISTING);
                    }
                    out.toFile().deleteOnExit();
                    urls.add(out.toUri().toURL());
                } else if (e.getName().endsWith(".class") && !e.getName().startsWith("lib/")
                        && !e.getName().startsWith("META-INF/")) {
                    classes.add(e.getName());
                }
            }
        }
        PluginJar pj = new PluginJar(jar, new BundleClassLoader(urls.toArray(new URL[0]), PluginJar.class.getClassLoader()));
        pj.classEntries.addAll(classes);
        pj.libEntries.addAll(libs);
        pj.allEntries.addAll(all);
        return pj;
    }

    /** Every class of the bundle annotated {@code @Extension}, found the way GoCD's activator finds them. */
    List<Class<?>> extensionClasses() throws ClassNotFoundException {
        List<Class<?>> found = new ArrayList<>();
        for (String entry : classEntries) {
            String name = entry.replace('/', '.').replaceFirst("\\.class$", "");
            Class<?> c = loader.loadClass(name);
            if (c.isAnnotationPresent(Extension.class)) {
                found.add(c);
            }
        }
        return found;
    }

    /** The one extension class (asserted by the tests). */
    Class<?> extensionClass() throws ClassNotFoundException {
        List<Class<?>> all = extensionClasses();
        if (all.size() != 1) {
            throw new IllegalStateException("expected one @Extension class, found " + all);
        }
        return all.get(0);
    }

    /** A new plugin instance as GoCD makes it (public no-argument constructor). */
    GoPlugin newPlugin() throws ReflectiveOperationException {
        return (GoPlugin) extensionClass().getConstructor().newInstance();
    }

    /** A new plugin instance with the tests' hooks: extra environment for the binary, shorter timings. */
    GoPlugin newPlugin(Map<String, String> env, Map<String, String> tuningMillis) throws ReflectiveOperationException {
        Constructor<?> c = extensionClass().getDeclaredConstructor(Map.class, Map.class);
        c.setAccessible(true);
        return (GoPlugin) c.newInstance(env, tuningMillis);
    }

    /** A plugin with the test hooks, initialised with {@code accessor} (starts the binary). */
    GoPlugin start(Map<String, String> env, Map<String, String> tuningMillis, GoApplicationAccessor accessor)
            throws ReflectiveOperationException {
        GoPlugin plugin = newPlugin(env, tuningMillis);
        plugin.initializeGoApplicationAccessor(accessor);
        return plugin;
    }

    /** GoCD unloading the plugin: calls its {@code @UnLoad} method. */
    static void unload(GoPlugin plugin) throws ReflectiveOperationException {
        for (Method m : plugin.getClass().getDeclaredMethods()) {
            if (m.isAnnotationPresent(UnLoad.class)) {
                m.invoke(plugin, new PluginContext() {
                });
                return;
            }
        }
        throw new IllegalStateException("no @UnLoad method");
    }

    /** The pid of the binary serving now (-1 when none), through the plugin's test hook. */
    static long binaryPid(GoPlugin plugin) throws ReflectiveOperationException {
        Method m = plugin.getClass().getDeclaredMethod("binaryPid");
        m.setAccessible(true);
        return (long) m.invoke(plugin);
    }

    /** One request as GoCD's plugin request helper makes it. */
    static GoPluginApiResponse handle(GoPlugin plugin, String name, String body) throws Exception {
        DefaultGoPluginApiRequest request = new DefaultGoPluginApiRequest("elastic-agent", "5.0", name);
        request.setRequestBody(body);
        return plugin.handle(request);
    }
}
