// What one attention call asks of a backend: where it runs and what it needs. Every backend's refusal
// (backend_table.h) reads this and nothing else besides the arm, so a call, the first-use self-check
// and a config before a run (which builds one from its keys) ask the same question.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "attnlab/attention.h"
#include "attnlab/attention_window.h"

namespace attnlab {

struct AttentionRequest {
  at::Device device = at::kCPU;
  at::ScalarType dtype = at::kFloat;  ///< dtype of q, k, v
  int64_t head_dim = 64;
  int64_t q_len = 1, k_len = 1;       ///< Tq <= Tk; Tq < Tk is KV-cache decoding
  bool key_mask = false;
  bool return_probs = false;
  AttentionWindow window;             ///< the layer's window (attention_window.h); none for a global layer
  int cuda_capability = 0;            ///< 10 * major + minor of a CUDA device (device.h); 0: CPU or unknown
};

/// The request of attention of queries q [B, H, Tq, d] over keys of length k_len (on CUDA, with the
/// device's compute capability), under `window`. A window that hides no key of the call
/// (AttentionWindow::hides_keys) is dropped: such a call is a global layer's on every backend.
AttentionRequest attention_request(const at::Tensor& q, int64_t k_len, bool return_probs = false,
                                   const AttentionWindow& window = {});

/// The request of the call `in` (attention.h): q's device, dtype and shape, k's length, whether it
/// has a key mask, its window as above.
AttentionRequest attention_request(const AttentionInputs& in, bool return_probs = false);

}  // namespace attnlab
