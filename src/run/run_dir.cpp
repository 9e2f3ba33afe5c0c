#include "run/run_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <sstream>
#include <vector>

#include <spdlog/spdlog.h>

#include "attnlab/trainer.h"

namespace attnlab::run_dir {
namespace fs = std::filesystem;

bool is_budget_key(const std::string& key) { return key == "train.max_steps" || key == "train.token_budget"; }

void write_atomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw TrainError(tmp.string() + ": cannot write");
  }
  const int fd = ::open(tmp.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
  fs::rename(tmp, path);
}

void claim(const fs::path& dir, const RunConfig& cfg, bool must_be_new) {
  const fs::path config_file = dir / "config.yaml";
  if (fs::exists(config_file)) {
    if (must_be_new) throw TrainError(dir.string() + ": already holds a run; a branch needs a new out_dir");
    const auto existing = load_run_config(config_file);
    std::vector<std::string> differing;
    for (const auto& key : differing_keys(existing, cfg))
      if (!is_budget_key(key) && !is_observation_key(key) && key != "out_dir") differing.push_back(key);
    if (!differing.empty()) {
      std::ostringstream msg;
      msg << dir.string() << " belongs to another run (its config.yaml differs in:";
      for (const auto& key : differing) msg << ' ' << key;
      msg << "); use another out_dir, or the same config to resume";
      throw TrainError(msg.str());
    }
  } else if (fs::exists(dir) && !fs::is_empty(dir)) {
    throw TrainError(dir.string() + ": exists, holds files and no config.yaml; not an attnlab run "
                     "directory, refusing to write into it");
  }
  fs::create_directories(dir);
  write_atomically(config_file, to_yaml(cfg));
}

MetricsLog::MetricsLog(const fs::path& path, int64_t resume_step) {
  if (fs::exists(path)) {
    std::ifstream in(path);
    std::string line, kept;
    int64_t dropped = 0;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (!j.is_discarded() && j.value("step", int64_t{0}) <= resume_step) {
        kept += line + "\n";
      } else {
        ++dropped;
      }
    }
    if (dropped > 0) {
      if (resume_step < 0)
        spdlog::info("metrics.jsonl: dropping {} line(s) of an earlier attempt (a fresh start)", dropped);
      else
        spdlog::info("metrics.jsonl: dropping {} line(s) logged after step {} (the checkpoint resumed from)",
                     dropped, resume_step);
      write_atomically(path, kept);
    }
  }
  out_.open(path, std::ios::app);
  if (!out_) throw TrainError(path.string() + ": cannot open for appending");
}

void MetricsLog::append(const nlohmann::json& line) {
  out_ << line.dump() << '\n';
  out_.flush();
}

}  // namespace attnlab::run_dir
