// End to end: tiny training runs on hand-made shards. Exact resume, refusals, corrupt or damaged
// checkpoints, non-finite losses and gradients, budget changes, falling validation loss.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>
#include <numeric>
#include <random>
#include <set>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "attnlab/activation_report.h"
#include "attnlab/activation_stats.h"
#include "attnlab/batch_sampler.h"
#include "attnlab/checkpoint.h"
#include "attnlab/lr_schedule.h"
#include "attnlab/report.h"
#include "attnlab/shards.h"
#include "attnlab/task_file.h"
#include "attnlab/task_scoring.h"
#include "attnlab/trainer.h"
#include "attnlab/run_dir.h"
#include "attnlab/trained_run.h"
#include "unit/checkpoint_surgery.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;

// llm.c shard: 256 int32 header (magic, version, count) then uint16 tokens.
void write_shard(const fs::path& path, const std::vector<uint16_t>& tokens) {
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520, header[1] = 1, header[2] = static_cast<int32_t>(tokens.size());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), header.size() * 4);
  out.write(reinterpret_cast<const char*>(tokens.data()), tokens.size() * 2);
}

// A learnable stream: short repeating phrases with noise, so the loss falls within a few steps.
std::vector<uint16_t> patterned_tokens(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint16_t> out;
  while (out.size() < n) {
    const uint16_t start = rng() % 48;
    for (uint16_t t = 0; t < 8 && out.size() < n; ++t) out.push_back((start + 3 * t) % 64);
  }
  return out;
}

class TrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("attnlab_e2e_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "data");
    write_shard(dir_ / "data/toy_val_000000.bin", patterned_tokens(4096, 1));
    write_shard(dir_ / "data/toy_train_000001.bin", patterned_tokens(40000, 2));
    // A hand-made 64-token vocabulary (the shards carry no real tokenizer).
    std::ofstream(dir_ / "data/tokenizer.json") << R"({"tokenizer": "sentencepiece", "vocab_size": 64, "source": "test"})";
    std::ofstream(dir_ / "run.yaml") << "model: {arm: combo2, n_layer: 1, n_head: 2, d_model: 32, block_size: 32, vocab_size: 64}\n"
                                        "data: {train: '" << (dir_ / "data/*_train_*.bin").string() << "', val: '"
                                     << (dir_ / "data/*_val_*.bin").string() << "', val_tokens: 1024}\n"
                                        "train: {batch_size: 4, seq_len: 16, tokens_per_step: 128, max_steps: 12, threads: 1}\n"
                                        "optim: {lr: 0.01, warmup_steps: 2}\n"
                                        "eval: {every: 4}\ncheckpoint: {every: 3, keep_last: 2}\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  RunConfig config(const std::string& out, std::vector<std::string> sets = {}) {
    sets.push_back("out_dir=" + (dir_ / out).string());
    return load_run_config(dir_ / "run.yaml", sets);
  }
  static std::vector<nlohmann::json> metrics(const fs::path& run) {
    std::vector<nlohmann::json> lines;
    std::ifstream in(run / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
    return lines;
  }
  template <class E>
  static std::string error_of(const std::function<void()>& f) {
    try {
      f();
    } catch (const E& e) {
      return e.what();
    }
    return "no error";
  }
  // Trains run "a" for 6 of its 12 steps and returns the options that branch from it.
  TrainOptions branch_of_run_stopped_at_6() {
    TrainOptions stop;
    stop.stop_after_steps = 6;
    train(config("a"), stop);
    TrainOptions branch;
    branch.branch_from = dir_ / "a";
    return branch;
  }
  fs::path dir_;
};

TEST_F(TrainTest, InterruptedRunResumesBitIdentically) {
  const auto straight = train(config("a"));
  ASSERT_EQ(straight.status, TrainStatus::finished);

  TrainOptions stop;
  stop.stop_after_steps = 5;  // not a checkpoint multiple: the stop itself saves
  ASSERT_EQ(train(config("b"), stop).status, TrainStatus::interrupted);
  const auto resumed = train(config("b"));
  ASSERT_EQ(resumed.status, TrainStatus::finished);

  const auto a = metrics(dir_ / "a"), b = metrics(dir_ / "b");
  ASSERT_EQ(a.size(), 12u);
  ASSERT_EQ(b.size(), 12u);  // each step logged once
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]["step"], b[i]["step"]);
    EXPECT_EQ(a[i]["train_loss"].get<double>(), b[i]["train_loss"].get<double>()) << "step " << i + 1;
    EXPECT_EQ(a[i]["grad_norm"].get<double>(), b[i]["grad_norm"].get<double>()) << "step " << i + 1;
  }
  EXPECT_EQ(straight.final_val_loss, resumed.final_val_loss);
  const auto wa = open_model(dir_ / "a"), wb = open_model(dir_ / "b");
  for (const auto& item : wa.model->named_parameters())
    EXPECT_TRUE(torch::equal(item.value(), wb.model->named_parameters()[item.key()])) << item.key();
  // final.json records what the run did.
  const auto final_json = nlohmann::json::parse(std::ifstream(dir_ / "b/final.json"));
  EXPECT_EQ(final_json["steps"], 12);
  EXPECT_EQ(final_json["tokens_seen"], 12 * 128);
  EXPECT_EQ(final_json["arm"], "combo2");
  EXPECT_EQ(final_json["final_val_loss"].get<double>(), resumed.final_val_loss);
}

