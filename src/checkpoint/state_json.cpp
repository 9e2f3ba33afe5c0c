#include "checkpoint/state_json.h"

#include <algorithm>
#include <cmath>
#include <ctime>

#include "attnlab/model_config_json.h"
#include "attnlab/version.h"
#include "checkpoint/file_ops.h"
#include "checkpoint/sha256.h"
#include "common/input_file.h"
#include "common/json_read.h"

namespace attnlab::detail {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kFormatName = "attnlab-checkpoint";

// ---- small codecs ---------------------------------------------------------------------------

std::string to_hex(const std::vector<uint8_t>& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (uint8_t b : bytes) {
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 15]);
  }
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::vector<uint8_t> from_hex(const std::string& text, const fs::path& file) {
  if (text.size() % 2 != 0) throw CheckpointError(file, "RNG state has an odd number of hex digits");
  std::vector<uint8_t> out(text.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    const int hi = hex_digit(text[2 * i]), lo = hex_digit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) throw CheckpointError(file, "RNG state is not hex");
    out[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return out;
}

/// JSON has no NaN or infinity: they are written as null.
json number_or_null(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

// ---- checked field access -------------------------------------------------------------------

const json& field(const json& j, const std::string& key, const fs::path& file) {
  if (!j.is_object() || !j.contains(key)) throw CheckpointError(file, "missing field '" + key + "'");
  return j.at(key);
}

int64_t int_field(const json& j, const std::string& key, const fs::path& file) {
  const json& v = field(j, key, file);
  if (!v.is_number_integer()) throw CheckpointError(file, "field '" + key + "' is not an integer: " + v.dump());
  return v.get<int64_t>();
}

std::string string_field(const json& j, const std::string& key, const fs::path& file) {
  const json& v = field(j, key, file);
  if (!v.is_string()) throw CheckpointError(file, "field '" + key + "' is not a string: " + v.dump());
  return v.get<std::string>();
}

/// A number, or `if_null` for null.
double loss_field(const json& j, const std::string& key, double if_null, const fs::path& file) {
  const json& v = field(j, key, file);
  if (v.is_null()) return if_null;
  if (!v.is_number()) throw CheckpointError(file, "field '" + key + "' is not a number: " + v.dump());
  return v.get<double>();
}

const json& object_field(const json& j, const std::string& key, const fs::path& file) {
  const json& v = field(j, key, file);
  if (!v.is_object()) throw CheckpointError(file, "field '" + key + "' is not an object");
  return v;
}

RngStates parse_rng(const json& j, const fs::path& file) {
  RngStates rng;
  rng.cpu = from_hex(string_field(j, "cpu", file), file);
  const json& cuda = field(j, "cuda", file);
  if (!cuda.is_array()) throw CheckpointError(file, "field 'rng.cuda' is not a list");
  for (const auto& s : cuda) {
    if (!s.is_string()) throw CheckpointError(file, "field 'rng.cuda' holds a non-string");
    rng.cuda.push_back(from_hex(s.get<std::string>(), file));
  }
  return rng;
}

/// The format version, checked: kCheckpointFormatVersion, or 1 (before state.json.sha256).
int64_t check_format(const json& j, const fs::path& file) {
  if (string_field(j, "format", file) != kFormatName) {
    throw CheckpointError(file, "field 'format' is not \"" + std::string(kFormatName) + "\"");
  }
  const int64_t version = int_field(j, "format_version", file);
  if (version != kCheckpointFormatVersion && version != 1) {
    throw CheckpointError(file, "format_version " + std::to_string(version) + " is not a supported one (1 or " +
                                    std::to_string(kCheckpointFormatVersion) + ")");
  }
  return version;
}

std::string read_text(const fs::path& file) {
  try {
    return detail::read_regular_file(file, kJsonMaxBytes);  // a FIFO or a directory is refused, not read
  } catch (const FileError& e) {
    throw CheckpointError(file, e.problem());
  }
}

/// Compares `text` (state.json's bytes) with the checksum in the sidecar `sidecar`, which must be
/// exactly what state_checksum_line writes.
void verify_state_checksum(const std::string& text, const fs::path& sidecar) {
  const std::string line = read_text(sidecar);
  const std::string tail = std::string("  ") + kStateFile + "\n";
  const bool well_formed = line.size() == 64 + tail.size() && line.compare(64, std::string::npos, tail) == 0 &&
                           std::all_of(line.begin(), line.begin() + 64,
                                       [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
  if (!well_formed) throw CheckpointError(sidecar, "is not one line \"<64 lower-case hex digits>  state.json\"");
  if (line.compare(0, 64, sha256_hex(text)) != 0) {
    throw CheckpointError(sidecar.parent_path() / kStateFile,
                          "SHA-256 differs from the one in state.json.sha256: state.json is corrupt");
  }
}

void check_count(int64_t n, const char* key, const fs::path& file) {
  if (n < 0) throw CheckpointError(file, std::string("field '") + key + "' is negative: " + std::to_string(n));
}

/// A loss in nats/token is finite and >= 0, or `none` (NaN for val_loss, +inf for best_val_loss).
void check_loss(double loss, double none, const char* key, const fs::path& file) {
  const bool is_none = std::isnan(none) ? std::isnan(loss) : loss == none;
  if (!is_none && !(std::isfinite(loss) && loss >= 0)) {
    const std::string text = std::isfinite(loss) ? json(loss).dump() : std::to_string(loss);
    throw CheckpointError(file,
                          std::string("field '") + key + "' is " + text + ", not a loss (finite, >= 0 nats/token)");
  }
}

}  // namespace

void check_train_state(const TrainState& t, const fs::path& file, bool trained) {
  check_count(t.step, "step", file);
  check_count(t.tokens_seen, "tokens_seen", file);
  check_count(t.data_position, "data_position", file);
  check_loss(t.val_loss, std::numeric_limits<double>::quiet_NaN(), "val_loss", file);
  check_loss(t.best_val_loss, std::numeric_limits<double>::infinity(), "best_val_loss", file);
  if (trained && t.tokens_seen < t.step) {
    throw CheckpointError(file, "tokens_seen " + std::to_string(t.tokens_seen) + " is below step " +
                                    std::to_string(t.step) + " (every step consumes tokens)");
  }
  if (!std::isnan(t.val_loss) && !(t.best_val_loss <= t.val_loss)) {
    throw CheckpointError(file, "best_val_loss " + number_or_null(t.best_val_loss).dump() +
                                    " is above this step's val_loss " + json(t.val_loss).dump());
  }
}

namespace {

/// A checkpoint directory named step_<N> holds step N.
void check_directory_step(const TrainState& t, const fs::path& file) {
  const int64_t dir_step = step_of_dir_name(file.parent_path().filename().string());
  if (dir_step >= 0 && dir_step != t.step) {
    throw CheckpointError(file, "step " + std::to_string(t.step) + " differs from its directory's name (" +
                                    file.parent_path().filename().string() + ")");
  }
}

/// "extra", typed; a known key of the wrong type is the file's fault.
TrainerState trainer_from_json(const json& extra, const fs::path& file) {
  try {
    return trainer_state_from_json(extra);
  } catch (const std::invalid_argument& e) {
    throw CheckpointError(file, e.what());
  }
}

}  // namespace

json config_to_json(const std::optional<RunConfig>& config) { return config ? to_json(*config) : json::object(); }

std::optional<RunConfig> config_from_json(const json& config, const fs::path& file) {
  if (config.empty()) return std::nullopt;
  try {
    return run_config_from_json(config);
  } catch (const std::exception& e) {  // ConfigError, or YAML's own
    throw CheckpointError(file, std::string("field 'config' is not a run config this build reads: ") + e.what());
  }
}

int64_t step_of_dir_name(const std::string& name) {
  const std::string digits = name.rfind("step_", 0) == 0 ? name.substr(5) : "";
  if (digits.empty() || digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return -1;
  }
  return std::stoll(digits);
}

std::string quoted_names(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < std::min<size_t>(names.size(), 3); ++i) out += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > 3) out += " and " + std::to_string(names.size() - 3) + " more";
  return out;
}

ModelConfig read_model_config(const json& j, const fs::path& origin) {
  ModelConfig cfg;
  try {
    cfg = model_config_from_json(j);
  } catch (const std::invalid_argument& e) {
    throw CheckpointError(origin, std::string("field ") + e.what());
  }
  try {
    cfg.validate();
  } catch (const std::invalid_argument& e) {
    throw CheckpointError(origin, std::string("model config: ") + e.what());
  }
  return cfg;
}

json state_file_to_json(const StateFile& s) {
  const TrainState& t = s.state;
  json cuda = json::array();
  for (const auto& bytes : t.rng.cuda) cuda.push_back(to_hex(bytes));
  return {{"format", kFormatName},
          {"format_version", kCheckpointFormatVersion},
          {"step", t.step},
          {"tokens_seen", t.tokens_seen},
          {"data_position", t.data_position},
          {"val_loss", number_or_null(t.val_loss)},
          {"best_val_loss", number_or_null(t.best_val_loss)},
          {"git_revision", t.git_revision},
          {"attnlab_version", version()},
          {"saved_at", utc_now()},
          {"model", model_config_to_json(s.model)},
          {"files", s.files},
          {"rng", {{"cpu", to_hex(t.rng.cpu)}, {"cuda", cuda}}},
          {"config", config_to_json(t.config)},
          {"extra", to_json(t.trainer)}};
}

std::string state_checksum_line(const std::string& state_text) {
  return sha256_hex(state_text) + "  " + kStateFile + "\n";
}

StateFile read_state_file(const fs::path& file) {
  const std::string text = read_text(file);
  const fs::path sidecar = file.parent_path() / kStateChecksumFile;
  const bool has_sidecar = is_file(sidecar);
  if (has_sidecar) verify_state_checksum(text, sidecar);  // before trusting any byte
  json j;
  try {
    j = parse_json(text);  // deep nesting and 1e400 too: a CheckpointError, so a resume falls back
  } catch (const JsonError& e) {
    throw CheckpointError(file, e.what());
  }
  if (check_format(j, file) >= 2 && !has_sidecar) {
    throw CheckpointError(sidecar, "is missing, so state.json cannot be verified");
  }
  StateFile s;
  TrainState& t = s.state;
  t.step = int_field(j, "step", file);
  t.tokens_seen = int_field(j, "tokens_seen", file);
  t.data_position = int_field(j, "data_position", file);
  t.val_loss = loss_field(j, "val_loss", std::numeric_limits<double>::quiet_NaN(), file);
  t.best_val_loss = loss_field(j, "best_val_loss", std::numeric_limits<double>::infinity(), file);
  t.git_revision = string_field(j, "git_revision", file);
  t.rng = parse_rng(object_field(j, "rng", file), file);
  t.config = config_from_json(object_field(j, "config", file), file);
  t.trainer = trainer_from_json(object_field(j, "extra", file), file);
  s.model = read_model_config(object_field(j, "model", file), file);
  s.files = object_field(j, "files", file);
  check_train_state(t, file, s.files.contains(kOptimizerFile));
  check_directory_step(t, file);
  return s;
}

}  // namespace attnlab::detail
