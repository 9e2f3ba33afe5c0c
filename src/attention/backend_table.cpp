// The attention backends, one row each (backend_table.h): name, refusal, run. Which backend may run a
// call is decided by these rows and nowhere else; `auto`'s order of preference is backend_choice.cpp's.
#include "attnlab/backend_table.h"

#include <initializer_list>
#include <stdexcept>

#include "attention/backend_detail.h"
#include "attnlab/cudnn_attention.h"
#include "attnlab/flash_attention.h"
#include "attnlab/fused_attention.h"
#include "attnlab/sdpa_attention.h"

namespace attnlab {
namespace {

std::string first_reason(std::initializer_list<std::string> reasons) {
  for (const auto& reason : reasons)
    if (!reason.empty()) return reason;
  return "";
}

std::string refuse_probs(const AttentionRequest& r) {
  return r.return_probs ? "it never forms the T x T probabilities; only 'reference' returns them" : "";
}

// at::scaled_dot_product_attention computes the plain causal softmax and nothing else.
std::string refuse_unless_plain_softmax(const ArmSpec& arm) {
  if (computes_plain_softmax(arm)) return "";
  return "it runs the plain causal softmax only (baseline); model.arm '" + arm.name + "' has a sink or gate";
}

// sdpa and cudnn have no window: a mask would move sdpa off the plain causal kernel it is the
// yardstick of, and torch 2.11's cuDNN op takes none (docs/windows.md, "Backends").
std::string refuse_window(const AttentionRequest& r) {
  if (!r.window.hides_keys(r.k_len)) return "";
  return "it has no sliding window (model.window = " + std::to_string(r.window.window) +
         " on this layer; docs/windows.md)";
}

// LibTorch's CPU flash kernel, behind the flash backend and behind at::scaled_dot_product_attention on
// CPU, takes D_i = dO_i . o_i from the half-precision o and rounds dS to the half type before
// dq = scale dS k. sum_j dS_ij should cancel (it is dlse_i); where the keys share a large component c
// it no longer does, and dq_i is off by that residue times c: 11-24x the reference backend's error in
// bfloat16 (docs/kernels.md, "Precision in bfloat16 / float16"). Refused rather than trained on.
std::string refuse_cpu_half_flash_kernel(const AttentionRequest& r) {
  if (!r.device.is_cpu() || (r.dtype != at::kBFloat16 && r.dtype != at::kHalf)) return "";
  return std::string("on CPU in ") + c10::toString(r.dtype) +
         " it would run LibTorch's CPU flash kernel, whose dq is wrong when the keys share a large component "
         "(docs/kernels.md, \"Precision in bfloat16 / float16\"); auto and fused compute half types in float32 there";
}

std::vector<BackendSpec>& rows() {
  using R = const AttentionRequest&;
  using A = const ArmSpec&;
  using In = const AttentionInputs&;
  static std::vector<BackendSpec> table{
      {AttentionBackend::fused, "fused", [](R r, A) { return refuse_probs(r); },
       [](In in, bool) { return fused_attention(in); }},
      {AttentionBackend::reference, "reference", [](R, A) { return std::string(); },
       [](In in, bool probs) { return reference_attention(in, probs); }},
      {AttentionBackend::sdpa, "sdpa",
       [](R r, A arm) {
         return first_reason(
             {refuse_probs(r), refuse_unless_plain_softmax(arm), refuse_window(r), refuse_cpu_half_flash_kernel(r)});
       },
       [](In in, bool) { return sdpa_attention(in); }},
      {AttentionBackend::flash, "flash",
       [](R r, A) { return first_reason({refuse_probs(r), flash_refusal(r), refuse_cpu_half_flash_kernel(r)}); },
       [](In in, bool) { return flash_attention(in); }},
      {AttentionBackend::cudnn, "cudnn",
       [](R r, A) { return first_reason({refuse_probs(r), refuse_window(r), cudnn_refusal(r)}); },
       [](In in, bool) { return cudnn_attention(in); }},
  };
  return table;
}

bool names_taken = false;

}  // namespace

namespace detail {

std::vector<NameTable<AttentionBackend>::Entry> take_backend_names() {
  names_taken = true;
  std::vector<NameTable<AttentionBackend>::Entry> names{{AttentionBackend::automatic, "auto"}};
  for (const auto& row : rows()) names.push_back({row.id, row.name});
  return names;
}

}  // namespace detail

const std::vector<BackendSpec>& backend_table() { return rows(); }

const BackendSpec& backend_spec(AttentionBackend id) {
  for (const auto& row : rows())
    if (row.id == id) return row;
  throw std::logic_error(id == AttentionBackend::automatic ? "backend_spec: 'auto' has no row; resolve_backend() it"
                                                           : "backend_spec: a backend without a row");
}

void register_backend(const BackendSpec& spec, const std::vector<c10::DeviceType>& auto_first_on) {
  if (names_taken) throw std::logic_error("register_backend: call it before anything names an attention backend");
  if (!spec.name || !*spec.name || !spec.refusal || !spec.run) {
    throw std::invalid_argument("register_backend: a backend needs a name, a refusal and a run");
  }
  bool taken = spec.id == AttentionBackend::automatic || std::string(spec.name) == "auto";
  for (const auto& row : rows()) taken = taken || row.id == spec.id || std::string(row.name) == spec.name;
  if (taken) throw std::invalid_argument(std::string("register_backend: '") + spec.name + "' or its id is taken");
  rows().push_back(spec);
  for (const auto type : auto_first_on) detail::prefer_first(type, spec.id);
}

std::string backend_refusal(AttentionBackend backend, const AttentionRequest& request, const ArmSpec& arm) {
  if (backend == AttentionBackend::automatic) return "";
  return backend_spec(backend).refusal(request, arm);
}

std::vector<AttentionBackend> serving_backends(const std::vector<AttentionRequest>& requests, const ArmSpec& arm) {
  std::vector<AttentionBackend> out{AttentionBackend::automatic};
  for (const auto& row : rows()) {
    bool serves = true;
    for (const auto& r : requests) serves = serves && row.refusal(r, arm).empty();
    if (serves) out.push_back(row.id);
  }
  return out;
}

std::string backend_list(const std::vector<AttentionBackend>& backends, const char* quote) {
  std::string out;
  for (size_t i = 0; i < backends.size(); ++i) {
    if (i > 0) out += i + 1 == backends.size() ? " or " : ", ";
    out += quote + to_string(backends[i]) + quote;
  }
  return out;
}

AttentionResult run_attention(AttentionBackend requested, const ArmSpec& arm, const AttentionInputs& in,
                              bool return_probs) {
  const auto request = attention_request(in, return_probs);
  const auto& spec = backend_spec(resolve_backend(requested, request, arm));
  if (const auto reason = spec.refusal(request, arm); !reason.empty()) {
    throw std::invalid_argument(std::string("attention backend '") + spec.name + "': " + reason + "; use " +
                                backend_list(serving_backends({request}, arm)));
  }
  return spec.run(in, return_probs);
}

}  // namespace attnlab
