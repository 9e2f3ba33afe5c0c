// `attnlab report --wd`: the weight-decay sweep's report (include/attnlab/wd_report.h), kept apart
// from cmd_report.cpp's paired report.
#pragma once

#include <filesystem>
#include <string>

namespace attnlab::cli {

/// Builds the report of `sweep_dir`, writes wd.md, wd.json and the CSVs into `out`, prints the
/// Markdown; with `plots`, draws PNGs with tools/plot_activations.py (`python` empty: the venv's).
void run_wd_report(const std::filesystem::path& sweep_dir, const std::filesystem::path& out, bool plots,
                   const std::string& python);

}  // namespace attnlab::cli
