# Writes the version header (lib/core/version.h.in) with the current git commit, at every build rather than
# only at configure time, so a benchmark's JSON names the code it ran; "-dirty" when tracked files differ from
# the commit. configure_file leaves the header untouched when nothing changed (no needless rebuilds).
# Called by the retro_version target: cmake -DSRC=<source dir> -DOUT=<header> -DVERSION=<x.y.z> -P version_stamp.cmake
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE RETRO_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT RETRO_GIT_COMMIT)
  set(RETRO_GIT_COMMIT unknown)
else()
  execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY ${SRC}
                  OUTPUT_VARIABLE changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(changes)
    string(APPEND RETRO_GIT_COMMIT "-dirty")
  endif()
endif()
set(PROJECT_VERSION ${VERSION})
configure_file(${SRC}/lib/core/version.h.in ${OUT} @ONLY)
