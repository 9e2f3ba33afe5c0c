// Autograd wrapper of the fused value-gate kernels (kernels/include/attnlab_kernels/value_gate.h).
#include "attnlab/fused_gate.h"

#include <torch/autograd.h>

#include <optional>
#include <stdexcept>
#include <string>

#include "attention/kernel_bridge.h"
#include "attnlab/arm_params.h"
#include "attnlab/attention.h"
#include "attnlab_kernels/value_gate.h"
#ifdef ATTNLAB_WITH_CUDA
#include "attnlab_kernels/flash_attention_cuda.h"
#endif

namespace attnlab {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
constexpr const char* kWho = "fused_value_gate";

kernels::ValueGateShape shape_of(const at::Tensor& v, bool projection) {
  kernels::ValueGateShape s;
  s.batch = v.size(0), s.heads = v.size(1), s.len = v.size(2), s.head_dim = v.size(3);
  s.kind = projection ? kernels::ValueGateKind::projection : kernels::ValueGateKind::norm;
  s.beta = kNormGateBeta;
  s.dtype = detail::kernel_dtype(v.scalar_type(), kWho);
  return s;
}

kernels::ValueGateForwardArgs forward_args(const at::Tensor& v, const at::Tensor& tau, const at::Tensor& w,
                                           const at::Tensor& c) {
  kernels::ValueGateForwardArgs a;
  a.v = v.data_ptr();
  a.tau = detail::ptr_or_null(tau), a.w = detail::ptr_or_null(w), a.c = detail::ptr_or_null(c);
  return a;
}

[[noreturn]] void no_cuda_kernels() {
  throw std::runtime_error(std::string(kWho) + ": CUDA tensors need the CUDA kernels, and this build has none; use "
                           "attention backend 'reference' or rebuild with CUDA");
}

void run_forward(const kernels::ValueGateShape& s, const kernels::ValueGateForwardArgs& a, const at::Tensor& v) {
  if (v.is_cpu()) return kernels::value_gate_forward_cpu(s, a, detail::torch_parallel_for());
#ifdef ATTNLAB_WITH_CUDA
  if (v.is_cuda()) return kernels::value_gate_forward_cuda(s, a, detail::current_stream(v.device()));
#endif
  no_cuda_kernels();
}

void run_backward(const kernels::ValueGateShape& s, const kernels::ValueGateBackwardArgs& a, const at::Tensor& v) {
  if (v.is_cpu()) return kernels::value_gate_backward_cpu(s, a, detail::torch_parallel_for());
#ifdef ATTNLAB_WITH_CUDA
  if (v.is_cuda()) return kernels::value_gate_backward_cuda(s, a, detail::current_stream(v.device()));
#endif
  no_cuda_kernels();
}

class FusedGateFunction : public torch::autograd::Function<FusedGateFunction> {
 public:
  // Parameters are std::optional: autograd records no input for the gate form's unused ones.
  static variable_list forward(AutogradContext* ctx, const at::Tensor& v, const std::optional<at::Tensor>& tau,
                               const std::optional<at::Tensor>& w, const std::optional<at::Tensor>& c) {
    const auto acc = attention_acc_dtype(v.scalar_type());
    const auto vc = detail::kernel_ready(v, v.scalar_type());
    const auto tc = detail::kernel_ready(tau.value_or(at::Tensor()), acc);
    const auto wc = detail::kernel_ready(w.value_or(at::Tensor()), acc);
    const auto cc = detail::kernel_ready(c.value_or(at::Tensor()), acc);
    const auto s = shape_of(vc, wc.defined());
    auto gated = at::empty_like(vc);                                            // (B, H, T, d)
    auto log_gate = at::empty({s.batch, s.heads, s.len}, vc.options().dtype(acc));  // (B, H, T)
    auto a = forward_args(vc, tc, wc, cc);
    a.gated_v = gated.data_ptr(), a.log_gate = log_gate.data_ptr();
    run_forward(s, a, vc);
    ctx->set_materialize_grads(false);
    ctx->save_for_backward({vc, tc, wc, cc});
    return {gated, log_gate};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &v = saved[0], &tau = saved[1], &w = saved[2], &c = saved[3];
    if (!grads[0].defined() && !grads[1].defined()) return variable_list(4);
    const auto s = shape_of(v, w.defined());
    const auto d_gated = detail::kernel_ready(grads[0], v.scalar_type());
    const auto d_log_gate = detail::kernel_ready(grads[1], attention_acc_dtype(v.scalar_type()));
    kernels::ValueGateBackwardArgs a;
    a.fwd = forward_args(v, tau, w, c);
    a.d_gated_v = detail::ptr_or_null(d_gated), a.d_log_gate = detail::ptr_or_null(d_log_gate);
    auto d_v = at::empty_like(v);
    // Zero-initialised: the CUDA kernels sum parameter gradients with atomics.
    auto d_tau = tau.defined() ? at::zeros_like(tau) : at::Tensor();
    auto d_w = w.defined() ? at::zeros_like(w) : at::Tensor();
    auto d_c = c.defined() ? at::zeros_like(c) : at::Tensor();
    a.d_v = d_v.data_ptr();
    a.d_tau = detail::mut_ptr_or_null(d_tau), a.d_w = detail::mut_ptr_or_null(d_w), a.d_c = detail::mut_ptr_or_null(d_c);
    run_backward(s, a, v);
    return {d_v, d_tau, d_w, d_c};
  }
};

void expect_param(const at::Tensor& t, at::IntArrayRef shape, const at::Tensor& v, const char* name) {
  if (!t.defined() || t.sizes() != shape) {
    throw std::invalid_argument(std::string(kWho) + ": parameter " + name + " must have shape " + c10::str(shape) +
                                (t.defined() ? ", got " + c10::str(t.sizes()) : ", got none"));
  }
  if (t.device() != v.device()) {
    throw std::invalid_argument(std::string(kWho) + ": parameter " + name + " is on " + t.device().str() +
                                ", v on " + v.device().str());
  }
}

}  // namespace

FusedGateResult fused_value_gate(const at::Tensor& v, const GateParams& params) {
  if (v.dim() != 4) throw std::invalid_argument(std::string(kWho) + ": v must be [B, H, T, d], got " + c10::str(v.sizes()));
  const int64_t n_head = v.size(1), head_dim = v.size(3);
  std::optional<at::Tensor> tau, w, c;
  switch (params.kind) {
    case GateKind::norm: expect_param(params.tau, {n_head}, v, "tau"), tau = params.tau; break;
    case GateKind::projection:
      expect_param(params.w, {n_head, head_dim}, v, "w"), expect_param(params.c, {n_head}, v, "c");
      w = params.w, c = params.c;
      break;
    case GateKind::none: throw std::invalid_argument(std::string(kWho) + ": the arm has no gate");
  }
  const auto type = v.scalar_type();
  detail::kernel_dtype(type, kWho);
  // CPU kernels compute in float32 or float64; half types are upcast here, inside autograd.
  const bool upcast = v.is_cpu() && (type == at::kHalf || type == at::kBFloat16);
  auto outs = FusedGateFunction::apply(upcast ? v.to(at::kFloat) : v, tau, w, c);
  return {upcast ? outs[0].to(type) : outs[0], outs[1]};
}

}  // namespace attnlab
