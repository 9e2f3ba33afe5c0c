// Junk injection of SPEC section 4: the dose lands exactly on the quiet reads, eps = 0 is a no-op
// bit for bit, one seed gives every arm the same junk, and gate-direction junk moves a projection
// gate's logit by the predicted eps * m_h * ||w_h||.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include <algorithm>
#include <cmath>

#include <torch/torch.h>

#include "attnlab/gates.h"
#include "attnlab/init.h"
#include "attnlab/injection.h"
#include "attnlab/model.h"
#include "unit/test_helpers.h"

namespace attnlab {
namespace {

using testing::to_vector;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double p25(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const double pos = 0.25 * double(v.size() - 1);
  const size_t lo = size_t(std::floor(pos)), hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - double(lo)) * (v[hi] - v[lo]);
}

std::vector<double> row_norms(const at::Tensor& v, int64_t b, int64_t h) {  // v (B, H, T, d)
  std::vector<double> out;
  for (int64_t j = 0; j < v.size(2); ++j) {
    double s = 0;
    for (double x : to_vector(v[b][h][j])) s += x * x;
    out.push_back(std::sqrt(s));
  }
  return out;
}

TEST(InjectJunk, AddsTheDoseToQuietReadsOnlyAndLeavesTheRestBitForBit) {
  torch::manual_seed(11);
  const int64_t B = 2, H = 2, T = 9, d = 4;
  auto v = torch::randn({B, H, T, d});
  auto u = torch::nn::functional::normalize(torch::randn({B, H, T, d}, torch::kDouble),
                                            torch::nn::functional::NormalizeFuncOptions().dim(-1));
  for (auto cutoff : {QuietCutoff::median, QuietCutoff::p25}) {
    auto out = inject_junk(v, u, 0.4, cutoff);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        const auto n = row_norms(v, b, h);
        const double m = median(n), c = cutoff == QuietCutoff::median ? m : p25(n);
        for (int64_t j = 0; j < T; ++j) {
          if (n[size_t(j)] < c) {
            auto expect = v[b][h][j].to(torch::kDouble) + 0.4 * m * u[b][h][j];
            EXPECT_LT(testing::max_abs_diff(out[b][h][j], expect), 1e-5);
            EXPECT_FALSE(torch::equal(out[b][h][j], v[b][h][j]));
          } else {
            EXPECT_TRUE(torch::equal(out[b][h][j], v[b][h][j]));
          }
        }
      }
  }
}

TEST(InjectJunk, EpsZeroChangesNothingBitForBit) {
  torch::manual_seed(12);
  auto v = torch::randn({2, 3, 7, 5});
  auto u = torch::randn({2, 3, 7, 5}, torch::kDouble);
  EXPECT_TRUE(torch::equal(inject_junk(v, u, 0.0, QuietCutoff::median), v));
}

TEST(DrawJunk, OneSeedGivesTheSameDrawsAndAnotherSeedDifferent) {
  auto a = draw_junk(JunkKind::structured, 5, 1, 3, 4, 2, 10, 8);
  auto b = draw_junk(JunkKind::structured, 5, 1, 3, 4, 2, 10, 8);
  auto c = draw_junk(JunkKind::structured, 6, 1, 3, 4, 2, 10, 8);
  auto other_layer = draw_junk(JunkKind::structured, 5, 0, 3, 4, 2, 10, 8);
  EXPECT_TRUE(torch::equal(a.donor_seq, b.donor_seq) && torch::equal(a.donor_pos, b.donor_pos));
  EXPECT_FALSE(torch::equal(a.donor_pos, c.donor_pos));
  EXPECT_FALSE(torch::equal(a.donor_pos, other_layer.donor_pos));
  // Never the read's own sequence; positions are text positions.
  auto own = torch::arange(4, torch::kLong).view({4, 1, 1}).expand_as(a.donor_seq);
  EXPECT_FALSE(a.donor_seq.eq(own).any().item<bool>());
  EXPECT_GE(a.donor_pos.min().item<int64_t>(), 0);
  EXPECT_LT(a.donor_pos.max().item<int64_t>(), 10);
  auto g1 = draw_junk(JunkKind::gaussian, 5, 1, 3, 4, 2, 10, 8), g2 = draw_junk(JunkKind::gaussian, 5, 1, 3, 4, 2, 10, 8);
  EXPECT_TRUE(torch::equal(g1.gaussian, g2.gaussian));
  EXPECT_LT((g1.gaussian.norm(2, -1) - 1).abs().max().item<double>(), 1e-12);
  EXPECT_THROW(draw_junk(JunkKind::structured, 5, 0, 0, 1, 2, 10, 8), std::invalid_argument);
}

