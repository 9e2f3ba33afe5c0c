#include "attnlab/version.h"

namespace attnlab {

std::string version() { return ATTNLAB_VERSION; }
std::string git_revision() { return ATTNLAB_GIT_REV; }

}  // namespace attnlab
