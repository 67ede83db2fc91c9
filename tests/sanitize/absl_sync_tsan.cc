// TSan annotations for Debian's (uninstrumented) Abseil synchronization library.
//
// ringside guards its state with absl::Mutex, absl::CondVar and absl::Notification. Their
// implementation lives in libabsl_synchronization.so, which Debian builds without
// -fsanitize=thread: its atomics and futex calls are invisible to TSan, so TSan sees no
// happens-before edge between an Unlock and the next Lock and reports every guarded member as a
// race. Abseil built with TSan annotates these functions itself (absl/base/internal/
// tsan_mutex_interface.h); this shim does the same from outside: it defines the library's
// exported entry points under their mangled names, tells TSan what each does
// (__tsan_mutex_pre_lock ... __tsan_mutex_post_unlock, __tsan_release/__tsan_acquire), and calls
// the real function (dlsym RTLD_NEXT).
//
// Built only with RINGSIDE_SANITIZE=thread, as libringside_absl_tsan.so, and put in front of
// every tsan-labelled test by LD_PRELOAD (tests/sanitize/sanitize.cmake), so that the calls made
// by gRPC's own locks (gpr_mu is an absl::Mutex) are annotated too. It is not itself built with
// TSan, and the __tsan_* functions are weak: a child process without TSan that inherits the
// LD_PRELOAD (a shell, a Python helper) loads it and runs the real functions unannotated.
// docs/reliability.md ("Sanitizers").
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "absl/base/options.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

#define RINGSIDE_STR2(x) #x
#define RINGSIDE_STR(x) RINGSIDE_STR2(x)
// The mangled names below are of Debian 12's Abseil (inline namespace debian3).
static_assert(std::string_view(RINGSIDE_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME)) == "debian3",
              "absl_sync_tsan.cc names Debian 12's Abseil symbols; update them for this Abseil");

extern "C" {
void __tsan_acquire(void* addr) __attribute__((weak));
void __tsan_release(void* addr) __attribute__((weak));
void __tsan_mutex_destroy(void* addr, unsigned flags) __attribute__((weak));
void __tsan_mutex_pre_lock(void* addr, unsigned flags) __attribute__((weak));
void __tsan_mutex_post_lock(void* addr, unsigned flags, int recursion) __attribute__((weak));
int __tsan_mutex_pre_unlock(void* addr, unsigned flags) __attribute__((weak));
void __tsan_mutex_post_unlock(void* addr, unsigned flags) __attribute__((weak));
}

namespace {

// Flags of sanitizer/tsan_interface.h.
constexpr unsigned kNotStatic = 1u << 8;
constexpr unsigned kReadLock = 1u << 3;
constexpr unsigned kTryLock = 1u << 4;
constexpr unsigned kTryLockFailed = 1u << 5;

// Some entry points call others through the PLT (AwaitWithTimeout calls AwaitWithDeadline, ...),
// which lands in this shim again: only the outermost call of a thread is annotated.
thread_local int depth = 0;

bool Tsan() { return __tsan_mutex_pre_lock != nullptr && depth == 1; }

struct Outer {
  Outer() { ++depth; }
  ~Outer() { --depth; }
};

void* Real(const char* name) {
  void* fn = dlsym(RTLD_NEXT, name);
  if (fn == nullptr) {
    std::fprintf(stderr, "absl_sync_tsan: %s not found after the shim: %s\n", name, dlerror());
    std::abort();
  }
  return fn;
}

void PreLock(void* mu, unsigned flags) {
  if (Tsan()) __tsan_mutex_pre_lock(mu, flags);
}
void PostLock(void* mu, unsigned flags) {
  if (Tsan()) __tsan_mutex_post_lock(mu, flags, 0);
}
void PreUnlock(void* mu, unsigned flags) {
  if (Tsan()) __tsan_mutex_pre_unlock(mu, flags);
}
void PostUnlock(void* mu, unsigned flags) {
  if (Tsan()) __tsan_mutex_post_unlock(mu, flags);
}
// A wait that releases the mutex and holds it again on return (CondVar::Wait, Mutex::Await):
// released before the real call, held again after it. TSan ignores the accesses between
// pre_unlock and post_unlock, which covers the waiter's condition being evaluated inside the
// library while the mutex is in fact held.
void Released(void* mu, unsigned flags) { PreUnlock(mu, flags); }
void Reacquired(void* mu, unsigned flags) {
  PostUnlock(mu, flags);
  PreLock(mu, flags);
  PostLock(mu, flags);
}

}  // namespace

