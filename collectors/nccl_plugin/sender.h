// The plugin's background thread: takes records from the ring in batches and writes them to the
// agent's unix socket. It is the only part of the plugin that makes system calls after init.
//
// No agent: the thread retries the connection with backoff (50 ms doubling to 2 s) and leaves the
// ring alone, so the first kRingRecords records wait for the agent and later ones are dropped and
// counted by the producers. Slow agent: a batch that cannot be written within 5 s closes the
// connection; its records join the drop count. The drop count goes out in the next batch header.
//
// Format version: each connection starts in version 3, whose records carry their CUDA device and
// whose batch headers carry the pod (POD_NAME/POD_NAMESPACE, when set). The thread first sends a
// hello (a header of that version with no records) and waits up to 1 s for the answer. An agent
// that speaks the version answers with one byte, the version (kVersion3Ack, kVersion2Ack). An
// older agent cuts the connection off instead (bad_version): the thread reconnects at once in the
// next older version, having lost nothing: version 2 (pod, no device) with a pod identity, else
// version 1 (neither, no hello); a version-1 agent refuses the version-2 hello in turn. No answer
// in time (a stalled agent): records go out in the version asked, and if the connection is then
// lost before the answer came, what was sent on it counts as dropped and the next connection
// speaks the next older version. After a connection in an older version ends (the agent may have
// been upgraded) the next one tries version 3 again. The ring holds version-3 records; for an
// older connection the sender zeroes their device bytes (DowngradeRecord).
#ifndef RINGSIDE_COLLECTORS_NCCL_PLUGIN_SENDER_H_
#define RINGSIDE_COLLECTORS_NCCL_PLUGIN_SENDER_H_

#include <pthread.h>
#include <sys/un.h>

#include <atomic>
#include <cstdint>

#include "collectors/nccl_plugin/record_format.h"

namespace ringside::collectors {

struct SenderTimings {
  int64_t flush_interval_ns;  // how often the ring is drained while connected and idle
  int64_t busy_interval_ns;   // ... and while records keep coming
  int64_t connect_backoff_min_ns;
  int64_t connect_backoff_max_ns;
  int64_t stall_timeout_ns;         // a batch not written by then: disconnect
  int64_t clock_check_interval_ns;  // how often the NTP state is read again
  int64_t hello_timeout_ns;         // how long a hello (version 2, 3) waits for the agent's answer
};
inline constexpr SenderTimings kSenderTimings = {20'000'000,     1'000'000,     50'000'000,
                                                 2'000'000'000,  5'000'000'000, 10'000'000'000,
                                                 1'000'000'000};

class Sender {
 public:
  constexpr Sender() = default;
  Sender(const Sender&) = delete;
  Sender& operator=(const Sender&) = delete;

  // Sets the socket path (RINGSIDE_SOCKET or the default). Only while the thread is stopped.
  // False when the path does not fit a sockaddr_un (the thread then never connects).
  bool SetSocketPath(const char* path) noexcept;
  const char* socket_path() const noexcept { return path_; }

  // The callers serialise Start/Stop/Flush/ForkChild (the plugin's init mutex).
  // Starts the thread if it is not running; false if it cannot be created.
  bool Start() noexcept;
  // Stops and joins the thread; closes the connection.
  void Stop() noexcept;
  // Asks the thread to connect at once if it is not connected and to send what is queued, then
  // waits up to `timeout_ns` for it to report that it did, or that no agent answers.
  void Flush(int64_t timeout_ns) noexcept;
  bool running() const noexcept { return running_; }
  bool connected() const noexcept { return connected_.load(std::memory_order_acquire); }

  // In a fork child: the thread does not exist there and the descriptors belong to the parent's
  // connection. Forgets both; returns whether the parent had a thread running.
  bool ForkChild() noexcept;

 private:
  static void* ThreadMain(void* self) noexcept;
  void Loop() noexcept;
  // Connects, in the newest version the agent acknowledges (see above).
  bool Connect() noexcept;
  bool Open() noexcept;  // the socket alone
  enum class HelloResult { kAcked, kRefused, kNoAnswer };
  HelloResult Hello() noexcept;
  void Disconnect() noexcept;
  // The connection failed or the agent closed it: the version fallback above, then Disconnect().
  void ConnectionLost() noexcept;
  // Sends batches until the ring is empty and no drop is unreported. False on a write failure.
  // `*sent` counts the records written.
  bool SendAvailable(uint64_t* sent) noexcept;
  bool WriteAll(const uint8_t* data, size_t size) noexcept;
  void Wait(int64_t timeout_ns) noexcept;

  static constexpr const SenderTimings& timings_ = kSenderTimings;
  char path_[sizeof(sockaddr_un{}.sun_path)] = {};
  bool path_ok_ = false;
  pthread_t thread_{};
  bool running_ = false;
  int wake_fd_ = -1;
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<bool> connected_{false};
  std::atomic<uint32_t> flush_requested_{0};
  std::atomic<uint32_t> flush_done_{0};
  int64_t next_connect_ns_ = 0;
  int64_t backoff_ns_ = 0;
  int64_t next_clock_check_ns_ = 0;
  // The current connection's format version (0: none), whether the agent acknowledged it (2, 3),
  // and what was sent (records and reported drops) before it did.
  uint16_t conn_version_ = 0;
  bool acked_ = false;
  uint64_t unacked_ = 0;
  // The version the next connection tries: lowered when an agent refuses one, back to the newest
  // after a connection in an older version ends.
  uint16_t max_version_ = kRecordFormatVersion;
};

extern Sender g_sender;

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_NCCL_PLUGIN_SENDER_H_
