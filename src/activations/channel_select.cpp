#include "attnlab/channel_select.h"
#include "attnlab/activation_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>

#include <ATen/ATen.h>

namespace attnlab {
namespace {

std::vector<double> as_doubles(const at::Tensor& x) {
  if (x.dim() != 1) throw std::invalid_argument("a channel state must be [d_model], got " + c10::str(x.sizes()));
  auto c = x.detach().to(at::kCPU, at::kDouble).contiguous();
  return {c.data_ptr<double>(), c.data_ptr<double>() + c.numel()};
}

int64_t parse_int(const std::string& s, const std::string& spec) {
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (s.empty() || used != s.size()) throw std::invalid_argument("channel spec '" + spec + "': '" + s + "' is not an integer");
  return v;
}

}  // namespace

double rms(const at::Tensor& x) {
  const auto v = as_doubles(x);
  if (v.empty()) throw std::invalid_argument("rms of an empty state");
  double sum = 0.0;
  for (double e : v) sum += e * e;
  return std::sqrt(sum / double(v.size()));
}

std::vector<int64_t> top_channels(const at::Tensor& x, int64_t k) {
  auto v = as_doubles(x);
  if (k < 0 || k > int64_t(v.size()))
    throw std::invalid_argument("top " + std::to_string(k) + " channels of a state with d_model = " + std::to_string(v.size()));
  for (double& e : v) e = std::abs(e);
  return top_channels(v, k);  // activation_stats.h: the one ranking (ties keep the lower channel first)
}

ChannelSpec parse_channel_spec(const std::string& text, int64_t d_model) {
  ChannelSpec spec;
  spec.text = text;
  const auto colon = text.find(':');
  if (colon != std::string::npos) {
    const std::string kind = text.substr(0, colon);
    if (kind != "top" && kind != "random")
      throw std::invalid_argument("channel spec '" + text + "': expected c1,c2,... | top:k | random:k");
    spec.kind = kind == "top" ? ChannelSpec::Kind::top : ChannelSpec::Kind::random;
    spec.k = parse_int(text.substr(colon + 1), text);
    const int64_t most = spec.kind == ChannelSpec::Kind::top ? d_model : d_model - 1;
    if (spec.k < 1 || spec.k > most)
      throw std::invalid_argument("channel spec '" + text + "': k must lie in [1, " + std::to_string(most) +
                                  "] for d_model = " + std::to_string(d_model));
    return spec;
  }
  std::set<int64_t> seen;
  size_t start = 0;
  while (start <= text.size()) {
    const auto comma = std::min(text.find(',', start), text.size());
    const int64_t c = parse_int(text.substr(start, comma - start), text);
    if (c < 0 || c >= d_model)
      throw std::invalid_argument("channel spec '" + text + "': channel " + std::to_string(c) + " outside [0, " +
                                  std::to_string(d_model) + ")");
    if (!seen.insert(c).second) throw std::invalid_argument("channel spec '" + text + "': channel " + std::to_string(c) + " repeated");
    spec.channels.push_back(c);
    start = comma + 1;
  }
  return spec;
}

std::vector<int64_t> resolve_channels(const ChannelSpec& spec, const at::Tensor& magnitude, uint64_t seed) {
  const int64_t d = magnitude.numel();
  switch (spec.kind) {
    case ChannelSpec::Kind::list:
      for (int64_t c : spec.channels)
        if (c < 0 || c >= d) throw std::invalid_argument("channel " + std::to_string(c) + " outside [0, " + std::to_string(d) + ")");
      return spec.channels;
    case ChannelSpec::Kind::top:
      return top_channels(magnitude, spec.k);
    case ChannelSpec::Kind::random: {
      if (spec.k < 1 || spec.k > d - 1) throw std::invalid_argument("random:" + std::to_string(spec.k) + " for d_model = " + std::to_string(d));
      const int64_t dominant = top_channels(magnitude, 1)[0];
      std::vector<int64_t> pool;
      for (int64_t c = 0; c < d; ++c)
        if (c != dominant) pool.push_back(c);
      std::mt19937_64 rng(seed);
      std::shuffle(pool.begin(), pool.end(), rng);  // libstdc++'s shuffle: deterministic for one build
      pool.resize(spec.k);
      return pool;
    }
  }
  return {};
}

}  // namespace attnlab
