// Where the plotting Python and the tools/ scripts are, for subcommands that draw PNGs.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "attnlab/report.h"

namespace attnlab::cli {

/// The venv scripts/setup.sh makes (exported as ATTNLAB_VENV), else ~/.cache/attnlab/venv, else python3.
inline std::filesystem::path venv_python() {
  if (const char* venv = std::getenv("ATTNLAB_VENV"); venv && *venv) return std::filesystem::path(venv) / "bin/python";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::filesystem::path(home) / ".cache/attnlab/venv/bin/python";
  return "python3";
}

/// tools/<name> of the source tree the binary was built from (the build directory's CMakeCache.txt
/// names it; a build directory inside the tree also finds it one level up).
inline std::filesystem::path source_tool(const std::string& name) {
  const auto build_dir = std::filesystem::read_symlink("/proc/self/exe").parent_path();
  std::ifstream cache(build_dir / "CMakeCache.txt");
  const std::string key = "CMAKE_HOME_DIRECTORY:INTERNAL=";
  for (std::string line; std::getline(cache, line);)
    if (line.rfind(key, 0) == 0) return std::filesystem::path(line.substr(key.size())) / "tools" / name;
  return build_dir.parent_path() / "tools" / name;
}

/// Draws the PNGs of `json` into `out` with tools/<default_script> (or `script`) run by the venv's
/// Python (or `python`); empty strings take the defaults. Throws std::runtime_error when Python,
/// matplotlib or the script is missing, or the script fails (report.h render_plots).
inline void draw_plots(const std::string& python, const std::string& script, const std::string& default_script,
                       const std::filesystem::path& json, const std::filesystem::path& out) {
  const std::filesystem::path py = python.empty() ? venv_python() : std::filesystem::path(python);
  const std::filesystem::path tool = script.empty() ? source_tool(default_script) : std::filesystem::path(script);
  if (const int code = render_plots(py, tool, json, out))
    throw std::runtime_error(fmt::format("plots: {} exited with {}", tool.string(), code));
}

}  // namespace attnlab::cli
