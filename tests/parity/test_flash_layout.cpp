// The flash backend reads the model's tensors where they lie: one attention layer of the model
// (CausalSelfAttention: c_attn, the [B, T, H, d] views transposed, attention, c_proj) forward and
// backward, with its tensor copies counted (copy_count.h), on flash and on fused for comparison.
// The flash kernels take strided q, k, v and return o laid out [B, T, H, d], so the layer's transpose
// back to [B, T, C] is free; the fused kernels want contiguous [B, H, T, d] operands and return them.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "attnlab/copy_count.h"
#include "attnlab/model.h"

namespace attnlab {
namespace {

struct Counts {
  int64_t forward = 0, backward = 0;
  std::vector<std::string> shapes;  ///< destinations of the backward's copies
};

Counts layer_copies(const std::string& arm, AttentionBackend backend) {
  ModelConfig cfg;
  cfg.arm = arm, cfg.n_layer = 1, cfg.n_head = 2, cfg.d_model = 128, cfg.block_size = 64, cfg.vocab_size = 64;
  CausalSelfAttention layer(cfg, arm_by_name(arm), /*layer=*/0);
  layer->backend = backend;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
  const auto x = at::normal(0.0, 1.0, {2, 64, 128}, gen).requires_grad_(true);
  const auto dy = at::normal(0.0, 1.0, {2, 64, 128}, gen);
  layer->forward(x, 0).backward(dy);  // warm-up: lazily built state is not the layer's copying
  Counts c;
  at::Tensor y;
  {
    CopyCounter counter;
    y = layer->forward(x, 0);
    c.forward = counter.copies();
  }
  CopyCounter counter;
  y.backward(dy);
  c.backward = counter.copies();
  c.shapes = counter.shapes();
  return c;
}

// Copies of one layer (forward / backward), counted. Flash: none in the forward of any arm, none in
// the backward of the plain, sink and norm-gate arms. The projection gate's einsum backward copies one
// [B, H, T, 1] column (combo2). renorm's backward runs the kernel on one more column (flash_kernels.h):
// it widens q, k, v, o and dO (5 copies of [B, H, T, d]), and dq and dk come back as views of the
// widened gradients, which the layer's view back to [B, T, C] copies (2; dv is summed with the gate's
// gradient first). Fused: q, k, v made contiguous and o transposed back, and their gradients likewise.
TEST(FlashLayout, AttentionLayerCopiesPerArm) {
  const std::map<std::string, Counts> flash_expected = {
      {"baseline", {0, 0}}, {"sink_logit", {0, 0}}, {"norm_gate", {0, 0}}, {"combo2", {0, 1}}, {"renorm", {0, 7}}};
  for (const auto& [arm, want] : flash_expected) {
    const auto flash = layer_copies(arm, AttentionBackend::flash);
    const auto fused = layer_copies(arm, AttentionBackend::fused);
    std::cout << "  [copies] " << arm << ": flash " << flash.forward << " / " << flash.backward << ", fused "
              << fused.forward << " / " << fused.backward << " (forward / backward); flash backward into";
    for (const auto& shape : flash.shapes) std::cout << " " << shape;
    std::cout << "\n";
    EXPECT_EQ(flash.forward, want.forward) << arm;
    EXPECT_EQ(flash.backward, want.backward) << arm;
    if (arm != "renorm") EXPECT_LT(flash.forward + flash.backward, fused.forward + fused.backward) << arm;
  }
}

// The output o comes back laid out [B, T, H, d]: transposing it to [B, T, H * d] needs no copy.
TEST(FlashLayout, OutputIsLaidOutForTheLayersTransposeBack) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(2);
  const auto qkv = at::normal(0.0, 1.0, {2, 33, 3, 4, 16}, gen);  // [B, T, 3, H, d], as c_attn's output
  const auto q = qkv.select(2, 0).transpose(1, 2), k = qkv.select(2, 1).transpose(1, 2);
  const auto v = qkv.select(2, 2).transpose(1, 2);
  for (const char* name : {"baseline", "sink_logit"}) {
    const auto& arm = arm_by_name(name);
    ArmLayerParams params;
    if (arm.sink == SinkKind::learned) params.sink_logit = at::full({4}, 0.5);
    const auto out = arm_attention(arm, params, q, prepare_keys(arm, params, k, v, false, AttentionBackend::flash),
                                   false, AttentionBackend::flash);
    EXPECT_TRUE(out.o.transpose(1, 2).is_contiguous()) << name << ": strides " << out.o.strides();
  }
}

}  // namespace
}  // namespace attnlab
