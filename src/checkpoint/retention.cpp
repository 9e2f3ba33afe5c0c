// Where checkpoints live, which exist, and which survive a save.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "attnlab/checkpoint.h"
#include "common/durable_file.h"
#include "checkpoint/file_ops.h"
#include "checkpoint/state_json.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPrefix = "step_";

/// val_loss of a checkpoint, NaN when unknown or unreadable.
double val_loss_of(const fs::path& dir) {
  try {
    return detail::read_state_file(dir / detail::kStateFile).state.val_loss;
  } catch (const CheckpointError&) {
    return std::numeric_limits<double>::quiet_NaN();
  }
}

/// Step of the checkpoint with the lowest finite val_loss (earliest on ties), or -1.
int64_t best_step(const std::vector<CheckpointInfo>& all) {
  int64_t best = -1;
  double lowest = std::numeric_limits<double>::infinity();
  for (const auto& c : all) {
    const double loss = val_loss_of(c.dir);
    if (std::isfinite(loss) && loss < lowest) {
      lowest = loss;
      best = c.step;
    }
  }
  return best;
}

std::set<int64_t> kept_steps(const std::vector<CheckpointInfo>& all, const RetentionPolicy& policy) {
  std::set<int64_t> keep;
  const size_t first_recent = all.size() > static_cast<size_t>(policy.keep_last) ? all.size() - policy.keep_last : 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const int64_t step = all[i].step;
    if (i >= first_recent || policy.keep_steps.count(step) ||
        (policy.keep_every > 0 && step % policy.keep_every == 0)) {
      keep.insert(step);
    }
  }
  if (policy.keep_best) keep.insert(best_step(all));
  return keep;
}

}  // namespace

fs::path checkpoint_dir(const fs::path& root, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "%s%06lld", kPrefix, static_cast<long long>(step));
  return root / name;
}

std::vector<CheckpointInfo> list_checkpoints(const fs::path& root) {
  std::vector<CheckpointInfo> all;
  for (const auto& name : detail::list_directory(root)) {
    const int64_t step = detail::step_of_dir_name(name);
    if (step >= 0 && detail::is_dir(root / name)) all.push_back({step, root / name});
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return all;
}

std::vector<int64_t> apply_retention(const fs::path& root, const RetentionPolicy& policy,
                                     std::optional<int64_t> just_saved) {
  if (policy.keep_last < 1) throw std::invalid_argument("checkpoint retention: keep_last must be at least 1");
  const auto all = list_checkpoints(root);
  auto keep = kept_steps(all, policy);
  if (just_saved) keep.insert(*just_saved);
  std::vector<int64_t> deleted;
  for (const auto& c : all) {
    if (keep.count(c.step)) continue;
    // Hide it first: a crash during the removal must not leave half a checkpoint under its name.
    const fs::path hidden = c.dir.parent_path() / (".old." + c.dir.filename().string());
    detail::remove_tree(hidden);
    detail::rename_path(c.dir, hidden);
    detail::remove_tree(hidden);
    deleted.push_back(c.step);
  }
  if (!deleted.empty()) detail::fsync_directory(root);
  return deleted;
}

}  // namespace attnlab
