// torchrun's environment -> LaunchEnv, and the split of a step's global batch over ranks.
#include <charconv>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "attnlab/distributed.h"
#include "attnlab/run_config.h"

namespace attnlab::dist {
namespace {

constexpr const char* kJobVariables[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"};

const char* variable(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

int integer(const char* name, int lo, int hi) {
  const std::string text = variable(name);
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < lo || value > hi) {
    throw DistributedError(fmt::format("{}={}: must be an integer in [{}, {}]", name, text, lo, hi));
  }
  return value;
}

}  // namespace

std::optional<LaunchEnv> launch_env_from_environment() {
  std::vector<std::string> set, unset;
  for (const char* name : kJobVariables) (variable(name) ? set : unset).push_back(name);
  if (set.empty()) return std::nullopt;
  if (!unset.empty()) {
    throw DistributedError(fmt::format(
        "the data-parallel launch environment is incomplete: {} set but {} not; a rank needs all of RANK, "
        "WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT (torchrun sets them; docs/distributed.md)",
        fmt::join(set, ", "), fmt::join(unset, ", ")));
  }
  LaunchEnv env;
  env.world_size = integer("WORLD_SIZE", 1, 1 << 20);
  env.rank = integer("RANK", 0, env.world_size - 1);
  env.local_rank = integer("LOCAL_RANK", 0, env.world_size - 1);
  env.master_addr = variable("MASTER_ADDR");
  env.master_port = integer("MASTER_PORT", 1, 65535);
  const char* agent = variable("TORCHELASTIC_USE_AGENT_STORE");
  env.agent_store = agent != nullptr && std::string(agent) == "True";
  if (variable("TORCHELASTIC_RESTART_COUNT")) env.restart_count = integer("TORCHELASTIC_RESTART_COUNT", 0, 1 << 30);
  if (variable("ATTNLAB_LAUNCHER_PID")) env.launcher_pid = integer("ATTNLAB_LAUNCHER_PID", 1, std::numeric_limits<int>::max());
  return env;
}

int64_t micro_batches_per_rank(const RunConfig& cfg, int world_size) {
  const int64_t sequences = cfg.effective_tokens_per_step() / cfg.train.seq_len;  // validate(): a whole number
  const int64_t per_pass = int64_t(world_size) * cfg.train.batch_size;
  if (world_size < 1 || sequences % per_pass != 0) {
    throw DistributedError(fmt::format(
        "train.tokens_per_step = {} is {} sequences of train.seq_len = {} per step, which {} ranks x "
        "train.batch_size = {} cannot split evenly: make tokens_per_step a multiple of {} (ranks x batch_size x "
        "seq_len), or change batch_size",
        cfg.effective_tokens_per_step(), sequences, cfg.train.seq_len, world_size, cfg.train.batch_size,
        per_pass * cfg.train.seq_len));
  }
  return sequences / per_pass;
}

}  // namespace attnlab::dist
