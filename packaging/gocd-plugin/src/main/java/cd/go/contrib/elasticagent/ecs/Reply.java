package cd.go.contrib.elasticagent.ecs;

import com.google.gson.JsonObject;

/**
 * One answer to one request, in either direction: GoCD's response code and the body as a JSON
 * text ({@code null} for none). Owns the shape of the bridge's own error answers:
 * {@code {"message":"..."}}, as the wire ({@code docs/protocol.md}, "Response") and GoCD expect.
 */
record Reply(int code, String body) {

    static final int INTERNAL_ERROR = 500;
    static final int BAD_REQUEST = 400;

    /** An error answer made by the bridge itself; {@code message} must hold no secret. */
    static Reply error(int code, String message) {
        JsonObject o = new JsonObject();
        o.addProperty("message", message);
        return new Reply(code, o.toString());
    }

    static Reply internalError(String message) {
        return error(INTERNAL_ERROR, message);
    }
}
