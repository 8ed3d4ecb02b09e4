/* File actions (src/config/transfer.c): what the loader accepts and refuses in "put" / "get",
 * the command it gives them, and the path check of one call's values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"
#include "transfer.h"
#include "workspace.h"

static char dir[64];

#define HEAD "{\"hosts\": {}, \"secrets\": {\"S\": {\"env\": \"X\"}}, \"actions\": {\"a\": "

static int load(const char *action, rx_ws **ws, rexec_error *err)
{
    char path[128], json[4096];
    snprintf(path, sizeof(path), "%s/rexec.json", dir);
    snprintf(json, sizeof(json), HEAD "%s}}", action);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(json, f);
    fclose(f);
    chmod(path, 0600);
    *ws = NULL;
    return rx_ws_load(ws, dir, err);
}

static void refused(const char *action, const char *want)
{
    rx_ws *ws;
    rexec_error err = {0};
    int r = load(action, &ws, &err);
    rx_ws_free(ws);
    if (r != REXEC_ECONFIG || strstr(err.msg, want) == NULL)
        fail_msg("%s: got %d \"%s\", expected 78 with \"%s\"", action, r, err.msg, want);
}

static rx_ws *loaded(const char *action)
{
    rx_ws *ws;
    rexec_error err = {0};
    if (load(action, &ws, &err) != 0)
        fail_msg("%s: %s", action, err.msg);
    return ws;
}

static void test_load_refusals(void **state)
{
    (void)state;
    refused("{\"risk\": \"L1\", \"get\": {\"path\": \"/x/{n}\"}, \"binary\": true, \"secrets\": "
            "[\"S\"], \"params\": {\"n\": {\"type\": \"path\"}}}",
            "actions.a.binary: a binary download is not redacted");
    refused("{\"risk\": \"L1\", \"command\": \"cat\", \"binary\": true}",
            "actions.a.binary: only a \"get\" action");
    refused("{\"risk\": \"L1\", \"command\": \"true\", \"put\": {\"path\": \"/x\"}}",
            "actions.a.command: a \"put\" action has no command");
    refused("{\"risk\": \"L1\", \"put\": {\"path\": \"/x\"}, \"get\": {\"path\": \"/y\"}}",
            "give one of \"put\" or \"get\"");
    refused("{\"risk\": \"L1\", \"put\": {\"path\": \"x/y\"}}", "actions.a.put.path: must be an "
                                                               "absolute path");
    refused("{\"risk\": \"L1\", \"put\": {\"path\": \"/x/$(id)\"}}", "actions.a.put.path: a path "
                                                                    "template holds only");
    refused("{\"risk\": \"L1\", \"put\": {\"path\": \"/x/\\\"y\"}}", "actions.a.put.path");
    refused("{\"risk\": \"L1\", \"put\": {\"path\": \"/x/{nope}\"}}", "names no declared");
    refused("{\"risk\": \"L1\", \"put\": {\"path\": \"/x\", \"mode\": \"4755\"}}",
            "actions.a.put.mode");
    refused("{\"risk\": \"L1\", \"put\": {\"path\": \"/x\", \"mode\": \"0800\"}}",
            "actions.a.put.mode");
    refused("{\"risk\": \"L1\", \"put\": {\"path\": \"/x\", \"owner\": \"a b\"}}",
            "actions.a.put.owner");
    refused("{\"risk\": \"L1\", \"put\": {\"path\": \"/x\", \"owner\": \"-x\"}}",
            "actions.a.put.owner");
    refused("{\"risk\": \"L1\", \"get\": {\"path\": \"/x\", \"mode\": \"0600\"}}",
            "actions.a.get.mode: unknown key");
    refused("{\"risk\": \"L1\", \"put\": {\"path\": \"/x\"}, \"params\": {\"content_sha256\": "
            "{\"type\": \"string\"}}}",
            "may not declare the parameters content_sha256");
    refused("{\"risk\": \"L1\", \"put\": {\"path\": \"/x\", \"max_bytes\": -1}}",
            "actions.a.put.max_bytes");
}

static void test_put_command_and_defaults(void **state)
{
    (void)state;
    rx_ws *ws = loaded("{\"risk\": \"L1\", \"put\": {\"path\": \"/srv/{n}.tar\", \"mode\": "
                       "\"0640\", \"owner\": \"app:app\"}, \"params\": {\"n\": {\"type\": "
                       "\"path\"}}}");
    const rx_action *a = rx_ws_action(ws, "a");
    assert_int_equal(a->transfer, RX_XFER_PUT);
    assert_string_equal(a->command,
                        "__rx_put \"/srv/{n}.tar\" {content_sha256} {content_size} '0640' 'app:app'");
    assert_int_equal(a->n_params, 3);
    assert_true(a->stdin_piped);
    assert_true(a->state_changing);
    assert_int_equal(a->risk, RX_L2); /* a put changes state */
    assert_true(a->xfer_max_bytes == 1ULL << 30);
    rx_ws_free(ws);
    ws = loaded("{\"risk\": \"L1\", \"state_changing\": false, \"stdin\": \"staged\", \"put\": "
                "{\"path\": \"/srv/x\", \"max_bytes\": 10}}");
    a = rx_ws_action(ws, "a");
    assert_false(a->stdin_piped);
    assert_int_equal(a->risk, RX_L1);
    assert_true(a->xfer_max_bytes == 10);
    assert_string_equal(a->command, "__rx_put \"/srv/x\" {content_sha256} {content_size} '' ''");
    rx_ws_free(ws);
    ws = loaded("{\"risk\": \"L1\", \"get\": {\"path\": \"/var/log/{u}.log\"}, \"binary\": "
                "true, \"keep_bytes\": true, \"params\": {\"u\": {\"type\": \"string\"}}}");
    a = rx_ws_action(ws, "a");
    assert_int_equal(a->transfer, RX_XFER_GET);
    assert_string_equal(a->command, "__rx_get \"/var/log/{u}.log\"");
    assert_true(a->binary && a->keep_bytes);
    rx_ws_free(ws);
}