TEST(JunkDirections, StructuredIsTheDonorsNormalisedReadInEveryArmLayout) {
  torch::manual_seed(13);
  const int64_t B = 3, H = 2, T = 6, d = 4;
  const auto draws = draw_junk(JunkKind::structured, 9, 0, 0, B, H, T, d);
  auto v = torch::randn({B, H, T + 1, d});  // a sink_token layout: model position 0 is the learned token
  auto u_sink = junk_directions(JunkKind::structured, draws, v, {}, /*sink_token=*/true);
  auto v_text = v.narrow(2, 1, T).contiguous();  // the same text reads in a plain layout
  auto u_plain = junk_directions(JunkKind::structured, draws, v_text, {}, false);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t sb = draws.donor_seq[b][h][t].item<int64_t>(), st = draws.donor_pos[b][h][t].item<int64_t>();
        auto donor = v_text[sb][h][st].to(torch::kDouble);
        auto expect = donor / donor.norm();
        EXPECT_LT(testing::max_abs_diff(u_plain[b][h][t], expect), 1e-12);
        EXPECT_LT(testing::max_abs_diff(u_sink[b][h][t + 1], expect), 1e-12);  // text position t sits at t + 1
      }
}

TEST(JunkDirections, GaussianTextPositionsAreTheSameWithOrWithoutTheSinkToken) {
  const auto draws = draw_junk(JunkKind::gaussian, 3, 1, 0, 2, 2, 5, 4);
  auto u_plain = junk_directions(JunkKind::gaussian, draws, torch::zeros({2, 2, 5, 4}), {}, false);
  auto u_sink = junk_directions(JunkKind::gaussian, draws, torch::zeros({2, 2, 6, 4}), {}, true);
  EXPECT_TRUE(torch::equal(u_sink.narrow(2, 1, 5), u_plain));
  EXPECT_TRUE(torch::equal(u_sink.select(2, 0), draws.gaussian.select(2, 5)));  // the learned token: slot T
}

TEST(JunkDirections, GateDirectionMovesTheProjectionGateLogitAsPredicted) {
  torch::manual_seed(14);
  const int64_t B = 2, H = 2, T = 8, d = 4;
  auto v = torch::randn({B, H, T, d}, torch::kDouble);
  GateParams gate{GateKind::projection, {}, torch::randn({H, d}, torch::kDouble), torch::randn({H}, torch::kDouble)};
  auto u = junk_directions(JunkKind::gate_direction, {}, v, gate.w, false);
  const double eps = 0.8;
  auto z0 = gate_logits(v, gate), z1 = gate_logits(inject_junk(v, u, eps, QuietCutoff::median), gate);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const auto n = row_norms(v, b, h);
      const double m = median(n), w_norm = gate.w[h].norm().item<double>();
      for (int64_t j = 0; j < T; ++j) {
        const double dz = z1[b][h][j].item<double>() - z0[b][h][j].item<double>();
        EXPECT_NEAR(dz, n[size_t(j)] < m ? eps * m * w_norm : 0.0, 1e-10);
      }
    }
  EXPECT_THROW(junk_directions(JunkKind::gate_direction, {}, v, {}, false), std::invalid_argument);
}

GPT tiny(const std::string& arm) {
  ModelConfig cfg;
  cfg.arm = arm;
  cfg.n_layer = 2, cfg.n_head = 2, cfg.d_model = 16, cfg.block_size = 16, cfg.vocab_size = 50;
  GPT model(cfg);
  init_parameters(*model, 3);
  return model;
}

std::vector<Batch> batches() {
  torch::manual_seed(21);
  return {{torch::randint(0, 50, {3, 10}, torch::kLong), torch::randint(0, 50, {3, 10}, torch::kLong)},
          {torch::randint(0, 50, {2, 10}, torch::kLong), torch::randint(0, 50, {2, 10}, torch::kLong)}};
}

// eps 0 and 1.6, every layer together and each alone.
InjectOptions no_dose_and_a_dose_per_layer() {
  InjectOptions o;
  o.eps = {0.0, 1.6};
  o.per_layer = true;
  return o;
}

