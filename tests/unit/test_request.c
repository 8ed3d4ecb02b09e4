/* Run requests and the strict JSON under them: every refusal names the JSON path (or the byte
 * offset for syntax), and nothing lenient gets through. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jsonx.h"
#include "request.h"

/* Parses a C-string document; returns the rexec_err, the message in e. */
static int parse(const char *doc, rx_request *r, rexec_error *e)
{
    return rx_request_parse(doc, strlen(doc), r, e);
}

/* Expects doc to be refused with 65 and a message containing want. */
static void refused(const char *doc, const char *want)
{
    rx_request r;
    rexec_error e = {0};
    int rc = parse(doc, &r, &e);
    if (rc != REXEC_EREQUEST || strstr(e.msg, want) == NULL)
        fail_msg("%s: expected 65 with \"%s\", got %d: %s", doc, want, rc, e.msg);
    assert_null(r.action); /* nothing is left behind on failure */
    assert_int_equal(r.n_params, 0);
    rx_request_free(&r);
}

static void test_full_request(void **state)
{
    (void)state;
    rx_request r;
    rexec_error e = {0};
    const char *doc = "{\"action\": \"svc.restart\", \"params\": {\"unit\": \"nginx\", \"count\": 3,"
                      " \"neg\": -12, \"big\": 1e3}, \"stdin\": \"line\\n\", \"rationale\": "
                      "\"why \\u00e9\", \"hypothesis_id\": \"H-12\", \"host\": \"lab1\", "
                      "\"timeout_s\": 2.5}\n";
    assert_int_equal(parse(doc, &r, &e), 0);
    assert_string_equal(r.action, "svc.restart");
    assert_int_equal(r.n_params, 4);
    assert_string_equal(r.params[0].name, "unit");
    assert_string_equal(r.params[0].value, "nginx");
    assert_int_equal(r.params[0].len, 5);
    assert_int_equal(r.params[0].from_number, 0);
    assert_string_equal(r.params[1].value, "3");
    assert_int_equal(r.params[1].from_number, 1);
    assert_string_equal(r.params[2].value, "-12");
    assert_string_equal(r.params[3].value, "1000");
    rx_request_free(&r);
    assert_int_equal(parse("{\"action\":\"a\",\"params\":{\"max\":9007199254740991,"
                           "\"min\":-9007199254740991,\"z\":-0}}", &r, &e), 0);
    assert_string_equal(r.params[0].value, "9007199254740991");
    assert_string_equal(r.params[1].value, "-9007199254740991");
    assert_string_equal(r.params[2].value, "0");
    rx_request_free(&r);
    assert_int_equal(parse(doc, &r, &e), 0);
    assert_int_equal(r.has_stdin, 1);
    assert_int_equal(r.stdin_data.len, 5);
    assert_memory_equal(r.stdin_data.data, "line\n", 5);
    assert_string_equal(r.rationale, "why \xc3\xa9");
    assert_string_equal(r.hypothesis_id, "H-12");
    assert_string_equal(r.host, "lab1");
    assert_true(r.timeout_s == 2.5);

    rexec_request pub;
    rexec_param *pp = NULL;
    assert_int_equal(rx_request_view(&r, &pub, &pp), 0);
    assert_string_equal(pub.action, "svc.restart");
    assert_string_equal(pub.host, "lab1");
    assert_int_equal(pub.n_params, 4);
    assert_string_equal(pub.params[1].name, "count");
    assert_int_equal(pub.params[1].value_len, 1);
    assert_int_equal(pub.stdin_len, 5);
    assert_true(pub.timeout_s == 2.5);
    free(pp);
    rx_request_free(&r);
    assert_null(r.action);
}

