// The validation loss split by eval.trigger_tokens (evaluate.h's domains): against the same
// per-token losses computed by hand from the model's logits and split by hand, summed over shards as
// the ranks sum them; the main loss untouched; final.json's optional keys.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "attnlab/evaluate.h"
#include "attnlab/final_record.h"
#include "attnlab/run_metrics.h"
#include "activation_models.h"
#include "shard_files.h"

namespace attnlab {
namespace {

using testing::TempDir;

// 9 sequences of 8 tokens; ids 0..49 with the triggers 0, 1, 2 frequent.
std::shared_ptr<const ShardSet> val_stream(const TempDir& dir) {
  std::vector<uint16_t> t;
  for (int i = 0; i < 80; ++i) t.push_back(static_cast<uint16_t>(i % 3 == 0 ? i % 9 / 3 : (7 * i) % 50));
  dir.write_shard("t_val_000000.bin", {t});
  return std::make_shared<ShardSet>(ShardSet::open(dir.file("t_val_*.bin"), 50));
}

struct Plain {
  double trigger = 0, other = 0;
  int64_t n_trigger = 0, n_other = 0;
};

// -log softmax(logits)[y] per target in float64, a target a trigger one when its input x is.
Plain plain_split(GPTImpl& model, const ValidationSet& val, const std::set<int64_t>& triggers) {
  torch::NoGradGuard no_grad;
  Plain p;
  const auto all = val.sequences(0, val.num_sequences());
  const auto logp = torch::log_softmax(model.forward(all.x).to(torch::kDouble), -1);  // (n, T, V)
  for (int64_t r = 0; r < all.x.size(0); ++r)
    for (int64_t t = 0; t < all.x.size(1); ++t) {
      const double loss = -logp[r][t][all.y[r][t].item<int64_t>()].item<double>();
      if (triggers.count(all.x[r][t].item<int64_t>())) {
        p.trigger += loss, ++p.n_trigger;
      } else {
        p.other += loss, ++p.n_other;
      }
    }
  return p;
}

TEST(TriggerLoss, TheSplitIsTheMeanOfThePerTokenLossesSplitByHand) {
  TempDir dir;
  auto model = testing::tiny_gpt("sink_logit", torch::kFloat);
  const ValidationSet val(val_stream(dir), 8, 0);
  ASSERT_EQ(val.num_sequences(), 9);
  const std::vector<int64_t> ids = {0, 1, 2};
  const auto plain = plain_split(*model, val, {0, 1, 2});
  ASSERT_GT(plain.n_trigger, 0);
  ASSERT_GT(plain.n_other, 0);

  const auto with = evaluate_sum(*model, val, 4, c10::kCPU, false, 0, 1, ids);
  const auto without = evaluate_sum(*model, val, 4, c10::kCPU, false, 0, 1);
  EXPECT_EQ(with.nats, without.nats) << "the split leaves the main loss as it was, bit for bit";
  EXPECT_EQ(with.tokens, without.tokens);
  EXPECT_EQ(without.domains.trigger_tokens + without.domains.other_tokens, 0);
  EXPECT_EQ(with.domains.trigger_tokens, plain.n_trigger);
  EXPECT_EQ(with.domains.other_tokens, plain.n_other);
  const auto means = domain_losses(with.domains);
  EXPECT_NEAR(means.trigger, plain.trigger / double(plain.n_trigger), 1e-5);
  EXPECT_NEAR(means.other, plain.other / double(plain.n_other), 1e-5);
  EXPECT_NEAR(with.nats, plain.trigger + plain.other, 1e-4);  // the two domains are every target

  // Data-parallel: the shards' sums add up to the single process's (the evaluator's collective).
  const auto a = evaluate_sum(*model, val, 4, c10::kCPU, false, 0, 2, ids);
  const auto b = evaluate_sum(*model, val, 4, c10::kCPU, false, 1, 2, ids);
  EXPECT_EQ(a.domains.trigger_tokens + b.domains.trigger_tokens, plain.n_trigger);
  EXPECT_NEAR(a.domains.trigger_nats + b.domains.trigger_nats, with.domains.trigger_nats, 1e-9);
  EXPECT_NEAR(a.domains.other_nats + b.domains.other_nats, with.domains.other_nats, 1e-9);

  const auto none = domain_losses({0.0, 0, 3.0, 2});  // a domain without targets has no mean
  EXPECT_TRUE(std::isnan(none.trigger));
  EXPECT_EQ(none.other, 1.5);
}

FinalRecord record() {
  FinalRecord r;
  r.final_val_loss = 2.5, r.best_val_loss = 2.25, r.steps = 3, r.tokens_seen = 96;
  r.arm = "baseline", r.tier = "t", r.device = "cpu", r.git_revision = "g", r.config_hash = "h";
  return r;
}

// final.json: the keys only with eval.trigger_tokens (older records read as before), null for an
// empty domain, anything else but a number >= 0 refused naming the key.
TEST(TriggerLoss, FinalJsonHoldsTheSplitOnlyWhereMeasured) {
  EXPECT_FALSE(to_json(record()).contains("val_loss_trigger"));
  EXPECT_FALSE(final_record_from_json(to_json(record()), "f").val_loss_trigger);
  auto r = record();
  r.val_loss_trigger = 0.125, r.val_loss_other = std::nan("");
  const auto j = to_json(r);
  EXPECT_EQ(j["val_loss_trigger"], 0.125);
  EXPECT_TRUE(j["val_loss_other"].is_null());
  const auto back = final_record_from_json(j, "final.json");
  EXPECT_EQ(*back.val_loss_trigger, 0.125);
  EXPECT_TRUE(std::isnan(*back.val_loss_other));
  EXPECT_EQ(to_json(back), j);
  auto bad = j;
  bad["val_loss_trigger"] = "low";
  try {
    final_record_from_json(bad, "/r/final.json");
    ADD_FAILURE() << "read";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("val_loss_trigger"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("/r/final.json"), std::string::npos) << e.what();
  }
}

TEST(TriggerLoss, StepRecordsCarryTheSplitOnEvaluatedStepsOnly) {
  StepRecord r;
  r.step = 4, r.val_loss = 2.0;
  EXPECT_FALSE(to_json(r).contains("val_loss_trigger"));
  r.val_loss_trigger = 0.5, r.val_loss_other = std::nan("");
  const auto j = to_json(r);
  EXPECT_EQ(j["val_loss_trigger"], 0.5);
  EXPECT_TRUE(j.contains("val_loss_other") && j["val_loss_other"].is_null());
}

}  // namespace
}  // namespace attnlab
