// Downstream tasks (docs/downstream.md): the task file's refusals, and lm-eval's multiple-choice
// scorer held to a plain loop over the model's log-softmax (one unpadded forward per choice, the
// log-softmax summed in double by hand), with acc, acc_norm and the tie rule worked out from it.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <random>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "attnlab/init.h"
#include "attnlab/model.h"
#include "attnlab/shards.h"
#include "attnlab/task_file.h"
#include "attnlab/task_scoring.h"
#include "unit/shard_files.h"

namespace attnlab {
namespace {

using testing::TempDir;

constexpr int64_t kVocab = 50, kBlock = 16;

GPT tiny_model(const std::string& arm) {
  ModelConfig cfg;
  cfg.arm = arm;
  cfg.n_layer = 2, cfg.n_head = 2, cfg.d_model = 16, cfg.block_size = kBlock, cfg.vocab_size = kVocab;
  GPT model(cfg);
  init_parameters(*model, 11);
  return model;
}

// lm-eval's definition, spelled out: the window (context + choice)[-(block + 1):], the model run on
// all of it but its last token, and log p(choice token k) at the window position before it; the
// log-softmax as max + log(sum exp) in double over the vocabulary.
double plain_loglikelihood(GPTImpl& model, const TaskItem& item, size_t c) {
  std::vector<int64_t> all(item.context);
  all.insert(all.end(), item.choices[c].begin(), item.choices[c].end());
  std::vector<int64_t> window(all.end() - std::min<int64_t>(all.size(), kBlock + 1), all.end());
  torch::NoGradGuard no_grad;
  const auto input = torch::tensor(std::vector<int64_t>(window.begin(), window.end() - 1)).unsqueeze(0);
  const auto logits = model.forward(input)[0].to(torch::kDouble);
  const int64_t n = item.choices[c].size(), first = int64_t(window.size()) - 1 - n;
  double sum = 0.0;
  for (int64_t k = 0; k < n; ++k) {
    const auto row = logits[first + k];
    double max = -std::numeric_limits<double>::infinity(), total = 0.0;
    for (int64_t v = 0; v < kVocab; ++v) max = std::max(max, row[v].item<double>());
    for (int64_t v = 0; v < kVocab; ++v) total += std::exp(row[v].item<double>() - max);
    sum += row[item.choices[c][k]].item<double>() - (max + std::log(total));
  }
  return sum;
}

int64_t first_max(const std::vector<double>& v) {
  int64_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[best]) best = int64_t(i);
  return best;
}

// Items of every shape: a short context, one longer than the block (cut from the left), choices of
// one to block_size tokens, two to four choices.
std::vector<TaskItem> items() {
  std::vector<TaskItem> out;
  std::mt19937 rng(5);
  for (int i = 0; i < 12; ++i) {
    TaskItem item;
    const int context = i % 3 == 0 ? 30 : 1 + i % 5;  // 30 > block_size: truncated
    for (int t = 0; t < context; ++t) item.context.push_back(rng() % kVocab);
    const int choices = 2 + i % 3;
    for (int c = 0; c < choices; ++c) {
      const int len = i == 4 && c == 0 ? kBlock : 1 + (i + c) % 4;
      item.choices.emplace_back();
      for (int t = 0; t < len; ++t) item.choices.back().push_back(rng() % kVocab);
      item.choice_chars.push_back(1 + (3 * c + i) % 7);
    }
    item.gold = i % choices;
    out.push_back(item);
  }
  return out;
}

TEST(TaskScoring, LoglikelihoodsEqualAPlainLoopForEveryArmShape) {
  for (const std::string arm : {"baseline", "sink_token", "combo2"}) {
    SCOPED_TRACE(arm);
    auto model = tiny_model(arm);
    for (const auto& item : items()) {
      const auto got = choice_loglikelihoods(*model, item, torch::kCPU, false);
      ASSERT_EQ(got.size(), item.choices.size());
      for (size_t c = 0; c < got.size(); ++c) EXPECT_NEAR(got[c], plain_loglikelihood(*model, item, c), 2e-5);
    }
  }
}

TEST(TaskScoring, AccuracyAndNormalisedAccuracyCountWhatThePlainLoopPicks) {
  auto model = tiny_model("baseline");
  Task task{"t", "t.jsonl", items(), 77};
  int64_t correct = 0, correct_norm = 0;
  for (const auto& item : task.items) {
    std::vector<double> ll, per_char;
    for (size_t c = 0; c < item.choices.size(); ++c) {
      ll.push_back(plain_loglikelihood(*model, item, c));
      per_char.push_back(ll.back() / double(item.choice_chars[c]));
    }
    correct += first_max(ll) == item.gold;
    correct_norm += first_max(per_char) == item.gold;
  }
  // One item made so that the two metrics disagree: gold is the likelier choice (acc counts it), but
  // the other has 1000 times the characters, so per character it wins (both loglikelihoods are
  // negative: |l_other| / 1000 < |l_gold|), and acc_norm does not count it.
  TaskItem split = task.items[1];
  split.choices.resize(2), split.choice_chars.resize(2);
  const double l0 = plain_loglikelihood(*model, split, 0), l1 = plain_loglikelihood(*model, split, 1);
  ASSERT_NE(l0, l1);
  split.gold = l0 > l1 ? 0 : 1;
  split.choice_chars = {1000, 1000};
  split.choice_chars[split.gold] = 1;
  ASSERT_LT(std::max(l0, l1), 0.0);
  ASSERT_GT(std::min(l0, l1) / 1000, std::max(l0, l1));
  task.items.push_back(split);
  correct += 1;
  const auto counts = score_task(*model, task, torch::kCPU, false, 0, 1);
  EXPECT_EQ(counts.n, int64_t(task.items.size()));
  EXPECT_EQ(counts.correct, correct);
  EXPECT_EQ(counts.correct_norm, correct_norm);
  // Shards (data-parallel ranks) add up to the whole.
  TaskCounts sum;
  for (int64_t shard = 0; shard < 3; ++shard) {
    const auto part = score_task(*model, task, torch::kCPU, false, shard, 3);
    sum.correct += part.correct, sum.correct_norm += part.correct_norm, sum.n += part.n;
  }
  EXPECT_EQ(sum.correct, counts.correct);
  EXPECT_EQ(sum.correct_norm, counts.correct_norm);
  EXPECT_EQ(sum.n, counts.n);
  const auto a = task_accuracy(task, counts);
  EXPECT_DOUBLE_EQ(a.acc, double(counts.correct) / double(counts.n));
  EXPECT_DOUBLE_EQ(a.acc_norm, double(counts.correct_norm) / double(counts.n));
  EXPECT_EQ(a.fingerprint, 77u);
  EXPECT_THROW(score_task(*model, task, torch::kCPU, false, 3, 3), std::invalid_argument);
}

TEST(TaskScoring, TiesGoToTheLowestIndexAndNaNIsNeverPicked) {
  EXPECT_EQ(pick_choice({-2.0, -1.0, -1.0}), 1);
  EXPECT_EQ(pick_choice({-1.0, -1.0}), 0);
  EXPECT_EQ(pick_choice({std::nan(""), -5.0, -7.0}), 1);
  EXPECT_EQ(pick_choice({std::nan(""), std::nan("")}), 0);
  EXPECT_THROW(pick_choice({}), std::invalid_argument);
  // Two identical choices score identically: the first is picked, whichever is gold.
  auto model = tiny_model("baseline");
  TaskItem same{{1, 2, 3}, {{4, 5}, {4, 5}}, {2, 2}, 1};
  Task task{"same", "same.jsonl", {same}, 0};
  const auto counts = score_task(*model, task, torch::kCPU, false, 0, 1);
  EXPECT_EQ(counts.correct, 0);
  EXPECT_EQ(counts.correct_norm, 0);
}

// ---- the task file ---------------------------------------------------------------------------

std::string write(const TempDir& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir.file(name)) << text;
  return dir.file(name);
}

