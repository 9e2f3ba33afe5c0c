#include "attnlab/attention_self_check.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <utility>

#include "attnlab/device.h"

namespace attnlab {
namespace {

// The shared key component, in units of sqrt(head_dim) (the norm of a N(0, 1) key), and the
// queries' component along it: scores scale * q . k near -+160 whatever the head_dim, so that even the
// largest of a row's 192 scores (spread about 10 by the queries' component times the keys' own) keeps
// its lse below -ln(FLT_MAX) = -88.7.
constexpr double kSharedKeyComponent = 2.0;
constexpr double kQueryComponent = 80.0;

std::string scientific(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2e", x);
  return buf;
}

std::string failure_message(const SelfCheckResult& r) {
  const auto& w = r.worst();
  return "attention self-check failed: backend " + r.backend + ", arm " + r.arm + ", dtype " + r.dtype + ", head_dim " +
         std::to_string(r.head_dim) + " on " + r.device + ": " + w.tensor + " is off by " + scientific(w.error) +
         " against float64 (normalised error), allowed " + scientific(w.bound) + " from the yardsticks' " +
         scientific(w.yardstick) + ". Set attention.backend: reference to run this arm on the composed ops instead "
         "(docs/kernels.md, \"The first-use self-check\")";
}

AttentionBackend resolved_backend(const SelfCheckCase& c) {
  AttentionRequest r;
  r.device = c.device, r.dtype = c.dtype, r.head_dim = c.head_dim;
  r.q_len = r.k_len = kSelfCheckLength;
  r.cuda_capability = c.device.is_cuda() ? cuda_compute_capability(c.device) : 0;
  return resolve_backend(c.backend, r, c.arm);
}

}  // namespace

ArmLeaves self_check_values(int64_t head_dim, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  auto normal = [&](at::IntArrayRef shape, double mean, double stdev) { return at::normal(mean, stdev, shape, gen, opts); };
  const int64_t B = kSelfCheckBatch, H = kSelfCheckHeads, T = kSelfCheckLength, d = head_dim;
  ArmLeaves l{normal({B, H, T, d}, 0, 1), normal({B, H, T, d}, 0, 1), normal({B, H, T, d}, 0, 1), normal({H}, 0, 1),
              normal({H}, 1.0, 0.2),      normal({H, d}, 0, 0.3),      normal({H}, 0, 1)};
  auto u = normal({d}, 0, 1);
  u = u / u.norm();
  // Sequence 1, head 0: keys share a component twice their own norm; queries alternate against it.
  const auto sign = at::arange(T, opts).remainder(2).mul(2).sub(1).unsqueeze(-1);  // -1, +1, -1, ...
  l.k[1][0].add_(kSharedKeyComponent * std::sqrt(static_cast<double>(d)) * u);
  l.q[1][0].add_(kQueryComponent * sign * u);
  return l;
}

AttentionSelfCheckError::AttentionSelfCheckError(SelfCheckResult result)
    : std::runtime_error(failure_message(result)), result_(std::move(result)) {}

namespace {

// `with_lse`: the backend returns lse (all but sdpa), so the loss reads it and it is checked; without,
// every run's loss reads o alone and lse is compared nowhere.
SelfCheckResult run_check(const SelfCheckCase& c, const ArmAttend& attend, AttentionBackend gate_backend,
                          const std::string& backend_name, bool with_lse) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto src = rounded(self_check_values(c.head_dim, c.seed), c.dtype);
  const auto on_device = [&] { return as_leaves(src, c.device, c.dtype); };
  auto exact = run_arm(c.arm, as_leaves(src, at::kCPU, at::kDouble), AttentionBackend::reference, with_lse);
  auto low = run_arm(c.arm, on_device(), AttentionBackend::reference, with_lse);
  auto rounding_p = run_arm_rounding_p(c.arm, on_device(), with_lse);
  auto arithmetic = run_arm_flash_arithmetic(c.arm, on_device(), with_lse);
  auto got = run_arm_with(c.arm, on_device(), gate_backend, attend, with_lse);
  if (!with_lse)
    for (auto* run : {&exact, &low, &rounding_p, &arithmetic, &got}) run->lse = run->phantom = at::Tensor();
  SelfCheckResult result;
  result.backend = backend_name;
  result.arm = c.arm.name;
  result.dtype = c10::toString(c.dtype);
  result.device = c.device.str();
  result.head_dim = c.head_dim;
  result.shape = {kSelfCheckBatch, kSelfCheckHeads, kSelfCheckLength};
  result.rule = rule_for_dtype(c.dtype);
  result.checks = check_run_within_rule(got, low, exact, {&rounding_p, &arithmetic}, result.rule);
  result.milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!result.passed()) throw AttentionSelfCheckError(result);
  return result;
}

}  // namespace

SelfCheckResult check_attention_backend(const SelfCheckCase& c) {
  const auto backend = resolved_backend(c);
  const ArmAttend attend = [backend](const ArmSpec& a, const ArmLayerParams& p, const at::Tensor& q,
                                     const PreparedKeys& keys) { return arm_attention(a, p, q, keys, false, backend); };
  return run_check(c, attend, backend, to_string(backend), /*with_lse=*/backend != AttentionBackend::sdpa);
}

SelfCheckResult check_attention_backend(const SelfCheckCase& c, const ArmAttend& attend,
                                        AttentionBackend gate_backend, const std::string& name) {
  return run_check(c, attend, gate_backend, name, /*with_lse=*/true);
}

SelfCheckResult first_use_self_check(const SelfCheckCase& c, const SelfCheckRunner& runner) {
  static std::mutex mutex;
  static std::map<std::string, SelfCheckResult> passed;
  const auto key = fmt::format("{}|{}|{}|{}|{}|{}", to_string(c.backend), c.arm.name, c.device.str(),
                               c10::toString(c.dtype), c.head_dim, c.seed);
  if (!runner) {
    const std::lock_guard<std::mutex> lock(mutex);
    if (const auto it = passed.find(key); it != passed.end()) return it->second;
  }
  auto result = runner ? runner(c) : check_attention_backend(c);
  const auto& w = result.worst();
  spdlog::info("attention self-check: backend {}, arm {}, {}, head_dim {} on {}: passed in {:.0f} ms (worst: {} {:.2e} "
               "of {:.2e} allowed)",
               result.backend, result.arm, result.dtype, result.head_dim, result.device, result.milliseconds, w.tensor,
               w.error, w.bound);
  if (!runner) {
    const std::lock_guard<std::mutex> lock(mutex);
    passed.emplace(key, result);
  }
  return result;
}

}  // namespace attnlab
