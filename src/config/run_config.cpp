// One list of keys (visit_fields) drives reading, writing and diffing, so the YAML and the records
// cannot drift apart.
#include "attnlab/run_config.h"

#include <climits>
#include <cmath>
#include <cstdio>
#include <optional>
#include <map>
#include <set>
#include <type_traits>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include "attnlab/lr_schedule.h"
#include "attnlab/task_file.h"
#include "common/seed_mix.h"
#include "config/backend_check.h"
#include "config/model_fields.h"
#include "config/sizes.h"
#include "config/yaml_io.h"

namespace attnlab {
namespace {

using detail::is_optional_v;
using detail::Need;
template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};

// The config's keys in order: one list drives reading, checking, writing and diffing (docs/config.md).
template <class V>
void visit_fields(RunConfig& c, V& v) {
  v.field("tier", c.tier);
  v.field("seed", c.seed);
  v.field("init_seed", c.init_seed);  // optional: written only when set
  v.field("data_seed", c.data_seed);
  v.field("out_dir", c.out_dir);
  v.section("model", [&] { detail::visit_model_fields(c.model, v); });
  v.section("attention", [&] { v.field("backend", c.attention.backend); });
  v.section("data", [&] {
    v.field("train", c.data.train);
    v.field("val", c.data.val);
    v.field("val_tokens", c.data.val_tokens);
    v.field("sampling", c.data.sampling);  // optional: written only when set (docs/data.md)
  });
  v.section("optim", [&] {
    v.field("name", c.optim.name);  // optional, as momentum, nesterov and muon_lr below: written only when set
    v.field("lr", c.optim.lr);
    v.field("min_lr_ratio", c.optim.min_lr_ratio);
    v.field("warmup_steps", c.optim.warmup_steps);
    v.field("weight_decay", c.optim.weight_decay);
    v.field("beta1", c.optim.beta1);
    v.field("beta2", c.optim.beta2);
    v.field("eps", c.optim.eps);
    v.field("grad_clip", c.optim.grad_clip);
    v.field("momentum", c.optim.momentum);
    v.field("nesterov", c.optim.nesterov);
    v.field("muon_lr", c.optim.muon_lr);
  });
  v.section("train", [&] {
    v.field("batch_size", c.train.batch_size);
    v.field("seq_len", c.train.seq_len);
    v.field("tokens_per_step", c.train.tokens_per_step);
    v.field("token_budget", c.train.token_budget);
    v.field("max_steps", c.train.max_steps);
    v.field("device", c.train.device);
    v.field("precision", c.train.precision);
    v.field("log_every", c.train.log_every);
    v.field("threads", c.train.threads);
  });
  v.section("eval", [&] {
    v.field("every", c.eval.every);
    v.field("tasks", c.eval.tasks);
    v.field("trigger_tokens", c.eval.trigger_tokens);
  });
  v.section("checkpoint", [&] {
    v.field("every", c.checkpoint.every);
    v.field("keep_last", c.checkpoint.keep_last);
    v.field("log_spaced", c.checkpoint.log_spaced);
    v.field("log_spaced_until", c.checkpoint.log_spaced_until);
    v.field("keep_every", c.checkpoint.keep_every);
  });
  v.section("track", [&] {
    v.section("activations", [&] {
      v.field("every", c.track.activations.every);
      v.field("sequences", c.track.activations.sequences);
      v.field("top_k", c.track.activations.top_k);
      v.field("massive_max", c.track.activations.massive_max);
      v.field("massive_ratio", c.track.activations.massive_ratio);
    });
  });
}

// Writes every field into a JSON object.
struct JsonWriter {
  nlohmann::json root = nlohmann::json::object();
  nlohmann::json* cur = &root;
  template <class T>
  void field(const char* key, const T& value, Need = Need::defaulted) {
    if constexpr (is_optional_v<T>) {
      if (value) field(key, *value);  // an unset key is left out, so configs without it keep their bytes
    } else if constexpr (std::is_enum_v<T>) {
      (*cur)[key] = name_table<T>().name(value);  // the name the YAML holds
    } else {
      (*cur)[key] = value;
    }
  }
  template <class F>
  void section(const char* key, F&& body) {
    auto* parent = cur;
    cur = &(*parent)[key];
    *cur = nlohmann::json::object();
    body();
    cur = parent;
  }
};

// Reads every field from a YAML tree, type-checked; remembers which keys it consumed.
struct YamlReader {
  YAML::Node cur;
  std::string prefix;
  std::set<std::string> known;

