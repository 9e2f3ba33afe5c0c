// The one exception type of checkpoint and safetensors I/O, so callers (load_latest, the CLI) can
// tell "this file is bad" apart from programming errors and fall back to an older checkpoint.
#pragma once

#include "attnlab/file_error.h"

namespace attnlab {

/// A checkpoint or safetensors file that cannot be written, read or trusted. what() is
/// "<file>: <problem>", so every message names the file it is about.
class CheckpointError : public FileError {
 public:
  using FileError::FileError;
};

}  // namespace attnlab
