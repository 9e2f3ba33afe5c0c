#include "distributed/liveness.h"

#include <algorithm>

namespace attnlab::dist::detail {

std::chrono::milliseconds silence_limit(std::chrono::milliseconds timeout) {
  return std::clamp<std::chrono::milliseconds>(timeout, std::chrono::seconds(5), std::chrono::seconds(20));
}

std::string beat_key(int rank) { return "beat/" + std::to_string(rank); }

Heartbeat::Heartbeat(const c10::intrusive_ptr<c10d::Store>& store, int rank) {
  auto own = store->clone();
  own->setTimeout(std::chrono::seconds(5));  // a server that stopped answering must not hold the destructor
  thread_ = std::thread([this, own, key = beat_key(rank)] {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      lock.unlock();
      try {
        own->add(key, 1);
      } catch (const std::exception&) {
        return;  // the store is gone: its server (rank 0, or the launcher) has exited
      }
      lock.lock();
      wake_.wait_for(lock, kBeatInterval, [this] { return stop_; });
    }
  });
}

Heartbeat::~Heartbeat() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

bool PulseWatch::silent(int rank) {
  const auto now = std::chrono::steady_clock::now();
  const int64_t count = store_.add(beat_key(rank), 0);
  const auto it = seen_.find(rank);
  if (it == seen_.end() || it->second.count != count) {
    seen_[rank] = {count, now};
    return false;
  }
  return now - it->second.since >= silence_;
}

}  // namespace attnlab::dist::detail
