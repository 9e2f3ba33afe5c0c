#include "attnlab/gates.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "attnlab/arm_params.h"

namespace attnlab {
namespace {

at::ScalarType compute_dtype(const at::Tensor& t) {
  return t.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

void expect_shape(const at::Tensor& t, at::IntArrayRef shape, const char* name) {
  if (!t.defined() || t.sizes() != shape) {
    throw std::invalid_argument(std::string("gate parameter ") + name + " must have shape " +
                                c10::str(shape) +
                                (t.defined() ? ", got " + c10::str(t.sizes()) : ", got none"));
  }
}

}  // namespace

at::Tensor read_norms(const at::Tensor& v) {
  return at::linalg_vector_norm(v.to(compute_dtype(v)), 2, {-1});
}

at::Tensor gate_logits(const at::Tensor& v, const GateParams& params) {
  if (v.dim() != 4) throw std::invalid_argument("gate_logits: v must be [B, H, T, d], got " + c10::str(v.sizes()));
  const int64_t n_head = v.size(1), head_dim = v.size(2 + 1);
  const auto dtype = compute_dtype(v);
  switch (params.kind) {
    case GateKind::norm: {
      expect_shape(params.tau, {n_head}, "tau");
      auto tau = params.tau.to(dtype).view({1, n_head, 1});
      return kNormGateBeta * (read_norms(v) / std::sqrt(static_cast<double>(head_dim)) - tau);
    }
    case GateKind::projection: {
      expect_shape(params.w, {n_head, head_dim}, "w");
      expect_shape(params.c, {n_head}, "c");
      auto proj = at::einsum("bhtd,hd->bht", {v.to(dtype), params.w.to(dtype)});
      return proj + params.c.to(dtype).view({1, n_head, 1});
    }
    case GateKind::none: break;
  }
  throw std::invalid_argument("gate_logits: the arm has no gate");
}

}  // namespace attnlab
