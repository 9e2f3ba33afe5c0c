// Which Hugging Face tensor holds each attnlab parameter, and how its layout differs (the tables of
// docs/interop.md). One function per direction of the layout change keeps import and export exact
// inverses of each other.
#pragma once

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "attnlab/hf_interop.h"

namespace attnlab::interop {

enum class Layout {
  same,        ///< identical shape and order
  transposed,  ///< GPT-2's Conv1D keeps [in, out]; attnlab's Linear [out, in]
  neox_qkv,    ///< GPT-NeoX's query_key_value rows per head [H, (q, k, v), head_dim]; attnlab's [(q, k, v), H, head_dim]
  vocab_rows,  ///< the real vocabulary's rows; attnlab pads them to padded_vocab with zeros
};

struct HfTensor {
  std::string name;  ///< the tensor's name in model.safetensors of that kind
  Layout layout;
};

/// The Hugging Face tensor of attnlab parameter `name` (GPTImpl::named_parameters()) in a `kind`
/// directory. Throws std::invalid_argument for a parameter that kind cannot hold.
HfTensor hf_tensor(HfExportKind kind, const std::string& name);

/// Other names transformers accepts for `hf_name` (GPT-2 without "transformer.", GPT-NeoX's head as
/// lm_head.weight).
std::vector<std::string> hf_aliases(HfExportKind kind, const std::string& hf_name);

/// Tensors a Hugging Face file may hold that are not weights (attention-mask and rotary buffers of
/// older transformers versions): skipped on import.
bool is_hf_buffer(const std::string& hf_name);

/// The shape the Hugging Face tensor must have for an attnlab parameter of `shape`.
std::vector<int64_t> hf_shape(Layout layout, at::IntArrayRef shape, int64_t vocab_size);

/// Hugging Face tensor -> attnlab layout (float32, contiguous), and back.
at::Tensor from_hf(const at::Tensor& t, Layout layout, int64_t n_head, int64_t padded_vocab);
at::Tensor to_hf(const at::Tensor& t, Layout layout, int64_t n_head, int64_t vocab_size);

}  // namespace attnlab::interop
