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

/// A hidden matrix of a block, which Muon orthogonalises (muon.h): a Linear weight [out, in] (float32
/// as trained) whose rows hold `blocks` equal matrices orthogonalised one by one.
struct HiddenMatrix {
  std::string name;
  at::Tensor param;
  int64_t blocks = 1;  ///< 3 for attn.c_attn (q, k, v, each [d_model, d_model]); 1 otherwise
};

/// Every block's attn.c_attn, attn.c_proj, mlp.c_fc and mlp.c_proj weight, in named_parameters()
/// order: the 2-D matrices between the embeddings and the LM head (Keller Jordan, "Muon", 2024). Not
/// the embeddings, the head, biases, gains, nor any arm parameter (out_gate_w is 2-D but the arm's).
std::vector<HiddenMatrix> hidden_matrices(const GPTImpl& model);

}  // namespace attnlab
