// lm-eval's loglikelihood multiple choice (task_scoring.h, docs/downstream.md).
#include "attnlab/task_scoring.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>
#include <torch/torch.h>

#include "attnlab/device.h"

namespace attnlab {
namespace {

// One choice's window: the model's input ids and how many of its last positions predict the choice.
struct Window {
  std::vector<int64_t> input;
  int64_t choice_tokens = 0;
};

Window window(const std::vector<int64_t>& context, const std::vector<int64_t>& choice, int64_t block_size) {
  std::vector<int64_t> all(context);
  all.insert(all.end(), choice.begin(), choice.end());
  all.pop_back();  // the last token is only a target
  const int64_t start = std::max<int64_t>(0, int64_t(all.size()) - block_size);  // lm-eval cuts from the left
  return {std::vector<int64_t>(all.begin() + start, all.end()), int64_t(choice.size())};
}

}  // namespace

std::vector<double> choice_loglikelihoods(GPTImpl& model, const TaskItem& item, const c10::Device& device,
                                          bool autocast_bf16) {
  const int64_t block = model.config().block_size;
  std::vector<Window> windows;
  int64_t longest = 0;
  for (const auto& choice : item.choices) {
    windows.push_back(window(item.context, choice, block));
    longest = std::max<int64_t>(longest, windows.back().input.size());
  }
  auto input = torch::zeros({int64_t(windows.size()), longest}, torch::kLong);
  auto acc = input.accessor<int64_t, 2>();
  for (size_t r = 0; r < windows.size(); ++r)
    for (size_t t = 0; t < windows[r].input.size(); ++t) acc[r][t] = windows[r].input[t];
  at::Tensor logp;
  {
    torch::NoGradGuard no_grad;
    AutocastGuard autocast(device, autocast_bf16);
    logp = torch::log_softmax(model.forward(input.to(device)).to(torch::kFloat), -1).cpu();
  }
  auto lp = logp.accessor<float, 3>();
  std::vector<double> out;
  for (size_t r = 0; r < windows.size(); ++r) {
    const auto& w = windows[r];
    const int64_t len = int64_t(w.input.size()), first = len - w.choice_tokens;
    double sum = 0.0;
    for (int64_t k = 0; k < w.choice_tokens; ++k) sum += lp[r][first + k][item.choices[r][k]];
    out.push_back(sum);
  }
  return out;
}

int64_t pick_choice(const std::vector<double>& scores) {
  if (scores.empty()) throw std::invalid_argument("pick_choice: no scores");
  int64_t best = -1;
  for (size_t i = 0; i < scores.size(); ++i)
    if (!std::isnan(scores[i]) && (best < 0 || scores[i] > scores[best])) best = int64_t(i);
  return best < 0 ? 0 : best;  // all NaN: the first, as numpy's argmax
}

TaskCounts score_task(GPTImpl& model, const Task& task, const c10::Device& device, bool autocast_bf16, int64_t shard,
                      int64_t num_shards) {
  if (num_shards < 1 || shard < 0 || shard >= num_shards)
    throw std::invalid_argument(fmt::format("task shard {} of {}: need 0 <= shard < num_shards", shard, num_shards));
  TaskCounts counts;
  for (size_t i = size_t(shard); i < task.items.size(); i += size_t(num_shards)) {
    const auto& item = task.items[i];
    const auto ll = choice_loglikelihoods(model, item, device, autocast_bf16);
    std::vector<double> per_char;
    for (size_t c = 0; c < ll.size(); ++c) per_char.push_back(ll[c] / double(item.choice_chars[c]));
    counts.correct += pick_choice(ll) == item.gold;
    counts.correct_norm += pick_choice(per_char) == item.gold;
    counts.n += 1;
  }
  return counts;
}

TaskAccuracy task_accuracy(const Task& task, const TaskCounts& counts) {
  if (counts.n < 1) throw std::invalid_argument("task_accuracy: " + task.name + " has no scored item");
  return {double(counts.correct) / double(counts.n), double(counts.correct_norm) / double(counts.n), counts.n,
          task.fingerprint};
}

}  // namespace attnlab
