# Tests of the `air` CLI: the .npy reader (C), the commands driven from a
# shell script on files saved from C graphs, and the installed library
# (install into a temporary prefix, build examples/c against it).
add_executable(test_npy ${PROJECT_SOURCE_DIR}/tests/cli/test_npy.c)
target_include_directories(test_npy PRIVATE ${PROJECT_SOURCE_DIR}/tests/c)
target_link_libraries(test_npy PRIVATE air_npy air)
add_test(NAME test_npy COMMAND test_npy)

# The installed library: only in a plain build (a sanitizer build's objects
# need the sanitizer runtime, which the example's own build does not link)
if(NOT AIR_SANITIZE)
  add_test(NAME test_install COMMAND sh ${PROJECT_SOURCE_DIR}/tests/cli/test_install.sh ${PROJECT_BINARY_DIR}
    ${PROJECT_SOURCE_DIR} ${CMAKE_C_COMPILER})
endif()

# The commands, on .air files saved from C graphs; on every ISA, like the C tests
add_executable(make_air_files ${PROJECT_SOURCE_DIR}/tests/cli/make_air_files.c)
target_link_libraries(make_air_files PRIVATE air_npy air)
foreach(isa "" avx512 avx2 scalar)
  set(name test_cli)
  if(isa)
    set(name test_cli_${isa})
  endif()
  add_test(NAME ${name} COMMAND sh ${PROJECT_SOURCE_DIR}/tests/cli/test_cli.sh $<TARGET_FILE:air_cli>
    $<TARGET_FILE:make_air_files>)
  if(isa)
    set_tests_properties(${name} PROPERTIES ENVIRONMENT "AIR_ISA=${isa}")
  endif()
endforeach()
