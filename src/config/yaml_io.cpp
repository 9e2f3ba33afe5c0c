#include "config/yaml_io.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "attnlab/file_error.h"
#include "common/input_file.h"

namespace attnlab::yaml_io {
namespace {

constexpr int kMaxDepth = 32;         // a config is 3 levels deep; a sweep file 4
constexpr size_t kMaxNodes = 100000;  // configs hold a few hundred values
constexpr int64_t kMaxFileBytes = int64_t{16} << 20;  // configs are a few KiB

// Walks a parsed tree once, counting nodes as they expand through aliases.
struct TreeCheck {
  std::string where;
  bool file = true;  // marks are line numbers in `where`
  size_t nodes = 0;

  std::string at(const YAML::Mark& mark) const {
    return file && !mark.is_null() ? fmt::format("{}:{}", where, mark.line + 1) : where;
  }

  void walk(const YAML::Node& node, const std::string& path, int depth) {
    if (++nodes > kMaxNodes)
      throw ConfigError(fmt::format("{}: more than {} values once aliases are expanded (an alias cycle or "
                                    "an alias bomb); not a config", where, kMaxNodes));
    if (depth > kMaxDepth)
      throw ConfigError(fmt::format("{}: {}: nested deeper than {} levels (an alias cycle?)", at(node.Mark()),
                                    printable(path), kMaxDepth));
    if (node.IsSequence()) {
      size_t i = 0;
      for (const auto& item : node) walk(item, fmt::format("{}[{}]", path, i++), depth + 1);
    } else if (node.IsMap()) {
      std::map<std::string, YAML::Mark> seen;  // key -> where it was first written
      for (const auto& kv : node) {
        if (!kv.first.IsScalar())
          throw ConfigError(fmt::format("{}: {}a key must be a plain name, got {}", at(kv.first.Mark()),
                                        path.empty() ? "" : printable(path) + ": ", describe(kv.first)));
        const std::string key = path.empty() ? kv.first.Scalar() : path + "." + kv.first.Scalar();
        const auto [first, fresh] = seen.emplace(kv.first.Scalar(), kv.first.Mark());
        if (!fresh) {
          throw ConfigError(fmt::format("{}: {}: duplicate key{}", at(kv.first.Mark()), printable(key),
                                        file && !first->second.is_null()
                                            ? fmt::format(" (first at line {})", first->second.line + 1)
                                            : std::string()));
        }
        walk(kv.second, key, depth + 1);
      }
    }
  }
};

// Deep merge: maps merge key by key, anything else is replaced by the overlay.
YAML::Node merge(const YAML::Node& base, const YAML::Node& overlay) {
  if (!base || !base.IsMap() || !overlay.IsMap()) return YAML::Clone(overlay);
  YAML::Node out = YAML::Clone(base);
  for (const auto& kv : overlay) {
    const auto& key = kv.first.Scalar();
    out[key] = out[key] ? merge(out[key], kv.second) : YAML::Clone(kv.second);
  }
  return out;
}

std::vector<std::string> include_list(const YAML::Node& includes, const std::string& file) {
  std::vector<std::string> files;
  if (includes.IsScalar()) files.push_back(includes.Scalar());
  if (includes.IsSequence()) {
    for (const auto& f : includes) {
      if (!f.IsScalar()) throw ConfigError(file + ": include: expected file names, got " + describe(f));
      files.push_back(f.Scalar());
    }
  }
  if (!includes.IsScalar() && !includes.IsSequence()) throw ConfigError(file + ": include: expected a list of files");
  return files;
}

YAML::Node load_file(const std::filesystem::path& path, std::vector<std::filesystem::path>& stack) {
  YAML::Node node = load_yaml_file(path, /*pipe_allowed=*/stack.empty());
  std::error_code ec;  // a pipe (/dev/fd/63 -> "pipe:[...]") has no canonical path: keep its own
  auto canonical = std::filesystem::canonical(path, ec);
  if (ec) canonical = path.lexically_normal();
  if (std::find(stack.begin(), stack.end(), canonical) != stack.end())
    throw ConfigError(path.string() + ": include cycle");
  if (node.IsNull()) node = YAML::Node(YAML::NodeType::Map);
  if (!node.IsMap()) throw ConfigError(path.string() + ": a config file must be a mapping of keys");
  stack.push_back(canonical);
  YAML::Node merged(YAML::NodeType::Map);
  if (const YAML::Node includes = node["include"]) {
    for (const auto& f : include_list(includes, path.string()))
      merged = merge(merged, load_file(path.parent_path() / f, stack));
    node.remove("include");
  }
  stack.pop_back();
  return merge(merged, node);
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The magnitude of a YAML 1.2 core-schema integer and its sign; nullopt when `text` is not one or
// the magnitude exceeds 64 bits.
struct CoreInt {
  bool negative = false;
  uint64_t magnitude = 0;
  bool overflow = false;
};
std::optional<CoreInt> parse_core_int(std::string_view s) {
  CoreInt out;
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'o')) {
    base = s[1] == 'x' ? 16 : 8;
    s.remove_prefix(2);
  } else if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    out.negative = s[0] == '-';
    s.remove_prefix(1);
  }
  const auto is_digit = [base](char c) {
    if (base == 16) return std::isxdigit(static_cast<unsigned char>(c)) != 0;
    return c >= '0' && c < char('0' + base);
  };
  if (s.empty() || !std::all_of(s.begin(), s.end(), is_digit)) return std::nullopt;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out.magnitude, base);
  out.overflow = ec == std::errc::result_out_of_range;
  if (end != s.data() + s.size() && !out.overflow) return std::nullopt;
  return out;
}

