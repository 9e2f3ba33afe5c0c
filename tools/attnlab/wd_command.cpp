// `attnlab report --wd` (see wd_command.h).
#include "wd_command.h"

#include <iostream>

#include <fmt/format.h>

#include "attnlab/run_dir.h"
#include "attnlab/wd_report.h"
#include "plot_paths.h"

namespace attnlab::cli {
namespace fs = std::filesystem;

void run_wd_report(const fs::path& sweep_dir, const fs::path& out, bool plots, const std::string& python) {
  const auto report = build_wd_report(sweep_dir);
  const auto files = wd_files(report);
  write_outputs(out, files);
  std::cout << files.at("wd.md");
  std::cout.flush();
  std::cerr << fmt::format("attnlab report --wd: wrote wd.md, wd.json, wd_runs.csv and wd_fits.csv to {}\n", out.string());
  if (plots) draw_plots(python, "", "plot_activations.py", out / "wd.json", out);
}

}  // namespace attnlab::cli
