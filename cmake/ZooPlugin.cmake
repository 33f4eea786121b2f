# zoo_add_plugin(<target> SOURCES ... [LIBRARIES ...])
# Builds a Zoo model plugin: a MODULE library with hidden visibility, linked to the framework,
# placed beside the zoo binary's default plugin directory and installed there.
function(zoo_add_plugin target)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES" ${ARGN})
  add_library(${target} MODULE ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(TARGET zoo_framework)
    target_link_libraries(${target} PRIVATE zoo_framework ${ARG_LIBRARIES})
  else()
    target_link_libraries(${target} PRIVATE Zoo::framework ${ARG_LIBRARIES})
  endif()
  target_compile_definitions(${target} PRIVATE BOOST_DLL_USE_STD_FS)
  if(DEFINED ZOO_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${ZOO_PLUGIN_OUTPUT_DIR})
  endif()
  if(DEFINED ZOO_INSTALL_PLUGINDIR)
    install(TARGETS ${target} LIBRARY DESTINATION ${ZOO_INSTALL_PLUGINDIR})
  endif()
endfunction()
