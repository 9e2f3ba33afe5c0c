// AdamW parameter groups of SPEC section 1: decayed vs not, listed by name.
#pragma once

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace attnlab {

class GPTImpl;

struct ParamGroups {
  std::vector<std::string> decay_names;     ///< 2-D matrices and embeddings
  std::vector<at::Tensor> decay;
  std::vector<std::string> no_decay_names;  ///< biases, LayerNorm gains, b_h, tau_h, w_h, c_h, e_sink
  std::vector<at::Tensor> no_decay;
};

/// Splits the model's parameters by GPTImpl::decays(), in named_parameters() order.
ParamGroups parameter_groups(const GPTImpl& model);

}  // namespace attnlab
