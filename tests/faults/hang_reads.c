/* A read that never returns, for the stall tests: preloaded (LD_PRELOAD) into a real run, it makes
 * pread() on one file block forever in the data loader's I/O thread (named "st-io"), as a hung
 * parallel file system or a library looping on a damaged file would. Every other read, and every
 * read from other threads (open_split, checkpoints), goes through untouched.
 *   ST_HANG_READS_OF=SUBSTRING   the file: its path (from /proc/self/fd) contains SUBSTRING
 *   ST_HANG_AFTER=N              let N matching reads through first (default 0)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

typedef ssize_t (*pread_fn)(int, void*, size_t, off_t);

static atomic_long matched;

static int in_io_thread(void) {
  static __thread int known = -1;
  if (known < 0) {
    char name[32] = "";
    pthread_getname_np(pthread_self(), name, sizeof name);
    known = strcmp(name, "st-io") == 0;
  }
  return known;
}

static int reads_hang_file(int fd) {
  const char* target = getenv("ST_HANG_READS_OF");
  if (target == NULL || *target == '\0' || !in_io_thread()) return 0;
  char link[64], path[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return 0;
  path[n] = '\0';
  return strstr(path, target) != NULL;
}

static void maybe_hang(int fd) {
  if (!reads_hang_file(fd)) return;
  const char* after = getenv("ST_HANG_AFTER");
  if (atomic_fetch_add(&matched, 1) < (after ? atol(after) : 0)) return;
  for (;;) pause();
}

ssize_t pread(int fd, void* buf, size_t count, off_t offset) {
  static pread_fn next;
  if (next == NULL) next = (pread_fn)dlsym(RTLD_NEXT, "pread");
  maybe_hang(fd);
  return next(fd, buf, count, offset);
}

ssize_t pread64(int fd, void* buf, size_t count, off_t offset) {
  static pread_fn next;
  if (next == NULL) next = (pread_fn)dlsym(RTLD_NEXT, "pread64");
  maybe_hang(fd);
  return next(fd, buf, count, offset);
}
