#include "attnlab/arm_call.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/autograd.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>

namespace attnlab {

ArmLeaves as_leaves(const ArmLeaves& src, const at::Device& device, at::ScalarType dtype) {
  const auto acc = attention_acc_dtype(dtype);
  auto leaf = [&](const at::Tensor& t, at::ScalarType type) {
    return t.to(device, type).detach().requires_grad_(true);
  };
  return {leaf(src.q, dtype), leaf(src.k, dtype), leaf(src.v, dtype), leaf(src.b, acc),
          leaf(src.tau, acc), leaf(src.w, acc),   leaf(src.c, acc)};
}

ArmLeaves rounded(const ArmLeaves& s, at::ScalarType dtype) {
  auto r = [](const at::Tensor& t, at::ScalarType type) { return t.to(at::kCPU).to(type).to(at::kDouble); };
  return {r(s.q, dtype), r(s.k, dtype), r(s.v, dtype), r(s.b, at::kFloat), r(s.tau, at::kFloat), r(s.w, at::kFloat),
          r(s.c, at::kFloat)};
}

ArmRun run_arm_with(const ArmSpec& arm, const ArmLeaves& l, AttentionBackend gate_backend, const ArmAttend& attend,
                    bool lse_in_loss) {
  for (const auto* t : {&l.q, &l.k, &l.v, &l.b, &l.tau, &l.w, &l.c}) {
    if (t->grad().defined()) t->mutable_grad().reset();
  }
  ArmLayerParams params;
  if (arm.sink == SinkKind::learned) params.sink_logit = l.b;
  if (arm.gate == GateKind::norm) params.gate_tau = l.tau;
  if (arm.gate == GateKind::projection) params.gate_w = l.w, params.gate_c = l.c;
  const auto keys = prepare_keys(arm, params, l.k, l.v, false, gate_backend);
  const auto out = attend(arm, params, l.q, keys);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(17);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  auto loss = (out.o * at::normal(0.0, 1.0, out.o.sizes(), gen, f64).to(out.o.options())).sum();
  if (lse_in_loss) loss = loss + (out.lse * at::normal(0.0, 1.0, out.lse.sizes(), gen, f64).to(out.lse.options())).sum();
  loss.backward();
  auto host = [](const at::Tensor& t) { return t.defined() ? t.detach().to(at::kCPU, at::kDouble) : t; };
  auto grad = [&](const at::Tensor& t) { return host(t.grad()); };
  at::Tensor phantom;
  if (out.lse.defined()) {
    const auto sink = effective_sink_logit(arm, params, l.q.size(1), out.lse.options());
    if (sink.defined()) phantom = host(phantom_mass(out.lse, sink));
  }
  return {host(out.o), host(out.lse), phantom,   grad(l.q), grad(l.k),
          grad(l.v),   grad(l.b),     grad(l.tau), grad(l.w), grad(l.c)};
}

ArmRun run_arm(const ArmSpec& arm, const ArmLeaves& l, AttentionBackend backend, bool lse_in_loss) {
  const ArmAttend attend = [backend](const ArmSpec& a, const ArmLayerParams& p, const at::Tensor& q,
                                     const PreparedKeys& keys) { return arm_attention(a, p, q, keys, false, backend); };
  return run_arm_with(arm, l, backend, attend, lse_in_loss);
}

AttentionResult attention_rounding_p(const AttentionInputs& in) {
  if (in.q.size(2) != in.k.size(2) || in.key_mask.defined()) {
    throw std::invalid_argument("attention_rounding_p: square causal attention only (Tq = Tk, no key mask)");
  }
  const int64_t B = in.q.size(0), H = in.q.size(1), T = in.q.size(2);
  const double scale = in.scale > 0 ? in.scale : 1.0 / std::sqrt(static_cast<double>(in.q.size(3)));
  auto s = at::matmul(in.q.to(at::kFloat), in.k.to(at::kFloat).transpose(-2, -1)) * scale;
  if (in.routing_bias.defined()) s = s + in.routing_bias.to(at::kFloat).unsqueeze(-2);
  const auto future = at::ones({T, T}, in.q.options().dtype(at::kBool)).triu(1);
  s = s.masked_fill(future, -std::numeric_limits<double>::infinity());
  if (in.sink_logit.defined()) {
    s = at::cat({s, in.sink_logit.to(at::kFloat).view({1, H, 1, 1}).expand({B, H, T, 1})}, -1);
  }
  AttentionResult out;
  out.lse = at::logsumexp(s, -1);
  out.o = at::matmul(at::softmax(s, -1).narrow(-1, 0, T).to(in.q.scalar_type()), in.v);
  return out;
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// The flash kernels' arithmetic (attention_flash_arithmetic): a forward in the accumulator dtype
/// (float32 for half types) with o rounded, a backward rounding as they do. q, k, v in one dtype; the
/// routing bias [B, H, T] and the sink [H] optional.
class FlashArithmetic : public torch::autograd::Function<FlashArithmetic> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& sink,
                               double scale) {
    const int64_t B = q.size(0), H = q.size(1), T = q.size(2);
    const auto acc = attention_acc_dtype(q.scalar_type());
    auto s = at::matmul(q.to(acc), k.to(acc).transpose(-2, -1)) * scale;
    if (bias) s = s + bias->to(acc).unsqueeze(-2);
    const auto future = at::ones({T, T}, q.options().dtype(at::kBool)).triu(1);
    s = s.masked_fill(future, -std::numeric_limits<double>::infinity());
    if (sink) s = at::cat({s, sink->to(acc).view({1, H, 1, 1}).expand({B, H, T, 1})}, -1);
    const auto lse = at::logsumexp(s, -1);          // (B, H, T)
    const auto p = at::exp(s - lse.unsqueeze(-1));  // (B, H, T, T [+ 1])
    const auto o = at::matmul(p.narrow(-1, 0, T), v.to(acc)).to(q.scalar_type());
    ctx->save_for_backward({q, k, v, p, o});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["bias"] = bias.has_value();
    ctx->saved_data["sink"] = sink.has_value();
    return {o, lse};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &p = saved[3], &o = saved[4];
    const auto type = q.scalar_type(), acc = attention_acc_dtype(type);
    const double scale = ctx->saved_data["scale"].toDouble();
    const int64_t T = q.size(2);
    auto rounded = [type, acc](const at::Tensor& t) { return t.to(type).to(acc); };
    const auto d_o = rounded(grads[0].defined() ? grads[0] : at::zeros_like(o));
    auto D = (d_o * o.to(acc)).sum(-1);  // from the rounded o, as the kernels take it
    if (grads[1].defined()) D = D - grads[1].to(acc);
    const auto p_keys = p.narrow(-1, 0, T);
    const auto d_s = p_keys * (at::matmul(d_o, v.to(acc).transpose(-2, -1)) - D.unsqueeze(-1));
    const auto dq = (at::matmul(rounded(d_s), k.to(acc)) * scale).to(type);
    const auto dk = (at::matmul(rounded(d_s).transpose(-2, -1), q.to(acc)) * scale).to(type);
    const auto dv = at::matmul(rounded(p_keys).transpose(-2, -1), d_o).to(type);
    at::Tensor d_bias, d_sink;
    if (ctx->saved_data["bias"].toBool()) d_bias = d_s.sum(-2);  // (B, H, T)
    if (ctx->saved_data["sink"].toBool()) d_sink = (p.select(-1, T) * D).sum(at::IntArrayRef{0, 2}).neg();  // (H)
    return {dq, dk, dv, d_bias, d_sink, at::Tensor()};
  }
};

}  // namespace