  std::string path(const char* key) const { return prefix + key; }
  template <class T>
  void field(const char* key, T& out, Need = Need::defaulted) {  // a YAML key may always default
    known.insert(path(key));
    const YAML::Node node = std::as_const(cur)[key];
    if (!node) return;
    if constexpr (is_optional_v<T>) {
      using V = typename T::value_type;
      if (node.IsNull()) {  // `key: null` unsets what an included file set
        out.reset();
      } else if constexpr (std::is_enum_v<V>) {
        out = read_name<V>(node, path(key));
      } else {
        out = yaml_io::read_scalar<V>(node, path(key));
      }
    } else if constexpr (std::is_enum_v<T>) {
      out = read_name<T>(node, path(key));
    } else if constexpr (is_vector<T>::value) {
      using V = typename T::value_type;
      if (!node.IsSequence())
        throw ConfigError(fmt::format("{}: expected a list of {}s, got {}", path(key),
                                      std::is_same_v<V, std::string> ? "string" : "integer", yaml_io::describe(node)));
      out.clear();
      for (size_t i = 0; i < node.size(); ++i)
        out.push_back(yaml_io::read_scalar<V>(node[i], fmt::format("{}[{}]", path(key), i)));
    } else {
      out = yaml_io::read_scalar<T>(node, path(key));
    }
  }
  // A name of E's table, or ConfigError "<key>: '<text>' is not one of <names>".
  template <class E>
  static E read_name(const YAML::Node& node, const std::string& key) {
    const auto text = yaml_io::read_scalar<std::string>(node, key);
    yaml_io::require_writable(text, key);  // before the refusal echoes it
    const auto& table = name_table<E>();
    if (const auto value = table.find(text)) return *value;
    throw ConfigError(table.refusal(text, key));
  }
  template <class F>
  void section(const char* key, F&& body) {
    known.insert(path(key));
    const YAML::Node node = std::as_const(cur)[key];
    if (node && !node.IsMap()) throw ConfigError(path(key) + ": expected a mapping of keys");
    if (!node) return;
    // reset() rebinds; operator= on a yaml-cpp node would overwrite the tree it refers to.
    YAML::Node saved_node;
    saved_node.reset(cur);
    const auto saved_prefix = prefix;
    cur.reset(node);
    prefix = path(key) + ".";
    body();
    cur.reset(saved_node);
    prefix = saved_prefix;
  }
};

// Checks what holds for every key of a type, whichever key it is: floats finite (no key documents
// an infinite or NaN value), strings writable by every writer of a run (JSON needs UTF-8; logs,
// CSV and Markdown rows need no control characters).
struct ValueCheck {
  std::string prefix;

  template <class T>
  void field(const char* key, const T& value, Need = Need::defaulted) {
    if constexpr (is_optional_v<T>) {
      if (value) field(key, *value);
    } else if constexpr (std::is_floating_point_v<T>) {
      if (!std::isfinite(value))
        throw ConfigError(fmt::format("{}{}: must be a finite number, got {}", prefix, key, yaml_io::format_float(value)));
    } else if constexpr (std::is_same_v<T, std::string>) {
      yaml_io::require_writable(value, prefix + key);
    } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      for (size_t i = 0; i < value.size(); ++i) yaml_io::require_writable(value[i], fmt::format("{}{}[{}]", prefix, key, i));
    } else if constexpr (std::is_enum_v<T>) {  // a config built in code could cast any integer
      if (!name_table<T>().has(value))
        throw ConfigError(fmt::format("{}{}: {} is not one of {}", prefix, key, static_cast<int64_t>(value),
                                      name_table<T>().valid_names()));
    }
  }
  template <class F>
  void section(const char* key, F&& body) {
    const auto saved = prefix;
    prefix += std::string(key) + ".";
    body();
    prefix = saved;
  }
};

// A key at its default says nothing more (adamw, or sgd's own momentum): one spelling per run, so one
// config hash, as for the seeds above. After validate(), which refuses a key the optimizer does not use.
void normalize_optimizer(OptimConfig& o) {
  OptimConfig bare;
  bare.name = o.name;
  if (o.momentum == bare.effective_momentum()) o.momentum.reset();
  if (o.nesterov == bare.effective_nesterov()) o.nesterov.reset();
  if (o.muon_lr == bare.effective_muon_lr()) o.muon_lr.reset();
  if (o.name == OptimizerName::adamw) o.name.reset();
}

