#include "attention/flash_kernels.h"

#include <ATen/ops/_scaled_dot_product_flash_attention.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_backward.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward.h>

#include <initializer_list>
#include <optional>
#include <vector>

namespace attnlab::detail {
namespace {

constexpr bool kCausal = true;
constexpr double kNoDropout = 0.0;
// CUDA: a float32 quantity that must reach the half-precision kernel (the routing bias in the keys, the
// lse gradient in `out`) rides in three columns, hi + mid + lo parts each exact in the half type, so
// the kernel's float32 dot products sum them back to about float32 precision.
constexpr int64_t kHalfParts = 3;
// ... and is clamped below at -1000 first: exp(-1000) is 0 in float32 (nothing changes) and
// r_j / scale stays far inside float16's range.
constexpr double kCudaBiasFloor = -1000.0;
// FlashAttention-2 takes head dims in multiples of 8.
constexpr int64_t kCudaHeadDimAlign = 8;

int64_t round_up(int64_t x, int64_t multiple) { return (x + multiple - 1) / multiple * multiple; }

/// A column added by widen(): a scalar filled in, or a [B, H, T] tensor copied in.
struct Column {
  double value = 0.0;
  at::Tensor values;  ///< when defined, used instead of `value`
};

/// t [B, H, T, d] widened to `width` columns: t, then `columns`, then zeros. Laid out [B, T, H, width]
/// like the model's tensors, so the kernels' transposed view of it is contiguous (their backward would
/// otherwise copy dO into that layout). Returns t itself when nothing is added.
at::Tensor widen(const at::Tensor& t, int64_t width, std::initializer_list<Column> columns = {}) {
  const int64_t d = t.size(-1);
  if (width == d) return t;
  auto out = at::empty({t.size(0), t.size(2), t.size(1), width}, t.options()).transpose(1, 2);
  out.narrow(-1, 0, d).copy_(t);
  int64_t c = d;
  for (const auto& column : columns) {
    auto slot = out.select(-1, c++);
    column.values.defined() ? slot.copy_(column.values) : slot.fill_(column.value);
  }
  if (c < width) out.narrow(-1, c, width - c).fill_(0.0);
  return out;
}

/// The kernels read rows through strides but need each row (the last dimension) contiguous.
at::Tensor rows_contiguous(const at::Tensor& t) { return t.stride(-1) == 1 ? t : t.contiguous(); }

// ---- CPU: at::_scaled_dot_product_flash_attention_for_cpu; the bias is its additive mask. ----

std::optional<at::Tensor> cpu_mask(const at::Tensor& bias) {
  if (!bias.defined()) return std::nullopt;
  return bias.unsqueeze(2);  // [B, H, 1, T]: the kernel broadcasts a size-1 query dimension
}

FlashForward cpu_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& bias,
                         double scale) {
  auto [o, lse] = at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, kNoDropout, kCausal, cpu_mask(bias), scale);
  return {o, lse, {}, {}};
}

FlashGrads cpu_backward(const at::Tensor& d_o, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const at::Tensor& out, const at::Tensor& lse, const at::Tensor& d_lse, const at::Tensor& bias,
                        double scale) {
  if (!bias.defined() && !d_lse.defined()) {
    auto [dq, dk, dv] = at::_scaled_dot_product_flash_attention_for_cpu_backward(d_o, q, k, v, out, lse, kNoDropout,
                                                                                kCausal, std::nullopt, scale);
    return {dq, dk, dv, {}};
  }
  // One more column (flash_kernels.h): q 1, k 0, v 0; out -d_lse and d_o 1 when d_lse is given.
  const int64_t d = q.size(-1), width = d + 1;
  const bool lse_grad = d_lse.defined();
  auto [dq, dk, dv] = at::_scaled_dot_product_flash_attention_for_cpu_backward(
      widen(d_o, width, {{lse_grad ? 1.0 : 0.0}}), widen(q, width, {{1.0}}), widen(k, width), widen(v, width),
      widen(out, width, {lse_grad ? Column{0.0, at::neg(d_lse)} : Column{}}), lse, kNoDropout, kCausal, cpu_mask(bias),
      scale);
  FlashGrads g{dq.narrow(-1, 0, d), dk.narrow(-1, 0, d), dv.narrow(-1, 0, d), {}};
  if (bias.defined()) g.d_bias = dk.select(-1, d).to(bias.scalar_type()) / scale;
  return g;
}

// ---- CUDA: at::_scaled_dot_product_flash_attention (FlashAttention-2); the bias rides in columns. ----

