// Which ranks of a job are alive, told by heartbeats in the job's store (docs/distributed.md,
// "Failures"). c10d learns of a dead peer only through a collective: Gloo when a socket closes, NCCL
// at its watchdog's timeout. But a rank also waits outside collectives, for ranks still starting
// (the rendezvous) and for rank 0 while it writes a checkpoint, and there only a heartbeat can say
// whether the awaited rank is coming: a heartbeat that stops means its process is gone or frozen.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace attnlab::dist::detail {

/// How often a rank raises its heartbeat counter.
inline constexpr std::chrono::milliseconds kBeatInterval{500};

/// How long a heartbeat may stay silent before its rank is taken for dead: `timeout` (train
/// --dist-timeout, the wait for a stalled rank), but at least 5 s, since a loaded machine can delay a
/// thread for a second or two, and at most 20 s, so that a death is found long before a default
/// timeout of 600 s.
std::chrono::milliseconds silence_limit(std::chrono::milliseconds timeout);

/// The key of `rank`'s heartbeat counter in the job's store.
std::string beat_key(int rank);

/// Raises this rank's counter (beat_key) every kBeatInterval, on a thread of its own with a
/// connection of its own (a clone of `store`, so a blocking call on the main connection never holds
/// it back), from construction to destruction. A store that goes away (rank 0, its server, exited)
/// ends the beats quietly.
class Heartbeat {
 public:
  Heartbeat(const c10::intrusive_ptr<c10d::Store>& store, int rank);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

/// Watches other ranks' heartbeats through `store`.
class PulseWatch {
 public:
  PulseWatch(c10d::Store& store, std::chrono::milliseconds silence) : store_(store), silence_(silence) {}
  /// True once `rank`'s counter has not moved for the silence limit. Its clock starts at the first
  /// call, so a rank is never judged before it has had that long to beat.
  bool silent(int rank);
  std::chrono::milliseconds limit() const { return silence_; }

 private:
  struct Seen {
    int64_t count;
    std::chrono::steady_clock::time_point since;
  };
  c10d::Store& store_;
  std::chrono::milliseconds silence_;
  std::map<int, Seen> seen_;
};

}  // namespace attnlab::dist::detail
