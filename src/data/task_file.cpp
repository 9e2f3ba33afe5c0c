// The multiple-choice task files of eval.tasks (task_file.h, docs/downstream.md) and their
// accuracies' JSON.
#include "attnlab/task_file.h"

#include <cmath>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attnlab/file_error.h"
#include "attnlab/shards.h"
#include "common/input_file.h"
#include "common/json_field.h"
#include "common/json_read.h"
#include "common/seed_mix.h"

namespace attnlab {
namespace fs = std::filesystem;
namespace {

constexpr int64_t kMaxTaskFileBytes = int64_t{1} << 30;  // HellaSwag's validation split in ids is a few MB
const std::set<std::string> kItemKeys = {"context", "choices", "choice_chars", "gold"};

// A list of token ids, each in [0, vocab_size); `what` names it in errors.
std::vector<int64_t> token_ids(const nlohmann::json& j, const std::string& what, int64_t vocab_size) {
  if (!j.is_array()) throw std::invalid_argument(fmt::format("\"{}\" is not a list of token ids", what));
  std::vector<int64_t> ids;
  for (const auto& id : j) {
    if (!id.is_number_integer()) throw std::invalid_argument(fmt::format("\"{}\" holds {}, not a token id", what, id.dump()));
    const int64_t v = id.get<int64_t>();
    if (v < 0 || v >= vocab_size || (id.is_number_unsigned() && id.get<uint64_t>() >= uint64_t(vocab_size)))
      throw std::invalid_argument(fmt::format("\"{}\" holds token id {}, outside the model's vocabulary [0, {})", what,
                                              id.dump(), vocab_size));
    ids.push_back(v);
  }
  return ids;
}

TaskItem parse_item(const nlohmann::json& j, int64_t vocab_size, int64_t block_size) {
  if (!j.is_object()) throw std::invalid_argument("not a JSON object");
  for (const auto& [key, value] : j.items())
    if (!kItemKeys.count(key))
      throw std::invalid_argument(fmt::format("unknown key \"{}\" (an item has context, choices, choice_chars, gold)", key));
  TaskItem item;
  item.context = token_ids(json_field<nlohmann::json>(j, "context", ""), "context", vocab_size);
  if (item.context.empty())
    throw std::invalid_argument("\"context\" is empty (give at least one token: the end-of-text id when there is no text)");
  const auto choices = json_field<nlohmann::json>(j, "choices", "");
  if (!choices.is_array() || choices.size() < 2)
    throw std::invalid_argument("\"choices\" must be a list of at least two choices, each a list of token ids");
  for (size_t c = 0; c < choices.size(); ++c) {
    const auto what = fmt::format("choices[{}]", c);
    item.choices.push_back(token_ids(choices[c], what, vocab_size));
    const auto n = int64_t(item.choices.back().size());
    if (n < 1 || n > block_size)
      throw std::invalid_argument(fmt::format("\"{}\" has {} tokens; a choice needs 1 to model.block_size = {}", what, n, block_size));
  }
  const auto chars = json_field<nlohmann::json>(j, "choice_chars", "");
  if (!chars.is_array() || chars.size() != choices.size())
    throw std::invalid_argument(fmt::format("\"choice_chars\" must list one length per choice ({})", choices.size()));
  for (const auto& n : chars) {
    if (!n.is_number_integer() || n.get<int64_t>() < 1)
      throw std::invalid_argument(fmt::format("\"choice_chars\" holds {}, not a positive character count", n.dump()));
    item.choice_chars.push_back(n.get<int64_t>());
  }
  item.gold = json_field<int64_t>(j, "gold", "");
  if (item.gold < 0 || item.gold >= int64_t(choices.size()))
    throw std::invalid_argument(fmt::format("\"gold\" is {}, not the index of one of the {} choices", item.gold, choices.size()));
  return item;
}

uint64_t fold(uint64_t h, int64_t v) { return seed_mix::mix(h, static_cast<uint64_t>(v)); }

uint64_t fingerprint(const std::vector<TaskItem>& items) {
  uint64_t h = seed_mix::kFnv1aOffset;
  for (const auto& item : items) {  // each list led by its length, so no two item lists fold alike by shifting
    h = fold(fold(h, int64_t(item.context.size())), item.gold);
    for (int64_t id : item.context) h = fold(h, id);
    for (size_t c = 0; c < item.choices.size(); ++c) {
      h = fold(fold(h, int64_t(item.choices[c].size())), item.choice_chars[c]);
      for (int64_t id : item.choices[c]) h = fold(h, id);
    }
  }
  return h;
}

// 16 hex digits, as to_json writes it (a string: metrics.jsonl's readers take no integer beyond int64).
uint64_t parse_fingerprint(const std::string& text, const std::string& path) {
  if (text.size() != 16 || text.find_first_not_of("0123456789abcdef") != std::string::npos)
    throw std::invalid_argument(fmt::format("\"{}\" is \"{}\", not 16 hex digits", path, text));
  return std::stoull(text, nullptr, 16);
}

}  // namespace

std::string task_name(const fs::path& path) { return path.stem().string(); }

Task read_task_file(const fs::path& path, int64_t vocab_size, int64_t block_size) {
  std::string text;
  try {
    text = detail::read_regular_file(path, kMaxTaskFileBytes);
  } catch (const FileError& e) {
    throw DataError(std::string("eval.tasks: ") + e.what());
  }
  Task task{task_name(path), path, {}, 0};
  std::istringstream lines(text);
  int64_t number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      task.items.push_back(parse_item(detail::parse_json(line), vocab_size, block_size));
    } catch (const std::exception& e) {  // JsonError and the item's own
      throw DataError(fmt::format("eval.tasks: {} line {}: {} (docs/downstream.md)", path.string(), number, e.what()));
    }
  }
  if (task.items.empty()) throw DataError(fmt::format("eval.tasks: {}: holds no item (docs/downstream.md)", path.string()));
  task.fingerprint = fingerprint(task.items);
  return task;
}

nlohmann::json to_json(const TaskAccuracies& tasks) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, a] : tasks)
    j[name] = {{"acc", a.acc}, {"acc_norm", a.acc_norm}, {"n", a.n}, {"fingerprint", fmt::format("{:016x}", a.fingerprint)}};
  return j;
}

TaskAccuracies task_accuracies_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw std::invalid_argument("\"" + where + "\" is not a JSON object of tasks");
  TaskAccuracies out;
  for (const auto& [name, value] : j.items()) {
    const auto path = detail::json_path(where, name);
    TaskAccuracy a{json_field<double>(value, "acc", path), json_field<double>(value, "acc_norm", path),
                   json_field<int64_t>(value, "n", path), parse_fingerprint(json_field<std::string>(value, "fingerprint", path),
                                                                            detail::json_path(path, "fingerprint"))};
    for (const auto& [key, v] : {std::pair{"acc", a.acc}, std::pair{"acc_norm", a.acc_norm}})
      if (!(v >= 0.0 && v <= 1.0))
        throw std::invalid_argument(fmt::format("\"{}\" is {}, outside [0, 1]", detail::json_path(path, key), v));
    if (a.n < 1) throw std::invalid_argument(fmt::format("\"{}\" is {}, below 1", detail::json_path(path, "n"), a.n));
    out[name] = a;
  }
  return out;
}

}  // namespace attnlab
