// A CPU stand-in for the two cuDNN calls of the cuDNN route (cudnn_attention.h): LibTorch's CPU flash
// kernels behind cuDNN's conventions (lse returned as [B, H, T, 1] and taken back in that shape), and
// the preconditions cuDNN's fused attention sets on its operands checked on every call, so that CPU
// tests run the route's whole composition and see it call cuDNN as cuDNN wants to be called. Only the
// kernel call itself waits for a GPU (tests/gpu/test_cudnn_cuda_parity.cpp).
#pragma once

#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward.h>

#include <stdexcept>
#include <string>

#include "attnlab/cudnn_attention.h"

namespace attnlab::parity {

/// Throws std::logic_error when an operand breaks what cuDNN's SDPA asks of it: [B, H, T, w] with
/// w a multiple of 8 and rows contiguous.
inline void check_cudnn_operand(const at::Tensor& t, const char* what) {
  if (t.dim() != 4 || t.size(3) % 8 != 0 || t.stride(3) != 1) {
    throw std::logic_error(std::string("cuDNN stand-in: ") + what + " must be [B, H, T, w] with w % 8 == 0 and rows "
                           "contiguous, got sizes " + c10::str(t.sizes()) + " strides " + c10::str(t.strides()));
  }
}

inline CudnnKernelCalls cudnn_cpu_stand_in() {
  CudnnKernelCalls calls;
  calls.forward = [](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale) {
    check_cudnn_operand(q, "q"), check_cudnn_operand(k, "k"), check_cudnn_operand(v, "v");
    auto [o, lse] = at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, /*is_causal=*/true, std::nullopt, scale);
    return CudnnForward{o, lse.unsqueeze(-1).contiguous(), at::Tensor(), at::Tensor()};  // lse [B, H, T, 1]
  };
  calls.backward = [](const at::Tensor& d_o, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                      const at::Tensor& out, const at::Tensor& lse, const CudnnForward& forward, double scale) {
    check_cudnn_operand(d_o, "dO"), check_cudnn_operand(q, "q"), check_cudnn_operand(k, "k");
    check_cudnn_operand(v, "v"), check_cudnn_operand(out, "O");
    if (d_o.strides() != out.strides()) throw std::logic_error("cuDNN stand-in: dO must be laid out like O");
    if (lse.sizes() != forward.lse.sizes() || !lse.is_contiguous() || lse.scalar_type() != forward.lse.scalar_type()) {
      throw std::logic_error("cuDNN stand-in: lse must come back contiguous, in the forward's dtype and shape " +
                             c10::str(forward.lse.sizes()) + ", got " + c10::str(lse.sizes()));
    }
    return at::_scaled_dot_product_flash_attention_for_cpu_backward(d_o, q, k, v, out, lse.squeeze(-1), 0.0,
                                                                   /*is_causal=*/true, std::nullopt, scale);
  };
  return calls;
}

}  // namespace attnlab::parity