#define REAL(type, name) reinterpret_cast<type>(([] { static void* fn = Real(#name); return fn; })())

extern "C" {

// --- absl::Mutex
void _ZN4absl7debian35Mutex4LockEv(void* mu) {
  Outer outer;
  PreLock(mu, 0);
  REAL(void (*)(void*), _ZN4absl7debian35Mutex4LockEv)(mu);
  PostLock(mu, 0);
}
void _ZN4absl7debian35Mutex10ReaderLockEv(void* mu) {
  Outer outer;
  PreLock(mu, kReadLock);
  REAL(void (*)(void*), _ZN4absl7debian35Mutex10ReaderLockEv)(mu);
  PostLock(mu, kReadLock);
}
void _ZN4absl7debian35Mutex6UnlockEv(void* mu) {
  Outer outer;
  PreUnlock(mu, 0);
  REAL(void (*)(void*), _ZN4absl7debian35Mutex6UnlockEv)(mu);
  PostUnlock(mu, 0);
}
void _ZN4absl7debian35Mutex12ReaderUnlockEv(void* mu) {
  Outer outer;
  PreUnlock(mu, kReadLock);
  REAL(void (*)(void*), _ZN4absl7debian35Mutex12ReaderUnlockEv)(mu);
  PostUnlock(mu, kReadLock);
}
bool _ZN4absl7debian35Mutex7TryLockEv(void* mu) {
  Outer outer;
  PreLock(mu, kTryLock);
  bool locked = REAL(bool (*)(void*), _ZN4absl7debian35Mutex7TryLockEv)(mu);
  PostLock(mu, locked ? kTryLock : kTryLock | kTryLockFailed);
  return locked;
}
bool _ZN4absl7debian35Mutex13ReaderTryLockEv(void* mu) {
  Outer outer;
  PreLock(mu, kTryLock | kReadLock);
  bool locked = REAL(bool (*)(void*), _ZN4absl7debian35Mutex13ReaderTryLockEv)(mu);
  PostLock(mu, locked ? kTryLock | kReadLock : kTryLock | kReadLock | kTryLockFailed);
  return locked;
}
void _ZN4absl7debian35MutexD1Ev(void* mu) {
  Outer outer;
  if (Tsan()) __tsan_mutex_destroy(mu, kNotStatic);
  REAL(void (*)(void*), _ZN4absl7debian35MutexD1Ev)(mu);
}
void _ZN4absl7debian35MutexD2Ev(void* mu) {
  Outer outer;
  if (Tsan()) __tsan_mutex_destroy(mu, kNotStatic);
  REAL(void (*)(void*), _ZN4absl7debian35MutexD2Ev)(mu);
}
// Lock only once the condition holds: a plain lock as far as TSan is concerned (the condition is
// evaluated inside the library, between pre and post, where TSan ignores accesses).
void _ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE(void* mu, const void* cond) {
  Outer outer;
  PreLock(mu, 0);
  REAL(void (*)(void*, const void*), _ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE)(mu, cond);
  PostLock(mu, 0);
}
bool _ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE(
    void* mu, const void* cond, absl::Duration timeout) {
  Outer outer;
  PreLock(mu, 0);
  bool ok = REAL(bool (*)(void*, const void*, absl::Duration),
                 _ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE)(
      mu, cond, timeout);
  PostLock(mu, 0);
  return ok;
}
bool _ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE(
    void* mu, const void* cond, absl::Time deadline) {
  Outer outer;
  PreLock(mu, 0);
  bool ok = REAL(bool (*)(void*, const void*, absl::Time),
                 _ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE)(
      mu, cond, deadline);
  PostLock(mu, 0);
  return ok;
}
void _ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE(void* mu, const void* cond) {
  Outer outer;
  PreLock(mu, kReadLock);
  REAL(void (*)(void*, const void*), _ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE)(
      mu, cond);
  PostLock(mu, kReadLock);
}
// Await: holds the mutex on entry and on return, releases it while waiting.
void _ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE(void* mu, const void* cond) {
  Outer outer;
  Released(mu, 0);
  REAL(void (*)(void*, const void*), _ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE)(mu, cond);
  Reacquired(mu, 0);
}
bool _ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE(
    void* mu, const void* cond, absl::Duration timeout) {
  Outer outer;
  Released(mu, 0);
  bool ok = REAL(bool (*)(void*, const void*, absl::Duration),
                 _ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE)(
      mu, cond, timeout);
  Reacquired(mu, 0);
  return ok;
}
bool _ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE(
    void* mu, const void* cond, absl::Time deadline) {
  Outer outer;
  Released(mu, 0);
  bool ok = REAL(bool (*)(void*, const void*, absl::Time),
                 _ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE)(
      mu, cond, deadline);
  Reacquired(mu, 0);
  return ok;
}

// --- absl::CondVar: releases the mutex while waiting, holds it again on return.
void _ZN4absl7debian37CondVar4WaitEPNS0_5MutexE(void* cv, void* mu) {
  Outer outer;
  Released(mu, 0);
  REAL(void (*)(void*, void*), _ZN4absl7debian37CondVar4WaitEPNS0_5MutexE)(cv, mu);
  Reacquired(mu, 0);
}
bool _ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE(
    void* cv, void* mu, absl::Duration timeout) {
  Outer outer;
  Released(mu, 0);
  bool timed_out = REAL(bool (*)(void*, void*, absl::Duration),
                        _ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE)(
      cv, mu, timeout);
  Reacquired(mu, 0);
  return timed_out;
}
bool _ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE(void* cv, void* mu,
                                                                       absl::Time deadline) {
  Outer outer;
  Released(mu, 0);
  bool timed_out = REAL(bool (*)(void*, void*, absl::Time),
                        _ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE)(
      cv, mu, deadline);
  Reacquired(mu, 0);
  return timed_out;
}

// --- absl::Notification: Notify releases, a wait that saw the notification acquires. The inline
// HasBeenNotified() is an (instrumented) acquire load of the flag that follows the Notification's
// mutex, so Notify releases that address too.
static_assert(sizeof(absl::Notification) == 2 * sizeof(absl::Mutex),
              "absl::Notification is no longer {Mutex mutex_; atomic<bool> notified_yet_;}");
void _ZN4absl7debian312Notification6NotifyEv(void* n) {
  Outer outer;
  if (Tsan()) {
    __tsan_release(n);
    __tsan_release(static_cast<char*>(n) + sizeof(absl::Mutex));
  }
  REAL(void (*)(void*), _ZN4absl7debian312Notification6NotifyEv)(n);
}
void _ZNK4absl7debian312Notification19WaitForNotificationEv(const void* n) {
  Outer outer;
  REAL(void (*)(const void*), _ZNK4absl7debian312Notification19WaitForNotificationEv)(n);
  if (Tsan()) __tsan_acquire(const_cast<void*>(n));
}
bool _ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE(
    const void* n, absl::Duration timeout) {
  Outer outer;
  bool notified =
      REAL(bool (*)(const void*, absl::Duration),
           _ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE)(n, timeout);
  if (notified && Tsan()) __tsan_acquire(const_cast<void*>(n));
  return notified;
}
bool _ZNK4absl7debian312Notification31WaitForNotificationWithDeadlineENS0_4TimeE(
    const void* n, absl::Time deadline) {
  Outer outer;
  bool notified =
      REAL(bool (*)(const void*, absl::Time),
           _ZNK4absl7debian312Notification31WaitForNotificationWithDeadlineENS0_4TimeE)(n, deadline);
  if (notified && Tsan()) __tsan_acquire(const_cast<void*>(n));
  return notified;
}

}  // extern "C"
