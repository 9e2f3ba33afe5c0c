// What `auto` runs (resolve_backend, backend_table.h): per device, an order of preference over the
// backend table; the choice is the first backend auto wants for the call whose refusal is empty. The
// table of docs/kernels.md, "Selecting a backend", reads these lists.
#include <spdlog/spdlog.h>

#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <tuple>

#include "attention/backend_detail.h"
#include "attnlab/backend_table.h"
#include "attnlab/cudnn_attention.h"

namespace attnlab {
namespace {

/// One place in a preference list: the backend, and why auto runs it for a request, or nullopt when
/// auto passes it over for that request whether or not it could serve it.
struct Preference {
  AttentionBackend backend;
  std::function<std::optional<std::string>(const AttentionRequest&)> why;
};

// Only the reference forms the probabilities, and every other row refuses them: asked first, the
// reference's place says why.
Preference reference_for_probabilities() {
  return {AttentionBackend::reference, [](const AttentionRequest& r) -> std::optional<std::string> {
            if (r.return_probs) return "the probabilities were asked for; only it forms them";
            return std::nullopt;
          }};
}

Preference always(AttentionBackend backend, std::string why) {
  return {backend, [why](const AttentionRequest&) -> std::optional<std::string> { return why; }};
}

// CPU, and any device that is not CUDA (flash refuses those, so they run fused).
std::vector<Preference>& cpu_preferences() {
  static std::vector<Preference> list{
      reference_for_probabilities(),
      // Measured faster than the tiled CPU twin in float32 and float64 (docs/benchmarks.md, "Flash
      // backend (CPU)"); its row refuses half types on the CPU, which then run fused in float32.
      always(AttentionBackend::flash, "measured faster than the fused CPU kernels (docs/benchmarks.md)"),
      always(AttentionBackend::fused, ""),
      always(AttentionBackend::reference, ""),
  };
  return list;
}

std::vector<Preference>& cuda_preferences() {
  static std::vector<Preference> list{
      reference_for_probabilities(),
      // cuDNN only where a GPU run recorded it faster and correct on the device class (kVerdicts in
      // cudnn_attention.cpp; docs/kernels.md, "cuDNN beside FlashAttention-2").
      {AttentionBackend::cudnn,
       [](const AttentionRequest& r) -> std::optional<std::string> {
         const auto record = cudnn_record(r.cuda_capability);
         if (record.faster_and_correct) return record.why;
         return std::nullopt;
       }},
      {AttentionBackend::flash,
       [](const AttentionRequest& r) -> std::optional<std::string> {
         return "FlashAttention-2 with the arm's exact corrections (docs/kernels.md); " + cudnn_record(r.cuda_capability).why;
       }},
      // The fused CUDA kernels have no recorded GPU parity run: they run only when asked for by name
      // (attention.backend: fused), never by `auto` (docs/kernels.md, "Selecting a backend").
      always(AttentionBackend::reference, "not fused: the fused CUDA kernels are an explicit opt-in "
                                          "(attention.backend: fused) until their GPU parity run is recorded"),
  };
  return list;
}

std::vector<Preference>& preferences(c10::DeviceType type) {
  return type == c10::DeviceType::CUDA ? cuda_preferences() : cpu_preferences();
}

struct Choice {
  AttentionBackend backend;
  std::string why;  ///< the backends auto wanted and could not run ("not flash: ..."), then the chosen one's reason
};

Choice automatic_choice(const AttentionRequest& r, const ArmSpec& arm) {
  std::string why;
  const auto add = [&why](const std::string& part) {
    if (!part.empty()) why += (why.empty() ? "" : "; ") + part;
  };
  for (const auto& place : preferences(r.device.type())) {
    const auto wanted = place.why(r);
    if (!wanted) continue;
    if (const auto refusal = backend_spec(place.backend).refusal(r, arm); !refusal.empty()) {
      add("not " + to_string(place.backend) + ": " + refusal);
      continue;
    }
    add(*wanted);
    return {place.backend, why};
  }
  throw std::logic_error("resolve_backend: no backend in auto's list serves the call: " + why);
}

/// Says once per kind of call (device, dtype, probabilities, key mask, decoding, window) and choice what
/// `automatic` runs and why, so that a run's log names the backend its attention ran on. Falling back
/// to the O(T^2) reference on CUDA is a warning.
void log_automatic_choice(const AttentionRequest& r, const Choice& choice) {
  static std::mutex mutex;
  static std::set<std::tuple<int, int, bool, bool, bool, bool, int>> said;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    const bool decoding = r.q_len != r.k_len;
    if (!said.emplace(static_cast<int>(r.device.type()), static_cast<int>(r.dtype), r.return_probs, r.key_mask,
                      decoding, r.window.local(), static_cast<int>(choice.backend))
             .second) {
      return;
    }
  }
  const auto level =
      r.device.is_cuda() && choice.backend == AttentionBackend::reference ? spdlog::level::warn : spdlog::level::info;
  spdlog::log(level, "attention backend auto: {} for {} {} attention{}{}{}: {}", to_string(choice.backend),
              c10::DeviceTypeName(r.device.type(), /*lower_case=*/true), c10::toString(r.dtype),
              r.return_probs ? " with probabilities" : "", r.key_mask ? " with a key mask" : "",
              r.window.local() ? " in a window" : "", choice.why);
}

}  // namespace

namespace detail {

void prefer_first(c10::DeviceType type, AttentionBackend backend) {
  auto& list = preferences(type);
  list.insert(list.begin(), always(backend, "registered first in auto's list (register_backend)"));
}

}  // namespace detail

AttentionBackend resolve_backend(AttentionBackend requested, const AttentionRequest& request, const ArmSpec& arm) {
  if (requested != AttentionBackend::automatic) return requested;
  const auto choice = automatic_choice(request, arm);
  log_automatic_choice(request, choice);
  return choice.backend;
}

}  // namespace attnlab