RunConfig from_yaml(const YAML::Node& root) {
  RunConfig cfg;
  YamlReader reader{root, "", {}};
  visit_fields(cfg, reader);
  yaml_io::reject_unknown_keys(root, reader.known);
  // A seed equal to `seed` says nothing more: one spelling per run, so one config hash.
  if (cfg.init_seed == cfg.seed) cfg.init_seed.reset();
  if (cfg.data_seed == cfg.seed) cfg.data_seed.reset();
  if (cfg.data.sampling == WindowSampling::random) cfg.data.sampling.reset();  // the default, so no key and no hash
  validate(cfg);
  normalize_optimizer(cfg.optim);
  // Before normalisation expands the pattern to one letter per block, which hides an unused tail.
  if (const auto warning = window_pattern_warning(cfg.model); !warning.empty()) spdlog::warn("{}", warning);
  normalize_window(cfg.model);
  return cfg;
}


void require(bool ok, const std::string& message) {
  if (!ok) throw ConfigError(message);
}

// eval.tasks: paths, each task named by its file stem (its records' key), so no two may share one.
void check_task_names(const std::vector<std::string>& tasks) {
  std::map<std::string, std::string> seen;
  for (size_t i = 0; i < tasks.size(); ++i) {
    require(!tasks[i].empty(), fmt::format("eval.tasks[{}]: empty path (a task file, docs/downstream.md)", i));
    const auto name = task_name(tasks[i]);
    require(!name.empty(), fmt::format("eval.tasks[{}]: '{}' names no file", i, tasks[i]));
    const auto [it, fresh] = seen.emplace(name, tasks[i]);
    require(fresh, fmt::format("eval.tasks: '{}' and '{}' are both task '{}' (a task is named by its file stem): "
                               "rename one", it->second, tasks[i], name));
  }
}

// eval.trigger_tokens: token ids of the model's vocabulary.
void check_trigger_tokens(const std::vector<int64_t>& ids, int64_t vocab_size) {
  for (size_t i = 0; i < ids.size(); ++i)
    require(ids[i] >= 0 && ids[i] < vocab_size,
            fmt::format("eval.trigger_tokens[{}]: token {} is outside the vocabulary [0, {}) of model.vocab_size", i,
                        ids[i], vocab_size));
}

// The optimizer-specific keys (docs/config.md, "Optimizers"): each names the optimizers that use it.
void check_optimizer_keys(const OptimConfig& o) {
  const auto name = o.optimizer();
  const bool momentum_kind = name == OptimizerName::sgd || name == OptimizerName::muon;
  const auto unused = [&](const char* key, const char* users) {
    return fmt::format("optim.{}: used by {} only, not by optim.name {}", key, users, to_string(name));
  };
  require(!o.momentum || momentum_kind, unused("momentum", "sgd and muon") + " (AdamW's is optim.beta1)");
  require(!o.nesterov || momentum_kind, unused("nesterov", "sgd and muon"));
  require(!o.muon_lr || name == OptimizerName::muon, unused("muon_lr", "muon"));
  if (!momentum_kind) return;
  const double mu = o.effective_momentum();
  require(mu >= 0 && mu < 1, fmt::format("optim.momentum: must lie in [0, 1), got {}", yaml_io::format_float(mu)));
  require(!o.effective_nesterov() || mu > 0, "optim.nesterov: Nesterov momentum needs optim.momentum > 0");
  require(o.effective_muon_lr() > 0, "optim.muon_lr: must be positive");
}

// The model keys files had not held from the start (Need::defaulted), but an optional one: unset, it
// is not written at all.
struct AddedKeys {
  std::vector<std::string> keys;
  template <class T>
  void field(const char* key, const T&, Need need) {
    if (need == Need::defaulted && !is_optional_v<T>) keys.push_back(key);
  }
};

const std::vector<std::string>& model_keys_added_later() {
  static const std::vector<std::string> keys = [] {
    ModelConfig model;
    AddedKeys added;
    detail::visit_model_fields(model, added);
    return added.keys;
  }();
  return keys;
}

constexpr int64_t kMaxThreads = 1024;                // more than any CPU has cores (and it must fit an int)
constexpr int64_t kMaxLogSpaced = int64_t{1} << 62;  // the doubling 1, 2, 4, ... must not overflow

}  // namespace

template <>
const NameTable<Precision>& name_table<Precision>() {
  static const NameTable<Precision> table("precision", {{Precision::bf16, "bf16"}, {Precision::fp32, "fp32"}});
  return table;
}

std::string to_string(Precision precision) { return name_table<Precision>().name(precision); }

