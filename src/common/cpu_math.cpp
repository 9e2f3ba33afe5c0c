#include "attnlab/cpu_math.h"

#include <ATen/ATen.h>

#include <mutex>

namespace attnlab {

void warm_up_cpu_vector_math() {
  static std::once_flag once;
  std::call_once(once, [] {
    // 0.5 lies in every op's domain (erfinv and acos included). ATen's list of VML-routed ops
    // (aten/src/ATen/cpu/vml.h) changes between releases; ops it no longer routes cost nothing here.
    using UnaryOp = at::Tensor (*)(const at::Tensor&);
    const UnaryOp ops[] = {at::exp, at::expm1, at::log,  at::log2, at::log10, at::log1p, at::sqrt,
                           at::sin, at::cos,   at::tan,  at::tanh, at::asin,  at::acos,  at::atan,
                           at::erf, at::erfc,  at::erfinv, at::abs, at::trunc};
    for (const auto dtype : {at::kFloat, at::kDouble}) {
      const auto x = at::full({16}, 0.5, at::TensorOptions().dtype(dtype));
      for (const auto op : ops) (void)op(x);
    }
  });
}

}  // namespace attnlab
