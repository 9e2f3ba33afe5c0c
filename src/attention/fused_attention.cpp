// Autograd wrapper of the fused attention kernels: the one place where tensors become the plain
// structs of kernels/include/attnlab_kernels/flash_attention.h (flash-attention style edge).
#include "attnlab/fused_attention.h"

#include <torch/autograd.h>

#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>

#include "attention/kernel_bridge.h"
#include "attnlab_kernels/flash_attention.h"
#ifdef ATTNLAB_WITH_CUDA
#include "attnlab_kernels/flash_attention_cuda.h"
#endif

namespace attnlab {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
constexpr const char* kWho = "fused_attention";

/// The tensors one kernel call reads, already contiguous and in the kernel's dtypes.
struct KernelInputs {
  at::Tensor q, k, v, bias, sink, mask, o, lse;
};

kernels::AttentionShape shape_of(const KernelInputs& t, double scale, const AttentionWindow& window) {
  kernels::AttentionShape s;
  s.window = window.window, s.keep_first = window.keep_first;
  s.batch = t.q.size(0), s.heads = t.q.size(1), s.q_len = t.q.size(2), s.k_len = t.k.size(2);
  s.head_dim = t.q.size(3);
  s.scale = scale;
  s.has_sink = t.sink.defined();
  s.has_routing_bias = t.bias.defined();
  s.has_key_mask = t.mask.defined();
  s.dtype = detail::kernel_dtype(t.q.scalar_type(), kWho);
  return s;
}

kernels::ForwardArgs forward_args(const KernelInputs& t) {
  kernels::ForwardArgs a;
  a.q = t.q.data_ptr(), a.k = t.k.data_ptr(), a.v = t.v.data_ptr();
  a.sink_logit = detail::ptr_or_null(t.sink);
  a.routing_bias = detail::ptr_or_null(t.bias);
  a.key_mask = t.mask.defined() ? t.mask.data_ptr<bool>() : nullptr;
  a.o = t.o.data_ptr(), a.lse = t.lse.data_ptr();
  return a;
}

kernels::CpuTiling cpu_tiling(const FusedTiling& tiling) {
  kernels::CpuTiling t;
  if (tiling.q_tile > 0) t.q_tile = tiling.q_tile;
  if (tiling.k_tile > 0) t.k_tile = tiling.k_tile;
  return t;
}

[[noreturn]] void no_cuda_kernels() {
  throw std::runtime_error(
      "fused_attention: CUDA tensors need the CUDA kernels, and this build has none (nvcc was not found or "
      "ATTNLAB_CUDA=OFF); use attention backend 'reference' or rebuild with CUDA");
}

void run_forward(const kernels::AttentionShape& s, const KernelInputs& t, const FusedTiling& tiling) {
  const auto args = forward_args(t);
  if (t.q.is_cpu()) return kernels::flash_attention_forward_cpu(s, args, detail::torch_parallel_for(), cpu_tiling(tiling));
#ifdef ATTNLAB_WITH_CUDA
  if (t.q.is_cuda()) return kernels::flash_attention_forward_cuda(s, args, detail::current_stream(t.q.device()));
#endif
  if (t.q.is_cuda()) no_cuda_kernels();
  throw std::invalid_argument(std::string(kWho) + ": unsupported device " + t.q.device().str());
}

/// Gradient tensors of one backward call; d_bias / d_sink stay undefined when not wanted.
struct KernelGrads {
  at::Tensor d_o, d_lse, d_q, d_k, d_v, d_bias, d_sink;
};

void run_backward(const kernels::AttentionShape& s, const KernelInputs& t, const KernelGrads& g,
                  const FusedTiling& tiling) {
  kernels::BackwardArgs a;
  a.fwd = forward_args(t);
  a.d_o = g.d_o.data_ptr();
  a.d_q = g.d_q.data_ptr(), a.d_k = g.d_k.data_ptr(), a.d_v = g.d_v.data_ptr();
  a.d_sink_logit = detail::mut_ptr_or_null(g.d_sink);
  a.d_routing_bias = detail::mut_ptr_or_null(g.d_bias);
  if (t.q.is_cpu()) {
    return kernels::flash_attention_backward_cpu(s, a, detail::ptr_or_null(g.d_lse), detail::torch_parallel_for(),
                                                 cpu_tiling(tiling));
  }
#ifdef ATTNLAB_WITH_CUDA
  if (t.q.is_cuda()) {
    // Workspace from the caching allocator rather than the launcher's cudaMallocAsync.
    auto workspace = at::empty({static_cast<int64_t>(kernels::flash_attention_backward_workspace_bytes(s))},
                               t.q.options().dtype(at::kByte));
    return kernels::flash_attention_backward_cuda(s, a, detail::current_stream(t.q.device()), workspace.data_ptr(),
                                                  detail::ptr_or_null(g.d_lse));
  }
#endif
  no_cuda_kernels();
}

class FusedAttentionFunction : public torch::autograd::Function<FusedAttentionFunction> {
 public:
  // Optional inputs are std::optional: autograd records no input for an absent one.
  static variable_list forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& sink,
                               const std::optional<at::Tensor>& mask, double scale, int64_t q_tile, int64_t k_tile,
                               int64_t window, int64_t keep_first) {
    const auto type = q.scalar_type(), acc = attention_acc_dtype(type);
    KernelInputs t;
    t.q = detail::kernel_ready(q, type), t.k = detail::kernel_ready(k, type), t.v = detail::kernel_ready(v, type);
    t.bias = detail::kernel_ready(bias.value_or(at::Tensor()), acc);
    t.sink = detail::kernel_ready(sink.value_or(at::Tensor()), acc);
    t.mask = detail::kernel_ready(mask.value_or(at::Tensor()), at::kBool);
    t.o = at::empty_like(t.q);                                                     // (B, H, Tq, d)
    t.lse = at::empty({q.size(0), q.size(1), q.size(2)}, q.options().dtype(acc));  // (B, H, Tq)
    run_forward(shape_of(t, scale, {window, keep_first}), t, {q_tile, k_tile});
    ctx->set_materialize_grads(false);  // an unused output's gradient stays undefined: no zeros formed
    ctx->save_for_backward({t.q, t.k, t.v, t.bias, t.sink, t.mask, t.o, t.lse});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["q_tile"] = q_tile;
    ctx->saved_data["k_tile"] = k_tile;
    ctx->saved_data["window"] = window;
    ctx->saved_data["keep_first"] = keep_first;
    return {t.o, t.lse};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const KernelInputs t{saved[0], saved[1], saved[2], saved[3], saved[4], saved[5], saved[6], saved[7]};
    if (!grads[0].defined() && !grads[1].defined()) return variable_list(11);
    KernelGrads g;
    g.d_o = grads[0].defined() ? detail::kernel_ready(grads[0], t.o.scalar_type()) : at::zeros_like(t.o);
    g.d_lse = detail::kernel_ready(grads[1], t.lse.scalar_type());
    g.d_q = at::empty_like(t.q), g.d_k = at::empty_like(t.k), g.d_v = at::empty_like(t.v);
    // Always formed when the input exists (O(B H T) and O(H)): needs_input_grad counts only the
    // inputs present, so its indices shift with the optional ones.
    if (t.bias.defined()) g.d_bias = at::empty_like(t.bias);
    if (t.sink.defined()) g.d_sink = at::empty_like(t.sink);
    const FusedTiling tiling{ctx->saved_data["q_tile"].toInt(), ctx->saved_data["k_tile"].toInt()};
    const AttentionWindow window{ctx->saved_data["window"].toInt(), ctx->saved_data["keep_first"].toInt()};
    run_backward(shape_of(t, ctx->saved_data["scale"].toDouble(), window), t, g, tiling);
    return {g.d_q,        g.d_k,        g.d_v,        g.d_bias,     g.d_sink,    at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

void check_same_device(const AttentionInputs& in) {
  const auto device = in.q.device();
  for (const auto* t : {&in.k, &in.v, &in.routing_bias, &in.sink_logit, &in.key_mask}) {
    if (t->defined() && t->device() != device) {
      throw std::invalid_argument(std::string(kWho) + ": every input must be on " + device.str() + ", got one on " +
                                  t->device().str());
    }
  }
}

}  // namespace

bool fused_cuda_compiled() {
#ifdef ATTNLAB_WITH_CUDA
  return true;
#else
  return false;
#endif
}

AttentionResult fused_attention(const AttentionInputs& in, const FusedTiling& tiling) {
  check_attention_inputs(in);
  check_same_device(in);
  const auto type = in.q.scalar_type();
  detail::kernel_dtype(type, kWho);  // rejects integer / complex inputs early
  // CPU kernels compute in float32 or float64; half types are upcast here, inside autograd.
  const bool upcast = in.q.is_cpu() && (type == at::kHalf || type == at::kBFloat16);
  const auto run_type = upcast ? at::kFloat : type;
  const double scale = in.scale > 0 ? in.scale : 1.0 / std::sqrt(static_cast<double>(in.q.size(3)));
  auto optional = [](const at::Tensor& t) { return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt; };
  auto outs = FusedAttentionFunction::apply(in.q.to(run_type), in.k.to(run_type), in.v.to(run_type),
                                            optional(in.routing_bias), optional(in.sink_logit), optional(in.key_mask),
                                            scale, tiling.q_tile, tiling.k_tile, in.window.window,
                                            in.window.keep_first);
  AttentionResult result;
  result.o = upcast ? outs[0].to(type) : outs[0];  // (B, H, Tq, d)
  result.lse = outs[1];                            // (B, H, Tq)
  return result;
}

}  // namespace attnlab
