#include "distributed/job_wait.h"

#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/signals.h"

namespace attnlab::dist::detail {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kFailedKey = "failed";
constexpr const char* kFailedReadKey = "failed/read";
constexpr auto kLingerAtMost = std::chrono::seconds(5);
constexpr auto kPoll = std::chrono::milliseconds(100);
constexpr auto kPulseEvery = std::chrono::seconds(1);
constexpr auto kFirstLog = std::chrono::seconds(5);
constexpr auto kLogEvery = std::chrono::seconds(30);

std::string text_of(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }

int64_t whole_seconds(Clock::duration d) { return std::chrono::duration_cast<std::chrono::seconds>(d).count(); }

// One round of the checks that end a wait early; throws DistributedError.
void check_job(c10d::Store& store, PulseWatch& pulse, const WaitSpec& spec, bool pulse_due) {
  if (store.check({kFailedKey})) {
    store.add(kFailedReadKey, 1);  // lets a refusing rank 0, the store's server, exit (note_failure)
    throw DistributedError(fmt::format("{}: {} {}; nothing more can run (that rank's own log says why)", spec.who,
                                       text_of(store.get(kFailedKey)), spec.during));
  }
  if (pulse_due && spec.awaited) {
    for (const int rank : spec.awaited()) {
      if (!pulse.silent(rank)) continue;
      const auto why = fmt::format("rank {} has stopped responding (no heartbeat for {} s)", rank,
                                   whole_seconds(pulse.limit()));
      note_failure(store, why);  // the ranks that do not watch it learn it from the note
      throw DistributedError(fmt::format("{}: {} {}: it has most likely exited or been stopped (its own log says why)",
                                         spec.who, why, spec.during));
    }
  }
  if (spec.stop_on_signal) {
    if (const int sig = signals::stop_requested(); sig != 0) {
      throw DistributedError(fmt::format("{}: stopped by signal {} {}; nothing was trained", spec.who, sig, spec.during));
    }
  }
}

}  // namespace

void note_failure(c10d::Store& store, const std::string& why, int64_t readers) {
  try {
    store.compareSet(kFailedKey, std::vector<uint8_t>(), std::vector<uint8_t>(why.begin(), why.end()));
    const auto until = Clock::now() + kLingerAtMost;
    while (store.add(kFailedReadKey, 0) < readers && Clock::now() < until) std::this_thread::sleep_for(kPoll);
  } catch (const std::exception&) {
    // The store is gone; those who would read the note see that too.
  }
}

void wait_for(c10d::Store& store, PulseWatch& pulse, const WaitSpec& spec) {
  const auto start = Clock::now();
  auto next_pulse = start, next_log = start + kFirstLog;
  for (;;) {
    const auto now = Clock::now();
    try {
      if (spec.done()) return;
      check_job(store, pulse, spec, now >= next_pulse);
    } catch (const DistributedError&) {
      throw;
    } catch (const std::exception& e) {
      throw StoreLost(fmt::format(
          "{}: the job's rendezvous store cannot be reached {} ({}): its server (rank 0, or the launcher) has "
          "most likely exited",
          spec.who, spec.during, std::string(e.what()).substr(0, std::string(e.what()).find('\n'))));
    }
    if (now >= next_pulse) next_pulse = now + kPulseEvery;
    if (spec.limit && now - start >= *spec.limit) throw DistributedError(spec.who + ": " + spec.on_limit());
    if (now >= next_log) {
      spdlog::warn("{}: {} ({} s so far{})", spec.who, spec.progress(), whole_seconds(now - start),
                   spec.limit ? fmt::format(" of at most {} s, --dist-timeout", whole_seconds(*spec.limit)) : "");
      next_log = now + kLogEvery;
    }
    std::this_thread::sleep_for(kPoll);
  }
}

}  // namespace attnlab::dist::detail
