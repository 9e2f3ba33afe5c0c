// Writing the report's files, and handing report.json to the plotting script.
#include <stdexcept>

#include "attnlab/report.h"
#include "attnlab/run_dir.h"
#include "common/child_process.h"

namespace attnlab {
namespace fs = std::filesystem;

std::vector<fs::path> write_report_files(const SweepReport& report, const fs::path& out_dir) {
  std::map<std::string, std::string> files = report_csv(report);
  files["report.md"] = report_markdown(report);
  files["report.json"] = report_json(report).dump(1) + "\n";
  write_outputs(out_dir, files);
  std::vector<fs::path> written;
  for (const auto& [name, text] : files) written.push_back(out_dir / name);
  return written;
}

int render_plots(const fs::path& python, const fs::path& script, const fs::path& report_json, const fs::path& out_dir) {
  const std::string fix = "; run scripts/setup.sh (it installs matplotlib into ~/.cache/attnlab/venv) or pass --python";
  if (python.empty() || !fs::exists(python)) throw std::runtime_error("plots: no Python at '" + python.string() + "'" + fix);
  if (!fs::exists(script)) throw std::runtime_error("plots: plotting script '" + script.string() + "' not found; pass --plot-script");
  if (process::wait_exit(process::spawn(python, {"-c", "import matplotlib"}, "/dev/null")) != 0)
    throw std::runtime_error("plots: " + python.string() + " has no matplotlib" + fix);
  return process::wait_exit(process::spawn(python, {script.string(), report_json.string(), "--out", out_dir.string()}));
}

}  // namespace attnlab
