// The global gradient norm and clipping (include/attnlab/grad_clip.h) on gradients whose float32 sum
// of squares overflows or underflows, non-finite gradients, and clipping off. Expected values come
// from a plain float64 loop over the gradients' elements.
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "attnlab/grad_clip.h"

namespace attnlab {
namespace {

/// Two parameters whose gradients are `scale` times a fixed pattern, and one without a gradient.
std::vector<at::Tensor> params_with_grads(float scale) {
  auto a = torch::zeros({30, 40}, torch::requires_grad());
  auto b = torch::zeros({7}, torch::requires_grad());
  auto none = torch::zeros({5}, torch::requires_grad());
  a.mutable_grad() = (torch::arange(1200, torch::kFloat).view({30, 40}).remainder(17) - 8) * scale;
  b.mutable_grad() = torch::full({7}, 3.0f * scale);
  return {a, none, b};
}

double loop_norm(const std::vector<at::Tensor>& params) {
  double sum = 0.0;
  for (const auto& p : params) {
    if (!p.grad().defined()) continue;
    const auto g = p.grad().contiguous();
    for (int64_t i = 0; i < g.numel(); ++i) {
      const double x = g.data_ptr<float>()[i];
      sum += x * x;
    }
  }
  return std::sqrt(sum);
}

std::vector<at::Tensor> grads_of(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> out;
  for (const auto& p : params)
    if (p.grad().defined()) out.push_back(p.grad().clone());
  return out;
}

void expect_same_bits(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i].view(torch::kInt), b[i].view(torch::kInt))) << i;
}

TEST(GradClip, NormIsFiniteAndCorrectWhereFloat32SumsOverflowOrUnderflow) {
  for (float scale : {1.0f, 1e20f, 1e37f, 1e-30f, 1e-40f /* subnormal */}) {
    SCOPED_TRACE(scale);
    const auto params = params_with_grads(scale);
    const double expected = loop_norm(params);
    ASSERT_TRUE(std::isfinite(expected));
    ASSERT_GT(expected, 0.0);
    EXPECT_NEAR(global_grad_norm(params) / expected, 1.0, 1e-12);
  }
  EXPECT_EQ(global_grad_norm({torch::zeros({3}, torch::requires_grad())}), 0.0);  // no gradient at all
}

TEST(GradClip, NonFiniteElementsGiveANonFiniteNormAndCannotBeClipped) {
  auto params = params_with_grads(1.0f);
  params[0].mutable_grad()[4][5] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(global_grad_norm(params), std::numeric_limits<double>::infinity());
  params[0].mutable_grad()[4][5] = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(global_grad_norm(params), std::numeric_limits<double>::infinity());
  params[2].mutable_grad()[1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(global_grad_norm(params)));
  const auto before = grads_of(params);
  EXPECT_THROW(clip_gradients(params, global_grad_norm(params), 1.0), std::invalid_argument);
  EXPECT_THROW(clip_gradients(params, std::numeric_limits<double>::infinity(), 0.0), std::invalid_argument);
  expect_same_bits(before, grads_of(params));
}

TEST(GradClip, ClippingOffOrBelowTheLimitLeavesGradientsBitForBit) {
  for (float scale : {1e-3f, 1.0f, 1e20f, 1e37f}) {
    SCOPED_TRACE(scale);
    auto params = params_with_grads(scale);
    const auto before = grads_of(params);
    const double norm = global_grad_norm(params);
    EXPECT_FALSE(clip_gradients(params, norm, 0.0));
    EXPECT_FALSE(clip_gradients(params, norm, 2.0 * norm));
    expect_same_bits(before, grads_of(params));
  }
}

TEST(GradClip, ClippingScalesToTheLimitEvenFromOverflowingNorms) {
  for (float scale : {1.0f, 1e20f, 1e37f}) {
    SCOPED_TRACE(scale);
    auto params = params_with_grads(scale);
    const auto before = grads_of(params);
    const double norm = global_grad_norm(params);
    ASSERT_TRUE(clip_gradients(params, norm, 1.0));
    const double factor = 1.0 / (norm + 1e-6);
    const auto after = grads_of(params);
    for (size_t i = 0; i < after.size(); ++i) {
      EXPECT_TRUE(torch::isfinite(after[i]).all().item<bool>());
      EXPECT_LT((after[i].to(torch::kDouble) - before[i].to(torch::kDouble) * factor).abs().max().item<double>(), 1e-6);
    }
    EXPECT_NEAR(loop_norm(params), 1.0, 1e-6);
  }
}

}  // namespace
}  // namespace attnlab
