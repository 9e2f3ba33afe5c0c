// Build identity, written into every run's final.json and checkpoint.
#pragma once

#include <string>

namespace attnlab {

/// Semantic version of attnlab, e.g. "0.1.0".
std::string version();
/// Short git revision the binary was configured from ("unknown" outside a checkout).
std::string git_revision();

}  // namespace attnlab
