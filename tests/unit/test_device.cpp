// resolve_device: the three names a flag or train.device may hold, and a clear error naming the
// option for anything else (an unknown name must never silently mean CUDA).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include <torch/cuda.h>

#include "attnlab/device.h"

namespace attnlab {
namespace {

TEST(ResolveDevice, CpuAutoAndUnknownNames) {
  EXPECT_TRUE(resolve_device("cpu").is_cpu());
  EXPECT_EQ(resolve_device("auto").is_cuda(), torch::cuda::is_available());
  for (const std::string bad : {"tpu", "foo", "", "CPU", "cuda:0"}) {
    try {
      resolve_device(bad, "--device");
      ADD_FAILURE() << "'" << bad << "' accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("--device: '" + bad + "' is not one of auto, cpu, cuda"), std::string::npos)
          << e.what();
    }
  }
  if (!torch::cuda::is_available()) {
    try {
      resolve_device("cuda", "train.device");
      ADD_FAILURE() << "cuda accepted without a device";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("train.device"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace attnlab
