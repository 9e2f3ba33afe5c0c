// The cuDNN route on CUDA (at::_scaled_dot_product_cudnn_attention and its backward, label gpu): what
// the CPU tests of its composition (tests/parity/test_cudnn_composition.cpp) cannot check, the kernel
// call itself.
//  - every in-attention arm in bfloat16 and float16, head_dim 64, T in {1, 65, 192, 257}, ordinary,
//    extreme parameters and keys sharing a large component, held to the half-precision rule as FlashAttention-2 is; head_dim 128 is
//    refused (kCudnnMaxHeadDim is 125: the 3 key columns pad it past 128);
//  - its forward against FlashAttention-2's on the same inputs;
//  - the first-use self-check passes for flash and cudnn on every arm and half dtype;
//  - the whole model under bf16 autocast.
// Skipped, with the reason, where no CUDA device exists.
#include <gtest/gtest.h>

#include <torch/cuda.h>

#include <string>
#include <tuple>
#include <vector>

#include "attnlab/attention_self_check.h"
#include "attnlab/cudnn_attention.h"
#include "attnlab/device.h"
#include "attnlab/init.h"
#include "attnlab/model.h"
#include "gpu/gpu_parity.h"
#include "parity/arm_runner.h"
#include "parity/parity_helpers.h"

namespace attnlab {
namespace {

using gpu::Inputs;

parity::ArmLeaves values(int64_t T, int64_t d, Inputs inputs) { return gpu::arm_case(1900 + T + d, T, d, inputs); }

using Param = std::tuple<std::string, at::ScalarType>;

class CudaCudnnArmParity : public ::testing::TestWithParam<Param> {};

TEST_P(CudaCudnnArmParity, CudnnWithinTwiceTheReferenceError) {
  SKIP_WITHOUT_CUDA();
  const auto& [name, dtype] = GetParam();
  const auto arm = parity::arm_named(name);
  for (auto inputs : {Inputs::ordinary, Inputs::extreme, Inputs::shared_keys}) {
    for (int64_t T : {1, 65, 192, 257}) {  // cuDNN builds a graph per shape: few lengths, each a case
      gpu::expect_backend_within_rule(arm, parity::rounded(values(T, 64, inputs), dtype), dtype, AttentionBackend::cudnn,
                                      name + " " + gpu::dtype_name(dtype) + " T=" + std::to_string(T) +
                                          gpu::inputs_name(inputs));
    }
  }
}

// cuDNN's forward against FlashAttention-2's on the same inputs: the same function, two kernels' roundings
// of o (within two ulp of the half type at 1), lse within float32 round-off of scores near 10.
TEST_P(CudaCudnnArmParity, ForwardAgreesWithFlashAttention2) {
  SKIP_WITHOUT_CUDA();
  const auto& [name, dtype] = GetParam();
  const auto arm = parity::arm_named(name);
  const auto v = parity::rounded(values(130, 64, Inputs::ordinary), dtype);
  const auto cudnn = parity::run_arm(arm, parity::as_leaves(v, at::kCUDA, dtype), AttentionBackend::cudnn, true);
  const auto flash = parity::run_arm(arm, parity::as_leaves(v, at::kCUDA, dtype), AttentionBackend::flash, true);
  parity::expect_close(cudnn.o, flash.o, dtype == at::kBFloat16 ? 0x1p-7 : 0x1p-10, name + " o");
  parity::expect_close(cudnn.lse, flash.lse, 1e-5, name + " lse");
}

INSTANTIATE_TEST_SUITE_P(AllArms, CudaCudnnArmParity,
                         ::testing::Combine(::testing::ValuesIn(parity::in_attention_arm_names()),
                                            ::testing::Values(at::kBFloat16, at::kHalf)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + gpu::dtype_name(std::get<1>(info.param));
                         });

TEST(CudaCudnnAttention, HeadDim128IsRefusedWithTheReason) {
  SKIP_WITHOUT_CUDA();
  const auto l = parity::as_leaves(values(9, 128, Inputs::ordinary), at::kCUDA, at::kBFloat16);
  EXPECT_THROW(parity::run_arm(arm_by_name("baseline"), l, AttentionBackend::cudnn), std::invalid_argument);
}

// What gpu_check.sh's first step runs, as a test: the self-check of both kernel routes on every arm.
TEST(CudaSelfCheck, FlashAndCudnnPassOnEveryArmAndHalfDtype) {
  SKIP_WITHOUT_CUDA();
  for (auto backend : {AttentionBackend::flash, AttentionBackend::cudnn}) {
    for (const auto& arm : all_arms()) {
      for (auto dtype : {at::kBFloat16, at::kHalf}) {
        SelfCheckCase c{arm, backend, at::Device(at::kCUDA, 0), dtype, 64};
        try {
          check_attention_backend(c);
        } catch (const AttentionSelfCheckError& e) {
          ADD_FAILURE() << e.what();
        }
      }
    }
  }
}

// Whole model under bf16 autocast on cudnn, as CudaFlashModel holds flash.
TEST(CudaCudnnModel, EveryArmUnderBf16AutocastWithinTheRule) {
  SKIP_WITHOUT_CUDA();
  gpu::expect_model_within_rule_under_autocast(AttentionBackend::cudnn);
}

}  // namespace
}  // namespace attnlab
