// Whether every rank holds rank 0's values: the start-of-training check that the ranks resumed the
// same step of the same config, with the same options, and hold bit-identical parameters.
#include <torch/torch.h>

#include <fmt/format.h>

#include "distributed/process_group.h"

namespace attnlab::dist::detail {
namespace {

constexpr size_t kMaxDifferencesNamed = 10;
constexpr size_t kMaxValueChars = 80;

std::string shown(const nlohmann::json* value) {
  if (value == nullptr) return "none";
  std::string text = value->dump();
  if (text.size() > kMaxValueChars) text = text.substr(0, kMaxValueChars) + "...";
  return text;
}

// Each key path under which `mine` and `rank0` differ ("optim.lr"; "" for the values themselves),
// with both values (nullptr where one has no such key). Objects are walked; anything else compared whole.
void walk(const std::string& path, const nlohmann::json* mine, const nlohmann::json* rank0,
          std::vector<std::string>& out, size_t& found) {
  if (mine != nullptr && rank0 != nullptr && *mine == *rank0) return;
  if (mine != nullptr && rank0 != nullptr && mine->is_object() && rank0->is_object()) {
    for (const auto& [key, value] : rank0->items()) {
      const auto it = mine->find(key);
      walk(path.empty() ? key : path + "." + key, it == mine->end() ? nullptr : &*it, &value, out, found);
    }
    for (const auto& [key, value] : mine->items())
      if (!rank0->contains(key)) walk(path.empty() ? key : path + "." + key, &value, nullptr, out, found);
    return;
  }
  if (found++ < kMaxDifferencesNamed) out.push_back(path + (path.empty() ? "" : ": ") + "rank 0 has " + shown(rank0) + ", this rank " + shown(mine));
}

}  // namespace

std::vector<int64_t> count_over_ranks(c10d::ProcessGroup& group, const c10::Device& device,
                                      const std::vector<int64_t>& flags) {
  if (flags.empty()) return {};
  std::vector<at::Tensor> tensors = {torch::tensor(flags, torch::kLong).to(device)};
  group.allreduce(tensors)->wait();
  const auto counts = tensors[0].cpu();
  return {counts.data_ptr<int64_t>(), counts.data_ptr<int64_t>() + counts.numel()};
}

std::vector<std::string> fact_differences(const std::string& name, const nlohmann::json& mine,
                                          const nlohmann::json& rank0) {
  std::vector<std::string> paths;
  size_t found = 0;
  walk("", mine.is_null() && !rank0.is_null() ? nullptr : &mine, &rank0, paths, found);
  std::vector<std::string> out;
  for (const auto& p : paths) out.push_back(name + (p.rfind("rank 0 has", 0) == 0 ? ": " : " ") + p);
  if (found > kMaxDifferencesNamed) out.push_back(fmt::format("{}: and {} more difference(s)", name, found - kMaxDifferencesNamed));
  return out;
}

std::vector<int64_t> count_differing_tensors(c10d::ProcessGroup& group, const c10::Device& device,
                                             const std::vector<at::Tensor>& tensors) {
  torch::NoGradGuard no_grad;
  std::vector<int64_t> flags(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::vector<at::Tensor> copy = {tensors[i].detach().clone()};
    group.broadcast(copy)->wait();
    flags[i] = !torch::equal(copy[0], tensors[i]);  // exact: NaNs never compare equal, and would be refused
  }
  return count_over_ranks(group, device, flags);
}

}  // namespace attnlab::dist::detail
