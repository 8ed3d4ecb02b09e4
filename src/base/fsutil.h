/* File-system checks shared by the workspace, keys, audit and evidence: ssh-style refusal of
 * unprotected files, and creation with exact modes whatever the umask. */
#ifndef RX_FSUTIL_H
#define RX_FSUTIL_H

#include <stddef.h>

#include "rexec.h"

/* Refuses (code, naming path) a path that is a symlink, or group- or world-writable; also
 * group/world-readable when private is set (keys, secrets). Returns 0 or code. */
int rx_fs_check(const char *path, int private, int code, rexec_error *err);

/* mkdir with mode 0700 exactly (fchmod after creation); an existing dir is checked with
 * rx_fs_check. Returns 0 or code. */
int rx_fs_mkdir_private(const char *path, int code, rexec_error *err);

/* Reads a whole file of at most max bytes into *data (malloc'd, NUL-terminated). */
int rx_fs_read_file(const char *path, size_t max, char **data, size_t *len, int code,
                    rexec_error *err);

/* path joined to dir unless already absolute; malloc'd. */
char *rx_fs_join(const char *dir, const char *path);

/* ---- Added with the audit/evidence implementation ------------------------------------------ */

/* Note on rx_fs_check (and rx_fs_check_fd below): like ssh, it also refuses a path owned by
 * another user than the caller or root, who could rewrite it whatever its mode. */

/* Creates path as a new file (O_EXCL, never following a symlink) with mode 0600 exactly
 * whatever the umask, relative to dirfd (AT_FDCWD for a plain path). Returns 0 and the open
 * descriptor (O_WRONLY|O_CLOEXEC) in *fd, or code naming path. */
int rx_fs_create_private(int dirfd, const char *path, int *fd, int code, rexec_error *err);

/* Writes all len bytes to fd, retrying short writes and EINTR. Returns 0 or -1 with errno set
 * (the caller names the path in its message). */
int rx_fs_write_all(int fd, const void *data, size_t len);

/* fsyncs a directory so that a create or rename inside it survives a crash. Returns 0 or
 * code naming path. */
int rx_fs_fsync_dir(const char *path, int code, rexec_error *err);

/* 1 when path (after resolving symlinks in it) is dir itself or lies inside dir, 0 when not,
 * -1 when either cannot be resolved (errno set). */
int rx_fs_is_inside(const char *path, const char *dir);

/* rx_fs_check on an open descriptor (no race between the check and the use); path only names
 * it in the message. Also refuses what is not a regular file or directory. */
int rx_fs_check_fd(int fd, const char *path, int private, int code, rexec_error *err);

/* Why open(path, O_DIRECTORY | O_NOFOLLOW) failed with errno e, for a message: a symbolic link
 * (which fails with ENOTDIR when it points to a directory, ELOOP otherwise) is named as one. */
const char *rx_fs_open_dir_why(const char *path, int e);

#endif
