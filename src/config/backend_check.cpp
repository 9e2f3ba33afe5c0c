// A config's attention.backend against its model, by the backend table's refusals (backend_check.h).
#include "config/backend_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "attnlab/backend_table.h"

namespace attnlab {
namespace {

/// One request of the run and where it comes from, for the message.
struct PlannedCall {
  AttentionRequest request;
  std::string where;
};

std::vector<c10::Device> run_devices(DeviceChoice choice) {
  std::vector<c10::Device> out;
  if (choice != DeviceChoice::cuda) out.emplace_back(c10::kCPU);
  if (choice != DeviceChoice::cpu) out.emplace_back(c10::kCUDA);
  return out;
}

// The calls of the run on `device`, one per distinct layer window.
std::vector<PlannedCall> planned_calls(const RunConfig& c, const c10::Device& device) {
  auto model = c.model;
  normalize_window(model);  // a window that hides nothing is no window: a global layer's call
  const int64_t positions = model.block_size + (model.arm_spec().sink_token ? 1 : 0);
  std::vector<PlannedCall> out;
  std::set<std::pair<int64_t, int64_t>> seen;
  // The pattern repeats over depth, so its first period holds every distinct window: a config with
  // 2^63 layers is refused by its size check later, not walked layer by layer here.
  const int64_t period =
      model.window_pattern && !model.window_pattern->empty() ? static_cast<int64_t>(model.window_pattern->size()) : 1;
  for (int64_t l = 0; l < std::min(model.n_layer, period); ++l) {
    const auto window = model.layer_window(l);
    if (!seen.emplace(window.window, window.keep_first).second) continue;
    AttentionRequest r;
    r.device = device;
    r.dtype = device.is_cuda() && c.train.precision == Precision::bf16 ? at::kBFloat16 : at::kFloat;
    r.head_dim = model.head_dim();
    r.q_len = r.k_len = positions;
    if (window.hides_keys(positions)) r.window = window;
    out.push_back({r, fmt::format("on {} in {} (train.device: {}, train.precision: {}){}", device.str(),
                                  c10::toString(r.dtype), to_string(c.train.device), to_string(c.train.precision),
                                  r.window.local() ? fmt::format(", layer {} (local)", l) : "")});
  }
  return out;
}

// The backends this check accepts: those that serve every call on some device, in table order.
std::vector<AttentionBackend> accepted_backends(const std::vector<std::vector<AttentionRequest>>& by_device,
                                                const ArmSpec& arm) {
  std::vector<AttentionBackend> out{AttentionBackend::automatic};
  for (const auto& row : backend_table()) {
    bool accepted = false;
    for (const auto& requests : by_device) {
      const auto serving = serving_backends(requests, arm);
      accepted = accepted || std::find(serving.begin(), serving.end(), row.id) != serving.end();
    }
    if (accepted) out.push_back(row.id);
  }
  return out;
}

}  // namespace

void check_backend_serves_model(const RunConfig& c) {
  const auto backend = c.attention.backend;
  const auto arm = c.model.arm_spec();
  std::string first_refusal;
  std::vector<std::vector<AttentionRequest>> by_device;
  for (const auto& device : run_devices(c.train.device)) {
    std::string refusal;
    by_device.emplace_back();
    for (const auto& call : planned_calls(c, device)) {
      by_device.back().push_back(call.request);
      const auto reason = backend_refusal(backend, call.request, arm);
      if (refusal.empty() && !reason.empty()) refusal = "cannot run " + call.where + ": " + reason;
    }
    if (refusal.empty()) return;  // the run can land on this device and run there
    if (first_refusal.empty()) first_refusal = refusal;
  }
  throw ConfigError(fmt::format("attention.backend: {} {}; use {}", to_string(backend), first_refusal,
                                backend_list(accepted_backends(by_device, arm), "")));
}

}  // namespace attnlab
