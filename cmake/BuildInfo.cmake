# Writes OUT (a header defining ZOO_BUILD_VERSION and ZOO_BUILD_COMMIT) from the git checkout at SRC.
# Run at every build; the header is rewritten only when its text changes, so an unchanged commit
# rebuilds nothing. Usage: cmake -DSRC=... -DOUT=... -DVERSION=... -P BuildInfo.cmake
set(commit "unknown")
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} -C ${SRC} rev-parse --short=12 HEAD
                  OUTPUT_VARIABLE head RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(rc EQUAL 0 AND head)
    set(commit "${head}")
    execute_process(COMMAND ${GIT_EXECUTABLE} -C ${SRC} status --porcelain --untracked-files=no
                    OUTPUT_VARIABLE changes RESULT_VARIABLE rc ERROR_QUIET)
    if(rc EQUAL 0 AND changes)
      string(APPEND commit "+dirty")
    endif()
  endif()
endif()
set(text "#pragma once\n#define ZOO_BUILD_VERSION \"${VERSION}\"\n#define ZOO_BUILD_COMMIT \"${commit}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUT} "${text}")
endif()
