# The checkpoint readers' fuzz harness (docs/checkpoints.md, "Fuzzing the readers"): a driver
# program and a short CI run (label fuzz).
add_executable(fuzz_checkpoint_reader ${CMAKE_CURRENT_LIST_DIR}/checkpoint_reader.cpp)
target_link_libraries(fuzz_checkpoint_reader PRIVATE attnlab_core)
target_include_directories(fuzz_checkpoint_reader PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})  # tests/: unit/trainee.h
target_precompile_headers(fuzz_checkpoint_reader REUSE_FROM attnlab_core)
attnlab_link_stdcxx_first(fuzz_checkpoint_reader)
if(ATTNLAB_PYTHON AND EXISTS "${ATTNLAB_PYTHON}")
  add_test(NAME fuzz.checkpoint
           COMMAND ${ATTNLAB_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/fuzz_checkpoint.py
                   --driver $<TARGET_FILE:fuzz_checkpoint_reader> --seconds 30 --seed 1)
  set_tests_properties(fuzz.checkpoint PROPERTIES LABELS fuzz TIMEOUT 240)
endif()