// Each optimizer (optim.name, docs/design.md) resumes exactly: a two-step run resumed from step 1
// logs the same losses and ends with the same weights as the uninterrupted one; its checkpoints name
// the optimizer, and a resume under another one is refused naming the key.
TEST_F(TrainTest, EveryOptimizerResumesBitIdentically) {
  for (const std::string name : {"sgd", "muon"}) {
    const std::vector<std::string> sets = {"optim.name=" + name, "train.max_steps=2", "checkpoint.every=2"};
    const auto straight = train(config(name + "_a", sets));
    ASSERT_EQ(straight.status, TrainStatus::finished) << name;
    TrainOptions stop;
    stop.stop_after_steps = 1;
    ASSERT_EQ(train(config(name + "_b", sets), stop).status, TrainStatus::interrupted) << name;
    const auto ckpt = load_checkpoint(dir_ / (name + "_b") / "checkpoints/step_000001");
    EXPECT_EQ(to_string(ckpt.optimizer_name), name);
    const auto resumed = train(config(name + "_b", sets));
    ASSERT_EQ(resumed.status, TrainStatus::finished) << name;
    const auto a = metrics(dir_ / (name + "_a")), b = metrics(dir_ / (name + "_b"));
    ASSERT_EQ(a.size(), 2u);
    ASSERT_EQ(b.size(), 2u);
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_EQ(a[i]["train_loss"].get<double>(), b[i]["train_loss"].get<double>()) << name << " step " << i + 1;
    EXPECT_EQ(straight.final_val_loss, resumed.final_val_loss) << name;
    const auto wa = open_model(dir_ / (name + "_a")), wb = open_model(dir_ / (name + "_b"));
    for (const auto& item : wa.model->named_parameters())
      EXPECT_TRUE(torch::equal(item.value(), wb.model->named_parameters()[item.key()])) << name << " " << item.key();
  }
  const auto refused = error_of<TrainError>([&] { train(config("sgd_a", {"optim.name=muon", "train.max_steps=2"})); });
  EXPECT_NE(refused.find("optim.name"), std::string::npos) << refused;
}

// Every arm under a local-global pattern with a kept position (docs/windows.md) trains, and a run
// interrupted at any step resumes to the same losses and weights bit for bit.
TEST_F(TrainTest, EveryArmTrainsWithAWindowAndResumesBitIdentically) {
  int64_t stop_at = 1;
  for (const auto& arm : all_arms()) {
    const std::vector<std::string> sets = {"model.arm=" + arm.name, "model.n_layer=2", "model.window=4",
                                           "model.window_pattern=LG", "model.window_keep_first=1", "train.max_steps=6",
                                           "checkpoint.every=4"};
    auto with_out = [&](const std::string& out) { return config(out, sets); };
    const auto straight = train(with_out(arm.name + "_a"));
    ASSERT_EQ(straight.status, TrainStatus::finished) << arm.name;
    TrainOptions stop;
    stop.stop_after_steps = stop_at;
    ASSERT_EQ(train(with_out(arm.name + "_b"), stop).status, TrainStatus::interrupted) << arm.name;
    const auto resumed = train(with_out(arm.name + "_b"));
    EXPECT_EQ(straight.final_val_loss, resumed.final_val_loss) << arm.name << " stopped after " << stop_at;
    const auto wa = open_model(dir_ / (arm.name + "_a")), wb = open_model(dir_ / (arm.name + "_b"));
    EXPECT_TRUE(wa.model->config().layer_is_local(0) && !wa.model->config().layer_is_local(1)) << arm.name;
    for (const auto& item : wa.model->named_parameters())
      EXPECT_TRUE(torch::equal(item.value(), wb.model->named_parameters()[item.key()])) << arm.name << " " << item.key();
    stop_at = stop_at % 5 + 1;  // 1, 2, 3, 4, 5, 1, ...: before, at and after the checkpoint of step 4
  }
}

// A window that hides nothing is no window: pattern G reads as the config without the keys, so the
// run is the same run, and its final.json is byte for byte the other's but for where it lives.
TEST_F(TrainTest, AllGlobalPatternTrainsTheRunWithoutAWindow) {
  const auto plain = config("plain", {"train.max_steps=4"});
  const auto global = config("global", {"train.max_steps=4", "model.window=4", "model.window_pattern=G"});
  EXPECT_EQ(config_hash(plain), config_hash(global));
  ASSERT_EQ(train(plain).status, TrainStatus::finished);
  ASSERT_EQ(train(global).status, TrainStatus::finished);
  auto strip = [&](const std::string& run) {
    auto j = nlohmann::json::parse(std::ifstream(dir_ / run / "final.json"));
    for (const char* k : {"time_s", "wall_time_s", "git_revision"}) j.erase(k);  // provenance: when and how long
    return j.dump();
  };
  EXPECT_EQ(strip("plain"), strip("global"));
}

// init_seed drives the initialisation, data_seed the batch order: (seed 1, init_seed 5) and (seed 5,
// data_seed 1) are the same run (init 5, data 1) bit for bit; changing either one changes the losses.
TEST_F(TrainTest, InitSeedDrivesTheInitialisationAndDataSeedTheBatchOrder) {
  auto losses = [&](const std::string& out, const std::vector<std::string>& sets) {
    auto all = sets;
    all.push_back("train.max_steps=3");
    train(config(out, all));
    std::vector<double> out_losses;
    for (const auto& line : metrics(dir_ / out)) out_losses.push_back(line["train_loss"].get<double>());
    return out_losses;
  };
  const auto a = losses("a", {"seed=1", "init_seed=5"});
  const auto b = losses("b", {"seed=5", "data_seed=1"});
  const auto init1 = losses("c", {"seed=1"});  // init 1, data 1: a's data, another init
  const auto data5 = losses("d", {"seed=5"});  // init 5, data 5: b's init, another data order
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a, b) << "init 5 and data 1, spelt two ways";
  EXPECT_NE(a[0], init1[0]) << "the init seed changes the first loss";
  EXPECT_NE(b[0], data5[0]) << "the data seed changes the first batch";
}