[[noreturn]] void not_an_integer(const YAML::Node& node, const std::string& path, bool out_of_range) {
  throw ConfigError(path + ": expected an integer, got " + describe(node) + (out_of_range ? " (out of range)" : ""));
}

}  // namespace

YAML::Node load_yaml_file(const std::filesystem::path& path, bool pipe_allowed) {
  // Read with a cap rather than YAML::LoadFile: a pipe (--config <(...)) works, /dev/zero cannot stall,
  // and a FIFO or a directory where an include belongs is refused by what it is instead of hanging.
  std::string text;
  try {
    text = pipe_allowed ? detail::read_file_or_pipe(path, kMaxFileBytes) : detail::read_regular_file(path, kMaxFileBytes);
  } catch (const FileError& e) {
    throw ConfigError(path.string() + ": " + e.problem() + (pipe_allowed ? "" : " (an included config file)"));
  }
  YAML::Node node;
  try {
    node = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(path.string() + ": " + e.what());
  }
  check_tree(node, path.string());
  return node;
}

void check_tree(const YAML::Node& root, const std::string& where) {
  TreeCheck check{where};
  check.walk(root, "", 0);
}

YAML::Node load_with_includes(const std::filesystem::path& path) {
  std::vector<std::filesystem::path> stack;
  return load_file(path, stack);
}

void apply_override(YAML::Node& root, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError("--set " + printable(assignment) + ": expected key=value (e.g. optim.lr=3e-4)");
  const std::string key = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  YAML::Node value;
  try {
    value = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError("--set " + printable(key) + ": cannot parse value " + printable(text) + ": " + e.what());
  }
  // Walked with `key` as its path, so a duplicate inside `--set model={arm: a, arm: b}` reads model.arm.
  TreeCheck check{"--set " + printable(key), false};
  check.walk(value, key, 0);
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const auto dot = key.find('.', start);
    parts.push_back(key.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  // Walk with reset() rather than assignment: yaml-cpp's operator= on a node aliases, not rebinds.
  YAML::Node cur;
  cur.reset(root);
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node next = cur[parts[i]];
    if (next && !next.IsMap()) throw ConfigError("--set " + printable(key) + ": '" + printable(parts[i]) + "' is not a section");
    if (!next) cur[parts[i]] = YAML::Node(YAML::NodeType::Map);
    YAML::Node child = cur[parts[i]];
    cur.reset(child);
  }
  cur[parts.back()] = value;
}