static int path_of(const rx_action *a, const char *value, rx_buf *out, rexec_error *err)
{
    rexec_param v[3] = {{a->params[0].name, value, strlen(value)}, {"", "", 0}, {"", "", 0}};
    rx_buf_init(out, 8192);
    return rx_transfer_path(a, v, out, err);
}

/* The path of one call, checked whole whatever the parameter's type let through. */
static void test_call_path(void **state)
{
    (void)state;
    static const char *const bad[] = {"../etc/passwd", "a/../../b", "a/./b", "a//b", "a/",
                                      "..", ".", "a\nb", "a\tb", "a\x7f", NULL};
    rx_ws *ws = loaded("{\"risk\": \"L1\", \"get\": {\"path\": \"/srv/{n}\"}, \"params\": "
                       "{\"n\": {\"type\": \"string\"}}}");
    const rx_action *a = rx_ws_action(ws, "a");
    rx_buf out;
    rexec_error err = {0};
    assert_int_equal(path_of(a, "app/v1.tar", &out, &err), 0);
    assert_string_equal((const char *)out.data, "/srv/app/v1.tar");
    rx_buf_free(&out);
    assert_int_equal(path_of(a, "..x/a..b/.hidden", &out, &err), 0); /* names, not components */
    rx_buf_free(&out);
    for (int i = 0; bad[i]; i++) {
        if (path_of(a, bad[i], &out, &err) != REXEC_EREQUEST)
            fail_msg("the value \"%s\" was not refused", bad[i]);
        assert_non_null(strstr(err.msg, "action \"a\": the get path"));
        rx_buf_free(&out);
    }
    rx_ws_free(ws);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/rx-xfer-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return rx_test_rm_tree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_refusals),
        cmocka_unit_test(test_put_command_and_defaults),
        cmocka_unit_test(test_call_path),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
