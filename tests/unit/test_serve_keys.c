/* serve's request keys (rx_serve_keys, src/config/request.c): the table is well formed, and the
 * refusals are made from it — every key of an op is taken, any other is refused naming exactly
 * the op's keys in table order; the --request document takes its RX_OP_DOC rows and no other.
 * tests/install/t_serve_interface.sh holds the docs, the Python client and a running serve
 * against the same table. */
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

static void test_table_shape(void **state)
{
    (void)state;
    unsigned n_ops = 0;
    while (rx_serve_op_names[n_ops] != NULL)
        n_ops++;
    assert_int_equal(RX_OP_ALL, (1u << n_ops) - 1);
    for (unsigned i = 0; i < n_ops; i++)
        assert_int_equal(rx_serve_op_bit(rx_serve_op_names[i]), 1u << i);
    assert_int_equal(rx_serve_op_bit("frob"), 0);
    assert_int_equal(rx_serve_op_bit(NULL), 0);
    for (const rx_serve_key *k = rx_serve_keys; k->name != NULL; k++) {
        assert_non_null(k->type);
        assert_true(k->help != NULL && k->help[0] != 0);
        assert_true((k->ops & RX_OP_ALL) != 0); /* every key belongs to an op */
        if (k->ops & RX_OP_DOC)                 /* a document key is a run and eval key */
            assert_true((k->ops & (RX_OP_RUN | RX_OP_EVAL)) == (RX_OP_RUN | RX_OP_EVAL));
        for (const rx_serve_key *j = rx_serve_keys; j < k; j++)
            if (strcmp(j->name, k->name) == 0)
                fail_msg("key %s twice in the table", k->name);
    }
}

static cJSON *obj_with(const char *op, const char *key)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "op", op);
    if (key != NULL && strcmp(key, "op") != 0)
        cJSON_AddNumberToObject(o, key, 1);
    return o;
}

static void test_refusals_from_table(void **state)
{
    (void)state;
    for (unsigned i = 0; rx_serve_op_names[i] != NULL; i++) {
        const char *op = rx_serve_op_names[i];
        char want[1024], list[512];
        size_t at = 0;
        list[0] = 0;
        for (const rx_serve_key *k = rx_serve_keys; k->name != NULL; k++) {
            if (!(k->ops & (1u << i)))
                continue;
            at += (size_t)snprintf(list + at, sizeof(list) - at, "%s%s", at ? ", " : "", k->name);
            cJSON *o = obj_with(op, k->name);
            rexec_error e = {0};
            if (rx_serve_check_keys(o, op, &e) != 0)
                fail_msg("%s: its key %s was refused: %s", op, k->name, e.msg);
            cJSON_Delete(o);
        }
        assert_string_equal(rx_serve_keys_list(op, want, sizeof(want)), list);
        snprintf(want, sizeof(want), "frob: unknown key of \"%s\" (expected one of: %s)", op, list);
        cJSON *o = obj_with(op, "frob");
        rexec_error e = {0};
        assert_int_equal(rx_serve_check_keys(o, op, &e), REXEC_EREQUEST);
        assert_string_equal(e.msg, want);
        cJSON_Delete(o);
    }
    /* the run line is parsed past its keys: a key of serve only is no member of the request */
    cJSON *o = cJSON_Parse("{\"op\":\"run\",\"targets\":\"h\",\"action\":\"a\",\"grant_id\":\"g\","
                           "\"stdin_stream\":true,\"parallel\":2}");
    rx_request r;
    rexec_error e = {0};
    assert_int_equal(rx_request_from_serve(o, "run", &r, &e), 0);
    assert_string_equal(r.action, "a");
    rx_request_free(&r);
    cJSON_AddNumberToObject(o, "target", 1); /* a key of cancel and stdin, not of run */
    assert_int_equal(rx_request_from_serve(o, "run", &r, &e), REXEC_EREQUEST);
    assert_non_null(strstr(e.msg, "target: unknown key of \"run\""));
    assert_null(r.action);
    cJSON_Delete(o);
    assert_int_equal(rx_serve_check_keys(NULL, "run", &e), REXEC_EREQUEST);
}

static void test_document_keys(void **state)
{
    (void)state;
    char list[512] = "";
    size_t at = 0;
    for (const rx_serve_key *k = rx_serve_keys; k->name != NULL; k++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "action", "a");
        if (strcmp(k->name, "action") != 0)
            cJSON_AddItemToObject(o, k->name, cJSON_CreateObject()); /* a wrong type, if taken */
        rx_request r;
        rexec_error e = {0};
        int rc = rx_request_from_json(o, "", NULL, &r, &e);
        int unknown = rc != 0 && strstr(e.msg, "unknown key") != NULL;
        if (k->ops & RX_OP_DOC) {
            at += (size_t)snprintf(list + at, sizeof(list) - at, "%s%s", at ? ", " : "", k->name);
            if (unknown)
                fail_msg("the document refused its key %s: %s", k->name, e.msg);
        } else if (!unknown) {
            fail_msg("the document took serve's key %s (%d: %s)", k->name, rc, e.msg);
        }
        rx_request_free(&r);
        cJSON_Delete(o);
    }
    rx_request r;
    rexec_error e = {0};
    const char *doc = "{\"action\":\"a\",\"frob\":1}";
    char want[600];
    snprintf(want, sizeof(want), "request: frob: unknown key (expected one of: %s)", list);
    assert_int_equal(rx_request_parse(doc, strlen(doc), &r, &e), REXEC_EREQUEST);
    assert_string_equal(e.msg, want);
}

static void test_json_dump(void **state)
{
    (void)state;
    char *text = rx_serve_keys_json();
    assert_non_null(text);
    cJSON *j = cJSON_Parse(text);
    const cJSON *keys = cJSON_GetObjectItemCaseSensitive(j, "keys"), *k;
    size_t n = 0;
    cJSON_ArrayForEach(k, keys) {
        const rx_serve_key *t = &rx_serve_keys[n++];
        assert_non_null(t->name);
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(k, "name")->valuestring, t->name);
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(k, "type")->valuestring, t->type);
        const cJSON *ops = cJSON_GetObjectItemCaseSensitive(k, "ops"), *op;
        unsigned bits = 0;
        cJSON_ArrayForEach(op, ops) bits |= rx_serve_op_bit(op->valuestring);
        assert_int_equal(bits, t->ops & RX_OP_ALL);
    }
    assert_null(rx_serve_keys[n].name);
    cJSON_Delete(j);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_shape),
        cmocka_unit_test(test_refusals_from_table),
        cmocka_unit_test(test_document_keys),
        cmocka_unit_test(test_json_dump),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