template <>
const NameTable<OptimizerName>& name_table<OptimizerName>() {
  static const NameTable<OptimizerName> table(
      "optimizer", {{OptimizerName::adamw, "adamw"}, {OptimizerName::sgd, "sgd"}, {OptimizerName::muon, "muon"}});
  return table;
}

std::string to_string(OptimizerName name) { return name_table<OptimizerName>().name(name); }

int64_t RunConfig::effective_tokens_per_step() const {
  return train.tokens_per_step > 0 ? train.tokens_per_step : train.batch_size * train.seq_len;
}

int64_t RunConfig::total_steps() const {
  if (train.max_steps > 0) return train.max_steps;
  const int64_t per_step = effective_tokens_per_step();
  return train.token_budget / per_step + (train.token_budget % per_step != 0 ? 1 : 0);  // ceil, without overflow
}

void validate(const RunConfig& c) {
  ValueCheck values;
  visit_fields(const_cast<RunConfig&>(c), values);  // the check only reads
  try {
    c.model.validate();
  } catch (const std::invalid_argument& e) {
    throw ConfigError(e.what());
  }
  check_backend_serves_model(c);
  require(!c.data.train.empty(), "data.train: required (a glob of llm.c-format train shards)");
  require(!c.data.val.empty(), "data.val: required (a glob of llm.c-format validation shards)");
  require(c.data.val_tokens > 0, "data.val_tokens: must be positive");
  require(c.optim.lr > 0, "optim.lr: must be positive");
  require(c.optim.min_lr_ratio >= 0 && c.optim.min_lr_ratio <= 1, "optim.min_lr_ratio: must lie in [0, 1]");
  require(c.optim.warmup_steps >= 0, "optim.warmup_steps: must be >= 0");
  require(c.optim.weight_decay >= 0, "optim.weight_decay: must be >= 0");
  require(c.optim.beta1 >= 0 && c.optim.beta1 < 1, "optim.beta1: must lie in [0, 1)");
  require(c.optim.beta2 >= 0 && c.optim.beta2 < 1, "optim.beta2: must lie in [0, 1)");
  require(c.optim.eps > 0, "optim.eps: must be positive");
  require(c.optim.grad_clip >= 0, "optim.grad_clip: must be >= 0 (0 disables clipping)");
  check_optimizer_keys(c.optim);
  require(c.train.batch_size > 0, "train.batch_size: must be positive");
  require(c.train.seq_len > 0, "train.seq_len: must be positive");
  require(c.train.seq_len <= c.model.block_size,
          "train.seq_len = " + std::to_string(c.train.seq_len) + " exceeds model.block_size = " +
              std::to_string(c.model.block_size));
  const int64_t micro = sizes::micro_batch_tokens(c);
  require(c.train.tokens_per_step >= 0 && c.effective_tokens_per_step() % micro == 0,
          "train.tokens_per_step = " + std::to_string(c.train.tokens_per_step) +
              " must be a multiple of train.batch_size * train.seq_len = " + std::to_string(micro));
  require(c.train.token_budget > 0 || c.train.max_steps > 0,
          "train.token_budget: set a token budget (or train.max_steps)");
  require(c.train.token_budget >= 0 && c.train.max_steps >= 0, "train.token_budget / train.max_steps: must be >= 0");
  sizes::check_products(c);
  require(c.data.val_tokens > c.train.seq_len,  // a sequence reads seq_len + 1 tokens (x, then targets shifted by one)
          fmt::format("data.val_tokens = {} is less than one validation sequence of train.seq_len + 1 = {} tokens",
                      c.data.val_tokens, uint64_t(c.train.seq_len) + 1));
  require(c.train.log_every > 0, "train.log_every: must be positive");
  require(c.train.threads >= 0, "train.threads: must be >= 0");
  require(c.train.threads <= kMaxThreads, fmt::format("train.threads: must be at most {}", kMaxThreads));
  require(c.eval.every > 0, "eval.every: must be positive");
  check_task_names(c.eval.tasks);
  check_trigger_tokens(c.eval.trigger_tokens, c.model.vocab_size);
  require(c.checkpoint.every > 0, "checkpoint.every: must be positive");
  require(c.checkpoint.keep_last > 0, "checkpoint.keep_last: must be at least 1");
  require(c.checkpoint.log_spaced_until >= 1, "checkpoint.log_spaced_until: must be at least 1");
  require(c.checkpoint.log_spaced_until < kMaxLogSpaced,
          fmt::format("checkpoint.log_spaced_until: must be below 2^62 = {} (the power of two after it must fit a "
                      "64-bit step)", kMaxLogSpaced));
  require(c.checkpoint.keep_every >= 0, "checkpoint.keep_every: must be >= 0 (0 keeps no extra checkpoints)");
  const auto& t = c.track.activations;
  require(t.every >= 0, "track.activations.every: must be >= 0 (0 turns tracking off)");
  require(t.sequences > 0, "track.activations.sequences: must be positive");
  require(t.top_k > 0, "track.activations.top_k: must be positive");
  require(t.massive_max >= 0, "track.activations.massive_max: must be >= 0");
  require(t.massive_ratio >= 1, "track.activations.massive_ratio: must be >= 1");
}

