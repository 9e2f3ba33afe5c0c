// Downstream accuracy (docs/downstream.md): lm-eval's loglikelihood multiple choice on the items of
// a task file (task_file.h), as the trainer's evaluator scores eval.tasks.
#pragma once

#include <cstdint>
#include <vector>

#include <c10/core/Device.h>

#include "attnlab/model.h"
#include "attnlab/task_file.h"

namespace attnlab {

/// Per choice c of `item`, log P(choice tokens | context) in nats (float64 sum of the float32
/// log-softmax of each choice token): the sequence context + choice, its last token dropped, cut
/// from the left to the model's block_size (lm-eval's truncation), and the log-probabilities of the
/// choice's tokens at its last |choice| positions. One forward pass of a [choices, T] batch, right
/// padded (the model is causal, so padding after a row's end changes none of its positions), with
/// gradients off and bf16 autocast when `autocast_bf16` (CUDA only). The model's mode is left as it was.
std::vector<double> choice_loglikelihoods(GPTImpl& model, const TaskItem& item, const c10::Device& device,
                                          bool autocast_bf16);

/// The index of the largest of `scores`; ties go to the lowest index (numpy's argmax, which lm-eval
/// uses). A NaN is never chosen over a number. Throws std::invalid_argument for no scores.
int64_t pick_choice(const std::vector<double>& scores);

/// Items answered right, summed over a shard of a task: items shard, shard + num_shards, ...
/// Summing the parts of shards 0..num_shards-1 gives the whole task's counts (data-parallel
/// scoring). Throws std::invalid_argument unless 0 <= shard < num_shards.
struct TaskCounts {
  int64_t correct = 0;       ///< pick_choice(loglikelihoods) == gold
  int64_t correct_norm = 0;  ///< pick_choice(loglikelihood / choice_chars) == gold
  int64_t n = 0;             ///< items scored
};
TaskCounts score_task(GPTImpl& model, const Task& task, const c10::Device& device, bool autocast_bf16, int64_t shard,
                      int64_t num_shards);

/// The accuracies of whole-task counts (n >= 1): acc = correct / n, acc_norm = correct_norm / n.
TaskAccuracy task_accuracy(const Task& task, const TaskCounts& counts);

}  // namespace attnlab