static void test_minimal_request(void **state)
{
    (void)state;
    rx_request r;
    rexec_error e = {0};
    assert_int_equal(parse("{\"action\":\"sys.uname\"}", &r, &e), 0);
    assert_int_equal(r.n_params, 0);
    assert_int_equal(r.has_stdin, 0);
    assert_null(r.host);
    assert_null(r.rationale);
    assert_true(r.timeout_s == 0);
    rexec_request pub;
    rexec_param *pp = NULL;
    assert_int_equal(rx_request_view(&r, &pub, &pp), 0);
    assert_null(pub.stdin_data); /* no stdin: /dev/null */
    rx_request_free(&r);
    /* an empty stdin is stdin, not /dev/null */
    assert_int_equal(parse("{\"action\":\"a\",\"stdin\":\"\"}", &r, &e), 0);
    assert_int_equal(r.has_stdin, 1);
    assert_int_equal(r.stdin_data.len, 0);
    assert_int_equal(rx_request_view(&r, &pub, &pp), 0);
    assert_non_null(pub.stdin_data);
    assert_int_equal(pub.stdin_len, 0);
    rx_request_free(&r);
}

static void test_duplicate_keys(void **state)
{
    (void)state;
    refused("{\"action\":\"a\",\"action\":\"b\"}", "request: action: duplicate key");
    refused("{\"action\":\"a\",\"params\":{\"unit\":\"x\",\"n\":1,\"unit\":\"y\"}}",
            "request: params.unit: duplicate key");
    /* keys differing only by case are different keys: "Action" is then unknown */
    refused("{\"action\":\"a\",\"Action\":\"b\"}", "request: Action: unknown key");
    /* an escaped spelling of the same key is the same key */
    refused("{\"action\":\"a\",\"\\u0061ction\":\"b\"}", "request: action: duplicate key");
}

static void test_unknown_keys(void **state)
{
    (void)state;
    refused("{\"action\":\"a\",\"colour\":\"red\"}",
            "request: colour: unknown key (expected one of: action, params");
    refused("{\"action\":\"a\",\"grant_id\":\"g\"}", "request: grant_id: unknown key");
    /* a key with control characters is shown with '?' */
    refused("{\"action\":\"a\",\"x\\ty\":1}", "request: x?y: unknown key");
}

static void test_size_limit(void **state)
{
    (void)state;
    const char *head = "{\"action\":\"a\",\"stdin\":\"", *tail = "\"}";
    size_t hl = strlen(head), tl = strlen(tail);
    char *doc = malloc(RX_REQUEST_MAX_LEN + 2);
    assert_non_null(doc);
    memcpy(doc, head, hl);
    memset(doc + hl, 'x', RX_REQUEST_MAX_LEN - hl - tl);
    memcpy(doc + RX_REQUEST_MAX_LEN - tl, tail, tl);
    rx_request r;
    rexec_error e = {0};
    assert_int_equal(rx_request_parse(doc, RX_REQUEST_MAX_LEN, &r, &e), 0);
    assert_int_equal(r.stdin_data.len, RX_REQUEST_MAX_LEN - hl - tl);
    rx_request_free(&r);
    /* one byte more (trailing whitespace would otherwise be fine) */
    doc[RX_REQUEST_MAX_LEN] = ' ';
    assert_int_equal(rx_request_parse(doc, RX_REQUEST_MAX_LEN + 1, &r, &e), REXEC_EREQUEST);
    assert_string_equal(e.msg, "request: JSON document too large: 65537 bytes (at most 65536)");
    free(doc);
}

static void test_non_finite(void **state)
{
    (void)state;
    refused("{\"action\":\"a\",\"timeout_s\":1e999}",
            "request: timeout_s: number out of range (it must be finite)");
    refused("{\"action\":\"a\",\"params\":{\"n\":-1e999}}", "request: params.n: number out of range");
    refused("{\"action\":\"a\",\"timeout_s\":NaN}", "unexpected character");
    refused("{\"action\":\"a\",\"timeout_s\":Infinity}", "unexpected character");
    refused("{\"action\":\"a\",\"timeout_s\":-Infinity}", "invalid number");
}

