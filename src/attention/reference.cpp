// Composed-op reference of the shared attention form (SPEC section 1). Short on purpose: it is the
// oracle, read against docs/arms.md line by line.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "attnlab/attention.h"

namespace attnlab {
namespace {

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("attention: " + what);
}

std::string shape_of(const at::Tensor& t) { return c10::str(t.sizes()); }

}  // namespace

void check_attention_inputs(const AttentionInputs& in) {
  if (!in.q.defined() || !in.k.defined() || !in.v.defined()) bad("q, k and v are required");
  if (in.q.dim() != 4) bad("q must be [B, H, Tq, d], got " + shape_of(in.q));
  const int64_t B = in.q.size(0), H = in.q.size(1), Tq = in.q.size(2), d = in.q.size(3);
  if (in.k.dim() != 4 || in.k.size(0) != B || in.k.size(1) != H || in.k.size(3) != d)
    bad("k must be [B, H, Tk, d] matching q " + shape_of(in.q) + ", got " + shape_of(in.k));
  const int64_t Tk = in.k.size(2);
  if (in.v.sizes() != in.k.sizes()) bad("v must have k's shape " + shape_of(in.k) + ", got " + shape_of(in.v));
  if (Tq > Tk) bad("more queries (" + std::to_string(Tq) + ") than keys (" + std::to_string(Tk) + ")");
  if (!in.q.is_floating_point()) bad("q must be floating point");
  if (in.routing_bias.defined() && in.routing_bias.sizes() != at::IntArrayRef{B, H, Tk})
    bad("routing_bias must be [B, H, Tk] = " + c10::str(at::IntArrayRef{B, H, Tk}) + ", got " +
        shape_of(in.routing_bias));
  if (in.sink_logit.defined() && in.sink_logit.sizes() != at::IntArrayRef{H})
    bad("sink_logit must be [H] = [" + std::to_string(H) + "], got " + shape_of(in.sink_logit));
  if (in.key_mask.defined() &&
      (in.key_mask.sizes() != at::IntArrayRef{B, Tk} || in.key_mask.scalar_type() != at::kBool))
    bad("key_mask must be bool [B, Tk], got " + shape_of(in.key_mask));
  if (in.window.window < 0 || in.window.keep_first < 0 || (in.window.window == 0 && in.window.keep_first != 0))
    bad("window must be >= 1 with keep_first >= 0, or 0 (none) with keep_first 0; got window " +
        std::to_string(in.window.window) + ", keep_first " + std::to_string(in.window.keep_first));
}

at::Tensor visible_keys(int64_t q_len, int64_t k_len, const AttentionWindow& window, const at::Device& device) {
  // Query i sits at absolute position p = Tk - Tq + i and sees keys j <= p (and, under a window,
  // p - j < W or j < n).
  const auto opts = at::TensorOptions().dtype(at::kLong).device(device);
  const auto j = at::arange(k_len, opts).view({1, k_len});
  const auto p = (at::arange(q_len, opts) + (k_len - q_len)).view({q_len, 1});
  auto visible = j <= p;
  if (window.hides_keys(k_len)) visible = visible.logical_and((p - j < window.window).logical_or(j < window.keep_first));
  return visible;
}

at::ScalarType attention_acc_dtype(at::ScalarType type) { return type == at::kDouble ? at::kDouble : at::kFloat; }

AttentionResult reference_attention(const AttentionInputs& in, bool return_probs) {
  check_attention_inputs(in);
  const auto dtype = attention_acc_dtype(in.q.scalar_type());
  const int64_t H = in.q.size(1), Tq = in.q.size(2), d = in.q.size(3), Tk = in.k.size(2);
  const double scale = in.scale > 0 ? in.scale : 1.0 / std::sqrt(static_cast<double>(d));
  const double inf = std::numeric_limits<double>::infinity();

  auto q = in.q.to(dtype), k = in.k.to(dtype), v = in.v.to(dtype);
  auto s = at::matmul(q, k.transpose(-2, -1)) * scale;  // (B, H, Tq, Tk)
  if (in.routing_bias.defined()) s = s + in.routing_bias.to(dtype).unsqueeze(-2);

  auto mask = visible_keys(Tq, Tk, in.window, q.device()).view({1, 1, Tq, Tk});
  if (in.key_mask.defined()) mask = mask.logical_and(in.key_mask.view({-1, 1, 1, Tk}));
  s = s.masked_fill(mask.logical_not(), -inf);

  // Row maximum over the keys and the sink term (it takes part, SPEC Numerics); 0 for an empty row.
  at::Tensor sink = in.sink_logit.defined() ? in.sink_logit.to(dtype).view({1, H, 1}) : at::Tensor();
  auto m = std::get<0>(s.detach().max(-1));  // (B, H, Tq)
  if (sink.defined()) m = at::maximum(m, sink.detach());
  m = at::where(at::isfinite(m), m, at::zeros_like(m));

  auto e = at::exp(s - m.unsqueeze(-1));  // masked keys give exp(-inf) = 0
  auto denom = e.sum(-1);                 // (B, H, Tq)
  if (sink.defined()) denom = denom + at::exp(sink - m);
  auto has_mass = denom > 0;
  auto safe_denom = at::where(has_mass, denom, at::ones_like(denom));
  auto lse = at::where(has_mass, m + at::log(safe_denom), at::full_like(denom, -inf));
  auto probs = e / safe_denom.unsqueeze(-1);  // (B, H, Tq, Tk)

  AttentionResult out;
  out.o = at::matmul(probs, v).to(in.q.scalar_type());  // (B, H, Tq, d)
  out.lse = lse;
  if (return_probs) out.probs = probs;
  return out;
}

at::Tensor phantom_mass(const at::Tensor& lse, const at::Tensor& sink_logit) {
  if (!sink_logit.defined()) throw std::invalid_argument("phantom_mass: the arm has no sink term");
  return at::exp(sink_logit.to(lse.scalar_type()).view({1, -1, 1}) - lse);
}

}  // namespace attnlab
