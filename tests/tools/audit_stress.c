/* Audit stress: N processes append intent/outcome pairs to one workspace's audit log at the same
 * moment, then every line is checked whole, every run has its intent before its outcome, each
 * process's records are in its own order, nothing is lost, and the chain verifies.
 *
 *   audit_stress [-p PROCS] [-n RUNS] [-r ROTATE_BYTES] [WORKSPACE]
 *
 * Built standalone (see docs/audit.md) or included by tests/unit/test_audit_stress.c with
 * AUDIT_STRESS_NO_MAIN defined. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "audit.h"
#include "fsutil.h"

/* One child: waits at the barrier (the pipe's EOF), then appends its runs in order. Opens its
 * own handle after fork, as every rexec process does. */
static int stress_child(const char *ws, int barrier, int id, int runs, unsigned long long rotate)
{
    rx_audit *a = NULL;
    rexec_error e = {0};
    char c, run[32];
    while (read(barrier, &c, 1) > 0)
        ;
    if (rx_audit_open(&a, ws, NULL, &e) != 0) {
        fprintf(stderr, "child %d: %s\n", id, e.msg);
        return 1;
    }
    if (rotate)
        rx_audit_set_rotate_size(a, rotate);
    for (int i = 0; i < runs; i++) {
        snprintf(run, sizeof(run), "p%03d-r%04d", id, i);
        for (int ph = 0; ph < 2; ph++) {
            cJSON *r = cJSON_CreateObject();
            cJSON_AddStringToObject(r, "run_id", run);
            cJSON_AddStringToObject(r, "phase", ph ? "outcome" : "intent");
            cJSON_AddStringToObject(r, "host", "lab1");
            cJSON_AddStringToObject(r, "action", "sys.uname");
            cJSON_AddStringToObject(r, "argv", "uname -a");
            int rc = rx_audit_append(a, r, NULL, &e);
            cJSON_Delete(r);
            if (rc != 0) {
                fprintf(stderr, "child %d: %s\n", id, e.msg);
                rx_audit_close(a);
                return 1;
            }
        }
    }
    rx_audit_close(a);
    return 0;
}

/* Starts procs children held at one barrier, releases them together, waits for all. */
static int stress_run(const char *ws, int procs, int runs, unsigned long long rotate)
{
    int fds[2], bad = 0;
    pid_t *pids = calloc((size_t)procs, sizeof(*pids));
    if (pids == NULL || pipe(fds) != 0)
        return -1;
    fflush(NULL);
    for (int i = 0; i < procs; i++) {
        if ((pids[i] = fork()) == 0) {
            close(fds[1]);
            _exit(stress_child(ws, fds[0], i, runs, rotate));
        }
        if (pids[i] < 0)
            bad++;
    }
    close(fds[0]);
    close(fds[1]); /* every child is forked: let them all go at once */
    for (int i = 0; i < procs; i++) {
        int st = 0;
        if (pids[i] > 0 && (waitpid(pids[i], &st, 0) != pids[i] || !WIFEXITED(st) ||
                            WEXITSTATUS(st) != 0))
            bad++;
    }
    free(pids);
    return bad;
}

typedef struct stress_check {
    int procs, runs;
    int *next;    /* per process: index of the next record expected (2 per run) */
    long lines;
    int problems;
} stress_check;

static void stress_problem(stress_check *c, const char *file, long line, const char *what)
{
    if (c->problems++ < 20)
        fprintf(stderr, "%s:%ld: %s\n", file, line, what);
}

/* One line: whole (newline, JSON, hash at the end) and the next record of its process. */
static void stress_line(stress_check *c, const char *file, long line, char *s, size_t len)
{
    char hex[RX_AUDIT_HEX_LEN];
    int p, r;
    c->lines++;
    if (len == 0 || s[len - 1] != '\n') {
        stress_problem(c, file, line, "line without its newline");
        return;
    }
    s[--len] = 0;
    cJSON *o = cJSON_Parse(s);
    const cJSON *run = cJSON_GetObjectItem(o, "run_id"), *ph = cJSON_GetObjectItem(o, "phase");
    if (o == NULL || rx_audit_line_hash(s, len, hex) != 0 || !cJSON_IsString(run) ||
        !cJSON_IsString(ph) || sscanf(run->valuestring, "p%d-r%d", &p, &r) != 2 || p < 0 ||
        p >= c->procs) {
        stress_problem(c, file, line, "not a whole record");
    } else if (c->next[p] != 2 * r + (strcmp(ph->valuestring, "outcome") == 0)) {
        stress_problem(c, file, line, "record out of its process's order (lost or duplicated)");
    } else {
        c->next[p]++;
    }
    cJSON_Delete(o);
}