static void test_type_errors(void **state)
{
    (void)state;
    refused("{\"action\":\"a\",\"timeout_s\":true}",
            "request: timeout_s: expected a number, got a boolean");
    refused("{\"action\":\"a\",\"timeout_s\":\"30\"}",
            "request: timeout_s: expected a number, got a string");
    refused("{\"action\":\"a\",\"params\":{\"n\":true}}",
            "request: params.n: expected a string or an integer, got a boolean");
    refused("{\"action\":\"a\",\"params\":{\"n\":null}}", "request: params.n: expected a string or "
                                                         "an integer, got null");
    refused("{\"action\":\"a\",\"params\":{\"n\":{\"x\":1}}}", "request: params.n: expected a "
                                                              "string or an integer, got an object");
    refused("{\"action\":\"a\",\"params\":{\"n\":[1]}}", "got an array");
    refused("{\"action\":\"a\",\"params\":{\"n\":1.5}}", "request: params.n: a number must be an "
                                                        "integer");
    /* 2^53+1 rounds to 2^53 in a double: both are refused rather than silently changed */
    refused("{\"action\":\"a\",\"params\":{\"n\":9007199254740993}}", "request: params.n: integer "
                                                                     "beyond 2^53-1");
    refused("{\"action\":\"a\",\"params\":{\"n\":-9007199254740992}}", "beyond 2^53-1");
    refused("{\"action\":\"a\",\"params\":[\"x\"]}", "request: params: expected an object, got an "
                                                     "array");
    refused("{\"action\":true}", "request: action: expected a string, got a boolean");
    refused("{\"action\":\"a\",\"stdin\":5}", "request: stdin: expected a string, got a number");
    refused("[\"action\"]", "request: expected an object, got an array");
    refused("\"action\"", "request: expected an object, got a string");
}

static void test_field_rules(void **state)
{
    (void)state;
    refused("{}", "request: action: missing");
    refused("{\"params\":{}}", "request: action: missing");
    refused("{\"action\":\"\"}", "request: action: must be 1 to 128 bytes");
    refused("{\"action\":\"a b\"}", "request: action: only printable ASCII");
    refused("{\"action\":\"a\\nb\"}", "request: action: only printable ASCII");
    refused("{\"action\":\"a\",\"host\":\"l\\u00e9\"}", "request: host: only printable ASCII");
    refused("{\"action\":\"a\",\"params\":{\"a b\":\"x\"}}", "request: params.a b: parameter names");
    refused("{\"action\":\"a\",\"params\":{\"\":\"x\"}}", "request: params.\"\": parameter names");
    refused("{\"action\":\"a\",\"timeout_s\":0}", "request: timeout_s: must be greater than 0");
    refused("{\"action\":\"a\",\"timeout_s\":-1}", "request: timeout_s: must be greater than 0");
    refused("{\"action\":\"a\",\"timeout_s\":604801}", "request: timeout_s: must be greater than 0 "
                                                      "and at most 604800");
    refused("{\"action\":\"a\",\"stdin\":\"x\",\"stdin_base64\":\"eA==\"}",
            "request: stdin_base64: stdin and stdin_base64 are mutually exclusive");
    char big[RX_REQUEST_RATIONALE_MAX + 64];
    int n = snprintf(big, sizeof(big), "{\"action\":\"a\",\"rationale\":\"");
    memset(big + n, 'r', RX_REQUEST_RATIONALE_MAX + 1);
    strcpy(big + n + RX_REQUEST_RATIONALE_MAX + 1, "\"}");
    refused(big, "request: rationale: longer than 4096 bytes");
}

