/* A JSON value as it may be shown: a copy with every string and every key redacted (call.h:
 * rx_redact_json). serve echoes a request's id, of any JSON type, in its replies and logs; the
 * caller's text may hold a secret pasted in the wrong field. */
#include <stdlib.h>
#include <string.h>

#include "call.h"

#define REDACT_JSON_MAX (1u << 20) /* one string; a longer one is shown as a marker */

/* s redacted, malloc'd; "[REDACTED:UNAVAILABLE]" when it cannot be (too long, no memory). */
static char *redacted_str(const rx_redactor *r, const char *s)
{
    rx_buf b;
    size_t n = strlen(s);
    rx_buf_init(&b, n * 2 + 4096 < REDACT_JSON_MAX ? n * 2 + 4096 : REDACT_JSON_MAX);
    if (rx_redact_buf(r, s, n, &b) == 0 && rx_buf_addc(&b, 0) == 0) {
        size_t len;
        return (char *)rx_buf_steal(&b, &len);
    }
    rx_buf_free(&b);
    return strdup("[REDACTED:UNAVAILABLE]");
}

static cJSON *copy_string(const rx_redactor *r, const char *s)
{
    char *t = redacted_str(r, s);
    cJSON *o = t ? cJSON_CreateString(t) : NULL;
    free(t);
    return o;
}

cJSON *rx_redact_json(const rx_redactor *r, const cJSON *v)
{
    if (v == NULL)
        return cJSON_CreateNull();
    if (cJSON_IsString(v))
        return copy_string(r, v->valuestring);
    if (!cJSON_IsArray(v) && !cJSON_IsObject(v))
        return cJSON_Duplicate(v, 0); /* numbers, booleans, null */
    cJSON *o = cJSON_IsArray(v) ? cJSON_CreateArray() : cJSON_CreateObject();
    for (const cJSON *e = v->child; o && e; e = e->next) {
        cJSON *c = rx_redact_json(r, e);
        char *key = cJSON_IsObject(v) && e->string ? redacted_str(r, e->string) : NULL;
        if (c == NULL || (cJSON_IsObject(v) && key == NULL)) {
            cJSON_Delete(c), free(key), cJSON_Delete(o);
            return NULL;
        }
        if (key)
            cJSON_AddItemToObject(o, key, c);
        else
            cJSON_AddItemToArray(o, c);
        free(key);
    }
    return o;
}
