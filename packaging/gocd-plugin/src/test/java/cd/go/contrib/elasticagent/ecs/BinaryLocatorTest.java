package cd.go.contrib.elasticagent.ecs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import org.junit.jupiter.api.Test;

/** Which embedded binary a machine runs, by Java's {@code os.name} and {@code os.arch}. */
class BinaryLocatorTest {

    @Test
    void linuxOnX86AndArmRunsTheirOwnBinary() throws IOException {
        assertEquals("x86_64", BinaryLocator.platform("Linux", "amd64"));
        assertEquals("x86_64", BinaryLocator.platform("Linux", "x86_64"));
        assertEquals("aarch64", BinaryLocator.platform("Linux", "aarch64"));
        assertEquals("aarch64", BinaryLocator.platform("Linux", "arm64"));
    }

    @Test
    void anyOtherPlatformIsToldToNameItsOwnBinary() {
        for (String[] other : new String[][] {{"Linux", "ppc64le"}, {"Linux", "s390x"}, {"Mac OS X", "aarch64"}, {"Windows 11", "amd64"}}) {
            IOException e = assertThrows(IOException.class, () -> BinaryLocator.platform(other[0], other[1]));
            assertTrue(e.getMessage().contains("-D" + BinaryLocator.PROPERTY) && e.getMessage().contains(BinaryLocator.ENV),
                    e.getMessage());
            assertTrue(e.getMessage().contains(other[1]), e.getMessage());
        }
    }
}
