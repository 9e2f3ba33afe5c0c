// main() of every test binary: GoogleTest's own, after the CPU vector-math warm-up that every attnlab
// program runs first (include/attnlab/cpu_math.h), so tests see the numerics a run sees.
#include <gtest/gtest.h>

#include "attnlab/cpu_math.h"

int main(int argc, char** argv) {
  attnlab::warm_up_cpu_vector_math();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
