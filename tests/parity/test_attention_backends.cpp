// The backend switch of arm_attention: names, what `auto` picks, what each backend refuses,
// and sdpa against the reference on the baseline arm.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <sstream>

#include "attnlab/arm_attention.h"
#include "attnlab/flash_attention.h"
#include "attnlab/sdpa_attention.h"
#include "parity_helpers.h"

namespace attnlab {
namespace {

TEST(AttentionBackends, NamesRoundTrip) {
  for (auto b : {AttentionBackend::automatic, AttentionBackend::fused, AttentionBackend::reference,
                 AttentionBackend::sdpa, AttentionBackend::flash, AttentionBackend::cudnn}) {
    EXPECT_EQ(parse_attention_backend(to_string(b)), b);
  }
  try {
    parse_attention_backend("fast");
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'fast'"), std::string::npos) << e.what();
  }
}

AttentionRequest request(at::Device device, at::ScalarType dtype, int64_t q_len = 256, int64_t k_len = 256) {
  AttentionRequest r;
  r.device = device, r.dtype = dtype, r.q_len = q_len, r.k_len = k_len;
  return r;
}

// The choice table of docs/kernels.md, row by row.
TEST(AttentionBackends, AutoPicksFlashOnCpuFusedForDecodingReferenceForProbabilities) {
  EXPECT_EQ(resolve_backend(AttentionBackend::automatic, request(at::kCPU, at::kFloat)), AttentionBackend::flash);
  EXPECT_EQ(resolve_backend(AttentionBackend::automatic, request(at::kCPU, at::kDouble)), AttentionBackend::flash);
  EXPECT_EQ(resolve_backend(AttentionBackend::automatic, request(at::kCPU, at::kFloat, 1, 9)), AttentionBackend::fused);
  auto masked = request(at::kCPU, at::kFloat);
  masked.key_mask = true;
  EXPECT_EQ(resolve_backend(AttentionBackend::automatic, masked), AttentionBackend::fused);
  auto probs = request(at::kCPU, at::kFloat);
  probs.return_probs = true;
  EXPECT_EQ(resolve_backend(AttentionBackend::automatic, probs), AttentionBackend::reference);
  EXPECT_EQ(resolve_backend(AttentionBackend::sdpa, request(at::kCPU, at::kFloat)), AttentionBackend::sdpa);
  EXPECT_EQ(resolve_backend(AttentionBackend::flash, request(at::kCPU, at::kFloat, 1, 9)), AttentionBackend::flash);
}

TEST(AttentionBackends, AutoPicksFlashOnCudaInHalfTypesFromSm80) {
  const at::Device cuda(at::kCUDA, 0);
  // Until a GPU run records cuDNN faster and correct (cudnn_record), flash, saying so: the first
  // resolution of a kind of call logs it (this test is the only one resolving CUDA bfloat16).
  std::ostringstream log;
  const auto logger = spdlog::default_logger();
  const auto level = logger->level();
  logger->set_level(spdlog::level::info);
  logger->sinks().push_back(std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
  auto first = request(cuda, at::kBFloat16);
  first.cuda_capability = 90;
  EXPECT_EQ(resolve_backend(AttentionBackend::automatic, first), AttentionBackend::flash);
  logger->sinks().pop_back();
  logger->set_level(level);
  EXPECT_NE(log.str().find("attention backend auto: flash for cuda BFloat16 attention: FlashAttention-2 with the "
                           "arm's exact corrections (docs/kernels.md); cuDNN not measured on compute capability 9.0"),
            std::string::npos)
      << log.str();
  for (auto dtype : {at::kBFloat16, at::kHalf}) {
    for (int capability : {80, 90, 100}) {
      auto r = request(cuda, dtype);
      r.cuda_capability = capability;
      EXPECT_EQ(resolve_backend(AttentionBackend::automatic, r), AttentionBackend::flash) << capability;
    }
    // Before Ampere, and for float32, decoding or key masks: the reference until the fused CUDA
    // kernels' GPU parity run is recorded (docs/kernels.md).
    auto turing = request(cuda, dtype);
    turing.cuda_capability = 75;
    EXPECT_EQ(resolve_backend(AttentionBackend::automatic, turing), AttentionBackend::reference);
    auto decoding = request(cuda, dtype, 1, 9);
    decoding.cuda_capability = 90;
    EXPECT_EQ(resolve_backend(AttentionBackend::automatic, decoding), AttentionBackend::reference);
  }
  auto fp32 = request(cuda, at::kFloat);
  fp32.cuda_capability = 90;
  EXPECT_EQ(resolve_backend(AttentionBackend::automatic, fp32), AttentionBackend::reference);
}

// `auto` never picks silently: it names what it runs and why, once per kind of call.
TEST(AttentionBackends, AutoLogsItsChoiceOncePerKindOfCall) {
  std::ostringstream log;
  const auto logger = spdlog::default_logger();
  const auto level = logger->level();
  logger->set_level(spdlog::level::info);
  logger->sinks().push_back(std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
  auto masked = request(at::kCPU, at::kHalf);  // a kind of call no other test here resolves
  masked.key_mask = true;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(resolve_backend(AttentionBackend::automatic, masked), AttentionBackend::fused);
  resolve_backend(AttentionBackend::fused, masked);  // an explicit choice: nothing to say
  logger->sinks().pop_back();
  logger->set_level(level);
  const auto text = log.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_NE(text.find("attention backend auto: fused for cpu Half attention with a key mask: not flash: "
                      "the flash kernels take no key mask"),
            std::string::npos)
      << text;
}

TEST(AttentionBackends, FlashRefusalsNameTheReason) {
  const at::Device cuda(at::kCUDA, 0);
  const auto with = [](AttentionRequest r, auto&& change) {
    change(r);
    return flash_refusal(r);
  };
  EXPECT_EQ(flash_refusal(request(at::kCPU, at::kFloat, 7, 7)), "");
  EXPECT_EQ(flash_refusal(request(cuda, at::kBFloat16, 7, 7)), "");
  EXPECT_NE(flash_refusal(request(cuda, at::kFloat, 7, 7)).find("bfloat16 or float16"), std::string::npos);
  EXPECT_NE(flash_refusal(request(at::kCPU, at::kFloat, 1, 7)).find("Tq = Tk"), std::string::npos);
  EXPECT_NE(with(request(at::kCPU, at::kFloat, 7, 7), [](auto& r) { r.key_mask = true; }).find("key mask"),
            std::string::npos);
  EXPECT_NE(with(request(cuda, at::kHalf, 7, 7), [](auto& r) { r.head_dim = 256; }).find("head_dim"), std::string::npos);
  EXPECT_NE(with(request(cuda, at::kHalf, 7, 7), [](auto& r) { r.cuda_capability = 75; })
                .find("8.0 or newer (sm_80), got 7.5"),
            std::string::npos);
  EXPECT_EQ(with(request(cuda, at::kHalf, 7, 7), [](auto& r) { r.cuda_capability = 80; }), "");
  // arm_attention passes the reason on when flash is asked for explicitly.
  const auto l = parity::make_leaves([] {
    parity::Case c;
    c.Tq = 3, c.Tk = 9, c.dtype = at::kFloat;
    return c;
  }());
  const auto& arm = arm_by_name("baseline");
  try {
    arm_attention(arm, {}, l.q, {l.k, l.v, {}, {}, {}}, false, AttentionBackend::flash);
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("KV-cache decoding"), std::string::npos) << e.what();
  }
}

parity::Leaves small_leaves(at::ScalarType dtype, int64_t tq = 9) {
  parity::Case c;
  c.Tq = tq, c.Tk = 9, c.dtype = dtype;
  return parity::make_leaves(c);
}

TEST(AttentionBackends, FusedAndFlashRefuseToMaterialiseProbabilities) {
  const auto l = small_leaves(at::kFloat);
  const auto& arm = arm_by_name("baseline");
  const auto keys = prepare_keys(arm, {}, l.k, l.v);
  EXPECT_THROW(arm_attention(arm, {}, l.q, keys, /*return_probs=*/true, AttentionBackend::fused),
               std::invalid_argument);
  EXPECT_THROW(arm_attention(arm, {}, l.q, keys, /*return_probs=*/true, AttentionBackend::flash),
               std::invalid_argument);
  const auto out = arm_attention(arm, {}, l.q, keys, true, AttentionBackend::automatic);
  EXPECT_TRUE(out.probs.defined());  // auto falls back to the reference for probabilities
}

TEST(AttentionBackends, SdpaRefusesArmsWithASinkOrGateNamingTheArm) {
  const auto l = small_leaves(at::kFloat);
  for (const char* name : {"sink_logit", "off_by_one", "norm_gate", "renorm", "combo2"}) {
    const auto& arm = arm_by_name(name);
    ArmLayerParams params;
    params.sink_logit = at::zeros({3});
    try {
      arm_attention(arm, params, l.q, {l.k, l.v, {}, {}, {}}, false, AttentionBackend::sdpa);
      ADD_FAILURE() << name << ": no exception";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
}

// SDPA computes the same plain causal softmax; float64 runs SDPA's math path, so 1e-12 (round-off);
// float32 may take its flash path: 1e-5. Decode (Tq < Tk) uses the bottom-right mask.
TEST(AttentionBackends, SdpaMatchesReferenceOnBaseline) {
  for (auto dtype : {at::kFloat, at::kDouble}) {
    for (int64_t tq : {9, 3, 1}) {
      const auto l = small_leaves(dtype, tq);
      const auto& arm = arm_by_name("baseline");
      const auto keys = prepare_keys(arm, {}, l.k, l.v);
      const auto want = arm_attention(arm, {}, l.q, keys, false, AttentionBackend::reference);
      const auto got = arm_attention(arm, {}, l.q, keys, false, AttentionBackend::sdpa);
      parity::expect_close(got.o, want.o, dtype == at::kDouble ? 1e-12 : 1e-5, "sdpa Tq=" + std::to_string(tq));
      EXPECT_FALSE(got.lse.defined());
    }
  }
}

}  // namespace
}  // namespace attnlab
