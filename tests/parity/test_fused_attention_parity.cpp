// The fused CPU kernel against the composed-op reference (attention.h), forward and backward, over
// the features one at a time and together: lengths that are not multiples of the tile, several
// tilings, T = 1, decode (Tq < Tk), sink logits of +-100, rows whose keys are all masked.
//
// Tolerances (normalised error, parity_helpers.h): float64 1e-13 — both sides sum O(100) terms of
// O(1) in double in different orders and differ by ~1e-15 (measured: 1.3e-15 worst); an algorithmic
// slip (a missed rescale, a sink left out of the max) shows up at 1e-3 and above. float32 1e-5 — the
// same sums in float differ by a few ulp times sqrt(T) (measured: 6e-7 worst at T = 100). The
// reference is always computed in float64 (reference_of): a float32 reference adds its own
// rounding, which depends on the BLAS path the machine's CPU takes.
// ATTNLAB_PARITY_VERBOSE=1 prints every measured error.
#include <gtest/gtest.h>

#include <tuple>

#include "parity_helpers.h"

namespace attnlab {
namespace {

using parity::Case;
using parity::expect_runs_close;
using parity::make_leaves;
using parity::run_attention;

double tolerance(at::ScalarType dtype) { return dtype == at::kDouble ? 1e-13 : 1e-5; }

/// The composed-op reference in float64 on the same (upcast) inputs.
parity::Run reference_of(const parity::Leaves& l) { return run_attention(parity::as_double(l), false); }

// (T, tile, dtype): every length against every tile size, all features on.
class LengthsAndTiles : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, at::ScalarType>> {};

TEST_P(LengthsAndTiles, AllFeaturesMatchReference) {
  const auto [T, tile, dtype] = GetParam();
  Case c;
  c.Tq = c.Tk = T, c.dtype = dtype, c.sink = true, c.bias = true, c.mask = true, c.seed = 100 + T;
  const auto l = make_leaves(c);
  const auto want = reference_of(l);
  const auto got = run_attention(l, true, {tile, tile});
  expect_runs_close(got, want, tolerance(dtype), "T=" + std::to_string(T) + " tile=" + std::to_string(tile));
}

INSTANTIATE_TEST_SUITE_P(Cpu, LengthsAndTiles,
                         ::testing::Combine(::testing::Values(1, 7, 33, 100), ::testing::Values(16, 32, 64),
                                            ::testing::Values(at::kFloat, at::kDouble)),
                         [](const auto& info) {
                           return "T" + std::to_string(std::get<0>(info.param)) + "_tile" +
                                  std::to_string(std::get<1>(info.param)) +
                                  (std::get<2>(info.param) == at::kDouble ? "_f64" : "_f32");
                         });

// Each feature alone (and none), so a failure names the feature.
struct FeatureCase {
  const char* name;
  bool sink, bias, mask;
};

class Features : public ::testing::TestWithParam<std::tuple<FeatureCase, at::ScalarType>> {};

TEST_P(Features, MatchReference) {
  const auto [f, dtype] = GetParam();
  Case c;
  c.Tq = c.Tk = 45, c.dtype = dtype, c.sink = f.sink, c.bias = f.bias, c.mask = f.mask, c.seed = 9;
  const auto l = make_leaves(c);
  expect_runs_close(run_attention(l, true, {16, 32}), reference_of(l), tolerance(dtype), f.name);
}

INSTANTIATE_TEST_SUITE_P(Cpu, Features,
                         ::testing::Combine(::testing::Values(FeatureCase{"plain", false, false, false},
                                                              FeatureCase{"sink", true, false, false},
                                                              FeatureCase{"routing_bias", false, true, false},
                                                              FeatureCase{"key_mask", false, false, true},
                                                              FeatureCase{"mask_and_sink", true, false, true}),
                                            ::testing::Values(at::kFloat, at::kDouble)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) +
                                  (std::get<1>(info.param) == at::kDouble ? "_f64" : "_f32");
                         });

// Decode: the queries are the last Tq of Tk positions.
TEST(FusedAttention, DecodeQueriesAtTheLastPositions) {
  for (int64_t tq : {1, 5, 37}) {
    for (auto dtype : {at::kFloat, at::kDouble}) {
      Case c;
      c.Tq = tq, c.Tk = 37, c.dtype = dtype, c.sink = true, c.bias = true, c.seed = 40 + tq;
      const auto l = make_leaves(c);
      expect_runs_close(run_attention(l, true, {16, 16}), reference_of(l), tolerance(dtype),
                        "Tq=" + std::to_string(tq));
    }
  }
}

// A sink logit of +-100 must not overflow the running max or underflow the keys away.
TEST(FusedAttention, ExtremeSinkLogits) {
  for (double b : {100.0, -100.0}) {
    for (auto dtype : {at::kFloat, at::kDouble}) {
      Case c;
      c.Tq = c.Tk = 33, c.dtype = dtype, c.sink = true, c.sink_value = b, c.seed = 3;
      const auto l = make_leaves(c);
      const auto got = run_attention(l, true, {16, 16});
      EXPECT_TRUE(at::isfinite(got.o).all().item<bool>()) << "b_h=" << b;
      EXPECT_TRUE(at::isfinite(got.dsink).all().item<bool>()) << "b_h=" << b;
      expect_runs_close(got, reference_of(l), tolerance(dtype), "b_h=" + std::to_string(b));
    }
  }
  // Independent value: with b_h = 100 every key's weight is below exp(|s| - 100), so o ~ 0 and
  // lse = 100 + log(1 + sum_j exp(s_ij - 100)) = 100 to within 1e-30.
  Case c;
  c.Tq = c.Tk = 9, c.sink = true, c.sink_value = 100.0;
  const auto got = run_attention(make_leaves(c), true);
  EXPECT_LT(got.o.abs().max().item<double>(), 1e-30);
  EXPECT_LT((got.lse - 100.0).abs().max().item<double>(), 1e-14);
}

// Rows whose keys are all masked: o = 0 and lse = b_h with a sink, lse = -inf without one; their
// gradients are finite (and match the reference, checked in Features above).
TEST(FusedAttention, FullyMaskedRows) {
  for (bool sink : {true, false}) {
    Case c;
    c.Tq = c.Tk = 12, c.sink = sink, c.mask = true, c.seed = 5;  // batch 0: keys 0..3 masked
    const auto l = make_leaves(c);
    const auto got = run_attention(l, true, {4, 4});
    const auto rows = at::indexing::Slice(0, 4);
    auto o_masked = got.o.index({0, at::indexing::Slice(), rows});
    auto lse_masked = got.lse.index({0, at::indexing::Slice(), rows});  // (H, 4)
    EXPECT_EQ(o_masked.abs().max().item<double>(), 0.0) << "sink=" << sink;
    if (sink) {
      EXPECT_TRUE(lse_masked.equal(l.sink.detach().view({-1, 1}).expand_as(lse_masked)));
    } else {
      EXPECT_TRUE(at::isneginf(lse_masked).all().item<bool>());
    }
    for (const auto& g : {got.dq, got.dk, got.dv}) EXPECT_TRUE(at::isfinite(g).all().item<bool>());
  }
}

// T = 1 without a sink: the only key gets weight 1, so o = v_0 and lse = s_00 (no reference needed).
TEST(FusedAttention, SingleTokenIsItsOwnValue) {
  Case c;
  c.Tq = c.Tk = 1, c.seed = 8;
  const auto l = make_leaves(c);
  const auto got = run_attention(l, true);
  EXPECT_LT((got.o - l.v.detach()).abs().max().item<double>(), 1e-15);
  auto s00 = (l.q * l.k).sum(-1).detach() / 4.0;  // scale 1/sqrt(16)
  EXPECT_LT((got.lse - s00).abs().max().item<double>(), 1e-14);
}

// Parallel over (b, h) with no atomics: the result does not depend on the thread count.
TEST(FusedAttention, ThreadCountDoesNotChangeBits) {
  Case c;
  c.Tq = c.Tk = 50, c.dtype = at::kFloat, c.sink = true, c.bias = true, c.B = 3, c.H = 4;
  const auto l = make_leaves(c);
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const auto one = run_attention(l, true, {16, 16});
  at::set_num_threads(std::max(2, threads));
  const auto many = run_attention(l, true, {16, 16});
  at::set_num_threads(threads);
  EXPECT_TRUE(one.o.equal(many.o));
  EXPECT_TRUE(one.dq.equal(many.dq));
  EXPECT_TRUE(one.dk.equal(many.dk));
  EXPECT_TRUE(one.dsink.equal(many.dsink));
}

// Half types are upcast on CPU: the result is the float32 run on the rounded inputs, cast back.
TEST(FusedAttention, HalfTypesUpcastOnCpu) {
  for (auto dtype : {at::kBFloat16, at::kHalf}) {
    Case c;
    c.Tq = c.Tk = 20, c.dtype = dtype, c.sink = true;
    const auto l = make_leaves(c);
    const auto got = run_attention(l, true, {}, /*lse_in_loss=*/false);
    ASSERT_EQ(got.o.scalar_type(), dtype);
    ASSERT_EQ(got.dq.scalar_type(), dtype);
    AttentionInputs in{l.q.detach().to(at::kFloat), l.k.detach().to(at::kFloat), l.v.detach().to(at::kFloat),
                       at::Tensor(), l.sink.detach(), at::Tensor()};
    const auto want = reference_attention(in).o.to(dtype);
    // One rounding of the output to the half type: at most one ulp (2^-8 relative for bf16).
    EXPECT_LE(parity::normalised_error(got.o, want), 1e-2);
  }
}

TEST(FusedAttention, RejectsInconsistentInputs) {
  Case c;
  auto l = make_leaves(c);
  AttentionInputs in{l.q, l.k, l.v.narrow(2, 0, 3), {}, {}, {}};
  EXPECT_THROW(fused_attention(in), std::invalid_argument);
  AttentionInputs ints{l.q.to(at::kInt), l.k.to(at::kInt), l.v.to(at::kInt), {}, {}, {}};
  EXPECT_THROW(fused_attention(ints), std::invalid_argument);
}

}  // namespace
}  // namespace attnlab