void reject_unknown_keys(const YAML::Node& root, const std::set<std::string>& known) {
  std::function<void(const YAML::Node&, const std::string&)> walk = [&](const YAML::Node& node,
                                                                        const std::string& prefix) {
    for (const auto& kv : node) {
      const std::string path = prefix + kv.first.Scalar();
      if (!known.count(path)) {
        std::string best;
        size_t best_d = 4;  // suggest only near misses
        for (const auto& k : known) {
          const size_t dist = edit_distance(path, k);
          if (dist < best_d) best_d = dist, best = k;
        }
        throw ConfigError(printable(path) + ": unknown key" + (best.empty() ? "" : " (did you mean " + best + "?)"));
      }
      if (kv.second.IsMap()) walk(kv.second, path + ".");
    }
  };
  walk(root, "");
}

YAML::Node from_json(const nlohmann::json& j) {
  if (j.is_object()) {
    YAML::Node node(YAML::NodeType::Map);
    for (const auto& [k, v] : j.items()) node[k] = from_json(v);
    return node;
  }
  if (j.is_array()) {
    YAML::Node node(YAML::NodeType::Sequence);
    for (const auto& v : j) node.push_back(from_json(v));
    return node;
  }
  if (j.is_string()) return YAML::Node(j.get<std::string>());
  if (j.is_boolean()) return YAML::Node(j.get<bool>());
  if (j.is_number_unsigned()) return YAML::Node(j.get<uint64_t>());
  if (j.is_number_integer()) return YAML::Node(j.get<int64_t>());
  if (j.is_number_float()) return YAML::Node(format_float(j.get<double>()));
  return YAML::Node();
}

std::string format_float(double value) {
  if (std::isnan(value)) return ".nan";
  if (std::isinf(value)) return value > 0 ? ".inf" : "-.inf";
  std::string text = fmt::format("{}", value);  // shortest round trip, Python's repr thresholds
  const auto e = text.find('e');
  if (text.substr(0, e).find('.') == std::string::npos) text.insert(e == std::string::npos ? text.size() : e, ".0");
  return text;
}

std::string describe(const YAML::Node& node) {
  if (node.IsMap()) return "a mapping";
  if (node.IsSequence()) return "a list";
  if (node.IsNull()) return "nothing";
  const auto& text = node.Scalar();
  return unwritable_reason(text).empty() ? "'" + text + "'" : printable(text);
}

std::string printable(const std::string& text) {
  if (unwritable_reason(text).empty()) return text;
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string unwritable_reason(const std::string& text) {
  try {
    (void)nlohmann::json(text).dump();  // the strictest writer a run has
  } catch (const nlohmann::json::type_error& e) {
    const std::string what = e.what();  // "[json.exception.type_error.316] invalid UTF-8 byte at index 3: 0xFF"
    const auto cut = what.find("] ");
    return "not valid UTF-8 (" + (cut == std::string::npos ? what : what.substr(cut + 2)) + ")";
  }
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) return fmt::format("control character 0x{:02X} at byte {}", c, i);
  }
  return "";
}

void require_writable(const std::string& text, const std::string& path) {
  if (const auto why = unwritable_reason(text); !why.empty()) throw ConfigError(path + ": " + why + " in " + printable(text));
}

int64_t read_int64(const YAML::Node& node, const std::string& path) {
  if (!node.IsScalar()) throw ConfigError(path + ": expected an integer, got " + describe(node));
  const auto parsed = parse_core_int(node.Scalar());
  if (!parsed) not_an_integer(node, path, false);
  constexpr uint64_t kMax = uint64_t(std::numeric_limits<int64_t>::max());
  if (parsed->overflow || parsed->magnitude > kMax + (parsed->negative ? 1 : 0)) not_an_integer(node, path, true);
  // -(2^63) has no positive twin: negate in unsigned arithmetic, then convert (two's complement).
  return parsed->negative ? int64_t(uint64_t(0) - parsed->magnitude) : int64_t(parsed->magnitude);
}

uint64_t read_uint64(const YAML::Node& node, const std::string& path) {
  if (!node.IsScalar()) throw ConfigError(path + ": expected an integer, got " + describe(node));
  const auto parsed = parse_core_int(node.Scalar());
  if (!parsed || (parsed->negative && parsed->magnitude != 0)) not_an_integer(node, path, false);
  if (parsed->overflow) not_an_integer(node, path, true);
  return parsed->magnitude;
}

}  // namespace attnlab::yaml_io
