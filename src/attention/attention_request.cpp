// The request of an attention call, read off its tensors (attention_request.h).
#include "attnlab/attention_request.h"

#include "attnlab/device.h"

namespace attnlab {

AttentionRequest attention_request(const at::Tensor& q, int64_t k_len, bool return_probs,
                                   const AttentionWindow& window) {
  AttentionRequest r;
  if (window.hides_keys(k_len)) r.window = window;
  r.device = q.device(), r.dtype = q.scalar_type(), r.head_dim = q.size(-1);
  r.q_len = q.size(-2), r.k_len = k_len, r.return_probs = return_probs;
  r.cuda_capability = cuda_compute_capability(q.device());
  return r;
}

AttentionRequest attention_request(const AttentionInputs& in, bool return_probs) {
  auto r = attention_request(in.q, in.k.size(-2), return_probs, in.window);
  r.key_mask = in.key_mask.defined();
  return r;
}

}  // namespace attnlab
