// Downstream tasks (docs/downstream.md): the multiple-choice task files that `eval.tasks` names, in
// token ids, and the accuracies the trainer scores on them (lm-eval's `acc` and `acc_norm`).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace attnlab {

/// One multiple-choice item: a line {"context": [ids], "choices": [[ids], ...], "choice_chars":
/// [n, ...], "gold": k} of a task file.
struct TaskItem {
  std::vector<int64_t> context;               ///< token ids, at least one (the end-of-text id when there is no text)
  std::vector<std::vector<int64_t>> choices;  ///< at least two, each of 1..block_size token ids
  std::vector<int64_t> choice_chars;          ///< per choice, the length of its text in characters (>= 1): acc_norm's divisor
  int64_t gold = 0;                           ///< index of the right choice
};

struct Task {
  std::string name;            ///< the file's stem: "hellaswag" for tasks/hellaswag.jsonl
  std::filesystem::path path;  ///< as eval.tasks names it
  std::vector<TaskItem> items; ///< in file order, at least one
  /// FNV-1a over the items' ids, lengths and gold indices: runs whose fingerprints agree scored the
  /// same items (the report pairs only those).
  uint64_t fingerprint = 0;
};

/// The name a task file's records carry: its file stem ("piqa" for data/piqa.jsonl).
std::string task_name(const std::filesystem::path& path);

/// Reads a task file: one JSON object per line with exactly the keys above (blank lines are
/// skipped). Throws DataError (shards.h) naming the file, and the line for a line's fault: a file
/// that is not regular or holds no item, a line that is not JSON or lacks a key, has another or one
/// of the wrong type, an empty context, fewer than two choices, a choice of no token or of more than
/// `block_size` tokens (the model could not score all of it), an id outside [0, vocab_size), a
/// choice_chars that is not one positive count per choice, a gold outside [0, choices).
Task read_task_file(const std::filesystem::path& path, int64_t vocab_size, int64_t block_size);

/// One task's accuracies at one evaluation (SPEC-free: lm-eval's multiple-choice scorer,
/// docs/downstream.md). acc and acc_norm are fractions of `n` items in [0, 1].
struct TaskAccuracy {
  double acc = 0.0;          ///< argmax of the choices' summed loglikelihoods is gold
  double acc_norm = 0.0;     ///< argmax of the loglikelihood per character of the choice's text is gold
  int64_t n = 0;             ///< items scored
  uint64_t fingerprint = 0;  ///< the task file's (Task::fingerprint)
};
using TaskAccuracies = std::map<std::string, TaskAccuracy>;  ///< by task name

/// {"<name>": {"acc", "acc_norm", "n", "fingerprint"}, ...}: metrics.jsonl's and final.json's "tasks";
/// the fingerprint as 16 lowercase hex digits (a string: `attnlab watch` refuses integers beyond int64).
nlohmann::json to_json(const TaskAccuracies& tasks);

/// Reads that object back. Throws std::invalid_argument naming the key path under `where` for a
/// value that is not an object, a missing or mistyped key, an accuracy outside [0, 1], n < 1 or a
/// fingerprint that is not 16 hex digits.
TaskAccuracies task_accuracies_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace attnlab
