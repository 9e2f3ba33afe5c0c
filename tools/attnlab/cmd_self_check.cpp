// `attnlab self-check [--device D] [--backends auto,flash,cudnn] [--arms ...] [--dtypes ...] [--head-dim 64]
// [--json FILE]`: the first-use self-check (attention_self_check.h) of every named backend, arm and
// dtype on one device, as a table; exit status 1 when any fails. A backend that cannot serve a case
// (its refusal) is listed as skipped, not failed.
#include <fstream>
#include <iostream>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attnlab/attention_self_check.h"
#include "attnlab/device.h"
#include "commands.h"

namespace attnlab::cli {
namespace {

struct Args {
  std::string device = "auto";
  std::vector<std::string> backends{"auto"}, arms, dtypes;
  int64_t head_dim = 64;
  std::string json;
};

at::ScalarType parse_dtype(const std::string& name) {
  if (name == "bfloat16" || name == "bf16") return at::kBFloat16;
  if (name == "float16" || name == "fp16" || name == "f16") return at::kHalf;
  if (name == "float32" || name == "fp32") return at::kFloat;
  if (name == "float64" || name == "fp64") return at::kDouble;
  throw std::invalid_argument("--dtypes: unknown dtype '" + name + "'; valid: bfloat16, float16, float32, float64");
}

struct Outcome {
  nlohmann::json record;
  std::string line;
  bool failed = false;
};

Outcome check_one(const SelfCheckCase& c, const std::string& backend_name) {
  const auto head = fmt::format("| {} | {} | {} |", backend_name, c.arm.name, c10::toString(c.dtype));
  try {
    const auto r = check_attention_backend(c);
    const auto& w = r.worst();
    return {to_json(r), fmt::format("{} {} | passed | {} {:.2e} of {:.2e} | {:.1f} |", head, r.backend, w.tensor,
                                    w.error, w.bound, r.milliseconds)};
  } catch (const AttentionSelfCheckError& e) {
    const auto& r = e.result();
    const auto& w = r.worst();
    return {to_json(r),
            fmt::format("{} {} | FAILED | {} {:.2e} of {:.2e} | {:.1f} |", head, r.backend, w.tensor, w.error, w.bound,
                        r.milliseconds),
            true};
  } catch (const std::invalid_argument& e) {  // the backend's refusal: not this device's or dtype's
    return {{{"backend", backend_name}, {"arm", c.arm.name}, {"dtype", c10::toString(c.dtype)}, {"skipped", e.what()}},
            fmt::format("{} - | skipped: {} | - | - |", head, e.what())};
  } catch (const std::exception& e) {  // the kernels threw: as bad as a wrong result
    return {{{"backend", backend_name}, {"arm", c.arm.name}, {"dtype", c10::toString(c.dtype)}, {"error", e.what()}},
            fmt::format("{} - | FAILED: {} | - | - |", head, e.what()), true};
  }
}

void run(const Args& a) {
  const auto device = resolve_device(a.device);
  auto dtypes = a.dtypes;
  if (dtypes.empty()) dtypes = device.is_cuda() ? std::vector<std::string>{"bfloat16", "float16"} : std::vector<std::string>{"float32"};
  std::vector<ArmSpec> arms;
  if (a.arms.empty()) {
    arms = all_arms();
  } else {
    for (const auto& name : a.arms) arms.push_back(arm_by_name(name));
  }
  std::cout << fmt::format("# attention self-check on {} ({}), head_dim {}, case [{}, {}, {}]\n\n", device.str(),
                           device_name(device), a.head_dim, kSelfCheckBatch, kSelfCheckHeads, kSelfCheckLength)
            << "| backend | arm | dtype | ran | outcome | worst: error of bound | ms |\n|---|---|---|---|---|---|---:|\n";
  nlohmann::json records = nlohmann::json::array();
  int failures = 0;
  for (const auto& backend : a.backends) {
    for (const auto& arm : arms) {
      for (const auto& dtype : dtypes) {
        const SelfCheckCase c{arm, parse_attention_backend(backend), device, parse_dtype(dtype), a.head_dim};
        auto outcome = check_one(c, backend);
        std::cout << outcome.line << std::endl;
        failures += outcome.failed;
        records.push_back(std::move(outcome.record));
      }
    }
  }
  if (!a.json.empty()) {
    std::ofstream out(a.json);
    out << records.dump(1) << "\n";
    if (!out) throw std::runtime_error("--json: cannot write " + a.json);
  }
  if (failures > 0) throw std::runtime_error(fmt::format("self-check: {} of {} cases failed", failures, records.size()));
}

}  // namespace

void add_self_check_command(CLI::App& app) {
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "self-check", "Check attention backends' kernels against float64 on this device (the first-use self-check)");
  cmd->add_option("--device", args->device, "auto | cpu | cuda")->capture_default_str();
  cmd->add_option("--backends", args->backends, "attention backends (auto resolves as a training call would)")
      ->capture_default_str();
  cmd->add_option("--arms", args->arms, "arms (default: every arm)");
  cmd->add_option("--dtypes", args->dtypes, "dtypes of q, k, v (default: bfloat16 float16 on CUDA, float32 on CPU)");
  cmd->add_option("--head-dim", args->head_dim, "head_dim of the case")->capture_default_str()->check(positive());
  cmd->add_option("--json", args->json, "also write every result as a JSON array to this file");
  cmd->callback([args] {
    log_to_stderr("self-check");  // the table alone on stdout
    run(*args);
  });
}

}  // namespace attnlab::cli
