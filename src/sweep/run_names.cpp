// How a sweep names its runs, and reading a name back: the one place that knows the naming scheme,
// so the report recovers a run's variant from it rather than from a convention of its own.
#include <vector>

#include "attnlab/sweep.h"

namespace attnlab {
namespace fs = std::filesystem;

std::string variant_part(const std::string& key, const std::string& value) {
  std::string s = key + "-" + value;
  for (char& c : s)
    if (c == '/' || c == ' ' || c == '\\') c = '_';
  return s;
}

std::string sweep_run_name(const std::string& tier, const std::string& arm, const std::string& variant, uint64_t seed) {
  return tier + "/" + arm + (variant.empty() ? "" : "/" + variant) + "/s" + std::to_string(seed);
}

std::string variant_of_run_name(const fs::path& name, const std::string& tier, const std::string& arm, uint64_t seed) {
  std::vector<std::string> parts;
  for (const auto& p : name) parts.push_back(p.string());
  if (parts.size() < 3 || parts[0] != tier || parts[1] != arm || parts.back() != "s" + std::to_string(seed)) return "";
  std::string variant;
  for (size_t i = 2; i + 1 < parts.size(); ++i) variant += (variant.empty() ? "" : "/") + parts[i];
  return variant;
}

std::string null_variant(const std::string& variant) {
  return variant.empty() ? kNullVariantPart : variant + "/" + kNullVariantPart;
}

std::optional<std::string> null_twin_of(const std::string& variant) {
  const fs::path p(variant);
  if (p.filename() != kNullVariantPart) return std::nullopt;
  return p.parent_path().string();
}

std::string variant_without(const std::string& variant, const std::string& key) {
  const std::string prefix = variant_part(key, "");
  std::string out;
  for (const auto& part : fs::path(variant))
    if (!part.empty() && part.string().rfind(prefix, 0) != 0) out += (out.empty() ? "" : "/") + part.string();
  return out;
}

}  // namespace attnlab