// eval.tasks (docs/downstream.md): accuracies on exactly the evaluated steps (4, 8, 12) and in
// final.json, equal to scoring the finished model afresh; the training itself is bit-identical to a
// run without tasks; the list may change on resume (an observation key); a bad file stops the run
// before its directory is claimed.
TEST_F(TrainTest, TaskAccuraciesAreLoggedAtEvaluationsAndChangeNothingTrained) {
  std::ofstream tasks(dir_ / "pattern.jsonl");
  std::mt19937 rng(9);
  for (int i = 0; i < 10; ++i) {  // the shards' phrases step by 3: the right continuation is s + 9
    const int64_t s = rng() % 40;
    const auto one = [](int64_t id) { return nlohmann::json::array({id}); };
    const nlohmann::json choices = nlohmann::json::array({one(s + 9), one((s + 20) % 64), {(s + 1) % 64, (s + 5) % 64}});
    tasks << nlohmann::json({{"context", {s, s + 3, s + 6}}, {"choices", choices}, {"choice_chars", {2, 2, 5}},
                             {"gold", i % 3 == 2 ? 1 : 0}}).dump() << "\n";
  }
  tasks.close();
  const std::string with = "eval.tasks=[" + (dir_ / "pattern.jsonl").string() + "]";
  ASSERT_EQ(train(config("plain")).status, TrainStatus::finished);
  ASSERT_EQ(train(config("tasked", {with})).status, TrainStatus::finished);
  const auto plain = metrics(dir_ / "plain"), tasked = metrics(dir_ / "tasked");
  ASSERT_EQ(tasked.size(), 12u);
  for (size_t i = 0; i < tasked.size(); ++i) {
    const int64_t step = tasked[i]["step"];
    EXPECT_EQ(tasked[i]["train_loss"], plain[i]["train_loss"]) << step;
    EXPECT_EQ(tasked[i]["val_loss"], plain[i]["val_loss"]) << step;
    EXPECT_FALSE(plain[i].contains("tasks"));
    ASSERT_EQ(tasked[i].contains("tasks"), step % 4 == 0) << step;
    if (step % 4 == 0) EXPECT_EQ(tasked[i]["tasks"]["pattern"]["n"], 10) << step;
  }
  const auto final_json = nlohmann::json::parse(std::ifstream(dir_ / "tasked/final.json"));
  EXPECT_EQ(final_json["tasks"], tasked.back()["tasks"]);
  EXPECT_FALSE(nlohmann::json::parse(std::ifstream(dir_ / "plain/final.json")).contains("tasks"));
  auto model = open_model(dir_ / "tasked");  // non-const: the scorer runs its forward
  const auto task = read_task_file(dir_ / "pattern.jsonl", 64, 32);
  const auto counts = score_task(*model.model, task, torch::kCPU, false, 0, 1);
  EXPECT_EQ(final_json["tasks"]["pattern"]["acc"].get<double>(), counts.correct / 10.0);
  EXPECT_EQ(final_json["tasks"]["pattern"]["acc_norm"].get<double>(), counts.correct_norm / 10.0);
  EXPECT_EQ(final_json["tasks"]["pattern"]["fingerprint"], fmt::format("{:016x}", task.fingerprint));
  // Tasks added on resume: scored from then on.
  TrainOptions stop;
  stop.stop_after_steps = 5;
  ASSERT_EQ(train(config("later"), stop).status, TrainStatus::interrupted);
  ASSERT_EQ(train(config("later", {with})).status, TrainStatus::finished);
  for (const auto& line : metrics(dir_ / "later"))
    EXPECT_EQ(line.contains("tasks"), line["step"] == 8 || line["step"] == 12) << line.dump();
  // A bad task file: refused naming it, no directory claimed.
  std::ofstream(dir_ / "bad.jsonl") << R"({"context": [1], "choices": [[2], [3]], "choice_chars": [1, 1], "gold": 5})" "\n";
  const auto error = error_of<DataError>([&] { train(config("bad", {"eval.tasks=[" + (dir_ / "bad.jsonl").string() + "]"})); });
  EXPECT_NE(error.find("bad.jsonl line 1: \"gold\" is 5"), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(dir_ / "bad"));
}

// data.sampling: document with eval.trigger_tokens (docs/data.md): documents separated by
// tokenizer.json's eot, every sequence starting at a document start or continuing one; the run
// resumes bit for bit, the split is logged at every evaluation and in final.json and changes
// nothing trained; without a known separator the run is refused before its directory is claimed.
TEST_F(TrainTest, DocumentAlignedWindowsResumeExactlyAndTheLossSplitsByTrigger) {
  fs::create_directories(dir_ / "docs");
  auto documents = [](size_t n, uint32_t seed) {  // documents of 5 to 40 tokens after an eot of 63
    std::mt19937 rng(seed);
    auto body = patterned_tokens(n, seed);
    std::vector<uint16_t> out;
    for (size_t i = 0; i < body.size();) {
      out.push_back(63);
      for (size_t len = 4 + rng() % 36; len > 0 && i < body.size(); --len) out.push_back(body[i++] % 63);
    }
    return out;
  };
  write_shard(dir_ / "docs/d_val_000000.bin", documents(4096, 1));
  write_shard(dir_ / "docs/d_train_000001.bin", documents(40000, 2));
  std::ofstream(dir_ / "docs/tokenizer.json") << R"({"tokenizer": "bytes", "vocab_size": 64, "eot": 63, "source": "test"})";
  const std::vector<std::string> doc = {"data.train=" + (dir_ / "docs/d_train_*.bin").string(),
                                        "data.val=" + (dir_ / "docs/d_val_*.bin").string(), "data.sampling=document"};
  auto with = doc;
  with.push_back("eval.trigger_tokens=[0, 3, 6]");
  ASSERT_EQ(train(config("plain", doc)).status, TrainStatus::finished);
  const auto straight = train(config("split", with));
  ASSERT_EQ(straight.status, TrainStatus::finished);
  TrainOptions stop;
  stop.stop_after_steps = 5;
  ASSERT_EQ(train(config("resumed", with), stop).status, TrainStatus::interrupted);
  ASSERT_EQ(train(config("resumed", with)).final_val_loss, straight.final_val_loss);

  const auto plain = metrics(dir_ / "plain"), split = metrics(dir_ / "split"), resumed = metrics(dir_ / "resumed");
  ASSERT_EQ(split.size(), 12u);
  ASSERT_EQ(resumed.size(), 12u);
  for (size_t i = 0; i < split.size(); ++i) {
    const int64_t step = split[i]["step"];
    EXPECT_EQ(split[i]["train_loss"], plain[i]["train_loss"]) << step;
    EXPECT_EQ(split[i]["val_loss"], plain[i]["val_loss"]) << step;
    EXPECT_EQ(split[i]["train_loss"], resumed[i]["train_loss"]) << step;
    EXPECT_FALSE(plain[i].contains("val_loss_trigger"));
    ASSERT_EQ(split[i].contains("val_loss_trigger"), step % 4 == 0) << step;
    ASSERT_EQ(resumed[i].contains("val_loss_trigger"), step % 4 == 0) << step;
    if (step % 4 != 0) continue;
    EXPECT_EQ(split[i].at("val_loss_trigger"), resumed[i].at("val_loss_trigger")) << step;
    EXPECT_EQ(split[i].at("val_loss_other"), resumed[i].at("val_loss_other")) << step;
    const double trig = split[i]["val_loss_trigger"], other = split[i]["val_loss_other"], all = split[i]["val_loss"];
    EXPECT_LT(std::min(trig, other), all + 1e-9) << step;  // the whole is a mix of its two parts
    EXPECT_GT(std::max(trig, other), all - 1e-9) << step;
  }
  const auto final_json = nlohmann::json::parse(std::ifstream(dir_ / "split/final.json"));
  EXPECT_EQ(final_json["val_loss_trigger"], split.back()["val_loss_trigger"]);
  EXPECT_EQ(final_json["val_loss_other"], split.back()["val_loss_other"]);
  EXPECT_FALSE(nlohmann::json::parse(std::ifstream(dir_ / "plain/final.json")).contains("val_loss_trigger"));
  // The same data without the option: another order, another validation set.
  auto random = doc;
  random.back() = "data.sampling=random";
  EXPECT_NE(train(config("random", random)).final_val_loss, straight.final_val_loss);

  // The shards of the fixture have a tokenizer.json without eot: refused, naming the pattern.
  const auto error = error_of<DataError>([&] { train(config("refused", {"data.sampling=document"})); });
  EXPECT_NE(error.find((dir_ / "data/*_train_*.bin").string() + ": data.sampling: document"), std::string::npos) << error;
  EXPECT_NE(error.find("names no \"eot\""), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(dir_ / "refused"));
}

