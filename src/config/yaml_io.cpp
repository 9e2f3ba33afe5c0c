#include "config/yaml_io.h"

#include <algorithm>
#include <functional>
#include <vector>

namespace attnlab::yaml_io {
namespace {

// Deep merge: maps merge key by key, anything else is replaced by the overlay.
YAML::Node merge(const YAML::Node& base, const YAML::Node& overlay) {
  if (!base || !base.IsMap() || !overlay.IsMap()) return YAML::Clone(overlay);
  YAML::Node out = YAML::Clone(base);
  for (const auto& kv : overlay) {
    const auto key = kv.first.as<std::string>();
    out[key] = out[key] ? merge(out[key], kv.second) : YAML::Clone(kv.second);
  }
  return out;
}

YAML::Node load_file(const std::filesystem::path& path, std::vector<std::filesystem::path>& stack) {
  if (!std::filesystem::exists(path)) throw ConfigError(path.string() + ": config file not found");
  const auto canonical = std::filesystem::canonical(path);
  if (std::find(stack.begin(), stack.end(), canonical) != stack.end())
    throw ConfigError(path.string() + ": include cycle");
  YAML::Node node;
  try {
    node = YAML::LoadFile(path.string());
  } catch (const YAML::Exception& e) {
    throw ConfigError(path.string() + ": " + e.what());
  }
  if (node.IsNull()) node = YAML::Node(YAML::NodeType::Map);
  if (!node.IsMap()) throw ConfigError(path.string() + ": a config file must be a mapping of keys");
  stack.push_back(canonical);
  YAML::Node merged(YAML::NodeType::Map);
  if (const YAML::Node includes = node["include"]) {
    if (!includes.IsSequence() && !includes.IsScalar())
      throw ConfigError(path.string() + ": include: expected a list of files");
    std::vector<std::string> files;
    if (includes.IsScalar()) files.push_back(includes.as<std::string>());
    for (const auto& f : includes) files.push_back(f.as<std::string>());
    for (const auto& f : files) merged = merge(merged, load_file(path.parent_path() / f, stack));
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

}  // namespace

YAML::Node load_with_includes(const std::filesystem::path& path) {
  std::vector<std::filesystem::path> stack;
  return load_file(path, stack);
}

void apply_override(YAML::Node& root, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError("--set " + assignment + ": expected key=value (e.g. optim.lr=3e-4)");
  const std::string key = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  YAML::Node value;
  try {
    value = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError("--set " + key + ": cannot parse value '" + text + "': " + e.what());
  }
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
    if (next && !next.IsMap()) throw ConfigError("--set " + key + ": '" + parts[i] + "' is not a section");
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
      const std::string path = prefix + kv.first.as<std::string>();
      if (!known.count(path)) {
        std::string best;
        size_t best_d = 4;  // suggest only near misses
        for (const auto& k : known) {
          const size_t dist = edit_distance(path, k);
          if (dist < best_d) best_d = dist, best = k;
        }
        throw ConfigError(path + ": unknown key" + (best.empty() ? "" : " (did you mean " + best + "?)"));
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
  if (j.is_number_float()) return YAML::Node(j.get<double>());
  return YAML::Node();
}

std::string describe(const YAML::Node& node) {
  if (node.IsMap()) return "a mapping";
  if (node.IsSequence()) return "a list";
  if (node.IsNull()) return "nothing";
  return "'" + node.Scalar() + "'";
}

}  // namespace attnlab::yaml_io