RunConfig load_run_config(const std::filesystem::path& path, const std::vector<std::string>& overrides) {
  YAML::Node root = yaml_io::load_with_includes(path);
  for (const auto& assignment : overrides) yaml_io::apply_override(root, assignment);
  return from_yaml(root);
}

RunConfig run_config_from_json(const nlohmann::json& resolved) {
  return from_yaml(yaml_io::from_json(resolved));
}

nlohmann::json to_json(const RunConfig& cfg) {
  JsonWriter writer;
  visit_fields(const_cast<RunConfig&>(cfg), writer);  // the writer only reads
  // Added after runs existed: an empty list is not written, so their config.yaml reads back byte for byte.
  if (cfg.eval.tasks.empty()) writer.root["eval"].erase("tasks");
  if (cfg.eval.trigger_tokens.empty()) writer.root["eval"].erase("trigger_tokens");
  return writer.root;
}

std::vector<std::string> config_warnings(const RunConfig& cfg) {
  std::vector<std::string> warnings;
  try {
    validate(cfg);  // warnings are about runnable configs (a default-constructed one has no steps yet)
  } catch (const ConfigError&) {
    return warnings;
  }
  const int64_t steps = cfg.total_steps();
  if (cfg.optim.warmup_steps >= steps) {
    warnings.push_back(fmt::format(
        "optim.warmup_steps = {} is not shorter than the run's {} steps ({}): the learning rate only rises, "
        "ending at {} (optim.lr = {}) with no cosine decay",
        cfg.optim.warmup_steps, steps, cfg.train.max_steps > 0 ? "train.max_steps" : "train.token_budget",
        yaml_io::format_float(learning_rate(cfg.optim, steps - 1, steps)), yaml_io::format_float(cfg.optim.lr)));
  }
  return warnings;
}

std::string to_yaml(const RunConfig& cfg) {
  std::string text;
  for (const auto& warning : config_warnings(cfg)) text += "# warning: " + warning + "\n";
  YAML::Emitter out;
  out << yaml_io::from_json(to_json(cfg));
  return text + out.c_str() + "\n";
}

std::vector<std::string> differing_keys(const RunConfig& a, const RunConfig& b) {
  std::vector<std::string> keys;
  const auto fa = to_json(a).flatten(), fb = to_json(b).flatten();
  for (const auto& [key, value] : fa.items()) {
    if (!fb.contains(key) || fb[key] != value) keys.push_back(key.substr(1));  // "/optim/lr" -> "optim/lr"
  }
  for (const auto& [key, value] : fb.items()) {  // a key set in b only (an optional one)
    if (!fa.contains(key)) keys.push_back(key.substr(1));
  }
  for (auto& key : keys) std::replace(key.begin(), key.end(), '/', '.');
  return keys;
}

bool is_observation_key(const std::string& key) {
  for (const char* list : {"eval.tasks", "eval.trigger_tokens"})
    if (key == list || key.rfind(std::string(list) + ".", 0) == 0) return true;
  return key.rfind("track.", 0) == 0;
}

std::string config_hash(const RunConfig& cfg) {
  auto j = to_json(cfg);
  j.erase("out_dir");  // where a run lives is not what it computes
  j.erase("track");    // nor what it observes on the way (is_observation_key)
  j["eval"].erase("tasks");  // scoring tasks changes no weight either
  j["eval"].erase("trigger_tokens");  // nor splitting the validation loss
  // Model options added after runs existed count only when set, so those runs keep their hash.
  const auto defaults = to_json(RunConfig{})["model"];
  for (const auto& key : model_keys_added_later())
    if (j["model"][key] == defaults[key]) j["model"].erase(key);
  const uint64_t h = seed_mix::fnv1a(j.dump());  // over the canonical (sorted-key) dump
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace attnlab