TEST_F(TrainTest, ValidationLossFalls) {
  train(config("a", {"train.max_steps=24"}));
  std::vector<double> val;
  for (const auto& line : metrics(dir_ / "a"))
    if (!line["val_loss"].is_null()) val.push_back(line["val_loss"]);
  ASSERT_GE(val.size(), 3u);
  EXPECT_LT(val.back(), val.front() - 0.3) << "nats/token";
  EXPECT_LT(val.front(), std::log(64.0) + 0.1);  // starts near uniform over the vocabulary
}

TEST_F(TrainTest, ResumeWithADifferentConfigIsRefusedListingKeys) {
  TrainOptions stop;
  stop.stop_after_steps = 3;
  train(config("a"), stop);
  const auto msg = error_of<TrainError>([&] { train(config("a", {"optim.lr=0.02", "seed=9"})); });
  EXPECT_NE(msg.find("optim.lr"), std::string::npos) << msg;
  EXPECT_NE(msg.find("seed"), std::string::npos) << msg;
  EXPECT_NE(msg.find((dir_ / "a").string()), std::string::npos) << msg;
  // The step budget may change: the run continues to the new budget.
  EXPECT_EQ(train(config("a", {"train.max_steps=6"})).step, 6);
}

TEST_F(TrainTest, ForeignDirectoryIsRefusedAndLeftUntouched) {
  fs::create_directories(dir_ / "notarun");
  std::ofstream(dir_ / "notarun/precious.txt") << "keep me";
  const auto msg = error_of<TrainError>([&] { train(config("notarun")); });
  EXPECT_NE(msg.find("notarun"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no config.yaml"), std::string::npos) << msg;
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "notarun"), fs::directory_iterator()), 1);
}

TEST_F(TrainTest, CorruptNewestCheckpointFallsBackToThePreviousOne) {
  TrainOptions stop;
  stop.stop_after_steps = 6;  // checkpoints at 3 and 6
  train(config("a"), stop);
  const auto ckpts = RunDir(dir_ / "a").checkpoints();
  ASSERT_EQ(ckpts.back().step, 6);
  fs::resize_file(ckpts.back().dir / "model.safetensors", 100);  // truncate the newest
  const auto resumed = train(config("a"));
  EXPECT_EQ(resumed.status, TrainStatus::finished);
  const auto lines = metrics(dir_ / "a");
  ASSERT_EQ(lines.size(), 12u);  // steps 4..6 were dropped from the log and redone
  const auto straight = train(config("ref"));
  EXPECT_EQ(straight.final_val_loss, resumed.final_val_loss);
}

TEST_F(TrainTest, NonFiniteLossStopsAndKeepsTheLastGoodCheckpoint) {
  const auto msg = error_of<TrainError>([&] {
    train(config("a", {"optim.lr=1e30", "optim.warmup_steps=0", "optim.grad_clip=0", "checkpoint.every=1"}));
  });
  EXPECT_NE(msg.find("non-finite training loss at step"), std::string::npos) << msg;
  const auto ckpts = RunDir(dir_ / "a").checkpoints();
  ASSERT_FALSE(ckpts.empty());
  EXPECT_NO_THROW(load_checkpoint(ckpts.back().dir));
}

// A gradient element planted at step 3 (0-based 2) by the test hook.
TrainOptions plant_gradient(float value, int64_t at_step = 2) {
  TrainOptions options;
  options.after_backward = [value, at_step](GPTImpl& model, int64_t step) {
    if (step == at_step) model.named_parameters()["h.0.mlp.c_fc.weight"].mutable_grad()[1][2] = value;
  };
  return options;
}

