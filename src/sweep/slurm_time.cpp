// Slurm time limits and the warning margin before them (docs/sweeps.md, "On a Slurm cluster"): the
// margin must leave the task time to train, or each allocation would checkpoint, requeue and wait.
#include <algorithm>
#include <cctype>
#include <vector>

#include <fmt/format.h>

#include "attnlab/sweep.h"

namespace attnlab {
namespace {

[[noreturn]] void not_a_time(const std::string& text) {
  throw SweepError(fmt::format("slurm: time: '{}' is not a Slurm time (minutes, minutes:seconds, hours:minutes:seconds, "
                               "days-hours, days-hours:minutes or days-hours:minutes:seconds)", text));
}

// "12" -> 12; anything but 1 to 9 digits is not a time.
int64_t field(const std::string& part, const std::string& text) {
  if (part.empty() || part.size() > 9 || !std::all_of(part.begin(), part.end(), [](unsigned char c) { return std::isdigit(c); }))
    not_a_time(text);
  return std::stoll(part);
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts(1);
  for (char c : text) {
    if (c == sep)
      parts.emplace_back();
    else
      parts.back().push_back(c);
  }
  return parts;
}

}  // namespace

std::optional<int64_t> slurm_time_seconds(const std::string& text) {
  if (text == "INFINITE" || text == "UNLIMITED" || text == "infinite" || text == "unlimited") return std::nullopt;
  const auto dash = split(text, '-');
  const auto clock = split(dash.back(), ':');
  if (dash.size() > 2 || clock.size() > 3) not_a_time(text);
  std::vector<int64_t> v;
  for (const auto& part : clock) v.push_back(field(part, text));
  int64_t seconds = 0;
  if (dash.size() == 2) {  // days-hours[:minutes[:seconds]]
    const int64_t days = field(dash[0], text);
    seconds = days * 86400 + v[0] * 3600 + (v.size() > 1 ? v[1] * 60 : 0) + (v.size() > 2 ? v[2] : 0);
  } else if (v.size() == 1) {  // minutes
    seconds = v[0] * 60;
  } else if (v.size() == 2) {  // minutes:seconds
    seconds = v[0] * 60 + v[1];
  } else {  // hours:minutes:seconds
    seconds = v[0] * 3600 + v[1] * 60 + v[2];
  }
  if (seconds == 0) return std::nullopt;  // Slurm: a time limit of zero imposes none
  return seconds;
}

int64_t default_slurm_signal_margin(std::optional<int64_t> time_limit_s) {
  if (!time_limit_s) return 300;
  return std::clamp<int64_t>(*time_limit_s / 10, 10, 300);
}

}  // namespace attnlab
