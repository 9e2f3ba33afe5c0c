#include "attnlab/half_precision_rule.h"

#include <torch/torch.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace attnlab {
namespace {

void require_like(const at::Tensor& t, const at::Tensor& exact, const std::string& what) {
  if (!t.defined()) throw std::invalid_argument("half-precision rule: " + what + " is missing");
  if (t.sizes() != exact.sizes()) {
    throw std::invalid_argument("half-precision rule: " + what + " has shape " + c10::str(t.sizes()) + ", expected " +
                                c10::str(exact.sizes()));
  }
}

}  // namespace

double normalised_error(const at::Tensor& a, const at::Tensor& b) {
  auto x = a.detach().to(at::kCPU, at::kDouble), y = b.detach().to(at::kCPU, at::kDouble);
  if (x.numel() == 0) return 0.0;
  auto both_inf = at::isinf(x).logical_and(at::isinf(y)).logical_and(x == y);
  auto diff = at::where(both_inf, at::zeros_like(x), (x - y).abs());
  if (at::isnan(diff).any().item<bool>()) return std::numeric_limits<double>::quiet_NaN();
  auto scale = std::max(1.0, at::where(at::isfinite(y), y.abs(), at::zeros_like(y)).max().item<double>());
  return diff.max().item<double>() / scale;
}

HalfRule rule_for_dtype(at::ScalarType dtype) {
  HalfRule rule;
  if (dtype == at::kBFloat16 || dtype == at::kHalf) {
    rule.param_factor = kFlashParamFactor;
    return rule;
  }
  rule.floor = dtype == at::kDouble ? 1e-10 : 1e-4;
  rule.lse_floor = rule.floor;
  rule.param_factor = kFlashParamFactor;
  return rule;
}

std::vector<RuleCheck> check_run_within_rule(const ArmRun& got, const ArmRun& low, const ArmRun& exact,
                                             const std::vector<const ArmRun*>& gradient_yardsticks,
                                             const HalfRule& rule) {
  std::vector<RuleCheck> checks;
  const double lse_floor = std::min(rule.floor, rule.lse_floor);
  auto hold = [&](at::Tensor ArmRun::*field, const char* name, double factor, double floor, bool gradient) {
    const auto& e = exact.*field;
    if (!e.defined()) return;
    require_like(got.*field, e, name);
    require_like(low.*field, e, std::string("the yardstick's ") + name);
    double yardstick = normalised_error(low.*field, e);
    for (const auto* run : gradient ? gradient_yardsticks : std::vector<const ArmRun*>{}) {
      require_like(run->*field, e, std::string("a gradient yardstick's ") + name);
      yardstick = std::max(yardstick, normalised_error(run->*field, e));
    }
    checks.push_back({name, normalised_error(got.*field, e), yardstick, factor * yardstick + floor});
  };
  hold(&ArmRun::o, "o", rule.factor, rule.floor, false);
  hold(&ArmRun::lse, "lse", rule.factor, lse_floor, false);
  hold(&ArmRun::phantom, "phantom mass", rule.factor, lse_floor, false);
  hold(&ArmRun::dq, "dq", rule.factor, rule.floor, true);
  hold(&ArmRun::dk, "dk", rule.factor, rule.floor, true);
  hold(&ArmRun::dv, "dv", rule.factor, rule.floor, true);
  hold(&ArmRun::db, "d b_h", rule.param_factor, rule.floor, true);
  hold(&ArmRun::dtau, "d tau_h", rule.param_factor, rule.floor, true);
  hold(&ArmRun::dw, "d w_h", rule.param_factor, rule.floor, true);
  hold(&ArmRun::dc, "d c_h", rule.param_factor, rule.floor, true);
  return checks;
}

}  // namespace attnlab
