package cd.go.contrib.elasticagent.ecs;

import java.time.Duration;
import java.util.Map;

/**
 * The bridge's timings. Production uses {@link #DEFAULT}; the tests shorten them through the
 * plugin's package-private constructor (there is no system property for them).
 *
 * @param helloTimeout   how long a started binary may take to write its hello line
 * @param startWait      how long a request waits for a binary that is being (re)started
 * @param requestTimeout the longest a GoCD thread waits for one answer
 * @param probeAfter     no line from the binary for this long while requests wait: send it a
 *                       cheap probe request (get-capabilities)
 * @param probeTimeout   an unanswered probe after this long: the binary is hung, kill it
 * @param backoffMin     first delay before a restart; doubles on each quick failure
 * @param backoffMax     longest delay before a restart
 * @param stableAfter    a binary that ran this long resets the backoff to {@code backoffMin}
 * @param stopGrace      at shutdown: EOF, this long, SIGTERM, this long again, then SIGKILL
 */
record Tuning(Duration helloTimeout, Duration startWait, Duration requestTimeout, Duration probeAfter,
              Duration probeTimeout, Duration backoffMin, Duration backoffMax, Duration stableAfter,
              Duration stopGrace) {

    static final Tuning DEFAULT = new Tuning(Duration.ofSeconds(30), Duration.ofSeconds(10), Duration.ofMinutes(5),
            Duration.ofSeconds(15), Duration.ofSeconds(15), Duration.ofMillis(500), Duration.ofSeconds(30),
            Duration.ofSeconds(60), Duration.ofSeconds(12));

    /** {@link #DEFAULT} with the given fields (names as above, values in milliseconds) replaced. */
    static Tuning withOverrides(Map<String, String> millis) {
        Tuning d = DEFAULT;
        return new Tuning(get(millis, "helloTimeout", d.helloTimeout), get(millis, "startWait", d.startWait),
                get(millis, "requestTimeout", d.requestTimeout), get(millis, "probeAfter", d.probeAfter),
                get(millis, "probeTimeout", d.probeTimeout), get(millis, "backoffMin", d.backoffMin),
                get(millis, "backoffMax", d.backoffMax), get(millis, "stableAfter", d.stableAfter),
                get(millis, "stopGrace", d.stopGrace));
    }

    private static Duration get(Map<String, String> millis, String key, Duration fallback) {
        String v = millis.get(key);
        return v == null ? fallback : Duration.ofMillis(Long.parseLong(v));
    }
}
