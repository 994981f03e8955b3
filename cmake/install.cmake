# What libair installs. `cmake --install` (a C user's install): the header,
# the static library (libair.a, target air::air_static), the shared library
# (libair.so, target air::air), pkg-config's libair.pc, the CMake package
# (find_package(air)) and the `air` binary. A wheel (scikit-build-core sets
# SKBUILD) installs only the `air` binary, into the scripts folder, so that
# `pip install` puts it on PATH; _C installs itself (top CMakeLists).
include(GNUInstallDirs)

# The version, from the header that defines it
file(STRINGS ${PROJECT_SOURCE_DIR}/include/air/air.h air_version_lines REGEX "^#define AIR_VERSION_(MAJOR|MINOR|PATCH) ")
foreach(part MAJOR MINOR PATCH)
  string(REGEX REPLACE ".*AIR_VERSION_${part} ([0-9]+).*" "\\1" AIR_VERSION_${part} "${air_version_lines}")
endforeach()
set(AIR_VERSION_STRING ${AIR_VERSION_MAJOR}.${AIR_VERSION_MINOR}.${AIR_VERSION_PATCH})
set(AIR_VERSION_MAJOR_MINOR ${AIR_VERSION_MAJOR}.${AIR_VERSION_MINOR})

if(SKBUILD)
  install(TARGETS air_cli DESTINATION ${SKBUILD_SCRIPTS_DIR})
  return()
endif()

# The shared library is made of the static one's objects (compiled once,
# position-independent: CMAKE_POSITION_INDEPENDENT_CODE). Only the public
# air_* functions are exported (air.h marks them; everything else is built
# with -fvisibility=hidden).
add_library(air_shared SHARED $<TARGET_OBJECTS:air>)
set_target_properties(air_shared PROPERTIES OUTPUT_NAME air EXPORT_NAME air
  VERSION ${AIR_VERSION_STRING} SOVERSION ${AIR_VERSION_MAJOR_MINOR})
target_link_libraries(air_shared PUBLIC Threads::Threads m)
target_include_directories(air_shared PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
# The static target's include path as an installed package sees it (the
# top CMakeLists gives it the source tree's, which an export may not hold).
set_property(TARGET air PROPERTY INTERFACE_INCLUDE_DIRECTORIES
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set_target_properties(air PROPERTIES EXPORT_NAME air_static)

install(FILES ${PROJECT_SOURCE_DIR}/include/air/air.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/air)
install(TARGETS air air_shared EXPORT airTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS air_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT airTargets NAMESPACE air:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/air)

include(CMakePackageConfigHelpers)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/airConfig.cmake.in
  ${PROJECT_BINARY_DIR}/airConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/air)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/airConfigVersion.cmake
  VERSION ${AIR_VERSION_STRING} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/airConfig.cmake ${PROJECT_BINARY_DIR}/airConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/air)

# pkg-config: the prefix relative to the .pc file, so that an install made
# with `cmake --install --prefix P` (or moved) finds itself
if(IS_ABSOLUTE ${CMAKE_INSTALL_LIBDIR})
  set(AIR_PC_PREFIX ${CMAKE_INSTALL_PREFIX})
else()
  set(AIR_PC_PREFIX "\${pcfiledir}")
  string(REPLACE "/" ";" air_libdir_parts "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
  foreach(part ${air_libdir_parts})
    string(APPEND AIR_PC_PREFIX "/..")
  endforeach()
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/libair.pc.in ${PROJECT_BINARY_DIR}/libair.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/libair.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
