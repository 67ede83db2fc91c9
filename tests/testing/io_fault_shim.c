/* A test-only LD_PRELOAD library that makes a process's file I/O fail with an errno of the test's
 * choosing (EIO, EROFS, ...) on the files whose path contains a given string, while the test says
 * so: faults a machine cannot produce on demand (a disk returning I/O errors; tests/testing/
 * io_fault.h drives it).
 *
 * RINGSIDE_IO_FAULT_MATCH: the string (e.g. "/journal/journal-"); a file descriptor's path is
 * read from /proc/self/fd. RINGSIDE_IO_FAULT_FILE: a file of four int32, mapped shared: the errno
 * for writes (write, pwrite, pwrite64, writev), for syncs (fsync, fdatasync), for reads (read,
 * pread, pread64), 0 for none; and a count of the calls failed so far, which the shim increments.
 * While every errno is 0 a call costs one atomic load more. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

enum { kWrite = 0, kSync = 1, kRead = 2, kHits = 3 };

static volatile int32_t* g_control;
static const char* g_match;

__attribute__((constructor)) static void MapControl(void) {
  const char* path = getenv("RINGSIDE_IO_FAULT_FILE");
  g_match = getenv("RINGSIDE_IO_FAULT_MATCH");
  if (path == NULL || *path == '\0' || g_match == NULL || *g_match == '\0') return;
  const int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return;
  void* p = mmap(NULL, 4 * sizeof(int32_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p != MAP_FAILED) g_control = (volatile int32_t*)p;
}

/* The errno to fail a call of `kind` on `fd` with, or 0. */
static int FaultFor(int kind, int fd) {
  if (g_control == NULL) return 0;
  const int err = __atomic_load_n(&g_control[kind], __ATOMIC_RELAXED);
  if (err == 0 || fd < 0) return 0;
  char link[64];
  char target[4096];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, target, sizeof(target) - 1);
  if (n <= 0) return 0;
  target[n] = '\0';
  if (strstr(target, g_match) == NULL) return 0;
  __atomic_add_fetch(&g_control[kHits], 1, __ATOMIC_RELAXED);
  return err;
}

typedef ssize_t (*WriteFn)(int, const void*, size_t);
typedef ssize_t (*WritevFn)(int, const struct iovec*, int);
typedef ssize_t (*PwriteFn)(int, const void*, size_t, off_t);
typedef ssize_t (*Pwrite64Fn)(int, const void*, size_t, off64_t);
typedef int (*SyncFn)(int);
typedef ssize_t (*ReadFn)(int, void*, size_t);
typedef ssize_t (*PreadFn)(int, void*, size_t, off_t);
typedef ssize_t (*Pread64Fn)(int, void*, size_t, off64_t);

/* The next definition of `name` (libc's), looked up once. */
#define REAL(name, type)   \
  static type real_##name; \
  if (real_##name == NULL) real_##name = (type)dlsym(RTLD_NEXT, #name)

ssize_t write(int fd, const void* buf, size_t count) {
  REAL(write, WriteFn);
  const int err = FaultFor(kWrite, fd);
  if (err != 0) {
    errno = err;
    return -1;
  }
  return real_write(fd, buf, count);
}

ssize_t writev(int fd, const struct iovec* iov, int iovcnt) {
  REAL(writev, WritevFn);
  const int err = FaultFor(kWrite, fd);
  if (err != 0) {
    errno = err;
    return -1;
  }
  return real_writev(fd, iov, iovcnt);
}

ssize_t pwrite(int fd, const void* buf, size_t count, off_t offset) {
  REAL(pwrite, PwriteFn);
  const int err = FaultFor(kWrite, fd);
  if (err != 0) {
    errno = err;
    return -1;
  }
  return real_pwrite(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void* buf, size_t count, off64_t offset) {
  REAL(pwrite64, Pwrite64Fn);
  const int err = FaultFor(kWrite, fd);
  if (err != 0) {
    errno = err;
    return -1;
  }
  return real_pwrite64(fd, buf, count, offset);
}

int fsync(int fd) {
  REAL(fsync, SyncFn);
  const int err = FaultFor(kSync, fd);
  if (err != 0) {
    errno = err;
    return -1;
  }
  return real_fsync(fd);
}

int fdatasync(int fd) {
  REAL(fdatasync, SyncFn);
  const int err = FaultFor(kSync, fd);
  if (err != 0) {
    errno = err;
    return -1;
  }
  return real_fdatasync(fd);
}

ssize_t read(int fd, void* buf, size_t count) {
  REAL(read, ReadFn);
  const int err = FaultFor(kRead, fd);
  if (err != 0) {
    errno = err;
    return -1;
  }
  return real_read(fd, buf, count);
}

ssize_t pread(int fd, void* buf, size_t count, off_t offset) {
  REAL(pread, PreadFn);
  const int err = FaultFor(kRead, fd);
  if (err != 0) {
    errno = err;
    return -1;
  }
  return real_pread(fd, buf, count, offset);
}

ssize_t pread64(int fd, void* buf, size_t count, off64_t offset) {
  REAL(pread64, Pread64Fn);
  const int err = FaultFor(kRead, fd);
  if (err != 0) {
    errno = err;
    return -1;
  }
  return real_pread64(fd, buf, count, offset);
}
