#include "distributed/rendezvous.h"

#include <unistd.h>

#include <climits>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "common/json_read.h"
#include "distributed/job_wait.h"

namespace attnlab::dist::detail {
namespace {

using Clock = std::chrono::steady_clock;

// Who joined as a rank: its WORLD_SIZE, and where to find its process and log.
struct Member {
  int rank = 0;
  int world_size = 0;
  int64_t pid = 0;
  std::string host;
};

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? name : "unknown";
}

std::string member_key(int rank) { return "rank/" + std::to_string(rank); }

std::vector<uint8_t> bytes_of(const Member& m) {
  const std::string text =
      nlohmann::json{{"rank", m.rank}, {"world_size", m.world_size}, {"pid", m.pid}, {"host", m.host}}.dump();
  return {text.begin(), text.end()};
}

Member member_of(const std::vector<uint8_t>& bytes) {
  const auto j = attnlab::detail::parse_json_or_discarded(std::string(bytes.begin(), bytes.end()));
  Member m;
  if (!j.is_object()) return m;
  m.rank = j.value("rank", -1), m.world_size = j.value("world_size", 0);
  m.pid = j.value("pid", int64_t{0}), m.host = j.value("host", std::string("unknown"));
  return m;
}

std::string describe(const Member& m) { return fmt::format("rank {} (pid {} on host {})", m.rank, m.pid, m.host); }

// "1, 2, 5", or the first eight and how many more.
std::string rank_list(const std::vector<int>& ranks) {
  if (ranks.size() <= 8) return fmt::format("{}", fmt::join(ranks, ", "));
  return fmt::format("{}, ... ({} ranks)", fmt::join(ranks.begin(), ranks.begin() + 8, ", "), ranks.size());
}

// Notes `why` for the others and throws it. Rank 0 serving the store first waits for the joined ranks
// to read the note: its exit takes the store with it.
[[noreturn]] void refuse(c10d::Store& store, bool serves_store, const std::string& who, const std::string& why,
                         const std::string& fix) {
  note_failure(store, why, serves_store ? store.add("joined", 0) : 0);
  throw DistributedError(who + ": " + why + "; " + fix);
}

// Claims this RANK, then checks WORLD_SIZE against the first rank that joined (compareSet keeps the
// first value), then announces this rank.
void announce(c10d::Store& store, const Member& self, bool serves_store, const std::string& who) {
  const auto mine = bytes_of(self);
  if (store.add("claim/" + std::to_string(self.rank), 1) > 1) {
    const auto other = store.check({member_key(self.rank)}) ? describe(member_of(store.get(member_key(self.rank))))
                                                           : "another process";
    refuse(store, serves_store, who, fmt::format("two processes were started as RANK={}: {} and pid {} on host {}", self.rank, other,
                                   self.pid, self.host),
           "every rank of a job needs its own RANK in [0, WORLD_SIZE)");
  }
  const Member first = member_of(store.compareSet("world_size", std::vector<uint8_t>(), mine));
  if (first.world_size != self.world_size) {
    refuse(store, serves_store, who, fmt::format("{} was started with WORLD_SIZE={}, but {}, which joined first, with WORLD_SIZE={}",
                                   describe(self), self.world_size, describe(first), first.world_size),
           "every rank of a job must be started with the same WORLD_SIZE (the number of ranks)");
  }
  store.set(member_key(self.rank), mine);
  store.add("joined", 1);
}

std::vector<int> missing_ranks(c10d::Store& store, int world_size) {
  std::vector<int> missing;
  for (int r = 0; r < world_size; ++r)
    if (!store.check({member_key(r)})) missing.push_back(r);
  return missing;
}

// The next rank after `rank`, in ring order, that has joined: the one whose heartbeat this rank
// watches, so that every joined rank is watched by one other at a cost of one check each.
std::optional<int> ring_successor(c10d::Store& store, int rank, int world_size) {
  for (int step = 1; step < world_size; ++step) {
    const int r = (rank + step) % world_size;
    if (store.check({member_key(r)})) return r;
  }
  return std::nullopt;
}

}  // namespace

void join_job(c10d::Store& store, const LaunchEnv& env, std::chrono::milliseconds timeout, PulseWatch& pulse) {
  const std::string who = fmt::format("rank {} of {}", env.rank, env.world_size);
  const Member self{env.rank, env.world_size, static_cast<int64_t>(::getpid()), host_name()};
  announce(store, self, /*serves_store=*/!env.agent_store && env.rank == 0, who);
  const int64_t want = env.world_size;
  WaitSpec spec;
  spec.who = who;
  spec.during = "while the job's ranks were joining";
  spec.done = [&] { return store.add("joined", 0) >= want; };
  spec.awaited = [&] {
    const auto next = ring_successor(store, env.rank, env.world_size);
    return next ? std::vector<int>{*next} : std::vector<int>{};
  };
  spec.progress = [&] {
    const auto missing = missing_ranks(store, env.world_size);
    return fmt::format("waiting for rank(s) {} to join the job: {} of WORLD_SIZE={} ranks have joined, at "
                       "MASTER_ADDR:MASTER_PORT = {}:{}",
                       rank_list(missing), env.world_size - static_cast<int>(missing.size()), env.world_size,
                       env.master_addr, env.master_port);
  };
  spec.limit = timeout;
  spec.on_limit = [&] {
    const auto missing = missing_ranks(store, env.world_size);
    return fmt::format("rank(s) {} did not join the job within {} s (--dist-timeout): {} of WORLD_SIZE={} ranks "
                       "joined at MASTER_ADDR:MASTER_PORT = {}:{}. Did every rank start, with the same "
                       "MASTER_ADDR, MASTER_PORT and WORLD_SIZE?",
                       rank_list(missing), timeout.count() / 1000, env.world_size - static_cast<int>(missing.size()),
                       env.world_size, env.master_addr, env.master_port);
  };
  spec.stop_on_signal = true;
  wait_for(store, pulse, spec);
}

}  // namespace attnlab::dist::detail
