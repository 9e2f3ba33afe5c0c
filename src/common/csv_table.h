// A CSV table in RFC 4180 quoting, for every report that writes CSV (sweep, activations, weight decay).
#pragma once

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace attnlab::csv {

inline std::string field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

/// Round-trip precision; an empty cell for NaN or infinity.
inline std::string number(double v) { return std::isfinite(v) ? fmt::format("{:.17g}", v) : ""; }

class Table {
 public:
  explicit Table(const std::vector<std::string>& header) { row(header); }
  void row(const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) out_ << (i ? "," : "") << field(cells[i]);
    out_ << "\n";
  }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

}  // namespace attnlab::csv