/// hi, mid and lo parts of float32 x in the half type `type`: each the rounding of what the previous
/// ones left, so that their float32 sum is x to about float32 precision.
std::vector<Column> half_parts(const at::Tensor& x, at::ScalarType type) {
  auto rest = x.to(at::kFloat);
  std::vector<Column> parts;
  for (int64_t i = 0; i < kHalfParts; ++i) {
    parts.push_back({0.0, rest.to(type)});
    rest = rest - parts.back().values.to(at::kFloat);
  }
  return parts;
}

/// The key columns of the bias: parts of max(r, -1000) / scale.
std::vector<Column> bias_columns(const at::Tensor& bias, double scale, at::ScalarType type) {
  return half_parts(bias.to(at::kFloat).clamp_min(kCudaBiasFloor) / scale, type);
}

struct CudaOperands {
  at::Tensor q, k, v;
  int64_t width;
};

/// q, k, v widened for FlashAttention-2: `extra` columns (3 for a bias, whose key columns hold its
/// parts and query columns 1), then zeros to a multiple of 8.
CudaOperands cuda_operands(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& bias,
                           double scale, int64_t extra) {
  const int64_t width = round_up(q.size(-1) + extra, kCudaHeadDimAlign);
  if (!bias.defined()) return {widen(q, width), widen(k, width), widen(v, width), width};
  const auto parts = bias_columns(bias, scale, k.scalar_type());
  return {widen(q, width, {{1.0}, {1.0}, {1.0}}), widen(k, width, {parts[0], parts[1], parts[2]}), widen(v, width),
          width};
}

FlashForward cuda_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& bias,
                          double scale) {
  const auto ops = cuda_operands(q, k, v, bias, scale, bias.defined() ? kHalfParts : 0);
  auto r = at::_scaled_dot_product_flash_attention(ops.q, ops.k, ops.v, kNoDropout, kCausal,
                                                   /*return_debug_mask=*/false, scale);
  const int64_t T = q.size(2);
  // The kernel's lse may be padded along the rows: keep the first T.
  return {std::get<0>(r).narrow(-1, 0, q.size(-1)), std::get<1>(r).narrow(-1, 0, T), std::get<6>(r), std::get<7>(r)};
}

FlashGrads cuda_backward(const at::Tensor& d_o, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const at::Tensor& out, const at::Tensor& lse, const at::Tensor& d_lse, const at::Tensor& bias,
                         double scale, const FlashForward& forward) {
  const int64_t d = q.size(-1), T = q.size(2);
  const bool lse_grad = d_lse.defined();
  const auto ops = cuda_operands(q, k, v, bias, scale, bias.defined() || lse_grad ? kHalfParts : 0);
  // Columns d..d+2 carry the lse gradient (flash_kernels.h) as half parts of -dlse against dO = 1; v
  // is 0 there in every case.
  at::Tensor d_o_w = d_o, out_w = out;
  if (lse_grad) {
    const auto parts = half_parts(at::neg(d_lse), out.scalar_type());
    d_o_w = widen(d_o, ops.width, {{1.0}, {1.0}, {1.0}});
    out_w = widen(out, ops.width, {parts[0], parts[1], parts[2]});
  } else {
    d_o_w = widen(d_o, ops.width), out_w = widen(out, ops.width);
  }
  auto [dq, dk, dv] = at::_scaled_dot_product_flash_attention_backward(
      rows_contiguous(d_o_w), ops.q, ops.k, ops.v, rows_contiguous(out_w), lse.contiguous(), at::Tensor(), at::Tensor(),
      T, T, kNoDropout, kCausal, forward.philox_seed, forward.philox_offset, scale);
  FlashGrads g{dq.narrow(-1, 0, d), dk.narrow(-1, 0, d), dv.narrow(-1, 0, d), {}};
  if (bias.defined()) g.d_bias = dk.select(-1, d).to(bias.scalar_type()) / scale;
  return g;
}

}  // namespace

FlashForward flash_kernel_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  const at::Tensor& bias, double scale) {
  const auto qc = rows_contiguous(q), kc = rows_contiguous(k), vc = rows_contiguous(v);
  return q.is_cuda() ? cuda_forward(qc, kc, vc, bias, scale) : cpu_forward(qc, kc, vc, bias, scale);
}

FlashGrads flash_kernel_backward(const at::Tensor& d_o, const at::Tensor& q, const at::Tensor& k,
                                 const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse,
                                 const at::Tensor& d_lse, const at::Tensor& bias, double scale,
                                 const FlashForward& forward) {
  const auto qc = rows_contiguous(q), kc = rows_contiguous(k), vc = rows_contiguous(v);
  const auto d_oc = rows_contiguous(d_o);
  if (q.is_cuda()) return cuda_backward(d_oc, qc, kc, vc, out, lse, d_lse, bias, scale, forward);
  return cpu_backward(d_oc, qc, kc, vc, out, lse, d_lse, bias, scale);
}

}  // namespace attnlab::detail
