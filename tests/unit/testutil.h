/* Helpers shared by the unit tests (header-only: each test is its own program). */
#ifndef RX_TESTUTIL_H
#define RX_TESTUTIL_H

#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>

static int rx_test_rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(p);
}

/* Removes a directory tree made by a test (no symlinks followed). Returns 0 or -1. */
static inline int rx_test_rm_tree(const char *path)
{
    return nftw(path, rx_test_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