static void test_syntax(void **state)
{
    (void)state;
    /* byte offsets (0-based) and line/column of the offending byte */
    refused("{\"action\":\"a\"} x", "JSON syntax error at byte 15 (line 1, column 16): unexpected "
                                    "data after the JSON value");
    refused("{\"action\":\"a\",\n \"x\":01}", "at byte 21 (line 2, column 7): leading zeros");
    refused("{\"action\":\"a\",\"timeout_s\":+1}", "at byte 26 (line 1, column 27): unexpected "
                                                  "character");
    refused("{\"action\":\"a\",\"timeout_s\":1.}", "digits are required after '.'");
    refused("{\"action\":\"a\",\"timeout_s\":.5}", "unexpected character");
    refused("{\"action\":\"a\",\"timeout_s\":1e}", "exponent");
    refused("{\"action\":\"a\",\"timeout_s\":-}", "invalid number");
    refused("{\"action\":\"a\",\"timeout_s\":0x10}", "invalid number");
    refused("{\"action\":\"a\",\"timeout_s\":1.5.5}", "invalid number");
    refused("{\"action\":\"a\",\"stdin\":\"a\x01" "b\"}", "control character in a string");
    refused("{\"action\":\"a\",\"stdin\":\"a\\u0000b\"}", "\\u0000 is not allowed");
    refused("{\"action\":\"a\",\"stdin\":\"\\ud800\"}", "JSON syntax error");
    refused("{\"action\":\"a\",\"stdin\":\"\\udc00x\"}", "JSON syntax error");
    refused("{\"action\":\"a\",\"stdin\":\"\\x41\"}", "invalid escape");
    refused("{\"action\":\"a\",\"stdin\":\"\\u12\"}", "invalid \\u escape");
    refused("{\"action\":\"a\",\"stdin\":\"abc", "unterminated string");
    refused("{\"action\":\"a\"\x0c}", "control character outside a string");
    refused("{\"action\":\"a\",}", "JSON syntax error");
    refused("{\"action\":'a'}", "unexpected character");
    refused("{action:\"a\"}", "JSON syntax error");
    refused("{\"action\":\"a\"} // c", "unexpected");
    refused("\xef\xbb\xbf{\"action\":\"a\"}", "byte order mark");
    refused("", "empty document");
    refused(" \n ", "empty document");
    refused("{\"action\":\"a\",\"x\":tru}", "JSON syntax error");
    refused("{\"action\":\"a\",\"x\":True}", "unexpected character");
    /* whitespace JSON allows is fine everywhere */
    rx_request r;
    rexec_error e = {0};
    assert_int_equal(parse(" \t\r\n{ \"action\" :\t\"a\" } \r\n", &r, &e), 0);
    rx_request_free(&r);
}

static void test_bytes(void **state)
{
    (void)state;
    refused("{\"action\":\"a\",\"stdin\":\"\xc0\xaf\"}", "byte 23 (line 1, column 24): invalid UTF-8");
    refused("{\"action\":\"a\",\"stdin\":\"\xed\xa0\x80\"}", "invalid UTF-8");
    refused("{\"action\":\"a\",\"stdin\":\"\xe2\x82\"}", "invalid UTF-8");
    refused("{\"action\":\"a\",\"stdin\":\"\xff\"}", "invalid UTF-8");
    rx_request r;
    rexec_error e = {0};
    static const char nul_doc[] = "{\"action\":\"a\",\"stdin\":\"a\0b\"}";
    assert_int_equal(rx_request_parse(nul_doc, sizeof(nul_doc) - 1, &r, &e), REXEC_EREQUEST);
    assert_non_null(strstr(e.msg, "byte 24 (line 1, column 25): NUL byte"));
    /* valid UTF-8 in strings passes */
    assert_int_equal(parse("{\"action\":\"a\",\"stdin\":\"\xe2\x9c\x93 \xf0\x9f\x98\x80\"}", &r, &e),
                     0);
    assert_int_equal(r.stdin_data.len, 8);
    rx_request_free(&r);
}