// Every checkpoint under a final name loads and holds finite weights.
void expect_all_checkpoints_good(const fs::path& run) {
  for (const auto& c : RunDir(run).checkpoints()) {
    const auto ckpt = load_checkpoint(c.dir);
    for (const auto& [name, w] : ckpt.weights)
      EXPECT_TRUE(torch::isfinite(w).all().item<bool>()) << c.dir << " " << name;
  }
}

TEST_F(TrainTest, NonFiniteGradientStopsBeforeTheUpdate) {
  const std::vector<std::pair<float, std::string>> cases = {{INFINITY, "1"}, {-INFINITY, "0"}, {NAN, "1"}, {NAN, "0"}};
  for (const auto& [value, clip] : cases) {
    const std::string run = "clip" + clip + "_" + std::to_string(std::isnan(value) ? 0 : int(value > 0) + 1);
    SCOPED_TRACE(run);
    const auto msg = error_of<TrainError>([&] {
      train(config(run, {"checkpoint.every=1", "optim.grad_clip=" + clip}), plant_gradient(value));
    });
    EXPECT_NE(msg.find(std::isnan(value) ? "non-finite gradient norm (nan) at step 3"
                                         : "non-finite gradient norm (inf) at step 3"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("step_000002 (step 2), is kept"), std::string::npos) << msg;
    EXPECT_EQ(RunDir(dir_ / run).checkpoints().back().step, 2);
    expect_all_checkpoints_good(dir_ / run);
  }
}

// Gradients 1e25 times their size at step 3: their float32 sum of squares overflows, yet the norm
// logged is the float64 one, clipping brings them to the limit and the run finishes finite.
TEST_F(TrainTest, HugeFiniteGradientsAreClippedNotZeroedOrNaN) {
  double planted_norm = 0.0;
  TrainOptions options;
  options.after_backward = [&](GPTImpl& model, int64_t step) {
    if (step != 2) return;
    double sum = 0.0;
    for (auto& p : model.parameters()) {
      p.mutable_grad().mul_(1e25f);
      sum += p.grad().to(torch::kDouble).square().sum().item<double>();
    }
    planted_norm = std::sqrt(sum);
  };
  const auto result = train(config("a"), options);
  EXPECT_EQ(result.status, TrainStatus::finished);
  EXPECT_TRUE(std::isfinite(result.final_val_loss));
  const auto lines = metrics(dir_ / "a");
  ASSERT_TRUE(lines[2]["grad_norm"].is_number()) << lines[2];
  EXPECT_NEAR(lines[2]["grad_norm"].get<double>() / planted_norm, 1.0, 1e-9);
  expect_all_checkpoints_good(dir_ / "a");
}

// A weight set to NaN after step 4's gradients: step 4's update makes the model NaN, its evaluation
// says so, and the run stops without saving step 4 and without final.json.
TEST_F(TrainTest, NonFiniteValidationLossStopsWithoutSaving) {
  TrainOptions options;
  options.after_backward = [](GPTImpl& model, int64_t step) {
    torch::NoGradGuard no_grad;
    if (step == 3) model.named_parameters()["ln_f.weight"][0] = NAN;
  };
  const auto msg = error_of<TrainError>([&] {
    train(config("a", {"train.max_steps=4", "checkpoint.every=1", "eval.every=4"}), options);
  });
  EXPECT_NE(msg.find("non-finite validation loss at step 4"), std::string::npos) << msg;
  EXPECT_EQ(RunDir(dir_ / "a").checkpoints().back().step, 3);
  expect_all_checkpoints_good(dir_ / "a");
  EXPECT_FALSE(fs::exists(dir_ / "a/final.json"));
}

// The same at a step without evaluation: the save refuses the NaN weights.
TEST_F(TrainTest, NonFiniteWeightsAreNeverSaved) {
  TrainOptions options;
  options.after_backward = [](GPTImpl& model, int64_t step) {
    torch::NoGradGuard no_grad;
    if (step == 2) model.named_parameters()["ln_f.weight"][0] = NAN;
  };
  const auto msg = error_of<CheckpointError>([&] { train(config("a", {"checkpoint.every=1"}), options); });
  EXPECT_NE(msg.find("tensor 'ln_f.weight' holds NaN or infinity"), std::string::npos) << msg;
  EXPECT_EQ(RunDir(dir_ / "a").checkpoints().back().step, 2);
  expect_all_checkpoints_good(dir_ / "a");
}

// A state.json edited after the save (its step 6 made 5: a skewed schedule) is refused by its
// checksum; the run resumes from the checkpoint before and ends as an uninterrupted one.
TEST_F(TrainTest, EditedStateJsonFallsBackAndFinishesIdentically) {
  TrainOptions stop;
  stop.stop_after_steps = 6;  // checkpoints at 3 and 6
  train(config("a"), stop);
  const fs::path state = RunDir(dir_ / "a").checkpoint_path(6) / "state.json";
  std::string text = testing::file_text(state);
  text.replace(text.find("\"step\": 6"), 9, "\"step\": 5");
  testing::write_text_file(state, text);
  const auto resumed = train(config("a"));
  EXPECT_EQ(metrics(dir_ / "a").size(), 12u);
  EXPECT_EQ(resumed.final_val_loss, train(config("ref")).final_val_loss);
}

// Mistyped lines planted in metrics.jsonl (a string step, an array, an activation record of the wrong
// shape) neither stop the resume, which drops them with a warning and finishes as an uninterrupted
// run, nor the report, which reads the rest of the log and names each skipped line by file:line.
TEST_F(TrainTest, AMistypedMetricsLineBlocksNeitherTheResumeNorTheReport) {
  TrainOptions stop;
  stop.stop_after_steps = 6;  // checkpoints at 3 and 6
  train(config("a"), stop);
  const fs::path file = RunDir(dir_ / "a").metrics_file();
  std::string text = testing::file_text(file);
  const size_t second = text.find('\n') + 1;
  text.replace(text.find("\"step\":2", second), 8, "\"step\":\"2\"");  // line 2
  text += "[6, 7]\n{\"type\": \"activations\", \"step\": \"6\", \"layers\": 0}\n";  // lines 7 and 8
  testing::write_text_file(file, text);
  const auto history = read_metrics(file);  // what report and the curves read
  ASSERT_EQ(history.skipped.size(), 3u);
  for (const auto& [i, line] : {std::pair{0, 2}, std::pair{1, 7}, std::pair{2, 8}})
    EXPECT_EQ(history.skipped[i].rfind(file.string() + ":" + std::to_string(line) + ": ", 0), 0u) << history.skipped[i];
  EXPECT_NE(history.skipped[0].find("\"step\" has the wrong type (\"2\", not an integer)"), std::string::npos)
      << history.skipped[0];
  EXPECT_EQ(history.training.size(), 5u);
  const auto runs = collect_runs(dir_);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_FALSE(runs[0].curve.empty());

  const auto resumed = train(config("a"));
  ASSERT_EQ(resumed.status, TrainStatus::finished);
  EXPECT_EQ(resumed.final_val_loss, train(config("ref")).final_val_loss);
  const auto lines = metrics(dir_ / "a");  // the planted lines dropped, every other step once
  ASSERT_EQ(lines.size(), 11u);
  EXPECT_EQ(lines[1]["step"], 3);
}

// Damage behind intact checksums that only restoring sees (a renamed optimizer tensor, an RNG state
// of another size, other model dimensions) makes the resume fall back, not fail.
TEST_F(TrainTest, RestoreErrorsFallBackToThePreviousCheckpoint) {
  const double straight = train(config("ref")).final_val_loss;
  const std::vector<std::function<void(const fs::path&)>> damages = {
      [](const fs::path& d) {
        testing::edit_tensors(d, "optimizer.safetensors", [](TensorMap& t, SafetensorsMetadata&) {
          t["exp_avg.wte.weights"] = t.at("exp_avg.wte.weight");
          t.erase("exp_avg.wte.weight");
        });
      },
      [](const fs::path& d) {
        testing::reseal(d, [](nlohmann::json& j) { j["rng"]["cpu"] = j["rng"]["cpu"].get<std::string>() + "00"; });
      },
      [](const fs::path& d) { testing::reseal(d, [](nlohmann::json& j) { j["model"]["n_head"] = 4; }); },
  };
  for (size_t i = 0; i < damages.size(); ++i) {
    SCOPED_TRACE(i);
    const std::string run = "r" + std::to_string(i);
    TrainOptions stop;
    stop.stop_after_steps = 6;
    train(config(run), stop);
    damages[i](RunDir(dir_ / run).checkpoint_path(6));
    const auto resumed = train(config(run));
    EXPECT_EQ(resumed.status, TrainStatus::finished);
    EXPECT_EQ(metrics(dir_ / run).size(), 12u);
    EXPECT_EQ(resumed.final_val_loss, straight);
  }
}

// A resume under a larger step budget re-shapes the cosine of the steps to come: metrics.jsonl
// records it with the next step's learning rate under both budgets.
TEST_F(TrainTest, BudgetChangeOnResumeIsRecorded) {
  TrainOptions stop;
  stop.stop_after_steps = 5;
  train(config("a"), stop);
  const auto cfg = config("a", {"train.max_steps=24"});
  train(cfg);
  std::vector<nlohmann::json> records;
  for (const auto& line : metrics(dir_ / "a"))
    if (line.value("type", "") == "schedule_change") records.push_back(line);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0]["step"], 5);
  EXPECT_EQ(records[0]["total_steps_before"], 12);
  EXPECT_EQ(records[0]["total_steps"], 24);
  EXPECT_DOUBLE_EQ(records[0]["next_lr_before"].get<double>(), learning_rate(cfg.optim, 5, 12));
  EXPECT_DOUBLE_EQ(records[0]["next_lr"].get<double>(), learning_rate(cfg.optim, 5, 24));
  EXPECT_NE(records[0]["next_lr"], records[0]["next_lr_before"]);
  // The same budget again: nothing more to record.
  train(config("a", {"train.max_steps=24"}));
  size_t count = 0;
  for (const auto& line : metrics(dir_ / "a")) count += line.value("type", "") == "schedule_change";
  EXPECT_EQ(count, 1u);
}

