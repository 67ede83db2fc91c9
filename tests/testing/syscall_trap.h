// Proves that a stretch of code makes no system call: a seccomp filter on the calling thread turns
// every system call (except rt_sigreturn, exit and exit_group) into SIGSYS, whose handler counts it
// and makes the call fail with ENOSYS. vDSO calls (clock_gettime on a TSC clock) are not system
// calls and pass. A seccomp filter cannot be removed: arm it on a thread of its own that ends right
// after the measured code. Linux on x86-64 and aarch64; Arm() returns false elsewhere or when
// seccomp is not allowed (the caller then skips the check).
#ifndef RINGSIDE_TESTS_TESTING_SYSCALL_TRAP_H_
#define RINGSIDE_TESTS_TESTING_SYSCALL_TRAP_H_

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <ucontext.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ringside::testing {

class SyscallTrap {
 public:
  // Installs the process-wide SIGSYS handler. Call once, before Arm().
  static bool InstallHandler() {
    struct sigaction sa = {};
    sa.sa_sigaction = &OnSigsys;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGSYS, &sa, nullptr) == 0;
  }

  // Arms the filter on the calling thread (forever). Counting starts at once.
  static bool Arm() {
#if defined(__x86_64__)
    constexpr uint32_t kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
    constexpr uint32_t kArch = AUDIT_ARCH_AARCH64;
#else
    return false;
#endif
#if defined(__x86_64__) || defined(__aarch64__)
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_rt_sigreturn, 3, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit_group, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])),
                              filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
    counting().store(true);
    // Without SECCOMP_FILTER_FLAG_TSYNC the filter applies to this thread only.
    if (syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
      counting().store(false);
      return false;
    }
    return true;
#endif
  }

  // Stops counting (the filter stays) and returns the number of system calls trapped.
  static uint64_t Disarm() {
    counting().store(false);
    return count().load();
  }
  static uint64_t trapped() { return count().load(); }
  static long last_syscall() { return last().load(); }

 private:
  static std::atomic<bool>& counting() {
    static std::atomic<bool> v{false};
    return v;
  }
  static std::atomic<uint64_t>& count() {
    static std::atomic<uint64_t> v{0};
    return v;
  }
  static std::atomic<long>& last() {
    static std::atomic<long> v{-1};
    return v;
  }
  static void OnSigsys(int, siginfo_t* info, void* context) {
    if (counting().load()) {
      count().fetch_add(1);
      last().store(info->si_syscall);
    }
    ucontext_t* uc = static_cast<ucontext_t*>(context);
#if defined(__x86_64__)
    uc->uc_mcontext.gregs[REG_RAX] = -ENOSYS;
#elif defined(__aarch64__)
    uc->uc_mcontext.regs[0] = static_cast<uint64_t>(-ENOSYS);
#endif
  }
};

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_TESTING_SYSCALL_TRAP_H_