TEST(InjectModel, EpsZeroGivesTheCleanLossBitForBitAndDosesHurt) {
  auto model = tiny("baseline");
  const auto r = inject_model(*model, batches(), torch::kCPU, no_dose_and_a_dose_per_layer());
  EXPECT_EQ(r.doses[0].loss, r.clean_loss);
  EXPECT_EQ(r.doses[0].increase, 0.0);
  EXPECT_NE(r.doses[1].loss, r.clean_loss);
  ASSERT_TRUE(r.per_layer.has_value());
  ASSERT_EQ(r.per_layer->size(), 2u);
  EXPECT_EQ((*r.per_layer)[1].doses[0].loss, r.clean_loss);
}

TEST(InjectModel, CleanLossIsTheTokenWeightedMean) {
  auto model = tiny("sink_logit");
  const auto bs = batches();
  double total = 0;
  int64_t n = 0;
  {
    torch::NoGradGuard no_grad;
    for (const auto& b : bs) {
      auto logp = torch::log_softmax(model->forward(b.x).to(torch::kDouble), -1);
      total -= logp.gather(-1, b.y.unsqueeze(-1)).sum().item<double>();
      n += b.y.numel();
    }
  }
  InjectOptions o;
  o.eps = {0.2};
  EXPECT_NEAR(inject_model(*model, bs, torch::kCPU, o).clean_loss, total / double(n), 1e-5);
}

TEST(InjectModel, BadOptionsAreClearErrors) {
  auto model = tiny("baseline");
  InjectOptions o;
  o.kind = JunkKind::gate_direction;
  try {
    check_inject_options(*model, o);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("projection gate"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("baseline"), std::string::npos) << e.what();
  }
  o.kind = JunkKind::structured;
  o.layers = {2};
  EXPECT_THROW(check_inject_options(*model, o), std::invalid_argument);
  o.layers = {};
  o.eps = {-0.1};
  EXPECT_THROW(check_inject_options(*model, o), std::invalid_argument);
  auto gated = tiny("combo2");
  o.kind = JunkKind::gate_direction;
  o.eps = {0.4};
  EXPECT_NO_THROW(check_inject_options(*gated, o));
  EXPECT_THROW(parse_junk_kind("noise"), std::invalid_argument);
  o.kind = JunkKind::structured;
  o.eps = {0.4, 0.4};
  EXPECT_THROW(check_inject_options(*model, o), std::invalid_argument);  // a dose named twice
}

// A cached injection is reused only when it is one inject_model() could have produced with these
// options: each way a file can disagree is refused.
TEST(InjectModel, OutcomeCheckRefusesWhatTheOptionsCouldNotHaveProduced) {
  auto model = tiny("baseline");
  const auto o = no_dose_and_a_dose_per_layer();
  const auto r = inject_model(*model, batches(), torch::kCPU, o);
  EXPECT_NO_THROW(check_inject_outcome(r, *model, o));
  auto refused = [&](const std::function<void(InjectOutcome&)>& edit) {
    auto bad = r;
    edit(bad);
    EXPECT_THROW(check_inject_outcome(bad, *model, o), std::invalid_argument);
  };
  refused([](InjectOutcome& x) { x.doses.pop_back(); });
  refused([](InjectOutcome& x) { x.doses[1].eps = 99; });
  refused([](InjectOutcome& x) { x.doses[1].increase += 0.01; });
  refused([](InjectOutcome& x) { x.layers = {0, 1, 9}; });
  refused([](InjectOutcome& x) { x.per_layer.reset(); });
  refused([](InjectOutcome& x) { x.per_layer->pop_back(); });
  refused([](InjectOutcome& x) { (*x.per_layer)[0].layer = 1; });
  refused([](InjectOutcome& x) { (*x.per_layer)[1].doses.clear(); });
  auto without = o;
  without.per_layer = false;
  EXPECT_THROW(check_inject_outcome(r, *model, without), std::invalid_argument);  // per_layer not asked for
  auto nan_loss = r;  // a non-finite loss reads back as NaN with a NaN increase: still consistent
  nan_loss.doses[1].loss = nan_loss.doses[1].increase = std::nan("");
  EXPECT_NO_THROW(check_inject_outcome(nan_loss, *model, o));
}

}  // namespace
}  // namespace attnlab
