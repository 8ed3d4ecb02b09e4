/* The recorder: makes a context's audit records and evidence durable on a thread of its own, so
 * that fsync never stalls the loop (every host's connection, every client of serve), and shares
 * one fsync between the records of concurrent calls (group commit). Private to src/api.
 *
 * A job commits a call's evidence (rx_evidence_commit), appends one rendered audit record
 * (rx_audit_render), or both in that order. Jobs are done in the order they were submitted; the
 * audit records waiting together (up to RX_AUDIT_BATCH_MAX) go out in one append: one write, one
 * fsync, one head. A job's done callback runs on the loop thread only after its work is durable
 * (or has failed): no record is acknowledged before it is on disk. The head of a drain's last
 * append (audit/head.json) is written after its jobs are reported, by a work of its own or by
 * the next append, whichever comes first: it is not what makes a record durable. Only its write
 * holds the log (the lock, and the mutex that serialises the recorder's appends); its fdatasync
 * comes after, so the next append never waits for the previous head's flush.
 *
 * The work runs on libuv's thread pool, one drain at a time (so records keep their order and at
 * most one thread holds the log); the callbacks run in the drain's after-work callback.
 *
 * The queue is bounded (RX_RECORDER_MAX_JOBS). When it is full, a job is done at once on the
 * caller's thread and its callback is called before rx_recorder_submit returns: slower, never
 * lost. */
#ifndef RX_RECORDER_H
#define RX_RECORDER_H

#include <cjson/cJSON.h>
#include <uv.h>

#include "audit.h"
#include "evidence.h"
#include "rexec.h"

#define RX_RECORDER_MAX_JOBS 4096

typedef struct rx_recorder rx_recorder;
typedef struct rx_record_job rx_record_job;

struct rx_record_job {
    /* set by the submitter: ev (with meta and sha), text, or both: then the record is appended
     * only once the evidence is committed (a call's outcome names its evidence), in the same
     * drain: one hand-over to the thread pool for both */
    rx_evidence *ev;    /* committed and freed by the recorder */
    cJSON *ev_meta;     /* the submitter's; not touched after done */
    const char *ev_sha[2];
    char *text;         /* a rendered audit record; freed by the recorder */
    void (*done)(rx_record_job *job); /* on the loop thread */
    void *ud;
    /* results, valid in done */
    int rc;             /* the append: 0, or err says why */
    rexec_error err;
    int ev_rc;          /* the evidence commit: 0, or ev_err says why (the text, if any, was
                         * then not appended) */
    rexec_error ev_err;
    char *ev_path;      /* the evidence directory (malloc'd, the callee takes it) */
    /* the recorder's */
    rx_record_job *next;
};

/* A recorder for a (which it then owns and closes). 0, or REXEC_ENOMEM. */
int rx_recorder_new(rx_recorder **out, uv_loop_t *loop, rx_audit *a, rexec_error *err);

/* Queues job. Its done runs later on the loop thread, or before this returns (see above). */
void rx_recorder_submit(rx_recorder *r, rx_record_job *job);

/* Appends one rendered record now, on the caller's thread, in turn with the thread's appends
 * (for a refusal that must be on disk before the call goes on). Frees text. */
int rx_recorder_append_now(rx_recorder *r, char *text, rexec_error *err);

/* Jobs waiting for a drain (0 for NULL); loop thread only. */
size_t rx_recorder_queued(const rx_recorder *r);
/* What the recorder has done so far: audit appends (each one write, one fsync, one head) and
 * the records they carried. records / appends is the group commit's gain. */
void rx_recorder_counts(const rx_recorder *r, unsigned long *appends, unsigned long *records);

/* Closes the audit log and frees r, once the drain in progress (if any) has reported. No job may
 * be submitted after this. NULL is fine. */
void rx_recorder_close(rx_recorder *r);

#endif
