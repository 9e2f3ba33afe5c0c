// The flash backend: the vendor kernels of flash_kernels.h plus the sink term, as one autograd
// function. The sink is an exact correction of the kernel's (o, lse):
//   lse' = logaddexp(lse, b_h),  o' = o exp(lse - lse'),
// and the kernel's own backward, handed (o', lse'), recomputes P' = exp(S - lse') (the sink-normalised
// probabilities) and D = rowsum(dO' o'), so dq, dk, dv are exact; d b_h = -sum_{b,i} p_i (D_i - dlse'_i)
// with p_i = exp(b_h - lse'_i) (docs/kernels.md, "The flash backend").
#include "attnlab/flash_attention.h"

#include <torch/autograd.h>

#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "attention/flash_kernels.h"
#include "attnlab/device.h"

namespace attnlab {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
constexpr const char* kWho = "flash_attention";

at::Tensor value_or_undefined(const std::optional<at::Tensor>& t) { return t.value_or(at::Tensor()); }

/// b_h [H] as [1, H, 1] in lse's dtype.
at::Tensor sink_rows(const at::Tensor& sink, const at::Tensor& lse) { return sink.to(lse.scalar_type()).view({1, -1, 1}); }

/// D_i = dO_i . o_i (B, H, T) in lse's dtype, from the rounded o as the kernels take it.
at::Tensor row_dots(const at::Tensor& d_o, const at::Tensor& o, const at::Tensor& lse) {
  return (d_o.to(lse.scalar_type()) * o.to(lse.scalar_type())).sum(-1);
}

/// In a half type the kernels return d r_j rounded to it (one column of dk), yet the sum over keys
/// is known in the accumulator dtype: sum_j dS_ij = p_i D_i + (1 - p_i) dlse_i in every row, with
/// D_i = dO_i . o'_i (`row_dot`) and p_i the phantom mass (docs/kernels.md, "Precision in bfloat16 /
/// float16"). A gate parameter's gradient sums B x T such values that nearly cancel, so their
/// rounding would dominate it. Restores the sum per (batch, head), spreading the residual over the
/// keys in proportion to |d r_j| (a heuristic: rounding errors grow with the value; measured better
/// than spreading evenly). With a sink the restored sum is as accurate as d b_h, whose D_i comes
/// from the rounded o' too.
at::Tensor restore_routing_grad_sum(const at::Tensor& d_bias, const at::Tensor& row_dot, const at::Tensor& lse,
                                    const at::Tensor& d_lse, const at::Tensor& sink) {
  auto row_sums = d_lse.defined() ? d_lse.to(lse.scalar_type()) : at::zeros_like(lse);  // (B, H, T)
  if (sink.defined()) {
    const auto p = at::exp(sink_rows(sink, lse) - lse);
    row_sums = p * row_dot + (1 - p) * row_sums;
  }
  const auto residual = row_sums.sum(-1, true) - d_bias.sum(-1, true);  // (B, H, 1)
  const auto weight = d_bias.abs();
  const auto total = weight.sum(-1, true);
  // A (batch, head) whose d r_j are all zero, or hold an inf (float16 overflow), is left as it is:
  // no 0 / 0, and an inf stays at its key instead of spreading NaN over the others.
  const auto usable = (total > 0).logical_and(at::isfinite(total)).logical_and(at::isfinite(residual));
  return at::where(usable, d_bias + weight / total * residual, d_bias);
}

bool is_half_type(at::ScalarType type) { return type == at::kBFloat16 || type == at::kHalf; }

/// The route of a call, kept for its backward in the autograd context (which holds only IValues).
struct RouteHolder : torch::CustomClassHolder {
  explicit RouteHolder(detail::KernelRoute r) : route(std::move(r)) {}
  detail::KernelRoute route;
};

class FlashAttentionFunction : public torch::autograd::Function<FlashAttentionFunction> {
 public:
  // Optional inputs are std::optional: autograd records no input for an absent one.
  static variable_list forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& sink,
                               double scale, const detail::KernelRoute& route) {
    const auto b = value_or_undefined(bias), s = value_or_undefined(sink);
    auto fwd = detail::flash_kernel_forward(q, k, v, b, scale, route);
    at::Tensor o = fwd.o, lse = fwd.lse;
    if (s.defined()) {
      const auto lse_sink = at::logaddexp(lse, sink_rows(s, lse));        // (B, H, T)
      o = (o * at::exp(lse - lse_sink).unsqueeze(-1)).to(q.scalar_type());  // (B, H, T, d), [B, T, H, d] memory
      lse = lse_sink;
    }
    ctx->set_materialize_grads(false);  // an unused output's gradient stays undefined: no zeros formed
    ctx->save_for_backward({q, k, v, b, s, o, lse, fwd.philox_seed, fwd.philox_offset});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["route"] = c10::IValue::make_capsule(c10::make_intrusive<RouteHolder>(route));
    ctx->saved_data["kernel_lse_shape"] = fwd.kernel_lse_shape;
    return {o, lse};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &bias = saved[3], &sink = saved[4];
    const auto &o = saved[5], &lse = saved[6];
    const detail::FlashForward fwd{o, lse, saved[7], saved[8], ctx->saved_data["kernel_lse_shape"].toIntVector()};
    if (!grads[0].defined() && !grads[1].defined()) return variable_list(7);
    const auto d_o = grads[0].defined() ? grads[0] : at::zeros_like(o);
    const auto& d_lse = grads[1];
    const double scale = ctx->saved_data["scale"].toDouble();
    const auto& route =
        c10::static_intrusive_pointer_cast<RouteHolder>(ctx->saved_data["route"].toCapsule())->route;
    auto g = detail::flash_kernel_backward(d_o, q, k, v, o, lse, d_lse, bias, scale, fwd, route);
    const bool restore = g.d_bias.defined() && is_half_type(q.scalar_type());
    const auto row_dot = sink.defined() ? row_dots(d_o, o, lse) : at::Tensor();  // D_i (B, H, T), with a sink
    if (restore) g.d_bias = restore_routing_grad_sum(g.d_bias, row_dot, lse, d_lse, sink);
    at::Tensor d_sink;
    if (sink.defined()) {
      // d b_h = -sum_{b,i} p_i (D_i - dlse_i): one reduction in a fixed order (no atomics).
      auto D = row_dot;
      if (d_lse.defined()) D = D - d_lse;
      const auto p = at::exp(sink_rows(sink, lse) - lse);                     // phantom mass
      d_sink = (p * D).sum(at::IntArrayRef{0, 2}).neg().to(sink.scalar_type());              // (H)
    }
    return {g.dq, g.dk, g.dv, g.d_bias, d_sink, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

std::string flash_refusal(const AttentionRequest& r) {
  const auto& device = r.device;
  const auto dtype = r.dtype;
  const auto& window = r.window;
  if (r.key_mask) return "the flash kernels take no key mask";
  if (window.hides_keys(r.k_len) && device.is_cuda() && window.keep_first > 0) {
    return "FlashAttention-2's window has no kept first positions (model.window_keep_first = " +
           std::to_string(window.keep_first) + "; docs/windows.md)";
  }
  if (r.q_len != r.k_len) {
    return "the flash backend runs the square causal case only (Tq = Tk); got " + std::to_string(r.q_len) +
           " queries over " + std::to_string(r.k_len) + " keys (KV-cache decoding)";
  }
  if (!at::isFloatingType(dtype)) return std::string("the flash kernels take floating dtypes, got ") + c10::toString(dtype);
  if (device.is_cpu()) return "";
  if (!device.is_cuda()) return "the flash backend runs on CPU or CUDA, got " + device.str();
  if (dtype != at::kBFloat16 && dtype != at::kHalf) {
    return std::string("FlashAttention-2 on CUDA takes bfloat16 or float16, got ") + c10::toString(dtype);
  }
  if (r.cuda_capability > 0 && r.cuda_capability < kFlashMinCudaCapability) {
    return "FlashAttention-2 runs on compute capability 8.0 or newer (sm_80), got " +
           std::to_string(r.cuda_capability / 10) + "." + std::to_string(r.cuda_capability % 10);
  }
  if (r.head_dim > detail::kFlashCudaMaxHeadDim) {
    return "FlashAttention-2 on CUDA takes head_dim <= " + std::to_string(detail::kFlashCudaMaxHeadDim) +
           " here (3 columns are kept for the routing bias), got " + std::to_string(r.head_dim);
  }
  return "";
}

namespace detail {

void check_same_device(const AttentionInputs& in, const char* who) {
  const auto device = in.q.device();
  for (const auto* t : {&in.k, &in.v, &in.routing_bias, &in.sink_logit}) {
    if (t->defined() && t->device() != device) {
      throw std::invalid_argument(std::string(who) + ": every input must be on " + device.str() + ", got one on " +
                                  t->device().str());
    }
  }
}

AttentionResult composed_kernel_attention(const AttentionInputs& in, const KernelRoute& route) {
  const auto type = in.q.scalar_type();
  const auto acc = attention_acc_dtype(type);
  const double scale = in.scale > 0 ? in.scale : 1.0 / std::sqrt(static_cast<double>(in.q.size(3)));
  auto optional = [acc](const at::Tensor& t) {
    return t.defined() ? std::optional<at::Tensor>(t.to(acc)) : std::nullopt;
  };
  auto outs = FlashAttentionFunction::apply(in.q, in.k.to(type), in.v.to(type), optional(in.routing_bias),
                                            optional(in.sink_logit), scale, route);
  AttentionResult result;
  result.o = outs[0];    // (B, H, T, d)
  result.lse = outs[1];  // (B, H, T)
  return result;
}

}  // namespace detail

AttentionResult flash_attention(const AttentionInputs& in, FlashComposition composition) {
  check_attention_inputs(in);
  detail::check_same_device(in, kWho);
  const auto reason = flash_refusal(attention_request(in));
  if (!reason.empty()) throw std::invalid_argument(std::string(kWho) + ": " + reason);
  const auto window = in.window.hides_keys(in.k.size(2)) ? in.window : AttentionWindow{};
  return detail::composed_kernel_attention(in, {composition, nullptr, window});
}

}  // namespace attnlab
