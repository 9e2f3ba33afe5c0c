// `attnlab report --probes --inject`: the flags and the step that runs after the paired tables, kept
// out of cmd_report.cpp so that file only wires them in.
#pragma once

#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>

#include "attnlab/probe_report.h"

namespace attnlab::cli {

/// Adds --probes, --inject, --probe-sequences, --probe-length, --probe-data, --inject-eps,
/// --inject-seed and --probe-device to `cmd`, filling `options`.
void add_probe_report_flags(CLI::App* cmd, ProbeReportOptions& options);

/// When options.probes or options.inject: collects (or reuses) every finished run's results, prints
/// the tables, writes probes.md and probes.json into `out`, and with `plots` draws the PNGs with
/// tools/plot_probes.py run by `python` (empty: the venv's). Throws std::runtime_error when the plot
/// script fails or a run could not be probed. Unless `quiet`, a progress line per run goes to stderr
/// when it is a terminal.
void run_probe_report(const SweepReport& report, const ProbeReportOptions& options, const std::filesystem::path& out,
                      bool plots, const std::string& python, bool quiet);

}  // namespace attnlab::cli
