// SIGINT / SIGTERM while training: the handler only records the signal; the loop checks it after each
// step, saves a checkpoint and returns (never exit from a handler with a half-written file).
#pragma once

namespace attnlab::signals {

/// Installs the handlers for SIGINT and SIGTERM (restored by the destructor). Scopes nest: an inner
/// one changes nothing, so a signal caught by an outer scope (e.g. the train command's, installed
/// before the start-up) is still reported inside it.
class StopRequestScope {
 public:
  StopRequestScope();
  ~StopRequestScope();
  StopRequestScope(const StopRequestScope&) = delete;
  StopRequestScope& operator=(const StopRequestScope&) = delete;
};

/// The signal received since the outermost scope began, or 0.
int stop_requested();

}  // namespace attnlab::signals