AttentionResult attention_flash_arithmetic(const AttentionInputs& in) {
  if (in.q.size(2) != in.k.size(2) || in.key_mask.defined()) {
    throw std::invalid_argument("attention_flash_arithmetic: square causal attention only (Tq = Tk, no key mask)");
  }
  const double scale = in.scale > 0 ? in.scale : 1.0 / std::sqrt(static_cast<double>(in.q.size(3)));
  auto optional = [](const at::Tensor& t) { return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt; };
  const auto outs = FlashArithmetic::apply(in.q, in.k.to(in.q.scalar_type()), in.v.to(in.q.scalar_type()),
                                           optional(in.routing_bias), optional(in.sink_logit), scale);
  AttentionResult out;
  out.o = outs[0];
  out.lse = outs[1];
  return out;
}

ArmRun run_arm_flash_arithmetic(const ArmSpec& arm, const ArmLeaves& l, bool lse_in_loss) {
  const ArmAttend attend = [](const ArmSpec& a, const ArmLayerParams& p, const at::Tensor& q, const PreparedKeys& keys) {
    return attention_flash_arithmetic(arm_attention_inputs(a, p, q, keys));
  };
  return run_arm_with(arm, l, AttentionBackend::flash, attend, lse_in_loss);
}

ArmRun run_arm_rounding_p(const ArmSpec& arm, const ArmLeaves& l, bool lse_in_loss) {
  const ArmAttend attend = [](const ArmSpec& a, const ArmLayerParams& p, const at::Tensor& q, const PreparedKeys& keys) {
    return attention_rounding_p(arm_attention_inputs(a, p, q, keys));
  };
  return run_arm_with(arm, l, AttentionBackend::reference, attend, lse_in_loss);
}

}  // namespace attnlab
