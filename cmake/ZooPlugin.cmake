# zoo_add_plugin(<target> SOURCES ... [LIBRARIES ...])
# Builds a Zoo model plugin: a MODULE library with hidden visibility, linked to the plugin SDK
# (Zoo::sdk: model, session, weight source, tensor, errors, host, plugin ABI; no yaml-cpp, no
# Boost), placed beside the zoo binary's default plugin directory and installed there.
# Works in the Zoo tree and, after find_package(Zoo), in an out-of-tree project: it only relies
# on Zoo::sdk (an alias in the tree, an imported target once installed). Link Zoo::kernels (or
# anything else the plugin calls) through LIBRARIES: the plugin is linked with -z defs, so a symbol
# it uses but does not link fails the build here instead of the dlopen in the host.
# ZOO_PLUGIN_OUTPUT_DIR (build output) and ZOO_INSTALL_PLUGINDIR (install destination) are read
# when set; a directory scope may unset the latter to keep a plugin out of the install.

# zoo_link_no_undefined(<target>): links with -z defs, so a symbol the shared object uses but
# does not link fails the link, not the dlopen. Used for every Zoo shared object and plugin.
# Clang links its sanitizer runtimes into executables only, so a sanitized shared object built by
# clang has undefined __asan_*/__ubsan_* symbols by design: no -z defs there. GCC links the shared
# runtimes into the library, so its sanitizer builds keep the check.
function(zoo_link_no_undefined target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang" AND
     ((ZOO_SANITIZE AND NOT ZOO_SANITIZE STREQUAL "OFF") OR CMAKE_CXX_FLAGS MATCHES "-fsanitize"))
    return()
  endif()
  target_link_options(${target} PRIVATE "LINKER:-z,defs")
endfunction()

function(zoo_add_plugin target)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES" ${ARGN})
  add_library(${target} MODULE ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  # The Zoo headers are C++20; an out-of-tree project may not have set CMAKE_CXX_STANDARD.
  target_compile_features(${target} PRIVATE cxx_std_20)
  target_link_libraries(${target} PRIVATE Zoo::sdk ${ARG_LIBRARIES})
  zoo_link_no_undefined(${target})
  if(DEFINED ZOO_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${ZOO_PLUGIN_OUTPUT_DIR})
  endif()
  if(DEFINED ZOO_INSTALL_PLUGINDIR)
    install(TARGETS ${target} LIBRARY DESTINATION ${ZOO_INSTALL_PLUGINDIR})
    # Installed at <prefix>/<libdir>/zoo/plugins, the Zoo libraries are two levels up.
    if(NOT CMAKE_INSTALL_RPATH)
      set_target_properties(${target} PROPERTIES INSTALL_RPATH "$ORIGIN/../..")
    endif()
  endif()
endfunction()