TEST_F(TrainTest, MissingShardsNameThePattern) {
  const auto msg = error_of<DataError>([&] { train(config("a", {"data.train=" + (dir_ / "nothing_*.bin").string()})); });
  EXPECT_NE(msg.find("nothing_*.bin"), std::string::npos) << msg;
  // The refused start claimed nothing, so the corrected command runs in the same out_dir.
  EXPECT_FALSE(fs::exists(dir_ / "a/config.yaml"));
  EXPECT_EQ(train(config("a", {"train.max_steps=2"})).status, TrainStatus::finished);
}

TEST_F(TrainTest, RefusedBranchLeavesNoDirectoryAndTheCorrectedRetryRuns) {
  const TrainOptions branch = branch_of_run_stopped_at_6();
  // The source's model is combo2: a sink_logit branch of it is refused, naming the arm.
  const auto msg = error_of<std::exception>([&] { train(config("b", {"model.arm=sink_logit"}), branch); });
  EXPECT_NE(msg.find("arm"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(dir_ / "b"));
  // A branch whose step count ends at or before the checkpoint's step has nothing to train.
  const auto early = error_of<TrainError>([&] { train(config("b", {"train.max_steps=6"}), branch); });
  EXPECT_NE(early.find("step 6"), std::string::npos) << early;
  EXPECT_FALSE(fs::exists(dir_ / "b"));
  EXPECT_EQ(train(config("b", {"optim.weight_decay=0"}), branch).status, TrainStatus::finished);
}

TEST_F(TrainTest, BranchRunStartsFromTheCheckpointAndRecordsItsParent) {
  const TrainOptions branch = branch_of_run_stopped_at_6();
  const auto result = train(config("b", {"optim.weight_decay=0"}), branch);
  EXPECT_EQ(result.status, TrainStatus::finished);
  EXPECT_EQ(metrics(dir_ / "b").front()["step"], 7);
  const auto final_json = nlohmann::json::parse(std::ifstream(dir_ / "b/final.json"));
  EXPECT_EQ(final_json["parent"]["step"], 6);
}

// The keep/remove-decay branch (docs/retention.md) rests on this: the branch's first step is exactly one AdamW step
// from the parent's full state (weights, moments, step count, data position) with the overridden
// weight decay. The expected step is computed here from the loaded parent checkpoint by hand.
TEST_F(TrainTest, BranchFirstStepIsAnAdamWStepWithoutDecayFromTheParentsFullState) {
  TrainOptions stop;
  stop.stop_after_steps = 6;
  train(config("a", {"optim.grad_clip=0"}), stop);
  TrainOptions branch;
  branch.branch_from = RunDir(dir_ / "a").checkpoint_path(6);
  branch.stop_after_steps = 1;
  const auto cfg = config("b", {"optim.weight_decay=0", "optim.grad_clip=0"});
  train(cfg, branch);
  const auto parent = load_checkpoint(RunDir(dir_ / "a").checkpoint_path(6));
  const auto child = load_checkpoint(RunDir(dir_ / "b").checkpoint_path(7));
  ASSERT_TRUE(child.state.trainer.parent.has_value());
  EXPECT_EQ(child.state.trainer.parent->step, 6);
  EXPECT_EQ(child.state.trainer.parent->checkpoint, RunDir(dir_ / "a").checkpoint_path(6).string());
  EXPECT_EQ(child.state.data_position, 7);
  EXPECT_EQ(child.state.tokens_seen, parent.state.tokens_seen + 128);
  EXPECT_EQ(child.optimizer_groups[0]["weight_decay"], 0.0);
  EXPECT_EQ(parent.optimizer_groups[0]["weight_decay"], 0.1);

  // The gradient of step 7 (index 6) on the parent's weights, accumulated over 2 micro-batches.
  GPT model(parent.model_config);
  restore_model(parent, *model);
  BatchSampler sampler(std::make_shared<const ShardSet>(ShardSet::open(cfg.data.train, 64)),
                       BatchSamplerOptions{cfg.train.batch_size, cfg.train.seq_len, cfg.seed});
  for (int64_t micro = 0; micro < 2; ++micro) {
    const auto batch = sampler.batch(6, micro * cfg.train.batch_size);
    (lm_loss(model->forward(batch.x), batch.y) / 2.0).backward();
  }
  const double lr = learning_rate(cfg.optim, 6, cfg.total_steps());
  const double b1 = cfg.optim.beta1, b2 = cfg.optim.beta2, eps = cfg.optim.eps;
  double worst = 0.0, decay_effect = 0.0;
  for (const auto& item : model->named_parameters()) {
    const auto& name = item.key();
    const auto g = item.value().grad().to(torch::kDouble);
    const auto w0 = parent.weights.at(name).to(torch::kDouble);
    const auto m = b1 * parent.optimizer.at("exp_avg." + name).to(torch::kDouble) + (1 - b1) * g;
    const auto v = b2 * parent.optimizer.at("exp_avg_sq." + name).to(torch::kDouble) + (1 - b2) * g * g;
    const double t = double(parent.optimizer.at("step." + name).item<int64_t>() + 1);
    const auto update = lr * (m / (1 - std::pow(b1, t))) / ((v / (1 - std::pow(b2, t))).sqrt() + eps);
    const auto w1 = child.weights.at(name).to(torch::kDouble);
    worst = std::max(worst, (w1 - (w0 - update)).abs().max().item<double>());
    EXPECT_LT((child.optimizer.at("exp_avg." + name).to(torch::kDouble) - m).abs().max().item<double>(), 1e-7) << name;
    if (model->decays(name)) decay_effect = std::max(decay_effect, (lr * 0.1 * w0).abs().max().item<double>());
  }
  EXPECT_LT(worst, 1e-6);
  EXPECT_GT(decay_effect, 20 * 1e-6);  // had the branch kept lambda = 0.1, the check above would fail
}

// Activation tracking is one forward pass that changes nothing the run computes: with it on,
// and interrupted, a run ends bit-identical to one without it; the records land at the steps asked;
// log-spaced and keep_every checkpoints survive retention.
TEST_F(TrainTest, ActivationTrackingChangesNothingAndSurvivesResume) {
  const auto plain = train(config("a"));
  const std::vector<std::string> tracking = {"track.activations.every=5", "track.activations.sequences=3",
                                             "checkpoint.log_spaced=true", "checkpoint.log_spaced_until=4",
                                             "checkpoint.keep_every=3"};
  TrainOptions stop;
  stop.stop_after_steps = 5;
  ASSERT_EQ(train(config("b", tracking), stop).status, TrainStatus::interrupted);
  auto resumed_sets = tracking;
  resumed_sets[0] = "track.activations.every=2";  // observation keys may change on resume
  const auto tracked = train(config("b", resumed_sets));
  ASSERT_EQ(tracked.status, TrainStatus::finished);
  EXPECT_EQ(plain.final_val_loss, tracked.final_val_loss);
  const auto wa = open_model(dir_ / "a"), wb = open_model(dir_ / "b");
  for (const auto& item : wa.model->named_parameters())
    EXPECT_TRUE(torch::equal(item.value(), wb.model->named_parameters()[item.key()])) << item.key();

  std::vector<int64_t> probe_steps;
  nlohmann::json last;
  int64_t step_lines = 0;
  for (const auto& line : metrics(dir_ / "b")) {
    if (line.value("type", "") == "activations") {
      probe_steps.push_back(line["step"]);
      last = line;
    } else {
      ++step_lines;
    }
  }
  EXPECT_EQ(step_lines, 12);
  // 0 (initial), log-spaced 1 2 4, every 5 before the stop; every 2 after it; the last step
  EXPECT_EQ(probe_steps, (std::vector<int64_t>{0, 1, 2, 4, 5, 6, 8, 10, 12}));
  ASSERT_EQ(last["layers"].size(), 2u);  // layers 0 and n_layer = 1
  // Layer 0's sink state is the embedding output at position 0 of validation sequence 0.
  const int64_t token = patterned_tokens(4096, 1)[0];
  const auto emb = (wb.model->wte->weight[token] + wb.model->wpe->weight[0]).to(torch::kDouble);
  const auto expected = activation_stats(emb);
  const auto logged = activation_stats_from_json(last["layers"][0]["sink"]);
  EXPECT_NEAR(logged.max_abs, expected.max_abs, 1e-6);
  EXPECT_EQ(logged.argmax, expected.argmax);
  EXPECT_NEAR(logged.rms, expected.rms, 1e-6);

  std::vector<int64_t> kept;
  for (const auto& c : RunDir(dir_ / "b").checkpoints()) kept.push_back(c.step);
  // log-spaced 1 2 4; keep_every 3: 3 6 9 12; keep_last 2: 9 12; the stop's 5 is not kept
  EXPECT_EQ(kept, (std::vector<int64_t>{1, 2, 3, 4, 6, 9, 12}));
  const auto final_json = nlohmann::json::parse(std::ifstream(dir_ / "b/final.json"));
  EXPECT_GT(final_json["time_s"]["track"].get<double>(), 0.0);
}

TEST_F(TrainTest, TrackingMoreSequencesThanValidationHasIsRefused) {
  const auto msg = error_of<TrainError>([&] {
    train(config("a", {"track.activations.every=5", "track.activations.sequences=1000"}));
  });
  EXPECT_NE(msg.find("track.activations.sequences = 1000"), std::string::npos) << msg;
}

// `attnlab activations` on two tiny runs that differ in seed: layer 0's sink state is the embedding
// output wte[token] + wpe[0] of each checkpoint, so its dominant channel, lock-in step, Spearman
// and cross-seed Jaccard follow from the weights by hand.
TEST_F(TrainTest, ActivationsReportMatchesTheEmbeddingsByHand) {
  const std::vector<std::string> every = {"checkpoint.every=2", "checkpoint.keep_every=2", "train.max_steps=8"};
  train(config("s1", every));
  auto seed2 = every;
  seed2.push_back("seed=2");
  train(config("s2", seed2));
  ActivationScanOptions options;
  options.sequences = 2;
  options.top_k = 5;
  options.layer = 1;
  const auto report = activations_report({dir_ / "s1", dir_ / "s2"}, options);
  ASSERT_EQ(report.runs.size(), 2u);
  const int64_t token = patterned_tokens(4096, 1)[0];
  std::vector<std::vector<double>> final_abs;
  for (const auto& run : report.runs) {
    std::vector<int64_t> steps, argmax;
    std::vector<std::vector<double>> abs_rows;
    for (const auto& info : RunDir(run.dir).checkpoints()) {
      const auto m = open_model(info.dir);
      const auto emb = (m.model->wte->weight[token] + m.model->wpe->weight[0]).to(torch::kDouble).abs();
      abs_rows.emplace_back(emb.data_ptr<double>(), emb.data_ptr<double>() + emb.numel());
      steps.push_back(info.step);
      argmax.push_back(emb.argmax().item<int64_t>());
    }
    ASSERT_EQ(run.checkpoints.size(), steps.size());
    EXPECT_EQ(steps, (std::vector<int64_t>{2, 4, 6, 8}));
    for (size_t k = 0; k < steps.size(); ++k) {
      EXPECT_EQ(run.checkpoints[k].step, steps[k]);
      EXPECT_EQ(run.checkpoints[k].capture.layers[0].sink.argmax, argmax[k]) << "step " << steps[k];
      EXPECT_NEAR(run.spearman_final[0][k], spearman(abs_rows[k], abs_rows.back()), 1e-9);
    }
    EXPECT_DOUBLE_EQ(run.spearman_final[0].back(), 1.0);
    size_t first = argmax.size() - 1;  // lock-in by a plain backward loop
    while (first > 0 && argmax[first - 1] == argmax.back()) --first;
    EXPECT_EQ(run.lock_in[0], steps[first]);
    EXPECT_EQ(run.layer, 1);
    EXPECT_EQ(run.final_tokens.tokens_abs.size(0), 16);  // seq_len positions of one sequence
    final_abs.push_back(abs_rows.back());
  }
  ASSERT_EQ(report.overlaps.size(), 1u);
  auto top5 = [](const std::vector<double>& v) {  // sort channel indices by descending |x_c|
    std::vector<int64_t> idx(v.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
    return std::set<int64_t>(idx.begin(), idx.begin() + 5);
  };
  const auto a = top5(final_abs[0]), b = top5(final_abs[1]);
  size_t common = 0;
  for (auto c : a) common += b.count(c);
  EXPECT_DOUBLE_EQ(report.overlaps[0].jaccard[0], double(common) / double(10 - common));
  const auto j = activations_json(report);
  EXPECT_EQ(j["runs"][0]["maps"]["sink_heatmap"]["steps"].size(), 4u);
  EXPECT_EQ(activations_csv(report).at("activations.csv").find("run,arm,seed,step,layer,state"), 0u);
}

// A run that restarts from nothing (no checkpoint left) logs the initial probe once, not twice.
TEST_F(TrainTest, FreshRestartLogsTheInitialProbeOnce) {
  const std::vector<std::string> sets = {"track.activations.every=6", "train.max_steps=6"};
  train(config("a", sets));
  fs::remove_all(dir_ / "a/checkpoints");
  fs::remove(dir_ / "a/final.json");
  train(config("a", sets));
  std::vector<int64_t> probes;
  int64_t steps = 0;
  for (const auto& line : metrics(dir_ / "a")) {
    if (line.value("type", "") == "activations") probes.push_back(line["step"]);
    else ++steps;
  }
  EXPECT_EQ(probes, (std::vector<int64_t>{0, 6}));
  EXPECT_EQ(steps, 6);
}

}  // namespace
}  // namespace attnlab
