// The cuDNN route: the flash backend's composition (flash_kernels.h, flash_attention.cpp) on cuDNN's
// fused attention. The op's backward returns dq, dk, dv only, no bias gradient, so the routing bias
// rides in key columns as on FlashAttention-2 (docs/kernels.md, "cuDNN beside FlashAttention-2"),
// which also keeps the op's mask path out (pytorch/pytorch#196678: NaN dq with a mask tensor).
#include "attnlab/cudnn_attention.h"

#include <ATen/ops/_scaled_dot_product_cudnn_attention.h>
#include <ATen/ops/_scaled_dot_product_cudnn_attention_backward.h>

#include <array>
#include <memory>
#include <stdexcept>
#include <string>

#include "attention/flash_kernels.h"
#include "attnlab/device.h"
#include "attnlab/flash_attention.h"

namespace attnlab {
namespace {

constexpr const char* kWho = "cudnn_attention";
constexpr bool kCausal = true;
constexpr double kNoDropout = 0.0;

/// GPU runs' verdicts on cuDNN against FlashAttention-2, per compute capability: the rows of
/// docs/kernels.md's table. A row is added in the commit that records the run (bench_attention,
/// the 124m step benchmark, the self-check and the gpu tests of scripts/gpu_check.sh).
struct Verdict {
  int capability;
  bool faster_and_correct;
  const char* record;
};
constexpr std::array<Verdict, 0> kVerdicts{};

CudnnForward real_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale) {
  auto r = at::_scaled_dot_product_cudnn_attention(q, k, v, /*attn_bias=*/std::nullopt, /*compute_log_sumexp=*/true,
                                                   kNoDropout, kCausal, /*return_debug_mask=*/false, scale);
  return {std::get<0>(r), std::get<1>(r), std::get<6>(r), std::get<7>(r)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> real_backward(const at::Tensor& d_o, const at::Tensor& q,
                                                             const at::Tensor& k, const at::Tensor& v,
                                                             const at::Tensor& out, const at::Tensor& lse,
                                                             const CudnnForward& forward, double scale) {
  const int64_t T = q.size(2);
  return at::_scaled_dot_product_cudnn_attention_backward(d_o, q, k, v, out, lse, forward.philox_seed,
                                                          forward.philox_offset, /*attn_bias=*/at::Tensor(),
                                                          /*cum_seq_q=*/at::Tensor(), /*cum_seq_k=*/at::Tensor(), T, T,
                                                          kNoDropout, kCausal, scale);
}

/// `t` laid out like `like` (same sizes): cuDNN's backward wants dO in O's layout.
at::Tensor laid_out_like(const at::Tensor& t, const at::Tensor& like) {
  if (t.strides() == like.strides()) return t;
  return at::empty_strided(like.sizes(), like.strides(), t.options()).copy_(t);
}

/// The composition's kernel pair on `calls`: lse normalised to [B, H, T] for the composition, handed
/// back in the op's own shape; no mask ever (key columns).
std::shared_ptr<const detail::KernelCalls> as_kernel_calls(const CudnnKernelCalls& calls) {
  auto forward = [calls](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const std::optional<at::Tensor>& mask, double scale) {
    if (mask.has_value()) throw std::logic_error("cudnn_attention: the cuDNN route takes no mask");
    const auto f = calls.forward(q, k, v, scale);
    const int64_t B = q.size(0), H = q.size(1), T = q.size(2);
    return detail::FlashForward{f.o, f.lse.reshape({B, H, -1}).narrow(-1, 0, T), f.philox_seed, f.philox_offset,
                                f.lse.sizes().vec()};
  };
  auto backward = [calls](const at::Tensor& d_o, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const at::Tensor& out, const at::Tensor& lse, const std::optional<at::Tensor>& mask,
                          double scale, const detail::FlashForward& f) {
    if (mask.has_value()) throw std::logic_error("cudnn_attention: the cuDNN route takes no mask");
    const auto kernel_lse = f.kernel_lse_shape.empty() ? lse.contiguous() : lse.contiguous().view(f.kernel_lse_shape);
    const CudnnForward forward{f.o, kernel_lse, f.philox_seed, f.philox_offset};
    return calls.backward(laid_out_like(d_o, out), q, k, v, out, kernel_lse, forward, scale);
  };
  return std::make_shared<const detail::KernelCalls>(detail::KernelCalls{forward, backward});
}

std::string device_free_refusal(at::ScalarType dtype, int64_t q_len, int64_t k_len, bool key_mask) {
  if (key_mask) return "the cuDNN route takes no key mask";
  if (q_len != k_len) {
    return "the cuDNN route runs the square causal case only (Tq = Tk); got " + std::to_string(q_len) +
           " queries over " + std::to_string(k_len) + " keys (KV-cache decoding)";
  }
  if (!at::isFloatingType(dtype)) return std::string("cuDNN attention takes floating dtypes, got ") + c10::toString(dtype);
  return "";
}

AttentionResult composed(const AttentionInputs& in, const CudnnKernelCalls& calls, const std::string& refusal) {
  if (!refusal.empty()) throw std::invalid_argument(std::string(kWho) + ": " + refusal);
  return detail::composed_kernel_attention(in, {FlashComposition::key_columns, as_kernel_calls(calls)});
}

}  // namespace

std::string cudnn_refusal(const AttentionRequest& r) {
  if (auto reason = device_free_refusal(r.dtype, r.q_len, r.k_len, r.key_mask); !reason.empty()) return reason;
  if (!r.device.is_cuda()) return "cuDNN attention runs on CUDA only, got " + r.device.str();
  if (r.dtype != at::kBFloat16 && r.dtype != at::kHalf) {
    return std::string("cuDNN's fused attention takes bfloat16 or float16, got ") + c10::toString(r.dtype);
  }
  if (r.cuda_capability > 0 && r.cuda_capability < kFlashMinCudaCapability) {
    return "cuDNN's fused attention runs on compute capability 8.0 or newer (sm_80), got " +
           std::to_string(r.cuda_capability / 10) + "." + std::to_string(r.cuda_capability % 10);
  }
  if (r.head_dim > kCudnnMaxHeadDim) {
    return "the cuDNN route takes head_dim <= " + std::to_string(kCudnnMaxHeadDim) +
           " (3 key columns for the routing bias, padded to 128), got " + std::to_string(r.head_dim);
  }
  return "";
}

CudnnKernelCalls cudnn_kernel_calls() { return {real_forward, real_backward}; }

AttentionResult cudnn_attention(const AttentionInputs& in) {
  check_attention_inputs(in);
  detail::check_same_device(in, kWho);
  if (in.window.hides_keys(in.k.size(2))) {
    throw std::invalid_argument(std::string(kWho) + ": torch 2.11's cuDNN attention has no sliding window "
                                "(docs/windows.md); use the flash, fused or reference backend");
  }
  return composed(in, cudnn_kernel_calls(), cudnn_refusal(attention_request(in)));
}

AttentionResult cudnn_attention(const AttentionInputs& in, const CudnnKernelCalls& calls) {
  check_attention_inputs(in);
  detail::check_same_device(in, kWho);
  if (in.window.hides_keys(in.k.size(2))) {
    throw std::invalid_argument(std::string(kWho) + ": torch 2.11's cuDNN attention has no sliding window "
                                "(docs/windows.md); use the flash, fused or reference backend");
  }
  return composed(in, calls,
                  device_free_refusal(in.q.scalar_type(), in.q.size(2), in.k.size(2), in.key_mask.defined()));
}

CudnnRecord cudnn_record(int cuda_capability) {
  for (const auto& v : kVerdicts) {
    if (v.capability == cuda_capability) return {v.faster_and_correct, v.record};
  }
  return {false, "cuDNN not measured on compute capability " + std::to_string(cuda_capability / 10) + "." +
                     std::to_string(cuda_capability % 10) + " (docs/kernels.md, \"cuDNN beside FlashAttention-2\")"};
}

}  // namespace attnlab