std::string refusal(const std::string& path) {
  try {
    read_task_file(path, kVocab, kBlock);
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

TEST(TaskFile, ReadsItemsSkipsBlankLinesAndFingerprintsTheirContent) {
  TempDir dir;
  const auto path = write(dir, "copa.jsonl",
                          R"({"context": [1, 2], "choices": [[3], [4, 5]], "choice_chars": [4, 9], "gold": 1})" "\n\n"
                          R"({"gold": 0, "choice_chars": [1, 1, 2], "choices": [[7], [8], [9, 9]], "context": [49]})" "\n");
  const auto task = read_task_file(path, kVocab, kBlock);
  EXPECT_EQ(task.name, "copa");
  ASSERT_EQ(task.items.size(), 2u);
  EXPECT_EQ(task.items[0].context, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(task.items[0].choices[1], (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(task.items[0].choice_chars, (std::vector<int64_t>{4, 9}));
  EXPECT_EQ(task.items[0].gold, 1);
  EXPECT_EQ(task.items[1].choices.size(), 3u);
  // The same items in another file (keys reordered, other spacing) share the fingerprint; one id less does not.
  const auto same = write(dir, "b.jsonl",
                          R"({"choices":[[3],[4,5]],"context":[1,2],"gold":1,"choice_chars":[4,9]})" "\n"
                          R"({"context":[49],"choices":[[7],[8],[9,9]],"choice_chars":[1,1,2],"gold":0})");
  EXPECT_EQ(read_task_file(same, kVocab, kBlock).fingerprint, task.fingerprint);
  const auto other = write(dir, "c.jsonl",
                           R"({"choices":[[3],[4,5]],"context":[1,2],"gold":1,"choice_chars":[4,9]})" "\n"
                           R"({"context":[49],"choices":[[7],[8],[9]],"choice_chars":[1,1,2],"gold":0})");
  EXPECT_NE(read_task_file(other, kVocab, kBlock).fingerprint, task.fingerprint);
}

TEST(TaskFile, EveryFaultIsRefusedNamingTheFileAndLine) {
  TempDir dir;
  const std::string good = R"({"context": [1], "choices": [[2], [3]], "choice_chars": [1, 1], "gold": 0})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "not valid JSON"},
      {R"({"context": [1], "choices": [[2], [3]], "choice_chars": [1, 1]})", "lacks \"gold\""},
      {R"({"context": [1], "choices": [[2], [3]], "choice_chars": [1, 1], "gold": 0, "label": 1})", "unknown key \"label\""},
      {R"({"context": [], "choices": [[2], [3]], "choice_chars": [1, 1], "gold": 0})", "\"context\" is empty"},
      {R"({"context": [1], "choices": [[2]], "choice_chars": [1], "gold": 0})", "at least two choices"},
      {R"({"context": [1], "choices": [[2], []], "choice_chars": [1, 1], "gold": 0})", "\"choices[1]\" has 0 tokens"},
      {R"({"context": [1], "choices": [[2], [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]], "choice_chars": [1, 1], "gold": 0})",
       "\"choices[1]\" has 17 tokens"},
      {R"({"context": [50], "choices": [[2], [3]], "choice_chars": [1, 1], "gold": 0})", "token id 50, outside"},
      {R"({"context": [-1], "choices": [[2], [3]], "choice_chars": [1, 1], "gold": 0})", "token id -1, outside"},
      {R"({"context": ["a"], "choices": [[2], [3]], "choice_chars": [1, 1], "gold": 0})", "holds \"a\", not a token id"},
      {R"({"context": [1], "choices": [[2], [3]], "choice_chars": [1], "gold": 0})", "one length per choice"},
      {R"({"context": [1], "choices": [[2], [3]], "choice_chars": [1, 0], "gold": 0})", "not a positive character count"},
      {R"({"context": [1], "choices": [[2], [3]], "choice_chars": [1, 1], "gold": 2})", "\"gold\" is 2"},
      {R"({"context": [1], "choices": [[2], [3]], "choice_chars": [1, 1], "gold": 0.5})", "\"gold\" has the wrong type"},
  };
  for (const auto& [line, why] : cases) {
    const auto path = write(dir, "t.jsonl", good + "\n" + line + "\n");
    const auto error = refusal(path);
    EXPECT_NE(error.find(path + " line 2: "), std::string::npos) << line << " -> " << error;
    EXPECT_NE(error.find(why), std::string::npos) << line << " -> " << error;
  }
  EXPECT_NE(refusal(write(dir, "empty.jsonl", "\n\n")).find("holds no item"), std::string::npos);
  EXPECT_NE(refusal(dir.file("missing.jsonl")).find("missing.jsonl"), std::string::npos);
  EXPECT_NE(refusal(dir.path()).find("directory"), std::string::npos);
}

TEST(TaskFile, AccuraciesRoundTripAndOutOfRangeValuesAreRefused) {
  const TaskAccuracies tasks = {{"copa", {0.5, 0.75, 4, 18446744073709551557ULL}}, {"piqa", {1.0, 0.0, 1, 3}}};
  const auto j = to_json(tasks);
  EXPECT_EQ(j["copa"]["fingerprint"], "ffffffffffffffc5");  // 2^64 - 59, exact as a string
  const auto back = task_accuracies_from_json(j, "tasks");
  EXPECT_EQ(to_json(back), j);
  auto bad = j;
  bad["copa"]["acc"] = 1.5;
  EXPECT_THROW(task_accuracies_from_json(bad, "tasks"), std::invalid_argument);
  bad = j;
  bad["piqa"]["n"] = 0;
  EXPECT_THROW(task_accuracies_from_json(bad, "tasks"), std::invalid_argument);
  bad = j;
  bad["piqa"]["fingerprint"] = 3;
  EXPECT_THROW(task_accuracies_from_json(bad, "tasks"), std::invalid_argument);
  bad = j;
  bad["piqa"]["fingerprint"] = "xyz";
  EXPECT_THROW(task_accuracies_from_json(bad, "tasks"), std::invalid_argument);
  bad = j;
  bad["piqa"].erase("acc_norm");
  try {
    task_accuracies_from_json(bad, "tasks");
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("tasks.piqa.acc_norm"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attnlab
