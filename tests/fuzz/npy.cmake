# The libFuzzer harness over the CLI's .npy reader (-DAIR_FUZZ=ON, clang).
# Kept apart from the .air loader's fuzz targets so that each can be merged
# alone. `fuzz_npy -max_total_time=60 corpus/` runs it; the test below runs
# it briefly from the seeds in tests/fuzz/npy_seeds.
add_executable(fuzz_npy ${PROJECT_SOURCE_DIR}/tests/fuzz/fuzz_npy.c ${PROJECT_SOURCE_DIR}/tools/air/npy.c)
target_include_directories(fuzz_npy PRIVATE ${PROJECT_SOURCE_DIR}/tools/air)
target_compile_options(fuzz_npy PRIVATE -fsanitize=fuzzer,address,undefined -fno-omit-frame-pointer)
target_link_options(fuzz_npy PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_libraries(fuzz_npy PRIVATE air)
if(AIR_BUILD_TESTS)
  add_test(NAME fuzz_npy_short COMMAND fuzz_npy -max_total_time=20 -rss_limit_mb=1024 -timeout=5
    ${PROJECT_SOURCE_DIR}/tests/fuzz/npy_seeds)
endif()
