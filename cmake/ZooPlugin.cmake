# zoo_add_plugin(<target> SOURCES ... [LIBRARIES ...])
# Builds a Zoo model plugin: a MODULE library with hidden visibility, linked to the framework,
# placed beside the zoo binary's default plugin directory and installed there.
# Works in the Zoo tree and, after find_package(Zoo), in an out-of-tree project: it only relies
# on Zoo::framework (an alias in the tree, an imported target once installed).
# ZOO_PLUGIN_OUTPUT_DIR (build output) and ZOO_INSTALL_PLUGINDIR (install destination) are read
# when set; a directory scope may unset the latter to keep a plugin out of the install.
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
  target_link_libraries(${target} PRIVATE Zoo::framework ${ARG_LIBRARIES})
  target_compile_definitions(${target} PRIVATE BOOST_DLL_USE_STD_FS)
  if(DEFINED ZOO_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${ZOO_PLUGIN_OUTPUT_DIR})
  endif()
  if(DEFINED ZOO_INSTALL_PLUGINDIR)
    install(TARGETS ${target} LIBRARY DESTINATION ${ZOO_INSTALL_PLUGINDIR})
    # Installed at <prefix>/<libdir>/zoo/plugins, the framework is two levels up.
    if(NOT CMAKE_INSTALL_RPATH)
      set_target_properties(${target} PROPERTIES INSTALL_RPATH "$ORIGIN/../..")
    endif()
  endif()
endfunction()
