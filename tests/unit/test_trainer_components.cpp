// The trainer's components decide for themselves whether a step is theirs (checkpointer.h,
// evaluator.h, activation_tracker.h, metrics_logger.h): each decision is checked here against the
// rule written out by hand, step by step, and against an explicit list of steps.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "attnlab/activation_tracker.h"
#include "attnlab/checkpointer.h"
#include "attnlab/evaluator.h"
#include "attnlab/metrics_logger.h"
#include "attnlab/shards.h"
#include "attnlab/trainer.h"
#include "unit/shard_files.h"

namespace attnlab {
namespace {

using testing::TempDir;

// The steps in 1..total for which `yes(step, step == total)` holds.
template <class F>
std::vector<int64_t> steps_where(int64_t total, F&& yes) {
  std::vector<int64_t> out;
  for (int64_t step = 1; step <= total; ++step)
    if (yes(step, step == total)) out.push_back(step);
  return out;
}

// 8 validation sequences of 4 tokens (33 tokens of a 64-token vocabulary).
std::shared_ptr<const ValidationSet> validation(const TempDir& tmp) {
  tmp.write_shard("v_val_000.bin", {testing::iota_tokens(33, 0, 64)});
  return std::make_shared<const ValidationSet>(std::make_shared<const ShardSet>(ShardSet::open(tmp.file("v_val_*.bin"), 64)),
                                               4, 33);
}

TEST(Checkpointer, SavesEveryEveryTheLogSpacedStepsTheLastAndAStop) {
  CheckpointConfig c;
  c.every = 5;
  c.log_spaced = true;
  c.log_spaced_until = 8;  // 1, 2, 4, 8
  c.keep_last = 2, c.keep_every = 10;
  const Checkpointer ck(c);
  EXPECT_EQ(steps_where(23, [&](int64_t s, bool last) { return ck.should_save(s, last, false); }),
            (std::vector<int64_t>{1, 2, 4, 5, 8, 10, 15, 20, 23}));
  EXPECT_TRUE(ck.should_save(7, false, /*stop=*/true));  // a stop saves whatever the step
  EXPECT_FALSE(ck.should_save(7, false, false));
  EXPECT_EQ(log_spaced_steps(c), (std::set<int64_t>{1, 2, 4, 8}));
  const auto& policy = ck.policy();
  EXPECT_EQ(policy.keep_last, 2);
  EXPECT_EQ(policy.keep_every, 10);
  EXPECT_TRUE(policy.keep_best);
  EXPECT_EQ(policy.keep_steps, (std::set<int64_t>{1, 2, 4, 8}));

  c.log_spaced = false;  // then only every 5 and the last
  const Checkpointer plain(c);
  EXPECT_EQ(steps_where(12, [&](int64_t s, bool last) { return plain.should_save(s, last, false); }),
            (std::vector<int64_t>{5, 10, 12}));
  EXPECT_TRUE(retention_policy(c).keep_steps.empty());
}

TEST(Evaluator, EvaluatesEveryEvalEveryAndTheLastStep) {
  TempDir tmp;
  RunConfig cfg;
  cfg.eval.every = 4;
  const Evaluator e(cfg, validation(tmp), c10::kCPU, false);
  EXPECT_EQ(steps_where(10, [&](int64_t s, bool last) { return e.should_evaluate(s, last); }),
            (std::vector<int64_t>{4, 8, 10}));
  EXPECT_TRUE(std::isnan(e.last_loss()));  // nothing evaluated yet
  EXPECT_EQ(e.validation().num_sequences(), 8);
}

TEST(ActivationTracker, ProbesStepZeroEveryEveryTheLogSpacedStepsAndTheLastOnRankZeroOnly) {
  TempDir tmp;
  const auto val = validation(tmp);
  RunConfig cfg;
  cfg.track.activations.every = 6;
  cfg.track.activations.sequences = 3;
  cfg.checkpoint.log_spaced = true;
  cfg.checkpoint.log_spaced_until = 4;  // 1, 2, 4
  const ActivationTracker tracker(cfg, *val, c10::kCPU, /*main_rank=*/true);
  EXPECT_TRUE(tracker.should_track(0, false));  // the initial state
  EXPECT_EQ(steps_where(13, [&](int64_t s, bool last) { return tracker.should_track(s, last); }),
            (std::vector<int64_t>{1, 2, 4, 6, 12, 13}));

  const ActivationTracker other_rank(cfg, *val, c10::kCPU, /*main_rank=*/false);
  EXPECT_TRUE(steps_where(13, [&](int64_t s, bool last) { return other_rank.should_track(s, last); }).empty());
  cfg.track.activations.every = 0;  // off
  const ActivationTracker off(cfg, *val, c10::kCPU, true);
  EXPECT_FALSE(off.should_track(0, false));
  EXPECT_TRUE(steps_where(13, [&](int64_t s, bool last) { return off.should_track(s, last); }).empty());

  cfg.track.activations.every = 6;
  cfg.track.activations.sequences = 9;  // more than the 8 there are: refused on every rank
  EXPECT_THROW(ActivationTracker(cfg, *val, c10::kCPU, false), TrainError);
}

TEST(MetricsLogger, PrintsEveryLogEveryTheSessionsFirstStepEveryEvaluatedStepAndTheLast) {
  RunConfig cfg;
  cfg.train.log_every = 10;
  const MetricsLogger logger(cfg, std::nullopt, /*first_step=*/13);  // a session resumed at step 13
  std::vector<int64_t> printed;
  for (int64_t step = 14; step <= 45; ++step) {
    StepRecord r;
    r.step = step;
    if (step == 33) r.val_loss = 4.0;
    if (logger.should_print(r, step == 45)) printed.push_back(step);
  }
  EXPECT_EQ(printed, (std::vector<int64_t>{14, 20, 30, 33, 40, 45}));
}

}  // namespace
}  // namespace attnlab
