#include "attnlab/sdpa_attention.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/scaled_dot_product_attention.h>

#include <cmath>
#include <optional>
#include <stdexcept>

namespace attnlab {

AttentionResult sdpa_attention(const AttentionInputs& in) {
  check_attention_inputs(in);
  if (in.sink_logit.defined() || in.routing_bias.defined() || in.key_mask.defined()) {
    throw std::invalid_argument(
        "sdpa_attention: SDPA computes the plain causal softmax only; a sink logit, routing bias or key mask "
        "needs the fused or reference backend");
  }
  if (in.window.hides_keys(in.k.size(2))) {
    throw std::invalid_argument("sdpa_attention: SDPA has no sliding window (docs/windows.md); use the fused or "
                                "reference backend");
  }
  const int64_t Tq = in.q.size(2), Tk = in.k.size(2);
  const double scale = in.scale > 0 ? in.scale : 1.0 / std::sqrt(static_cast<double>(in.q.size(3)));
  // SDPA's is_causal aligns the mask top-left; queries here are the last Tq positions (decode), so a
  // shorter query block gets an explicit bottom-right mask (true = may attend).
  std::optional<at::Tensor> mask;
  if (Tq != Tk) {
    auto opts = in.q.options().dtype(at::kLong);
    mask = at::arange(Tk, opts).view({1, Tk}) <= (at::arange(Tq, opts) + (Tk - Tq)).view({Tq, 1});  // (Tq, Tk)
  }
  AttentionResult out;
  out.o = at::scaled_dot_product_attention(in.q, in.k.to(in.q.scalar_type()), in.v.to(in.q.scalar_type()), mask,
                                           /*dropout_p=*/0.0, /*is_causal=*/Tq == Tk, scale);  // (B, H, Tq, d)
  return out;
}

}  // namespace attnlab