static void test_stdin_base64(void **state)
{
    (void)state;
    static const struct {
        const char *b64;
        const char *bytes;
        size_t len;
    } good[] = {
        {"", "", 0}, {"QQ==", "A", 1}, {"QUI=", "AB", 2}, {"QUJD", "ABC", 3},
        {"AP8A", "\x00\xff\x00", 3}, {"AAEC/w==", "\x00\x01\x02\xff", 4}, {"+/+/", "\xfb\xff\xbf", 3},
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        char doc[128];
        rx_request r;
        rexec_error e = {0};
        snprintf(doc, sizeof(doc), "{\"action\":\"a\",\"stdin_base64\":\"%s\"}", good[i].b64);
        if (parse(doc, &r, &e) != 0)
            fail_msg("%s refused: %s", good[i].b64, e.msg);
        assert_int_equal(r.has_stdin, 1);
        assert_int_equal(r.stdin_data.len, good[i].len);
        if (good[i].len)
            assert_memory_equal(r.stdin_data.data, good[i].bytes, good[i].len);
        rx_request_free(&r);
    }
    static const struct {
        const char *b64, *why;
    } bad[] = {
        {"QR==", "non-canonical base64"}, {"QUJ=", "non-canonical base64"},
        {"QQ=", "invalid base64 length"}, {"QQ", "invalid base64 length"},
        {"Q===", "invalid base64 length or padding"}, {"QQ==QQ==", "invalid base64 character at offset 4"},
        {"QQ ==", "invalid base64 character at offset 2"}, {"QQ\\n==", "invalid base64 character"},
        {"-_-_", "invalid base64 character at offset 0"}, {"QUJD=", "invalid base64 length"},
        {"====", "invalid base64"}, {"QUJD\\r\\n", "invalid base64 character at offset 4"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char doc[128], want[128];
        snprintf(doc, sizeof(doc), "{\"action\":\"a\",\"stdin_base64\":\"%s\"}", bad[i].b64);
        snprintf(want, sizeof(want), "request: stdin_base64: %s", bad[i].why);
        refused(doc, want);
    }
}

/* serve embeds run requests in a larger message: the path and extra keys are the caller's. */
static void test_from_json_nested(void **state)
{
    (void)state;
    cJSON *root = NULL;
    rexec_error e = {0};
    rx_request r;
    const char *msg = "{\"op\":\"run\",\"request\":{\"action\":\"a\",\"grant_id\":\"g1\","
                      "\"params\":{\"n\":false}}}";
    assert_int_equal(rx_json_parse_strict(msg, strlen(msg), 1 << 20, REXEC_EREQUEST, &root, &e), 0);
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(root, "request");
    static const char *const extra[] = {"grant_id", NULL};
    assert_int_equal(rx_request_from_json(req, "request", extra, &r, &e), REXEC_EREQUEST);
    assert_string_equal(e.msg, "request.params.n: expected a string or an integer, got a boolean");
    assert_int_equal(rx_request_from_json(req, "request", NULL, &r, &e), REXEC_EREQUEST);
    assert_string_equal(e.msg, "request.grant_id: unknown key (expected one of: action, params, "
                               "stdin, stdin_base64, rationale, hypothesis_id, host, timeout_s, "
                               "traceparent)");
    cJSON_Delete(root);
}

/* ---- The strict JSON module on its own ---------------------------------------------------- */

static void test_json_depth(void **state)
{
    (void)state;
    char doc[300];
    cJSON *j = NULL;
    rexec_error e = {0};
    for (int depth = 63; depth <= 66; depth++) {
        memset(doc, '[', (size_t)depth);
        memset(doc + depth, ']', (size_t)depth);
        int r = rx_json_parse_strict(doc, (size_t)depth * 2, sizeof(doc), REXEC_ECONFIG, &j, &e);
        if (depth <= RX_JSON_MAX_DEPTH) {
            assert_int_equal(r, 0);
            cJSON_Delete(j);
        } else {
            assert_int_equal(r, REXEC_ECONFIG); /* the caller's code */
            assert_non_null(strstr(e.msg, "at byte 64 (line 1, column 65): nested deeper than 64"));
        }
    }
    /* a tree built in memory is checked by the same walk, with paths */
    cJSON *t = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(t, "limits");
    cJSON_AddItemToArray(a, cJSON_CreateNumber(1));
    cJSON_AddItemToArray(a, cJSON_CreateNumber(1.0 / 0.0));
    assert_int_equal(rx_json_check_tree(t, "", REXEC_ECONFIG, &e), REXEC_ECONFIG);
    assert_string_equal(e.msg, "limits[1]: number out of range (it must be finite)");
    cJSON_AddItemToObject(t, "limits", cJSON_CreateNull());
    assert_int_equal(rx_json_check_tree(t, "ws", REXEC_ECONFIG, &e), REXEC_ECONFIG);
    assert_string_equal(e.msg, "ws.limits: duplicate key");
    cJSON_Delete(t);
}

static void test_json_many_keys(void **state)
{
    (void)state;
    /* 5000 distinct keys pass; one repeated at the end is found */
    size_t cap = 5000 * 16 + 64, at = 0;
    char *doc = malloc(cap);
    cJSON *j = NULL;
    rexec_error e = {0};
    at += (size_t)snprintf(doc + at, cap - at, "{");
    for (int i = 0; i < 5000; i++)
        at += (size_t)snprintf(doc + at, cap - at, "%s\"k%d\":%d", i ? "," : "", i, i);
    snprintf(doc + at, cap - at, "}");
    assert_int_equal(rx_json_parse_strict(doc, strlen(doc), cap, REXEC_ECONFIG, &j, &e), 0);
    cJSON_Delete(j);
    snprintf(doc + at, cap - at, ",\"k17\":0}");
    assert_int_equal(rx_json_parse_strict(doc, strlen(doc), cap, REXEC_ECONFIG, &j, &e),
                     REXEC_ECONFIG);
    assert_string_equal(e.msg, "k17: duplicate key");
    free(doc);
}

static void test_json_getters(void **state)
{
    (void)state;
    const char *doc = "{\"hosts\":{\"lab1\":{\"port\":22,\"frac\":1.5,\"huge\":9007199254740994,"
                      "\"neg\":-3,\"flag\":true,\"name\":\"x\",\"list\":[1,{\"k\":\"v\"}]}}}";
    cJSON *root = NULL;
    rexec_error e = {0};
    assert_int_equal(rx_json_parse_strict(doc, strlen(doc), 4096, REXEC_ECONFIG, &root, &e), 0);
    const cJSON *hosts = NULL, *lab = NULL, *list = NULL;
    assert_int_equal(rx_json_get_object(root, "hosts", "", 1, &hosts, REXEC_ECONFIG, &e), 0);
    assert_int_equal(rx_json_get_object(hosts, "lab1", "hosts", 1, &lab, REXEC_ECONFIG, &e), 0);
    long long port = 0, dflt = 77;
    assert_int_equal(rx_json_get_int(lab, "port", "hosts.lab1", 1, 1, 65535, &port,
                                     REXEC_ECONFIG, &e), 0);
    assert_int_equal(port, 22);
    assert_int_equal(rx_json_get_int(lab, "port", "hosts.lab1", 1, 23, 65535, &port,
                                     REXEC_ECONFIG, &e), REXEC_ECONFIG);
    assert_string_equal(e.msg, "hosts.lab1.port: out of range (23..65535)");
    assert_int_equal(rx_json_get_int(lab, "frac", "hosts.lab1", 1, 0, 10, &port, REXEC_ECONFIG,
                                     &e), REXEC_ECONFIG);
    assert_string_equal(e.msg, "hosts.lab1.frac: expected an integer");
    assert_int_equal(rx_json_get_int(lab, "huge", "hosts.lab1", 1, 0, INT64_MAX, &port,
                                     REXEC_ECONFIG, &e), REXEC_ECONFIG);
    assert_int_equal(rx_json_get_int(lab, "flag", "hosts.lab1", 1, 0, 10, &port, REXEC_ECONFIG,
                                     &e), REXEC_ECONFIG);
    assert_string_equal(e.msg, "hosts.lab1.flag: expected a number, got a boolean");
    /* absent and optional: 0, the default kept; absent and required: "missing" */
    assert_int_equal(rx_json_get_int(lab, "nope", "hosts.lab1", 0, 0, 10, &dflt, REXEC_ECONFIG,
                                     &e), 0);
    assert_int_equal(dflt, 77);
    assert_int_equal(rx_json_get_int(lab, "nope", "hosts.lab1", 1, 0, 10, &dflt, REXEC_ECONFIG,
                                     &e), REXEC_ECONFIG);
    assert_string_equal(e.msg, "hosts.lab1.nope: missing");
    double d = 0;
    assert_int_equal(rx_json_get_number(lab, "flag", "hosts.lab1", 1, &d, REXEC_EREQUEST, &e),
                     REXEC_EREQUEST);
    assert_int_equal(rx_json_get_number(lab, "frac", "hosts.lab1", 1, &d, REXEC_EREQUEST, &e), 0);
    assert_true(d == 1.5);
    int b = 0;
    assert_int_equal(rx_json_get_bool(lab, "flag", "hosts.lab1", 1, &b, REXEC_ECONFIG, &e), 0);
    assert_int_equal(b, 1);
    assert_int_equal(rx_json_get_bool(lab, "port", "hosts.lab1", 1, &b, REXEC_ECONFIG, &e),
                     REXEC_ECONFIG);
    assert_string_equal(e.msg, "hosts.lab1.port: expected a boolean, got a number");
    const char *s = NULL;
    assert_int_equal(rx_json_get_string(lab, "port", "hosts.lab1", 1, &s, REXEC_ECONFIG, &e),
                     REXEC_ECONFIG);
    assert_string_equal(e.msg, "hosts.lab1.port: expected a string, got a number");
    assert_int_equal(rx_json_get_array(lab, "list", "hosts.lab1", 1, &list, REXEC_ECONFIG, &e), 0);
    char p[RX_JSON_PATH_MAX];
    rx_json_path_index(p, sizeof(p), "hosts.lab1.list", 1);
    assert_int_equal(rx_json_get_string(cJSON_GetArrayItem(list, 1), "k", p, 1, &s,
                                        REXEC_ECONFIG, &e), 0);
    assert_string_equal(s, "v");
    assert_int_equal(rx_json_want(cJSON_GetArrayItem(list, 0), p, cJSON_Object, REXEC_ECONFIG,
                                  &e), REXEC_ECONFIG);
    assert_string_equal(e.msg, "hosts.lab1.list[1]: expected an object, got a number");
    static const char *const allowed[] = {"port", "frac", "huge", "neg", "flag", "name", NULL};
    assert_int_equal(rx_json_check_keys(lab, "hosts.lab1", allowed, REXEC_ECONFIG, &e),
                     REXEC_ECONFIG);
    assert_string_equal(e.msg, "hosts.lab1.list: unknown key (expected one of: port, frac, huge, "
                               "neg, flag, name)");
    cJSON_Delete(root);
}

static void test_json_paths(void **state)
{
    (void)state;
    char p[RX_JSON_PATH_MAX], key[300];
    assert_string_equal(rx_json_path_key(p, sizeof(p), "", "actions"), "actions");
    assert_string_equal(rx_json_path_key(p, sizeof(p), "actions", "svc.restart"),
                        "actions.svc.restart");
    rx_json_path_key(p, sizeof(p), p, "params"); /* extended in place */
    assert_string_equal(p, "actions.svc.restart.params");
    assert_string_equal(rx_json_path_index(p, sizeof(p), "groups.labs", 1), "groups.labs[1]");
    assert_string_equal(rx_json_path_key(p, sizeof(p), "a", "x\x01y\xc3\xa9"), "a.x?y??");
    memset(key, 'k', sizeof(key) - 1);
    key[sizeof(key) - 1] = 0;
    rx_json_path_key(p, sizeof(p), "a", key);
    assert_int_equal(strlen(p), 2 + 64 + 3);
    assert_string_equal(p + 66, "...");
    char small[12];
    rx_json_path_key(small, sizeof(small), "abcdefgh", "ijklmn");
    assert_string_equal(small, "abcdefgh...");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_request),   cmocka_unit_test(test_minimal_request),
        cmocka_unit_test(test_duplicate_keys), cmocka_unit_test(test_unknown_keys),
        cmocka_unit_test(test_size_limit),     cmocka_unit_test(test_non_finite),
        cmocka_unit_test(test_type_errors),    cmocka_unit_test(test_field_rules),
        cmocka_unit_test(test_syntax),         cmocka_unit_test(test_bytes),
        cmocka_unit_test(test_stdin_base64),   cmocka_unit_test(test_from_json_nested),
        cmocka_unit_test(test_json_depth),     cmocka_unit_test(test_json_many_keys),
        cmocka_unit_test(test_json_getters),   cmocka_unit_test(test_json_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
