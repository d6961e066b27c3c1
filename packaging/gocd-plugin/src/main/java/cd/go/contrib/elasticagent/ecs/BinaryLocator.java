package cd.go.contrib.elasticagent.ecs;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.DigestOutputStream;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.Locale;
import java.util.Properties;
import java.util.stream.Stream;

/**
 * Finds the ecs-elastic-agent binary to run. An operator's choice wins: the system property
 * {@code ecs.elastic.agent.binary} or the environment variable {@code ECS_ELASTIC_AGENT_BINARY}
 * (another platform, a newer build). Otherwise the jar's binary for this machine — Linux x86_64
 * or Linux aarch64, chosen by {@code os.arch} — is extracted,
 * once, executable, to {@code <plugins_work>/ecs-elastic-agent-bin/<version>-<sha256 prefix>/}
 * ({@code plugins_work} is GoCD's {@code plugins.work.path}); a later start finds it there, and
 * a new jar's extraction removes the binaries of earlier ones.
 */
final class BinaryLocator {

    static final String PROPERTY = "ecs.elastic.agent.binary";
    static final String ENV = "ECS_ELASTIC_AGENT_BINARY";
    static final String DIR_NAME = "ecs-elastic-agent-bin";

    private final Properties build;

    BinaryLocator() throws IOException {
        build = new Properties();
        try (InputStream in = resource("/ecs-elastic-agent-gocd.properties")) {
            build.load(in);
        }
    }

    /** The jar's version (the crate's). */
    String version() {
        return build.getProperty("version");
    }

    /** The binary to start; extracts the embedded one the first time. */
    Path locate() throws IOException {
        String override = System.getProperty(PROPERTY);
        if (override == null || override.isBlank()) {
            override = System.getenv(ENV);
        }
        if (override != null && !override.isBlank()) {
            Path p = Path.of(override.trim()).toAbsolutePath();
            if (!Files.isRegularFile(p) || !Files.isExecutable(p)) {
                throw new IOException(PROPERTY + "/" + ENV + " names " + p + ", which is not an executable file");
            }
            return p;
        }
        String platform = platform(System.getProperty("os.name", ""), System.getProperty("os.arch", ""));
        String name = build.getProperty("binary.resource." + platform);
        if (BinaryLocator.class.getResource(name) == null) {
            throw new IOException("this jar was built without the Linux " + platform + " binary (" + name
                    + "): build it with packaging/build.sh, or name a binary with -D" + PROPERTY + "=... or " + ENV);
        }
        return extract(name);
    }

    /**
     * The binary this machine runs: {@code x86_64} or {@code aarch64} (Java's {@code os.arch} says
     * {@code amd64} or {@code x86_64}, {@code aarch64} or {@code arm64}), on Linux only.
     */
    static String platform(String osName, String osArch) throws IOException {
        String os = osName.toLowerCase(Locale.ROOT);
        String arch = osArch.toLowerCase(Locale.ROOT);
        if (os.contains("linux")) {
            switch (arch) {
                case "amd64", "x86_64" -> {
                    return "x86_64";
                }
                case "aarch64", "arm64" -> {
                    return "aarch64";
                }
                default -> { }
            }
        }
        throw new IOException("this jar carries Linux x86_64 and Linux aarch64 binaries, and this is " + os + "/" + arch
                + ": build one for it (packaging/INSTALL.md, \"Other platforms\") and name it with -D" + PROPERTY
                + "=... or " + ENV);
    }

    private Path extract(String name) throws IOException {
        String sha;
        try (InputStream in = resource(name + ".sha256")) {
            sha = new String(in.readAllBytes(), StandardCharsets.US_ASCII).trim().split("\\s+")[0].toLowerCase(Locale.ROOT);
        }
        Path workDir = Path.of(System.getProperty("plugins.work.path", "plugins_work")).toAbsolutePath();
        Path dir = workDir.resolve(DIR_NAME).resolve(version() + "-" + sha.substring(0, 16));
        Path bin = dir.resolve("ecs-elastic-agent");
        if (Files.isRegularFile(bin) && Files.isExecutable(bin)) {
            return bin; // written under a temporary name and moved into place: complete
        }
        Files.createDirectories(dir);
        Path tmp = Files.createTempFile(dir, "ecs-elastic-agent", ".part");
        try {
            MessageDigest digest = MessageDigest.getInstance("SHA-256");
            try (InputStream in = resource(name);
                 OutputStream out = new DigestOutputStream(Files.newOutputStream(tmp), digest)) {
                in.transferTo(out);
            }
            String actual = HexFormat.of().formatHex(digest.digest());
            if (!actual.equals(sha)) {
                throw new IOException("the binary in the jar has SHA-256 " + actual + ", not " + sha + ": the jar is damaged");
            }
            Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwxr-xr-x"));
            Files.move(tmp, bin, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } catch (NoSuchAlgorithmException e) {
            throw new IOException(e);
        } finally {
            Files.deleteIfExists(tmp);
        }
        removeOtherVersions(dir);
        return bin;
    }

    /** Best effort: the binaries earlier versions of the jar extracted (a running one keeps its inode). */
    private static void removeOtherVersions(Path keep) {
        try (Stream<Path> siblings = Files.list(keep.getParent())) {
            for (Path dir : siblings.filter(d -> !d.equals(keep) && Files.isDirectory(d)).toList()) {
                try (Stream<Path> files = Files.list(dir)) {
                    for (Path f : files.toList()) {
                        Files.deleteIfExists(f);
                    }
                }
                Files.deleteIfExists(dir);
            }
        } catch (IOException ignored) {
            // left for the next extraction
        }
    }

    private static InputStream resource(String name) throws IOException {
        InputStream in = BinaryLocator.class.getResourceAsStream(name);
        if (in == null) {
            throw new IOException("the jar has no " + name);
        }
        return in;
    }
}