static int stress_check_file(stress_check *c, const char *path)
{
    FILE *fp = fopen(path, "r");
    char *s = NULL;
    size_t cap = 0;
    ssize_t n;
    long line = 0;
    if (fp == NULL)
        return -1;
    while ((n = getline(&s, &cap, fp)) > 0)
        stress_line(c, path, ++line, s, (size_t)n);
    free(s);
    fclose(fp);
    return 0;
}

/* Reads every audit file in chain order; returns the number of problems (0: all good). */
static int stress_check_all(const char *ws, int procs, int runs, size_t *files)
{
    stress_check c = {procs, runs, calloc((size_t)procs, sizeof(int)), 0, 0};
    char dir[4096], path[4200], **names = NULL;
    size_t n = 0;
    rexec_error e = {0};
    snprintf(dir, sizeof(dir), "%s/audit", ws);
    if (c.next == NULL || rx_audit_rotated(dir, &names, &n, &e) != 0) {
        free(c.next);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        stress_check_file(&c, path);
    }
    snprintf(path, sizeof(path), "%s/audit.log", dir);
    stress_check_file(&c, path);
    for (int p = 0; p < procs; p++)
        if (c.next[p] != 2 * runs)
            stress_problem(&c, "audit", 0, "a process's records are missing");
    if (c.lines != 2L * procs * runs)
        stress_problem(&c, "audit", c.lines, "wrong number of lines");
    *files = n + 1;
    rx_audit_names_free(names, n);
    free(c.next);
    return c.problems;
}

/* The whole exercise; 0 when every check passes. */
static int audit_stress(const char *ws, int procs, int runs, unsigned long long rotate)
{
    rexec_error e = {0};
    size_t files = 0;
    int bad = stress_run(ws, procs, runs, rotate);
    if (bad != 0) {
        fprintf(stderr, "audit_stress: %d process(es) failed\n", bad);
        return 1;
    }
    if ((bad = stress_check_all(ws, procs, runs, &files)) != 0) {
        fprintf(stderr, "audit_stress: %d problem(s) in the records\n", bad);
        return 1;
    }
    int v = rx_audit_verify(ws, NULL, stdout, &e);
    if (v != RX_AUDIT_VERIFY_OK) {
        fprintf(stderr, "audit_stress: verify returned %d %s\n", v, v < 0 ? e.msg : "");
        return 1;
    }
    printf("audit_stress: %d processes x %d runs: %ld records whole and in order in %zu "
           "file(s), chain verified\n", procs, runs, 2L * procs * runs, files);
    return 0;
}

#ifndef AUDIT_STRESS_NO_MAIN
int main(int argc, char **argv)
{
    int procs = 32, runs = 100, opt;
    unsigned long long rotate = 0;
    char tmp[] = "/tmp/rx-audit-stress-XXXXXX";
    while ((opt = getopt(argc, argv, "p:n:r:")) != -1) {
        if (opt == 'p')
            procs = atoi(optarg);
        else if (opt == 'n')
            runs = atoi(optarg);
        else if (opt == 'r')
            rotate = strtoull(optarg, NULL, 10);
        else {
            fprintf(stderr, "usage: audit_stress [-p PROCS] [-n RUNS] [-r ROTATE_BYTES] [DIR]\n");
            return 64;
        }
    }
    const char *ws = optind < argc ? argv[optind] : mkdtemp(tmp);
    if (ws == NULL || procs < 1 || runs < 1) {
        fprintf(stderr, "audit_stress: bad arguments or no temporary directory\n");
        return 64;
    }
    return audit_stress(ws, procs, runs, rotate);
}
#endif
